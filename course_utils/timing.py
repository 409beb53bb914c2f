"""Timing with warm-up and repeats, ratios against a baseline or an ideal, and the page faults behind a time."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Timing:
    """Wall-clock times of repeated calls, in seconds."""

    times: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median time of one call: the robust summary to report."""
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        """Fastest call."""
        return min(self.times)

    @property
    def stdev(self) -> float:
        """Sample standard deviation (0 for a single repeat)."""
        return statistics.stdev(self.times) if len(self.times) > 1 else 0.0

    def throughput(self, items: float) -> float:
        """Items processed per second when one call processes ``items``."""
        return items / self.median

    def speedup_over(self, baseline: Timing) -> float:
        """How many times faster this is than ``baseline`` (ratio of medians)."""
        return baseline.median / self.median

    def __str__(self) -> str:
        return f"{format_seconds(self.median)} ± {format_seconds(self.stdev)} (median of {len(self.times)})"


def format_seconds(seconds: float) -> str:
    """Format a duration with a unit that keeps 3 significant digits (ns to s)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_bytes(n: float) -> str:
    """Format a byte count with a binary unit (B, KiB, MiB, GiB), 3 significant digits."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def synchronize(device: torch.device | str | None) -> None:
    """Wait for queued CUDA work on ``device`` (a no-op for the CPU and for ``None``)."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def measure(fn: Callable[[], Any], *, warmup: int = 2, repeats: int = 5,
            device: torch.device | str | None = None) -> Timing:
    """Time ``fn()`` after ``warmup`` untimed calls, ``repeats`` times.

    For CUDA work pass ``device``: the GPU is synchronised before and after each
    call, since kernels run asynchronously and would otherwise not be timed.

    Raises:
        TypeError: if ``fn`` is not callable.
        ValueError: if ``warmup < 0`` or ``repeats < 1``.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable taking no arguments, got {type(fn).__name__}; wrap it in a lambda.")
    if warmup < 0 or repeats < 1:
        raise ValueError(f"need warmup >= 0 and repeats >= 1, got warmup={warmup}, repeats={repeats}.")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return Timing(tuple(times))


def rotations(names: Sequence[str], rounds: int) -> Iterator[list[str]]:
    """The order of each round when several candidates take turns: A B C, B C A, C A B, A B C, ...

    Each round starts one candidate further along, so that no candidate always runs first, or always
    right after the same neighbour, whose caches, memory and garbage it would inherit.
    """
    if rounds < 0 or not names:
        raise ValueError(f"need at least one name and rounds >= 0; got {list(names)!r} and {rounds}.")
    order = list(names)
    for round_ in range(rounds):
        start = round_ % len(order)
        yield order[start:] + order[:start]


def measure_interleaved(fns: Mapping[str, Callable[[], Any]], *, warmup: int = 2, repeats: int = 5,
                        calls: int = 1, device: torch.device | str | None = None,
                        threads: int | None = None) -> dict[str, Timing]:
    """Time several candidates fairly on a shared machine: each round times every candidate once.

    :func:`measure` times one function after another; when the load of the machine changes during
    the run, the candidate timed last pays for it. Interleaving the candidates round by round
    spreads such changes over all of them, so the ratio of their medians stays meaningful. The rounds
    follow :func:`rotations`.

    Args:
        fns: name -> callable taking no arguments (e.g. ``lambda: model(x)``).
        calls: calls per timing; the time reported is per call (use > 1 for calls of microseconds).
        device: for CUDA work, the GPU is synchronised around each timing.
        threads: run with this many PyTorch CPU threads (restored afterwards); one thread keeps
            CPU timings of small models steady when other processes share the cores.

    Returns:
        name -> :class:`Timing` of one call, in the order of ``fns``.
    """
    if not fns or not all(callable(fn) for fn in fns.values()):
        raise ValueError("fns must map at least one name to a callable taking no arguments.")
    if warmup < 0 or repeats < 1 or calls < 1:
        raise ValueError(f"need warmup >= 0, repeats >= 1, calls >= 1; got {warmup}, {repeats}, {calls}.")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive int or None, got {threads!r}.")
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    times: dict[str, list[float]] = {name: [] for name in fns}
    try:
        for round_, order in enumerate(rotations(list(fns), warmup + repeats)):
            for name in order:
                fn = fns[name]
                synchronize(device)
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                synchronize(device)
                if round_ >= warmup:
                    times[name].append((time.perf_counter() - start) / calls)
    finally:
        torch.set_num_threads(previous_threads)
    return {name: Timing(tuple(t)) for name, t in times.items()}


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """Context manager for one wall-clock measurement; call the yielded function for seconds.

    >>> with stopwatch() as elapsed:
    ...     pass
    >>> elapsed() >= 0
    True
    """
    start = time.perf_counter()
    end: float | None = None
    try:
        yield lambda: (end if end is not None else time.perf_counter()) - start
    finally:
        end = time.perf_counter()


@contextmanager
def page_faults() -> Iterator[Callable[[], int]]:
    """Context manager that counts this process's minor page faults (all its threads) during the block.

    A minor fault is the kernel mapping (and zero-filling) a fresh page at its first touch. Large temporaries pay
    for it at every call where the allocator returns their memory to the system and maps it again (on Linux,
    glibc serves blocks of 32 MiB and more with ``mmap`` and unmaps them when freed), and a time that grows with
    it measures the allocator, not the arithmetic::

        with cu.page_faults() as faults:
            fn()
        print(faults(), "minor page faults")

    Raises:
        RuntimeError: on a platform without ``getrusage`` (native Windows: run the course in WSL).
    """
    try:
        import resource
    except ImportError:  # pragma: no cover (Windows)
        raise RuntimeError(f"page faults are counted with getrusage, which {sys.platform} lacks: run the course "
                           "in WSL, Docker or Colab (README).") from None

    def now() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    start, end = now(), None
    try:
        yield lambda: (end if end is not None else now()) - start
    finally:
        end = now()


def ratio_by_round(timings: Mapping[str, Timing], numerator: str, denominator: str) -> float:
    """The median over the rounds of :func:`measure_interleaved` of ``numerator``'s time / ``denominator``'s.

    A round's two timings are adjacent in time, so a slower second of the machine reaches both and cancels out of
    their ratio; a ratio of the two medians can compare two different moments.
    """
    for name in (numerator, denominator):
        if name not in timings:
            raise KeyError(f"no timing named {name!r}: the names are {list(timings)}.")
    top, bottom = timings[numerator].times, timings[denominator].times
    if len(top) != len(bottom):
        raise ValueError(f"{numerator!r} has {len(top)} timings and {denominator!r} {len(bottom)}: the ratio by "
                         "round needs the timings of one measure_interleaved call.")
    return statistics.median(t / b for t, b in zip(top, bottom, strict=True))


def speedup(baseline: float, improved: float) -> float:
    """``baseline / improved`` for two times (seconds) of the same work."""
    if baseline <= 0 or improved <= 0:
        raise ValueError(f"times must be positive seconds, got baseline={baseline}, improved={improved}.")
    return baseline / improved


def parallel_efficiency(measured_speedup: float, workers: int) -> float:
    """Fraction of the ideal linear speedup reached with ``workers`` (1.0 is ideal)."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}.")
    return measured_speedup / workers
