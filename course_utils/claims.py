"""Claims that depend on the machine: stated with their condition, checked where it holds, explained where not.

An invariant (a gradient, a shape, a byte count) is a plain ``assert``. A measurement that depends on the
hardware, the load or the run profile (a speedup, "slower", an accuracy gap after a few steps) is a
*claim*: it holds under a :class:`Condition`, and :func:`expect` checks it only there::

    hw = env.hardware
    cu.expect("bf16 matmul faster than fp32", ratio < 1, measured=f"x{ratio:.2f} the fp32 time",
              when=hw.native_bf16, otherwise="bf16 is converted to fp32 and back there, so it is slower")

Where the condition holds and the claim fails, :func:`expect` raises :class:`ClaimError`: that is a bug
in the lesson (or a broken machine), and CI fails loudly. Where the condition does not hold, it prints
what was expected, what was measured, and which fact of this machine explains the difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class ClaimError(AssertionError):
    """A claim failed on a machine where its condition holds."""


@dataclass(frozen=True)
class Condition:
    """A fact of this machine or run that decides whether a claim must hold.

    Attributes:
        holds: whether the fact is true here.
        where: the condition in words, read after "where": ``"oneDNN has native bf16 kernels"``.
        here: what this machine has, in words: ``"AVX2, bf16 emulated by oneDNN"``.
        of_this_run: the fact is about this run, not the machine (no other process used the CPU): where only
            such facts fail, a claim's ``otherwise`` (what other machines do) is not printed.
        machine_holds: whether the facts about the machine hold; computed, not passed.
    """

    holds: bool
    where: str
    here: str
    of_this_run: bool = False
    machine_holds: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.holds, bool):
            raise TypeError(f"Condition.holds must be a bool, got {type(self.holds).__name__}: {self.holds!r}.")
        if not self.where.strip():
            raise ValueError("Condition.where must say in words when the condition holds.")
        object.__setattr__(self, "machine_holds", self.of_this_run or self.holds)

    def __and__(self, other: Condition) -> Condition:
        """Both conditions: holds where both hold; says what this machine has for each."""
        if not isinstance(other, Condition):
            return NotImplemented
        here = "; ".join(dict.fromkeys(h for h in (self.here, other.here) if h))
        both = Condition(self.holds and other.holds, f"{self.where} and {other.where}", here)
        object.__setattr__(both, "machine_holds", self.machine_holds and other.machine_holds)
        return both

    def __bool__(self) -> bool:
        return self.holds


ANYWHERE = Condition(True, "the lesson runs at all (no hardware condition)", "")


def expect(claim: str, ok: bool, *, measured: str, when: Condition = ANYWHERE, otherwise: str = "") -> None:
    """Check ``claim`` where ``when`` holds; elsewhere print what was expected, measured and why.

    Args:
        claim: what is expected, as a sentence: ``"processes are faster than threads"``.
        ok: whether the measurement satisfies the claim.
        measured: the measurement, in words and numbers: ``"1.65x"``.
        when: the condition under which the claim must hold (default: on every machine).
        otherwise: what to expect instead where the condition does not hold, and why; not printed where only
            facts of this run fail (another process used the CPU), since the machine is then not the reason.

    Raises:
        ClaimError: if the condition holds and the claim does not.
        TypeError: if ``ok`` is not a bool (Python's or NumPy's) or ``when`` is not a :class:`Condition`.
    """
    if not isinstance(ok, bool | np.bool_):
        raise TypeError(f"ok must be a bool (the claim checked on the measurement), got {type(ok).__name__}: {ok!r}.")
    ok = bool(ok)
    if not isinstance(when, Condition):
        raise TypeError(f"when must be a Condition (e.g. env.hardware.native_bf16), got {type(when).__name__}.")
    machine = f" (this machine: {when.here})" if when.here else ""
    if when.holds:
        if not ok:
            raise ClaimError(f"{claim}: expected where {when.where}, which holds here{machine}, but measured "
                             f"{measured}.")
        checked = "on every machine (no hardware condition)" if when is ANYWHERE else f"where {when.where}{machine}"
        print(f"✓ {claim}: {measured}. Checked {checked}.")
        return
    outcome = "holds here all the same" if ok else "does not hold here"
    print(f"○ {claim}: {measured}, {outcome}. Not checked: expected only where {when.where}{machine}."
          + (f" {otherwise}" if otherwise and not when.machine_holds else ""))
