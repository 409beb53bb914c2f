"""Inspecting models before and after a transformation (quantization, pruning): size and costs.

The lessons keep their own idea (the quantization call) in the notebook; these helpers only report
on its result::

    nbytes = serialized_size(model)
    costs = layer_costs(model, torch.zeros(1, 1, 28, 28))     # {"conv1": (weights, multiply-adds), ...}
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

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


def layer_costs(model: nn.Module, example: torch.Tensor) -> dict[str, tuple[int, int]]:
    """Weights and multiply-adds per example of every ``Conv2d`` and ``Linear`` layer of ``model``.

    Runs ``example`` (a batch; the first item is counted) through the model with forward hooks.
    A layer's multiply-adds are its output elements times the inputs feeding each output
    (``weight[0].numel()``). The model's training/eval mode is restored afterwards.

    Returns:
        ``{layer name: (weights, multiply-adds)}`` in the order of ``model.named_modules()``.
    """
    if not isinstance(model, nn.Module) or not isinstance(example, torch.Tensor):
        raise TypeError("pass an nn.Module and an example input tensor (a batch, e.g. torch.zeros(1, 1, 28, 28)).")
    layers = {name: m for name, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))}
    if not layers:
        raise ValueError("model has no Conv2d or Linear layer to count.")
    macs: dict[str, int] = {}

    def recorder(name: str) -> Callable[[nn.Module, Any, torch.Tensor], None]:
        def record(module: nn.Module, inputs: Any, output: torch.Tensor) -> None:
            weight = module.weight
            assert isinstance(weight, torch.Tensor)  # Conv2d and Linear hold a weight tensor
            macs[name] = output[0].numel() * weight[0].numel()
        return record

    handles = [m.register_forward_hook(recorder(name)) for name, m in layers.items()]
    was_training = model.training
    try:
        with torch.no_grad():
            model.eval()(example)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return {name: (m.weight.numel(), macs[name]) for name, m in layers.items()}
