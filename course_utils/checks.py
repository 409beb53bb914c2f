"""Right-or-wrong checks for the exercises at the end of each lesson."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from course_utils.launch import read_rank_results, run_processes, torchrun_command


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one answer, or the worked solution when asked for; shown as a single line in a notebook."""

    correct: bool
    message: str
    is_solution: bool = False  # the message is the worked solution, shown because the student asked for it

    def __repr__(self) -> str:
        if self.is_solution:
            return "📖 Solution: " + self.message
        return ("✅ Right: " if self.correct else "❌ Not yet: ") + self.message

    def __bool__(self) -> bool:
        return self.correct


NO_ANSWER = CheckResult(False, "no answer yet. Replace `None` with your answer and run the cell again.")
ASK_FOR_SOLUTION = "Still stuck? Add `solution=True` to the check's call for the worked solution."
HOW_TO_CHECK = ("Replace `None` with your answer and run the cell: the check says whether it is right and, if not, "
                "gives a hint. Try again before you ask for the worked solution with `solution=True`.")


def worked_solution(text: str) -> CheckResult:
    """The worked solution of an exercise, for a check called with ``solution=True``."""
    return CheckResult(False, text, is_solution=True)


def not_yet(hint: str) -> CheckResult:
    """A wrong answer's verdict: the hint, then how to ask for the solution (never the solution itself)."""
    return CheckResult(False, f"{hint} {ASK_FOR_SOLUTION}")


def check_numbers(answer: float | Sequence[float] | None, expected: Sequence[float], *, names: Sequence[str],
                  hints: Sequence[str], why: Sequence[str], rtol: float = 1e-6,
                  solution: bool = False) -> CheckResult:
    """Compare an answer (a number or a sequence) with the expected numbers, item by item.

    A wrong item gets its hint (which must not give the number away); the derivations are shown only when the
    student asks for them with ``solution=True``, whatever the answer.

    Args:
        names: what each number is (``"df/dx"``), used in the feedback.
        hints: for each number, a nudge towards deriving it; shown for the items that are wrong.
        why: for each number, its derivation, naming it and ending in its value (``"df/dx = 2q·y = 4"``); together
            the worked solution.
        solution: show the worked solution instead of checking the answer.

    Raises:
        ValueError: if ``names``, ``hints``, ``why`` and ``expected`` differ in length.
    """
    if not len(names) == len(hints) == len(why) == len(expected):
        raise ValueError(f"one name, hint and derivation per expected number: {len(expected)} numbers, "
                         f"{len(names)} names, {len(hints)} hints, {len(why)} derivations.")
    if solution:
        return worked_solution("; ".join(why) + ".")
    if answer is None:
        return NO_ANSWER
    got = np.atleast_1d(np.asarray(answer, dtype=float)) if _is_numeric(answer) else None
    if got is None or got.shape != (len(expected),):
        return CheckResult(False, f"expected {len(expected)} number(s) ({', '.join(names)}), got {answer!r}.")
    close = np.isclose(got, np.asarray(expected, dtype=float), rtol=rtol, atol=1e-9)
    wrong = [i for i, ok in enumerate(close) if not ok]
    if not wrong:
        return CheckResult(True, "; ".join(f"{n} = {_fmt(e)}" for n, e in zip(names, expected, strict=True)) + ".")
    return not_yet(" ".join(_sentence(f"{names[i]}: you have {_fmt(got[i])}; hint: {hints[i]}") for i in wrong))


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def _is_numeric(answer: object) -> bool:
    try:
        np.asarray(answer, dtype=float)
    except (TypeError, ValueError):
        return False
    return True


def _fmt(x: float) -> str:
    return f"{float(x):g}"


def _fmt_measured(x: float) -> str:
    """Three significant digits, thousands separated: 0.0123, 5.23, 5,561."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


@dataclass(frozen=True)
class Reveal:
    """A student's prediction beside what the cell measured or computed; shown as one line in a notebook."""

    guess: float | None
    value: float
    what: str
    unit: str = ""
    exact: bool = False  # a computed value: right or wrong; else a measurement: right within ``within`` times
    within: float = 2.0
    pivot: float | None = None  # a guess on the other side of it than the value is wrong, however close

    def __repr__(self) -> str:
        fmt = _fmt if self.exact else _fmt_measured
        shown = f"{fmt(self.value)}{self.unit}"
        if self.guess is None:
            return f"🔎 {self.what}: {shown} (no prediction made)."
        guess = f"{fmt(self.guess)}{self.unit}"
        if self.exact:
            verdict = "right" if np.isclose(self.guess, self.value) else f"not {guess}: see why below"
            return f"🔎 {self.what}: {shown}. You predicted {guess}: {verdict}."
        if self.pivot is not None and (self.guess - self.pivot) * (self.value - self.pivot) < 0:
            side = "more" if self.value > self.pivot else "less"
            return (f"🔎 {self.what}: {shown}. You predicted {guess}: it is {side} than "
                    f"{fmt(self.pivot)}{self.unit}, see why below.")
        if self.guess <= 0 or self.value <= 0:
            return f"🔎 {self.what}: {shown}. You predicted {guess}."
        factor = self.value / self.guess
        close = f"a factor of {self.within:g}" if self.within >= 1.5 else f"{self.within - 1:.0%}"
        off = (f"within {close}: well predicted" if 1 / self.within <= factor <= self.within else
               f"{factor:.3g} times more than you expected" if factor > 1 else
               f"{1 / factor:.3g} times less than you expected")
        return f"🔎 {self.what}: {shown}. You predicted {guess}: {off}."


def reveal(guess: float | None, value: float, *, what: str, unit: str = "", exact: bool = False,
           within: float = 2.0, pivot: float | None = None) -> Reveal:
    """Show a prediction made before a cell ran beside the value the cell produced.

    Args:
        guess: the student's prediction (``None``: none was made).
        value: what the cell measured (``exact=False``: a prediction within a factor of ``within`` counts as good)
            or computed (``exact=True``: right or wrong).
        what: the quantity, as a phrase ("PyTorch over Python loops").
        within: how many times off a prediction of a measurement may be and count as good (1.05: within 5%).
        pivot: a value whose side is the point (1 for "faster or slower"): a guess on the other side of it than the
            value is wrong, however close.

    Raises:
        TypeError: if ``guess`` is not a number or ``None``.
        ValueError: if ``within`` is not more than 1.
    """
    if within <= 1:
        raise ValueError(f"within is how many times off a good prediction may be: more than 1 (1.05: 5%), not "
                         f"{within}.")
    if guess is not None and (isinstance(guess, bool) or not isinstance(guess, int | float)):
        raise TypeError(f"a prediction is one number (or None for none), got {guess!r}.")
    return Reveal(None if guess is None else float(guess), float(value), what, unit, exact, within, pivot)


def launch_exercise(script: Path | str, *, samples: int, world: int,
                    timeout: float) -> list[dict[str, Any]] | CheckResult:
    """Launch a student's script with ``torchrun`` on ``world`` CPU processes (``--train-samples samples --out``) and
    read each rank's report; a launch that fails or writes no report gives the verdict instead.

    Raises:
        FileNotFoundError: if ``script`` does not exist (run the cell that writes it first).
    """
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"{script} does not exist: run the cell that writes it (%%writefile) first.")
    out = script.with_name(f"{script.stem}_reports")
    shutil.rmtree(out, ignore_errors=True)
    command = torchrun_command(script, "--train-samples", str(samples), "--out", str(out), nproc_per_node=world)
    (run,) = run_processes([command], timeout=timeout, env={"OMP_NUM_THREADS": "1"})
    if run.returncode != 0:
        return not_yet(f"the launch failed (exit code {run.returncode}). {run.errors}\n"
                       "Fix the first error a rank reports, then run the check again.")
    try:
        return read_rank_results(out)
    except FileNotFoundError:
        return not_yet("the processes ran but wrote no report: keep the `report(...)` call at the end of `main`.")
