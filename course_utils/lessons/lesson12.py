"""Lesson 12 (memory and sharded training): the exercise checks, and the plumbing of its memory measurements (the
allocator's peak seen by the profiler, the profiler's memory timeline, a count of the operators that ran)."""

from __future__ import annotations

import json
import math
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from course_utils.checks import CheckResult, check_numbers

# The columns of the profiler's memory timeline (torch/profiler/_memory_profiler.py, _CATEGORY_TO_INDEX), in order;
# None (no category found) is "unknown".
TIMELINE_CATEGORIES = ("parameters", "optimizer state", "input", "temporary", "activations", "gradients",
                       "autograd detail", "unknown")


def allocated_peak(fn: Callable[[], Any], device: torch.device | str = "cpu") -> int:
    """The peak of the bytes that the allocator of ``device`` handed out while ``fn()`` ran, above what was allocated
    before (the profiler's ``profile_memory`` events: every allocation, also those made inside a kernel, which a
    tensor-level count such as ``cu.peak_memory`` does not see)."""
    device = torch.device(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, profile_memory=True) as prof:
        fn()
    kineto = getattr(prof.profiler, "kineto_results", None)
    if kineto is None:
        raise RuntimeError("this PyTorch's profiler gives no allocation events (profile_memory=True).")
    wanted = {"cpu": "CPU", "cuda": "CUDA"}.get(device.type, device.type.upper())
    current = peak = 0
    events = [e for e in kineto.events() if e.name() == "[memory]" and e.device_type().name == wanted
              and (device.index is None or device.type == "cpu" or e.device_index() == device.index)]
    for event in sorted(events, key=lambda e: e.start_ns()):
        current += event.nbytes()
        peak = max(peak, current)
    return peak


def memory_timeline(prof: profile, device: torch.device | str = "cpu") -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The profiler's memory timeline of ``device``: the times (ms from the first event) and, per category of
    :data:`TIMELINE_CATEGORIES`, the bytes alive at each time. ``prof`` must have run with
    ``profile_memory=True, record_shapes=True, with_stack=True``.

    ``export_memory_timeline`` is deprecated in torch 2.14 (its warning points to the CUDA memory snapshot, which
    has no CPU counterpart): its warning is silenced here, where it is the only timeline a CPU has."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "timeline.json"
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "`export_memory_timeline` is deprecated", FutureWarning)
            prof.export_memory_timeline(str(path), device=str(torch.device(device)))
        times, sizes = json.loads(path.read_text())
    if not times:
        raise ValueError(f"the profile has no memory events on {device}.")
    columns = np.asarray(sizes, dtype=np.int64)[:, 1:]  # column 0 is unused by the profiler
    if columns.shape[1] != len(TIMELINE_CATEGORIES):
        raise ValueError(f"expected {len(TIMELINE_CATEGORIES)} categories, got {columns.shape[1]}: has the profiler "
                         "changed its timeline format?")
    ms = (np.asarray(times, dtype=np.float64) - times[0]) / 1e3  # µs -> ms
    return ms, {name: columns[:, i] for i, name in enumerate(TIMELINE_CATEGORIES)}


class _OpCounter(TorchDispatchMode):
    def __init__(self, counts: Counter[str]) -> None:
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def count_ops() -> Iterator[Counter[str]]:
    """Count the ATen operators that really run in the block, by name (``"addmm"``, ``"gelu"``, ...); an operator
    whose result a selective checkpoint replays from its cache does not run, and is not counted."""
    counts: Counter[str] = Counter()
    with _OpCounter(counts):
        yield counts


def check_zero_memory(answer: Sequence[float] | None, *, parameters: float = 1.5e9, ranks: int = 8,
                      optimizer_bytes: int = 12) -> CheckResult:
    """Exercise 1: GB (10**9 bytes) per rank for (DDP, ZeRO-1, ZeRO-2, ZeRO-3) in mixed-precision Adam training:
    2 bytes of fp16 weights and 2 of fp16 gradients per parameter, ``optimizer_bytes`` of fp32 state (K)."""
    p, n, k = parameters / 1e9, ranks, optimizer_bytes
    expected = [(2 + 2 + k) * p, (2 + 2) * p + k * p / n, 2 * p + (2 + k) * p / n, (2 + 2 + k) * p / n]
    return check_numbers(answer, expected, names=["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"], why=[
        f"every rank holds everything: (2 + 2 + {k}) B × {p:g} G = {expected[0]:g} GB",
        f"the optimizer state is split: (2 + 2) × {p:g} + {k} × {p:g} / {n} = {expected[1]:g} GB",
        f"the gradients too: 2 × {p:g} + (2 + {k}) × {p:g} / {n} = {expected[2]:g} GB",
        f"and the weights: (2 + 2 + {k}) × {p:g} / {n} = {expected[3]:g} GB"], rtol=1e-2)


def check_accumulation(answer: Sequence[int] | None, *, global_batch: int = 512, micro_batch: int = 16,
                       ranks: int = 4) -> CheckResult:
    """Exercise 2: (micro-steps per optimizer step, all-reduce rounds per optimizer step without ``no_sync``, with
    ``no_sync`` on all micro-steps but the last)."""
    if global_batch % (micro_batch * ranks):
        raise ValueError("the global batch must be a multiple of micro_batch × ranks.")
    k = global_batch // (micro_batch * ranks)
    return check_numbers(answer, [k, k, 1], names=["micro-steps", "rounds without no_sync", "rounds with no_sync"],
                         why=[f"each micro-step consumes {micro_batch} × {ranks} = {micro_batch * ranks} samples: "
                              f"{global_batch} / {micro_batch * ranks} = {k}",
                              "DDP all-reduces all the gradients (in buckets) in every backward pass",
                              "under no_sync the gradients only accumulate locally: one all-reduce, in the last "
                              "backward pass"])


def shard_rows(rows: int, ranks: int) -> list[int]:
    """Rows of a dim-0 ``Shard`` (FSDP2's placement) on each rank: ``torch.chunk``'s split, ranks past the last
    chunk holding none."""
    if rows < 1 or ranks < 1:
        raise ValueError(f"rows and ranks must be positive, got {rows} and {ranks}.")
    chunks = [len(c) for c in torch.chunk(torch.empty(rows), ranks)]
    return chunks + [0] * (ranks - len(chunks))


def check_shard_rows(answer: Sequence[int] | None, *, rows: int = 300, ranks: int = 8) -> CheckResult:
    """Exercise 3: (rows on rank 0, rows on the last rank) of a weight with ``rows`` rows under ``fully_shard``."""
    split = shard_rows(rows, ranks)
    size = math.ceil(rows / ranks)
    return check_numbers(answer, [split[0], split[-1]], names=["rank 0", f"rank {ranks - 1}"], why=[
        f"dim 0 is cut into chunks of ceil({rows} / {ranks}) = {size} rows, as torch.chunk does",
        f"the last rank gets what is left: {rows} - {ranks - 1} × {size} = {split[-1]} "
        f"(FSDP pads it to {size} rows for the collectives)" if split[-1] else
        f"{rows} rows make only {len([s for s in split if s])} chunks of {size}: the last rank holds none"])
