"""Lesson 09 (mixed precision): does this device run low precision fast; how much memory a step takes.

The lesson's own idea (``torch.autocast``, ``torch.amp.GradScaler``) stays in the notebook; this module
only answers two plumbing questions::

    from course_utils.lessons.lesson09 import fast_low_precision_dtype, peak_memory_bytes

    dtype, reason = fast_low_precision_dtype(env.device, env.hardware)   # torch.float16 on a tensor-core GPU, ...
    peak = peak_memory_bytes(train_step, env.device)       # bytes of tensors allocated at the peak

and draws the lesson's pictures: the formats' bit fields (:func:`draw_float_formats`), the gradients lost at
each loss scale (:func:`draw_gradients_lost`) and a ``GradScaler``'s scale step by step (:func:`draw_loss_scale`).
The exercise checks of the lesson follow.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from matplotlib.axes import Axes
from matplotlib.patches import Patch, Rectangle

from course_utils.checks import CheckResult, check_numbers
from course_utils.hardware import Hardware, detect
from course_utils.memory import peak_memory


class LowPrecisionChoice(NamedTuple):
    """The autocast dtype that runs fast on a device (``None``: none does), and why."""

    dtype: torch.dtype | None
    reason: str


def fast_low_precision_dtype(device: torch.device | str, hw: Hardware | None = None) -> LowPrecisionChoice:
    """Say which autocast dtype makes a training step faster on ``device`` of the machine ``hw`` (default: this
    one, :func:`course_utils.hardware.detect`), with the hardware reason.

    * CUDA with tensor cores (compute capability >= 7.0): ``torch.float16`` (used with a GradScaler).
    * CUDA without tensor cores: ``None``; fp16 arithmetic there is no faster than fp32.
    * CPU: ``torch.bfloat16`` when oneDNN has native bf16 kernels for it, else ``None``: bf16 is
      then emulated by converting to fp32 and back, which is slower than plain fp32.
    * Other devices (MPS): ``None``; this course does not measure them.

    The answer is a rule of thumb from the hardware, not a measurement: the notebook measures.

    Raises:
        ValueError: if ``device`` is not a device string or ``torch.device``.
    """
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be a torch.device or a string such as 'cpu' or 'cuda', got {device!r}.") from exc
    hw = hw or detect()
    if device.type == "cuda":
        if hw.gpu_capability is None:
            raise ValueError(f"device {device} asked for, but the machine has {hw.gpu_text}.")
        major, minor = hw.gpu_capability
        if hw.fp16_tensor_cores.holds:
            return LowPrecisionChoice(torch.float16, f"CUDA compute capability {major}.{minor} has fp16 tensor cores")
        return LowPrecisionChoice(None, f"CUDA compute capability {major}.{minor} has no tensor cores (needs >= 7.0)")
    if device.type == "cpu":
        if hw.onednn_bf16:
            return LowPrecisionChoice(torch.bfloat16, "oneDNN reports native bf16 kernels on this CPU")
        return LowPrecisionChoice(None, "oneDNN reports no native bf16 kernels on this CPU (no AVX-512/AMX bf16 "
                                        "support): bf16 is emulated through fp32 and runs slower than fp32")
    return LowPrecisionChoice(None, f"mixed precision speed on {device.type!r} is not covered by this course")


def peak_memory_bytes(fn: Callable[[], Any], device: torch.device | str = "cpu") -> int:
    """Peak bytes of tensor memory that ``fn()`` allocates on top of what already existed.

    On CUDA this is the caching allocator's own count (``torch.cuda.max_memory_allocated`` minus the
    memory allocated before the call). On other devices every tensor created by an op, forward and
    backward, is counted from its creation until it is freed, and the peak of that sum is returned:
    the same quantity, without the allocator's rounding. Neither counts memory that is not a tensor.

    Raises:
        TypeError: if ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable taking no arguments, got {type(fn).__name__}; wrap it in a lambda.")
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with peak_memory() as peak:
        fn()
    return peak.bytes


# ---------------------------------------- pictures

FIELD_COLORS = {"sign": "tab:red", "exponent": "tab:blue", "mantissa": "tab:green"}
FIELD_LABELS = {"sign": "sign", "exponent": "exponent: range", "mantissa": "mantissa: precision"}


class FloatFields(NamedTuple):
    """A float format's fields and numbers, from ``torch.finfo``: ``1 + exponent + mantissa == bits``."""

    bits: int
    exponent: int
    mantissa: int
    max: float
    smallest_normal: float
    eps: float


def float_fields(dtype: torch.dtype) -> FloatFields:
    """The fields of a floating-point ``dtype``: the mantissa from machine epsilon (``eps = 2**-mantissa``), the
    exponent from the bits left after the sign, and the range and precision as ``torch.finfo`` gives them.

    Raises:
        ValueError: if ``dtype`` is not a real floating-point ``torch.dtype``.
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a real floating-point torch.dtype such as torch.float16, got {dtype!r}.")
    fi = torch.finfo(dtype)
    mantissa = round(-math.log2(fi.eps))
    return FloatFields(fi.bits, fi.bits - 1 - mantissa, mantissa, fi.max, fi.smallest_normal, fi.eps)


def _compact(x: float) -> str:
    """A number in few characters: an integer as it is (65504), others in 3 digits without the exponent's + and 0s."""
    if x == int(x) and abs(x) < 1e6:
        return str(int(x))
    return re.sub(r"e([+-])0*(\d)", lambda m: f"e{m[1].replace('+', '')}{m[2]}", f"{x:.3g}")


def draw_float_formats(dtypes: Sequence[torch.dtype], ax: Axes) -> None:
    """A row of bit boxes per format, sign first, coloured by field with each field's width written on it; on the
    right each format's largest value, smallest normal value and machine epsilon (``2^-mantissa``).

    Raises:
        ValueError: if ``dtypes`` is empty or holds a dtype that is not a floating-point one.
    """
    if not dtypes:
        raise ValueError("dtypes is empty: pass the formats to draw, e.g. [torch.float32, torch.bfloat16].")
    fields = [float_fields(d) for d in dtypes]
    widest = max(f.bits for f in fields)
    columns = [widest + 1.5, widest + 8.5, widest + 16.5]  # where max, smallest normal and eps start
    for row, f in enumerate(fields):
        start = 0
        for name, width in (("sign", 1), ("exponent", f.exponent), ("mantissa", f.mantissa)):
            for bit in range(start, start + width):
                ax.add_patch(Rectangle((bit, row - 0.4), 1, 0.8, facecolor=FIELD_COLORS[name], edgecolor="white",
                                       lw=1))
            if name != "sign":
                ax.text(start + width / 2, row, str(width), ha="center", va="center", color="white", fontsize=10,
                        fontweight="bold")
            start += width
        for x, value in zip(columns, (_compact(f.max), _compact(f.smallest_normal), f"$2^{{-{f.mantissa}}}$"),
                            strict=True):
            ax.text(x, row, value, va="center", fontsize=10)
    for x, header in zip(columns, ("max", "min normal", "eps"), strict=True):
        ax.text(x, -0.75, header, va="bottom", fontsize=10, fontweight="bold")
    ax.set_xlim(0, columns[-1] + 4)
    ax.set_ylim(len(fields) - 0.5, -1.3)
    ax.set_xticks([])
    ax.set_yticks(range(len(fields)), [str(d).removeprefix("torch.") for d in dtypes], fontsize=10)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.legend(handles=[Patch(color=c, label=FIELD_LABELS[n]) for n, c in FIELD_COLORS.items()], ncol=3, fontsize=9,
              loc="upper left", bbox_to_anchor=(0, 0), frameon=False)


def draw_gradients_lost(log2_scales: Sequence[float], lost: Sequence[tuple[float, float]], ax: Axes, *,
                        tolerance: float = 0.01) -> None:
    """The fraction of gradients flushed to 0, overflowed to inf, and both, against log2 of the loss scale, the
    scales that lose the fewest shaded: every scale whose total is within ``tolerance`` of the lowest (a flat
    minimum is a range of scales, not the one that sampling noise happens to put lowest).

    Args:
        log2_scales: the scales tried, as powers of two, in increasing order.
        lost: for each scale, (fraction flushed to 0, fraction overflowed to inf).
        tolerance: how far above the lowest total a scale may lose and still count as losing the fewest.

    Raises:
        ValueError: if the two sequences are empty or of different lengths, or a fraction is outside [0, 1].
    """
    if not lost or len(lost) != len(log2_scales):
        raise ValueError(f"give one (zero, inf) pair per scale: {len(log2_scales)} scales, {len(lost)} pairs.")
    if list(log2_scales) != sorted(log2_scales):
        raise ValueError(f"give the scales in increasing order, got {list(log2_scales)}.")
    if any(not 0 <= v <= 1 for pair in lost for v in pair):
        raise ValueError(f"fractions must lie in [0, 1] (a share of the gradients), got {list(lost)}.")
    total = [z + i for z, i in lost]
    ax.plot(log2_scales, [z for z, _ in lost], "o-", color="tab:blue", label="flushed to 0")
    ax.plot(log2_scales, [i for _, i in lost], "s-", color="tab:red", label="overflow to inf")
    ax.plot(log2_scales, total, "-", color="0.2", lw=2.5, label="lost in all")
    fewest = [k for k, v in zip(log2_scales, total) if v <= min(total) + tolerance]
    first, last = min(fewest), max(fewest)
    where = f"$2^{{{first:g}}}$" if first == last else f"$2^{{{first:g}}}$ to $2^{{{last:g}}}$"
    ax.axvspan(first - 0.5, last + 0.5, color="tab:green", alpha=0.15, lw=0)
    ax.annotate(f"fewest lost: S = {where}", ((first + last) / 2, min(total)), textcoords="offset points",
                xytext=(0, 14), ha="center", fontsize=10)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("log2 of the loss scale S", fontsize=10)
    ax.set_ylabel("share of fp16 gradients", fontsize=10)
    ax.tick_params(labelsize=9)
    ax.legend(fontsize=9, loc="upper center", ncol=3)
    ax.grid(alpha=0.3)


def draw_loss_scale(scales: Sequence[float], skipped: Sequence[bool], ax: Axes, *, growth_interval: int) -> None:
    """The loss scale a ``GradScaler`` used at each step (log2 axis): each clean step numbered in its run of clean
    steps, each step with an inf marked as skipped, and every change of the scale labelled ×2 or ×½.

    Args:
        scales: the scale at each step, before that step's ``update()``.
        skipped: for each step, whether ``scaler.step`` skipped it (an inf or NaN in the gradients).
        growth_interval: the scaler's ``growth_interval``, for the title.

    Raises:
        ValueError: if the sequences are empty or of different lengths, a scale is not positive, or
            ``growth_interval`` is below 1.
    """
    if not scales or len(scales) != len(skipped):
        raise ValueError(f"give one skipped flag per step: {len(scales)} scales, {len(skipped)} flags.")
    if min(scales) <= 0 or growth_interval < 1:
        raise ValueError(f"scales must be positive and growth_interval at least 1, got {list(scales)} and "
                         f"{growth_interval}.")
    steps = list(range(len(scales)))
    ax.step(steps, scales, where="post", color="0.5", lw=1.5)
    clean_run = 0
    for step, (scale, skip) in enumerate(zip(scales, skipped, strict=True)):
        clean_run = 0 if skip else clean_run + 1
        ax.plot(step, scale, "X" if skip else "o", color="tab:red" if skip else "tab:blue", ms=10 if skip else 7)
        ax.annotate("skip" if skip else str(clean_run), (step, scale), textcoords="offset points", xytext=(0, -16),
                    ha="center", fontsize=9, color="tab:red" if skip else "tab:blue")
        if step and scale != scales[step - 1]:
            ax.annotate("×2" if scale > scales[step - 1] else "×½", (step, scale), textcoords="offset points",
                        xytext=(-14, 6), ha="center", fontsize=10, fontweight="bold")
        if skip or clean_run == growth_interval:
            clean_run = 0  # a growth or a backoff starts the count again
    levels = sorted(set(scales))
    ax.set_yscale("log", base=2)
    ax.set_yticks(levels, [f"{s:g}" for s in levels])
    ax.minorticks_off()
    ax.set_ylim(min(levels) / 2, max(levels) * 1.6)
    ax.set_xticks(steps)
    ax.set_xlabel("step (number: clean steps in a row; X: inf, step skipped)", fontsize=10)
    ax.set_ylabel("loss scale S", fontsize=10)
    ax.tick_params(labelsize=9)
    ax.set_title(f"GradScaler: ×2 after {growth_interval} clean steps in a row, ×½ at an inf", fontsize=10)
    ax.grid(alpha=0.3, axis="y")


# ---------------------------------------- exercise checks
# The exercises' parameters are written once, in the notebook's answer cells, and passed to the checks.


def smallest_fp16_loss_scale(gradient: float) -> float:
    """The smallest power of two ``S`` for which ``gradient * S`` cast to float16 is not zero."""
    if not 0 < gradient < 1:
        raise ValueError(f"gradient must be in (0, 1), got {gradient}.")
    k = 0
    while torch.tensor(gradient * 2.0**k, dtype=torch.float16).item() == 0.0:
        k += 1
    return 2.0**k


def check_loss_scale(answer: float | None, *, gradient: float, solution: bool = False) -> CheckResult:
    """Exercise 1: the smallest power-of-two loss scale that keeps ``gradient`` nonzero in fp16."""
    expected = smallest_fp16_loss_scale(gradient)
    tiny = torch.finfo(torch.float16).smallest_normal * torch.finfo(torch.float16).eps  # smallest subnormal
    return check_numbers(
        answer, [expected], names=["loss scale S"], solution=solution,
        hints=["compare g·S with fp16's smallest subnormal (section 1's table) and ask which products round to "
               "it, not to 0, under rounding to nearest: the threshold is not the subnormal itself"],
        why=[f"fp16's smallest subnormal is 2^-24 ≈ {tiny:.3g}; rounding to nearest keeps g·S nonzero once "
             f"it exceeds half of that ({tiny / 2:.3g}), and {gradient:g}·S first does so at S = {expected:g}"],
    )


def scaler_schedule(*, init_scale: float, growth_interval: int, steps: int,
                    inf_steps: Sequence[int]) -> tuple[float, int]:
    """Run a real ``torch.amp.GradScaler("cpu", growth_factor=2, backoff_factor=0.5)`` for ``steps`` steps,
    injecting an inf gradient at ``inf_steps`` (numbered from 0); return ``(final scale, skipped steps)``."""
    scales, skipped = _scaler_run(init_scale=init_scale, growth_interval=growth_interval, steps=steps,
                                  inf_steps=inf_steps)
    return scales[-1], skipped


def _scaler_run(*, init_scale: float, growth_interval: int, steps: int,
                inf_steps: Sequence[int]) -> tuple[list[float], int]:
    """:func:`scaler_schedule`'s run: ``(the initial scale, then the scale after each update(), skipped steps)``."""
    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=growth_interval)
    scales, skipped = [float(init_scale)], 0
    for step in range(steps):
        optimizer.zero_grad()
        scaler.scale((weight**2).sum()).backward()
        if step in inf_steps and weight.grad is not None:
            weight.grad[0] = float("inf")
        before = weight.detach().clone()
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
        skipped += int(torch.equal(before, weight.detach()))
    return scales, skipped


def check_scaler_schedule(answer: Sequence[float] | None, *, init_scale: float, growth_interval: int, steps: int,
                          inf_steps: Sequence[int], solution: bool = False) -> CheckResult:
    """Exercise 2: ``(final scale, skipped steps)`` of the GradScaler schedule given by the arguments."""
    scales, skipped = _scaler_run(init_scale=init_scale, growth_interval=growth_interval, steps=steps,
                                  inf_steps=inf_steps)
    scale, trace = scales[-1], ", ".join(f"{s:g}" for s in scales[1:])
    return check_numbers(
        answer, [scale, skipped], names=["final scale", "skipped steps"], solution=solution,
        hints=["follow the scale step by step with section 4's rules ('Dynamic loss scaling, step by step'): what "
               "an inf does to it, and after how many consecutive clean steps it grows (the count starts again "
               "after an inf)",
               "section 4 says which steps scaler.step(optimizer) skips; a step at which the scale grows is not "
               "one of them"],
        why=[f"the final scale: each step with an inf halves the scale and restarts the count of clean steps, and "
             f"every {growth_interval} consecutive clean steps double it; after each update() it is {trace}, "
             f"so it ends at {scale:g}",
             f"skipped steps: only the steps with an inf gradient ({', '.join(map(str, inf_steps))}) are skipped, "
             f"the others update the weight: {skipped}"],
    )
