"""Progress for long loops: shown where a person watches, silent where outputs are recorded.

A loop that takes minutes in the full profile wraps its iterable in :func:`progress`, and a Keras
``fit`` passes ``verbose=keras_verbose()``. Both follow ``$COURSE_PROGRESS``:

* ``on`` (the default outside CI): a ``tqdm.auto`` bar, a widget in JupyterLab and Colab, text in a terminal;
* ``off`` (the default under CI; the test suite and ``python -m course_utils execute`` set it): nothing,
  so the committed outputs and nbval's comparisons hold only the lesson's own prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

PROGRESS_ENV = "COURSE_PROGRESS"
_ON, _OFF = ("on", "1", "true", "yes"), ("off", "0", "false", "no")
T = TypeVar("T")


def progress_enabled() -> bool:
    """Whether long loops show progress: ``$COURSE_PROGRESS``, else off under CI (``$CI`` set) and on elsewhere.

    Raises:
        ValueError: for a value of ``$COURSE_PROGRESS`` other than on/off (or 1/0, true/false, yes/no).
    """
    value = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if not value:
        return not os.environ.get("CI")
    if value in _ON or value in _OFF:
        return value in _ON
    raise ValueError(f"{PROGRESS_ENV}={value!r} is neither on nor off. Use `{PROGRESS_ENV}=on` to show progress "
                     f"bars or `{PROGRESS_ENV}=off` to hide them.")


def progress(iterable: Iterable[T], *, desc: str, total: int | None = None, unit: str = "it") -> Iterator[T]:
    """Iterate over ``iterable``, with a progress bar labelled ``desc`` when progress is on.

    The bar disappears when the loop ends (``leave=False``): what stays in the cell is what the lesson prints.
    """
    if not progress_enabled():
        yield from iterable
        return
    from tqdm.auto import tqdm  # imported here: tqdm.auto inspects the front end it runs in

    yield from tqdm(iterable, desc=desc, total=total, unit=unit, leave=False, dynamic_ncols=True)


def keras_verbose() -> str | int:
    """The ``verbose`` argument of a Keras ``fit``: ``"auto"`` (Keras's own progress bar) or 0."""
    return "auto" if progress_enabled() else 0
