"""Right-or-wrong checks for the exercises at the end of each lesson."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one answer, with the reason; shown as a single line in a notebook."""

    correct: bool
    message: str

    def __repr__(self) -> str:
        return ("✅ Right: " if self.correct else "❌ Not yet: ") + self.message

    def __bool__(self) -> bool:
        return self.correct


NO_ANSWER = CheckResult(False, "no answer yet. Replace `None` with your answer and run the cell again.")


def check_numbers(answer: float | Sequence[float] | None, expected: Sequence[float], *,
                  names: Sequence[str], why: Sequence[str], rtol: float = 1e-6) -> CheckResult:
    """Compare an answer (a number or a sequence) with the expected numbers, item by item.

    Args:
        names: what each number is (``"df/dx"``), used in the feedback.
        why: for each number, how it is derived; shown for the items that are wrong.
    """
    if answer is None:
        return NO_ANSWER
    got = np.atleast_1d(np.asarray(answer, dtype=float)) if _is_numeric(answer) else None
    if got is None or got.shape != (len(expected),):
        return CheckResult(False, f"expected {len(expected)} number(s) ({', '.join(names)}), got {answer!r}.")
    close = np.isclose(got, np.asarray(expected, dtype=float), rtol=rtol, atol=1e-9)
    wrong = [i for i, ok in enumerate(close) if not ok]
    if not wrong:
        return CheckResult(True, "; ".join(f"{n} = {_fmt(e)}" for n, e in zip(names, expected, strict=True)) + ".")
    return CheckResult(False, " ".join(f"{names[i]}: you have {_fmt(got[i])}, but {why[i]}." for i in wrong))


def _is_numeric(answer: object) -> bool:
    try:
        np.asarray(answer, dtype=float)
    except (TypeError, ValueError):
        return False
    return True


def _fmt(x: float) -> str:
    return f"{float(x):g}"
