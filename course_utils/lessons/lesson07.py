"""Lesson 07 (quantization): which modules quantization swapped, and the exercise checks."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
import torch.ao.quantization as tq
from torch import nn

from course_utils.checks import CheckResult, check_numbers


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


# ---------------------------------------- exercise checks

# The range of exercise 1 and the layer of exercise 2.
RANGE = (-0.5, 1.5)
LAYER = (512, 256)  # nn.Linear(in_features, out_features)


@contextmanager
def _quietly() -> Iterator[None]:
    """Silence the deprecation notices of the eager quantization API (the lesson shows them once)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated")
        warnings.filterwarnings("ignore", message="torch.quantize_per_tensor, torch.quantize_per_channel")
        yield


def check_qparams(answer: Sequence[float] | None, *, solution: bool = False) -> CheckResult:
    """Exercise 1: ``(scale, zero_point)`` that maps the range ``RANGE`` onto quint8 ``[0, 255]``."""
    with _quietly():
        observer = tq.MinMaxObserver(dtype=torch.quint8)
        observer(torch.tensor(RANGE))
        scale, zero_point = (t.item() for t in observer.calculate_qparams())
    lo, hi = RANGE
    return check_numbers(
        answer, [scale, zero_point], names=["scale", "zero_point"], rtol=1e-5, solution=solution,
        hints=["section 2 defines s from the two ends of the real range and of quint8's integer range: "
               "mind the sign of x_min, and count the integer steps of [0, 255] (255, not 256)",
               "section 2's z is the integer that represents 0.0 exactly: start from x_min / s and round it to the "
               "nearest integer (int() truncates towards zero)"],
        why=[f"the scale is s = (x_max - x_min) / (q_max - q_min) = ({hi:g} - ({lo:g})) / 255 = {scale:.6g}",
             "the zero point is the integer that represents 0.0 exactly: z = q_min - round(x_min / s) = "
             f"0 - round({lo:g} / {scale:.6g}) = {zero_point:g}"],
    )


def check_int8_bytes(answer: Sequence[int] | None, *, solution: bool = False) -> CheckResult:
    """Exercise 2: bytes of the weight of ``nn.Linear(*LAYER)`` in fp32, and after per-channel int8
    quantization as torch stores it (int8 values + one float64 scale and one int64 zero point per row)."""
    in_features, out_features = LAYER
    weight = nn.Linear(in_features, out_features).weight.detach()
    fp32_bytes = weight.numel() * weight.element_size()
    with _quietly():
        observer = tq.default_per_channel_weight_observer()  # the weight observer of the x86 qconfig
        observer(weight)
        scales, zero_points = observer.calculate_qparams()
        q = torch.quantize_per_channel(weight, scales.double(), zero_points.long(), 0, torch.qint8)
    parts = [q.int_repr(), q.q_per_channel_scales(), q.q_per_channel_zero_points()]
    int8_bytes = sum(t.numel() * t.element_size() for t in parts)
    return check_numbers(
        answer, [fp32_bytes, int8_bytes], names=["fp32 bytes", "int8 bytes"], solution=solution,
        hints=["count the entries of the weight alone (nn.Linear(in, out).weight is out × in; the bias is not "
               "part of it), at the size of one float32",
               "besides 1 byte per weight, per-channel quantization (section 2, 'Per tensor or per channel') "
               "also stores a scale and a zero point per output row, at 8 bytes each"],
        why=[f"fp32: {out_features}·{in_features} weights × 4 bytes = {fp32_bytes} bytes",
             f"int8: {out_features}·{in_features} weights × 1 byte + {out_features} scales × 8 bytes + "
             f"{out_features} zero points × 8 bytes = {int8_bytes} bytes"],
    )


def exercise_model() -> nn.Module:
    """The small model of exercise 3: two convolutions, then two fully connected layers."""
    return nn.Sequential(
        nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.ReLU(), nn.Flatten(),
        nn.Linear(8 * 24 * 24, 64), nn.ReLU(), nn.Linear(64, 10),
    )


def check_dynamic_converted(answer: int | None, *, solution: bool = False) -> CheckResult:
    """Exercise 3: how many modules of :func:`exercise_model` does
    ``quantize_dynamic(model, {nn.Linear, nn.Conv2d}, dtype=torch.qint8)`` replace?"""
    model = exercise_model()
    with _quietly():
        quantized = tq.quantize_dynamic(model, {nn.Linear, nn.Conv2d}, dtype=torch.qint8)
    changed = changed_module_types(model, quantized)
    n_conv = sum(isinstance(m, nn.Conv2d) for m in model.modules())
    return check_numbers(
        answer, [len(changed)], names=["modules replaced"], solution=solution,
        hints=["naming a type in the set is not enough: quantize_dynamic replaces a module only if its default "
               "mapping knows the type, and section 3 (ResNet-18) shows which of the two it knows; then count "
               "those modules in the printed model"],
        why=[f"the {n_conv} Conv2d layers are not in quantize_dynamic's default mapping "
             "(torch.ao.nn.quantized.dynamic.Conv2d exists, but only a mapping= that names it converts a "
             "convolution), so naming nn.Conv2d in the set changes nothing; only the Linear layers "
             f"({', '.join(changed)}) are replaced: {len(changed)} modules"],
    )
