"""Lesson 03 (multiprocessing and the DataLoader): the exercise checks."""

from __future__ import annotations

import math

from course_utils.checks import NO_ANSWER, CheckResult, check_numbers

START_METHODS = ("fork", "spawn", "forkserver")


def check_ideal_batch_time(answer: float | None, *, latency_ms: float = 5.0, batch_size: int = 8,
                           workers: int = 4) -> CheckResult:
    """Exercise 1: the ideal time per batch (ms) when each item waits ``latency_ms``, batches hold
    ``batch_size`` items and ``workers`` DataLoader workers each build whole batches."""
    serial = latency_ms * batch_size
    expected = serial / workers
    return check_numbers(
        answer, [expected], names=["ideal time per batch (ms)"], rtol=1e-3,
        why=[f"one process needs t0 = {batch_size} × {latency_ms:g} ms = {serial:g} ms per batch; {workers} "
             f"workers waiting at the same time deliver a batch every t0 / {workers} = {expected:g} ms"],
    )


def check_weighted_draw(answer: float | None, *, counts: tuple[int, int] = (900, 100)) -> CheckResult:
    """Exercise 2: the probability that one draw of ``WeightedRandomSampler`` is from the minority class
    when every sample of class ``c`` has weight ``1 / sqrt(count_c)``."""
    mass = [n / math.sqrt(n) for n in counts]  # total weight of each class: n_c samples × 1/sqrt(n_c)
    expected = mass[1] / sum(mass)
    return check_numbers(
        answer, [expected], names=["P(minority class)"], rtol=1e-3,
        why=[f"a class's share is (its count × its weight) / total: sqrt({counts[1]}) / (sqrt({counts[0]}) + "
             f"sqrt({counts[1]})) = {mass[1]:g} / {sum(mass):g} = {expected:g}"],
    )


def check_start_method(answer: str | None) -> CheckResult:
    """Exercise 3: a start method that is safe in a parent that has already initialised CUDA."""
    if answer is None:
        return NO_ANSWER
    name = answer.strip().lower() if isinstance(answer, str) else answer
    if name not in START_METHODS:
        return CheckResult(False, f"{answer!r} is not a start method: choose one of {', '.join(START_METHODS)}.")
    if name == "fork":
        return CheckResult(False, "a forked child inherits the parent's CUDA context, which cannot be used "
                                  "after fork (\"Cannot re-initialize CUDA in forked subprocess\").")
    return CheckResult(True, f"{name} starts each child from a fresh interpreter"
                       + (" (forked from a clean server process that never touched CUDA)." if name == "forkserver"
                          else ".") + " The child initialises CUDA itself.")
