"""Run profiles: ``quick`` for CI and laptops, ``full`` for lecture-quality results.

The profile is read from the ``COURSE_PROFILE`` environment variable. When it is
unset, CI runs (``CI`` set) get ``quick`` and everyone else gets ``full``.
Lessons ask the profile for sizes instead of branching on its name by hand::

    profile = get_profile()
    n_train = profile.train_samples
    epochs = profile.pick(quick=2, full=10)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypeVar

PROFILE_ENV = "COURSE_PROFILE"
T = TypeVar("T")


@dataclass(frozen=True)
class Profile:
    """Sizes that a lesson scales with the run profile.

    Attributes:
        name: ``"quick"`` or ``"full"``.
        train_samples: training examples to use from a dataset (``None``: all of it).
        test_samples: test examples to use (``None``: all of it).
        epochs: default number of training epochs.
        repeats: default number of timed repeats for measurements.
    """

    name: str
    train_samples: int | None
    test_samples: int | None
    epochs: int
    repeats: int

    @property
    def is_quick(self) -> bool:
        """True for the ``quick`` profile."""
        return self.name == "quick"

    def pick(self, *, quick: T, full: T) -> T:
        """Return ``quick`` or ``full`` according to this profile."""
        return quick if self.is_quick else full


PROFILES: dict[str, Profile] = {
    "quick": Profile("quick", train_samples=6_000, test_samples=2_000, epochs=2, repeats=5),
    "full": Profile("full", train_samples=None, test_samples=None, epochs=10, repeats=20),
}


def get_profile(name: str | None = None) -> Profile:
    """Return the run profile named ``name``, or the one the environment selects.

    Raises:
        ValueError: if the name (or ``$COURSE_PROFILE``) is not a known profile.
    """
    if name is None:
        name = os.environ.get(PROFILE_ENV, "").strip() or ("quick" if os.environ.get("CI") else "full")
    key = name.strip().lower()
    if key not in PROFILES:
        raise ValueError(
            f"Unknown run profile {name!r}. Use one of {sorted(PROFILES)}, "
            f"e.g. `export {PROFILE_ENV}=quick` for a fast run or `{PROFILE_ENV}=full` for lecture results."
        )
    return PROFILES[key]
