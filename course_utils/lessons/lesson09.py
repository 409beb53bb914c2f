"""Lesson 09 (mixed precision): does this device run low precision fast; how much memory a step takes.

The lesson's own idea (``torch.autocast``, ``torch.amp.GradScaler``) stays in the notebook; this module
only answers two plumbing questions::

    from course_utils.lessons.lesson09 import fast_low_precision_dtype, peak_memory_bytes

    dtype, reason = fast_low_precision_dtype(env.device, env.hardware)   # torch.float16 on a tensor-core GPU, ...
    peak = peak_memory_bytes(train_step, env.device)       # bytes of tensors allocated at the peak

The exercise checks of the lesson follow its plumbing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

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
