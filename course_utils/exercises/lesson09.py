"""Exercise checks for lesson 09 (mixed precision). Expected values are computed here, with torch."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from course_utils.checks import CheckResult, check_numbers

TINY_GRADIENT = 1e-9          # exercise 1: a gradient value that fp16 flushes to zero
SCALER_INIT = 1024.0          # exercise 2: GradScaler("cpu", init_scale=1024, growth_interval=2)
SCALER_GROWTH_INTERVAL = 2
SCALER_STEPS = 10
SCALER_INF_STEPS = (2, 3)     # steps (from 0) whose gradients contain an inf


def smallest_fp16_loss_scale(gradient: float = TINY_GRADIENT) -> float:
    """The smallest power of two ``S`` for which ``gradient * S`` cast to float16 is not zero."""
    if not 0 < gradient < 1:
        raise ValueError(f"gradient must be in (0, 1), got {gradient}.")
    k = 0
    while torch.tensor(gradient * 2.0**k, dtype=torch.float16).item() == 0.0:
        k += 1
    return 2.0**k


def check_loss_scale(answer: float | None) -> CheckResult:
    """Exercise 1: the smallest power-of-two loss scale that keeps a gradient of 1e-9 nonzero in fp16."""
    expected = smallest_fp16_loss_scale()
    tiny = torch.finfo(torch.float16).smallest_normal * torch.finfo(torch.float16).eps  # smallest subnormal
    return check_numbers(
        answer, [expected], names=["loss scale S"],
        why=[f"fp16's smallest subnormal is 2^-24 ≈ {tiny:.3g}; rounding to nearest keeps g·S nonzero once "
             f"it reaches half of that ({tiny / 2:.3g}), and {TINY_GRADIENT:g}·S first does so at S = {expected:g}"],
    )


def scaler_schedule(inf_steps: Sequence[int] = SCALER_INF_STEPS) -> tuple[float, int]:
    """Run a real ``torch.amp.GradScaler("cpu")`` for ``SCALER_STEPS`` steps, injecting an inf gradient at
    ``inf_steps``; return ``(final scale, number of skipped optimizer steps)``."""
    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=SCALER_INIT, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=SCALER_GROWTH_INTERVAL)
    skipped = 0
    for step in range(SCALER_STEPS):
        optimizer.zero_grad()
        scaler.scale((weight**2).sum()).backward()
        if step in inf_steps and weight.grad is not None:
            weight.grad[0] = float("inf")
        before = weight.detach().clone()
        scaler.step(optimizer)
        scaler.update()
        skipped += int(torch.equal(before, weight.detach()))
    return scaler.get_scale(), skipped


def check_scaler_schedule(answer: Sequence[float] | None) -> CheckResult:
    """Exercise 2: ``(final scale, skipped steps)`` of the GradScaler schedule described in the notebook."""
    scale, skipped = scaler_schedule()
    return check_numbers(
        answer, [scale, skipped], names=["final scale", "skipped steps"],
        why=[f"each step with an inf halves the scale and resets the counter; every {SCALER_GROWTH_INTERVAL} "
             f"consecutive finite steps double it: the scale ends at {scale:g}",
             f"only the {len(SCALER_INF_STEPS)} steps with an inf gradient are skipped ({skipped})"],
    )
