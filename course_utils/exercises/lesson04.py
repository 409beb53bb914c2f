"""Exercise checks for lesson 04 (TensorBoard and hyper-parameter sweeps). Expected values are computed here."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import nn

from course_utils.checks import CheckResult, check_numbers

FASHION_MNIST_TRAIN = 60_000
LECTURE_BATCH_SIZES = (10, 100, 1000)


def _lecture_cnn() -> nn.Sequential:
    """The lecture's CNN layer by layer (the notebook's ``Network``), for counting parameters."""
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 12, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(12 * 4 * 4, 120), nn.ReLU(), nn.Linear(120, 60), nn.ReLU(), nn.Linear(60, 10),
    )


def check_parameter_count(answer: int | None) -> CheckResult:
    """Exercise 1: trainable parameters of the lecture's CNN (conv1, conv2, fc1, fc2, out)."""
    layers = [m for m in _lecture_cnn() if isinstance(m, (nn.Conv2d, nn.Linear))]
    counts = [sum(p.numel() for p in m.parameters()) for m in layers]
    terms = " + ".join(str(c) for c in counts)
    return check_numbers(
        answer, [sum(counts)], names=["parameters"],
        why=[f"a Conv2d(c_in, c_out, 5) holds c_out·c_in·5·5 weights + c_out biases, a Linear(n_in, n_out) "
             f"n_in·n_out + n_out; fc1 sees 12·4·4 = 192 inputs (28 → 24 → 12 → 8 → 4 after two 5×5 "
             f"convolutions and two 2×2 poolings): {terms} = {sum(counts)}"],
    )


def check_steps_per_epoch(answer: Sequence[int] | None) -> CheckResult:
    """Exercise 2: optimizer steps in one epoch over all 60,000 training images, per lecture batch size."""
    expected = [math.ceil(FASHION_MNIST_TRAIN / b) for b in LECTURE_BATCH_SIZES]
    return check_numbers(
        answer, expected, names=[f"steps at batch size {b}" for b in LECTURE_BATCH_SIZES],
        why=[f"one step per batch: ceil({FASHION_MNIST_TRAIN} / {b}) = {e}"
             for b, e in zip(LECTURE_BATCH_SIZES, expected)],
    )


def trials_for_top_fraction(top: float, confidence: float) -> int:
    """Fewest independent random trials so that one lands in the best ``top`` fraction with ``confidence``.

    Solves ``1 - (1 - top)**n >= confidence`` for the smallest integer ``n`` (Bergstra & Bengio, 2012).
    """
    if not (0 < top < 1 and 0 < confidence < 1):
        raise ValueError(f"top and confidence must be in (0, 1), got {top} and {confidence}.")
    n = math.ceil(math.log1p(-confidence) / math.log1p(-top))
    while 1 - (1 - top) ** n < confidence:  # guard against rounding at the boundary
        n += 1
    return n


def check_random_search_trials(answer: int | None) -> CheckResult:
    """Exercise 3: random trials needed for a 95 % chance that one is in the top 5 % of configurations."""
    expected = trials_for_top_fraction(0.05, 0.95)
    return check_numbers(
        answer, [expected], names=["trials"],
        why=[f"each trial misses the top 5 % with probability 0.95, so n trials all miss with 0.95ⁿ; "
             f"1 - 0.95ⁿ ≥ 0.95 first holds at n = {expected} (0.95^{expected} = {0.95 ** expected:.4f})"],
    )
