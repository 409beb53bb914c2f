"""Inspecting models before and after a transformation such as quantization: size on disk, swapped modules.

The lessons keep their own idea (the quantization call) in the notebook; these helpers only report
on its result::

    nbytes = serialized_size(model)
    changed = changed_module_types(model, quantized_model)   # {"fc": ("nn.Linear", "ao.nn.quantized...")}
"""

from __future__ import annotations

import io

import torch
from torch import nn


def serialized_size(model: nn.Module) -> int:
    """Bytes that ``torch.save(model.state_dict())`` writes: what a checkpoint of the model costs on disk.

    Saved to an in-memory buffer, so nothing touches the file system. For a fixed architecture and
    dtype the size does not depend on the values of the weights.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}.")
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getbuffer().nbytes


def type_name(cls: type) -> str:
    """A short, unambiguous name for a module class: ``nn.Linear`` and ``ao.nn.quantized.dynamic.Linear``
    (torch's package without the ``torch.`` prefix and the ``.modules.<file>`` part), or the bare
    class name for classes defined outside torch."""
    if not cls.__module__.startswith("torch."):
        return cls.__qualname__
    package = cls.__module__.removeprefix("torch.").split(".modules", 1)[0]
    return f"{package}.{cls.__qualname__}"


def changed_module_types(before: nn.Module, after: nn.Module) -> dict[str, tuple[str, str]]:
    """Submodules whose class differs between two versions of one model, e.g. before and after quantization.

    Returns:
        ``{qualified name: (class before, class after)}`` with classes named by :func:`type_name`, in the
        order of ``before.named_modules()``, for the names present in both models (``"fc"``,
        ``"layer1.0.conv1"``; the root is ``""``).
    """
    if not isinstance(before, nn.Module) or not isinstance(after, nn.Module):
        raise TypeError("pass two nn.Module instances.")
    after_modules = dict(after.named_modules())
    return {name: (type_name(type(module)), type_name(type(after_modules[name])))
            for name, module in before.named_modules()
            if name in after_modules and type(after_modules[name]) is not type(module)}

