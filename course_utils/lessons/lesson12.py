"""Lesson 12 (memory and sharded training): the exercise checks, the plumbing of its memory measurements (the
allocator's peak seen by the profiler, the profiler's memory timeline, a count of the operators that ran), and the
pictures of memory over a step, of recomputation, of ZeRO's stages and of an FSDP unit's life in one step, one colour
per kind of memory throughout."""

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
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from course_utils.checks import NO_ANSWER, CheckResult, check_numbers, launch_exercise, not_yet, worked_solution

# The columns of the profiler's memory timeline (torch/profiler/_memory_profiler.py, _CATEGORY_TO_INDEX), in order;
# None (no category found) is "unknown". The profiler's AUTOGRAD_DETAIL is named for what it holds here: the gradients
# of the activations on their way down the backward pass.
TIMELINE_CATEGORIES = ("parameters", "optimizer state", "input", "temporary", "activations", "gradients",
                       "activations' gradients", "unknown")


# One name and one colour per kind of memory in every figure of the lesson (the profiler timeline's kinds, the bars
# of section 1, ZeRO's parts).
MEMORY_COLORS = {"parameters": "tab:blue", "optimizer state": "tab:green", "input": "tab:gray",
                 "temporary": "tab:olive", "activations": "tab:red", "gradients": "tab:orange",
                 "activations' gradients": "tab:purple", "unknown": "tab:brown"}


def memory_color(kind: str) -> str:
    """The colour of a kind of memory (:data:`MEMORY_COLORS`).

    Raises:
        KeyError: for a kind the lesson does not draw.
    """
    if kind not in MEMORY_COLORS:
        raise KeyError(f"no colour for {kind!r}: the kinds are {', '.join(MEMORY_COLORS)}.")
    return MEMORY_COLORS[kind]


def allocated_peak(fn: Callable[[], Any], device: torch.device | str = "cpu") -> int:
    """The peak of the bytes that the allocator of ``device`` handed out while ``fn()`` ran, above what was allocated
    before (the profiler's ``profile_memory`` events: every allocation, also those made inside a kernel, which a
    tensor-level count such as ``cu.peak_memory`` does not see).

    torch 2.11 with CUDA warns here that the profiler "clears events at the end of each cycle" (seen on an H100): a
    profile without a schedule has one cycle, so the warning is silenced."""
    device = torch.device(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*Profiler clears events at the end of each cycle", UserWarning)
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


def _peak_index(by_kind: dict[str, np.ndarray]) -> int:
    return int(np.stack(list(by_kind.values())).sum(axis=0).argmax())


def timeline_peak(by_kind: dict[str, np.ndarray]) -> dict[str, int]:
    """The bytes of each kind alive at the timeline's peak (the moment the sum of all kinds is largest), kinds with
    none left out."""
    at = _peak_index(by_kind)
    return {kind: int(sizes[at]) for kind, sizes in by_kind.items() if sizes[at]}


def draw_memory_timeline(ms: np.ndarray, by_kind: dict[str, np.ndarray], ax: Axes, min_bytes: int = 2**10,
                         labels: dict[str, str] | None = None) -> None:
    """The timeline as stacked areas in MiB, one colour per kind (:data:`MEMORY_COLORS`), leaving out the kinds that
    never reach ``min_bytes``, each labelled with its kind or with ``labels[kind]``; a dotted line marks the peak."""
    shown = [kind for kind, sizes in by_kind.items() if sizes.max() >= min_bytes]
    ax.stackplot(ms, [by_kind[kind] / 2**20 for kind in shown], labels=[(labels or {}).get(k, k) for k in shown],
                 step="post",
                 colors=[memory_color(kind) for kind in shown])
    ax.axvline(ms[_peak_index(by_kind)], color="black", linestyle=":", linewidth=1)
    ax.set_ylabel("MiB")


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


# ---------------------------------------- pictures: ZeRO's stages, an FSDP unit's life

ZERO_SHARDED = {0: (), 1: ("optimizer state",), 2: ("optimizer state", "gradients"),
                3: ("optimizer state", "gradients", "parameters")}  # what each stage (0: DDP) splits over the ranks


def zero_bytes_per_parameter(stage: int, ranks: int, state_bytes: int = 12) -> dict[str, float]:
    """Bytes per parameter each rank holds under ZeRO ``stage`` (0: DDP) with mixed-precision Adam: fp16 weights and
    gradients (2 B each), ``state_bytes`` B of fp32 optimizer state (the paper's K); a sharded part is divided by
    ``ranks``.

    Raises:
        ValueError: for a stage outside 0–3, fewer than 1 rank or a negative ``state_bytes``.
    """
    if stage not in ZERO_SHARDED or ranks < 1 or state_bytes < 0:
        raise ValueError(f"stage is 0 (DDP) to 3, ranks at least 1 and state_bytes at least 0; got {stage}, {ranks}, "
                         f"{state_bytes}.")
    sizes = {"parameters": 2, "gradients": 2, "optimizer state": state_bytes}
    return {part: size / ranks if part in ZERO_SHARDED[stage] else float(size) for part, size in sizes.items()}


_QUARTER_HATCHES = ("///", "\\\\\\", "xxx", "...")  # one per rank: each rank holds another shard


def draw_zero_stages(ax: Axes, ranks: int = 4, state_bytes: int = 12) -> None:
    """One bar per rank for each stage: the bytes per parameter it holds, hatched where it holds a 1/N shard, with
    another hatch on each rank (each holds another shard)."""
    width = ranks + 1.5
    for stage in ZERO_SHARDED:
        held = zero_bytes_per_parameter(stage, ranks, state_bytes)
        for r in range(ranks):
            bottom = 0.0
            for part, size in held.items():
                ax.bar(stage * width + r, size, bottom=bottom, color=memory_color(part), edgecolor="white",
                       hatch=_QUARTER_HATCHES[r % len(_QUARTER_HATCHES)] if part in ZERO_SHARDED[stage] else None)
                bottom += size
        ax.text(stage * width + (ranks - 1) / 2, bottom + 0.3, f"{bottom:g} B on each rank", ha="center", fontsize=9)
    ax.set_xticks([stage * width + (ranks - 1) / 2 for stage in ZERO_SHARDED],
                  ["DDP" if stage == 0 else f"ZeRO-{stage}" for stage in ZERO_SHARDED])
    ax.set_ylabel("bytes per parameter")
    ax.set_title(f"what each of {ranks} ranks holds, mixed-precision Adam (K = {state_bytes})", fontsize=10)
    ax.legend(handles=[Patch(color=memory_color(part), label=part) for part in held]
              + [Patch(facecolor="white", edgecolor="gray", hatch="///",
                       label=f"a 1/{ranks} shard (each rank's hatch: its own)")],
              fontsize=10, loc="upper right")
    ax.set_ylim(0, (4 + state_bytes) * 1.2)


# The collectives in the colours of what they move (an all-gather brings parameters, a reduce-scatter sends
# gradients); the computations in grays.
_EVENT_STYLE = {"all-gather": ("AG", MEMORY_COLORS["parameters"]), "forward": ("F", "dimgray"),
                "free": ("free", "lightgray"), "backward": ("B", "black"),
                "reduce-scatter": ("RS", MEMORY_COLORS["gradients"])}


def fsdp_schedule(blocks: int, reshard_after_forward: bool | None) -> list[tuple[str, str]]:
    """What FSDP2 does, in order, in one training step of ``blocks`` units under a root unit: (unit, event).

    The root's pre-forward all-gathers what the blocks do not hold (here: the head), the blocks are gathered, run
    and (if resharded) freed in turn, and the backward pass runs in reverse, gathering again what was freed; after
    its backward every unit frees its gathered weights and reduce-scatters its gradients (FSDP2's post-backward,
    the root's at the very end). ``None`` (FSDP2's default) reshards every unit but the root after the forward.

    Raises:
        ValueError: for fewer than 1 block.
    """
    if blocks < 1:
        raise ValueError(f"blocks must be at least 1, got {blocks}.")
    units = [f"block {b + 1}" for b in range(blocks)]
    reshards = {unit: reshard_after_forward is not False and (reshard_after_forward or unit != "root")
                for unit in [*units, "root"]}
    events = [("root", "all-gather")]
    for unit in units:
        events += [(unit, "all-gather"), (unit, "forward")] + ([(unit, "free")] if reshards[unit] else [])
    events += [("root", "forward")] + ([("root", "free")] if reshards["root"] else [])
    events += ([("root", "all-gather")] if reshards["root"] else []) + [("root", "backward")]
    for unit in reversed(units):
        events += ([(unit, "all-gather")] if reshards[unit] else []) + [(unit, "backward"), (unit, "free"),
                                                                       (unit, "reduce-scatter")]
    return events + [("root", "free"), ("root", "reduce-scatter")]


def draw_fsdp_schedule(schedule: Sequence[tuple[str, str]], ax: Axes, title: str, root_label: str = "root") -> None:
    """The schedule as a timeline: a row per unit, a box per event in the order they happen; the root's row is
    labelled ``root_label`` (say what the root holds of its own: the parameters no block took)."""
    rows = list(dict.fromkeys(unit for unit, _ in schedule if unit != "root")) + ["root"]
    for t, (unit, event) in enumerate(schedule):
        label, color = _EVENT_STYLE[event]
        ax.barh(rows.index(unit), 0.92, left=t, color=color)
        ax.text(t + 0.46, rows.index(unit), label, ha="center", va="center", fontsize=10,
                color="black" if event == "free" else "white")
    ax.set_yticks(range(len(rows)), rows[:-1] + [root_label], fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks([])
    ax.set_title(title, fontsize=10, loc="left")
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)


def fsdp_schedule_legend(ax: Axes) -> None:
    """What the boxes of :func:`draw_fsdp_schedule` mean, beside ``ax``."""
    meaning = {"all-gather": "all-gather the unit's parameters", "forward": "forward", "backward": "backward",
               "free": "free the gathered parameters", "reduce-scatter": "reduce-scatter its gradients"}
    ax.legend(handles=[Patch(color=_EVENT_STYLE[event][1], label=f"{_EVENT_STYLE[event][0]}: {text}")
                       for event, text in meaning.items()], fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))


def prefetch_timeline(units: int, gather: float, compute: float, prefetch: bool) -> list[tuple[str, int, float, float]]:
    """The forward pass of ``units`` FSDP units on two streams, as (stream, unit, start, end): each unit's all-gather
    (``"communication"``, ``gather`` long) and forward (``"compute"``, ``compute`` long). A unit computes once its
    all-gather is done and the previous unit has computed. Without ``prefetch`` a unit's all-gather starts when the
    previous unit has computed; with it, when the previous unit starts computing (FSDP2's forward prefetch: the next
    all-gather overlaps the current compute). The pass ends at ``units * (gather + compute)`` without prefetching, at
    ``gather + compute + (units - 1) * max(gather, compute)`` with it.

    Raises:
        ValueError: for fewer than one unit, or a duration that is not positive.
    """
    if units < 1 or gather <= 0 or compute <= 0:
        raise ValueError(f"need at least one unit and positive durations, got {units} units, gather {gather}, "
                         f"compute {compute}.")
    events: list[tuple[str, int, float, float]] = []
    gathered = computed = started = 0.0   # when the last all-gather ended, the last forward ended and started
    for unit in range(units):
        begin = 0.0 if unit == 0 else started if prefetch else computed   # `started`: the previous unit's forward
        begin = max(begin, gathered)                          # one communication stream: all-gathers in turn
        gathered = begin + gather
        started = max(gathered, computed)
        computed = started + compute
        events += [("communication", unit, begin, gathered), ("compute", unit, started, computed)]
    return events


def units_gathered_at_once(timeline: Sequence[tuple[str, int, float, float]]) -> int:
    """The most units whose weights are whole at one moment of a :func:`prefetch_timeline`: a unit is whole from the
    start of its all-gather (its buffer is allocated) to the end of its forward (then it is resharded)."""
    spans: dict[int, tuple[float, float]] = {}
    for _, unit, start, end in timeline:
        begin, finish = spans.get(unit, (start, end))
        spans[unit] = (min(begin, start), max(finish, end))
    moments = [start for start, _ in spans.values()]
    return max(sum(begin <= t < finish for begin, finish in spans.values()) for t in moments)


def draw_prefetch(ax: Axes, units: int, gather: float, compute: float) -> None:
    """The forward pass of :func:`prefetch_timeline` without and with prefetching: for each, a row of all-gathers
    (communication) above a row of forwards (compute), on one time axis."""
    rows: list[str] = []
    for prefetch in (False, True):
        timeline = prefetch_timeline(units, gather, compute, prefetch)
        name = "prefetch" if prefetch else "no prefetch"
        for stream, event, color in (("communication", "AG", MEMORY_COLORS["parameters"]),
                                     ("compute", "F", "dimgray")):
            row = len(rows)
            rows.append(f"{name}: {stream}")
            for _, unit, start, end in (e for e in timeline if e[0] == stream):
                ax.barh(row, (end - start) * 0.96, left=start, color=color)
                ax.text((start + end) / 2, row, f"{event} {unit + 1}", ha="center", va="center", fontsize=9,
                        color="white")
        end = max(e[3] for e in timeline)
        ax.text(end + 0.05 * gather, len(rows) - 1, f"done at {end:g}", va="center", fontsize=9)
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("time (in units of one all-gather)" if gather == 1 else "time")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def accumulation_schedule(micro_batches: int, buckets: int, no_sync: bool) -> list[str]:
    """One DDP rank's events in an accumulated optimizer step: the forward and backward of each micro-batch
    (``"F+B"``), each followed by the all-reduce of each of the model's gradient buckets (``"AR"``); with
    ``no_sync``, after the last micro-batch only.

    Raises:
        ValueError: for fewer than one micro-batch or bucket.
    """
    if micro_batches < 1 or buckets < 1:
        raise ValueError(f"an accumulated step has at least one micro-batch and one bucket, got {micro_batches} "
                         f"micro-batches and {buckets} buckets.")
    events: list[str] = []
    for i in range(micro_batches):
        events.append("F+B")
        if not no_sync or i == micro_batches - 1:
            events += ["AR"] * buckets
    return events


def draw_accumulation(ax: Axes, micro_batches: int, buckets: int) -> None:
    """The two ways of accumulating on one rank, a row each, as :func:`accumulation_schedule` gives them: a box per
    micro-batch's forward and backward, a narrower one per bucket all-reduced (not to scale)."""
    rows = {"all-reduce every micro-batch": accumulation_schedule(micro_batches, buckets, no_sync=False),
            "no_sync until the last": accumulation_schedule(micro_batches, buckets, no_sync=True)}
    for row, events in enumerate(rows.values()):
        t, micro = 0.0, 0
        for event in events:
            width = 1.0 if event == "F+B" else 0.45
            micro += event == "F+B"
            ax.barh(row, width * 0.95, left=t, color="dimgray" if event == "F+B" else MEMORY_COLORS["gradients"])
            ax.text(t + width * 0.475, row, f"F+B {micro}" if event == "F+B" else "AR", ha="center", va="center",
                    fontsize=9, color="white")
            t += width
    ax.set_yticks(range(len(rows)), list(rows), fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks([])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.legend(handles=[Patch(color="dimgray", label="F+B i: forward and backward of micro-batch i"),
                       Patch(color=MEMORY_COLORS["gradients"], label="AR: all-reduce of one gradient bucket")],
              fontsize=9, loc="upper left", bbox_to_anchor=(0, -0.05), ncol=2, frameon=False)


_RUN_STYLE = {1: ("kept its activations", MEMORY_COLORS["activations"]),
              2: ("ran again in backward: its activations were not kept", "lightgray")}


def draw_recomputation(forward_runs: dict[str, Sequence[int]], ax: Axes,
                       kept_inputs: dict[str, Sequence[int]] | None = None) -> None:
    """One row of blocks per checkpointing strategy, each block coloured by how often its forward ran in one step
    (1: it kept its activations; 2: it was recomputed), as counted by forward pre-hooks. ``kept_inputs`` gives, per
    strategy, the blocks (0-based) whose input a checkpoint keeps: a black triangle on the block's left edge marks
    where each recomputation starts.

    Raises:
        ValueError: for a count other than 1 or 2, rows of different lengths, or a kept input that is not the
            input of a recomputed block.
    """
    if len({len(runs) for runs in forward_runs.values()}) != 1:
        raise ValueError("every strategy needs a count for each block: the rows differ in length.")
    for name, kept in (kept_inputs or {}).items():
        if any(forward_runs[name][block] != 2 for block in kept):
            raise ValueError(f"{name}: a checkpoint keeps the input of a block it recomputes; {list(kept)} are not "
                             f"all recomputed ({list(forward_runs[name])}).")
    for row, (name, runs) in enumerate(forward_runs.items()):
        for block, count in enumerate(runs):
            if count not in _RUN_STYLE:
                raise ValueError(f"{name}: block {block + 1} ran {count} times; a step runs a block once or twice.")
            ax.barh(row, 0.9, left=block, color=_RUN_STYLE[count][1])
            ax.text(block + 0.45, row, str(count), ha="center", va="center", fontsize=9,
                    color="white" if count == 1 else "black")
        kept = list((kept_inputs or {}).get(name, ()))
        ax.scatter([block - 0.02 for block in kept], [row] * len(kept), marker=">", s=45, color="black", zorder=3)
    blocks = len(next(iter(forward_runs.values())))
    ax.set_yticks(range(len(forward_runs)), list(forward_runs), fontsize=10)
    ax.set_ylim(len(forward_runs) - 0.5, -0.5)
    ax.set_xticks([b + 0.45 for b in range(blocks)], [str(b + 1) for b in range(blocks)], fontsize=9)
    ax.set_xlabel(f"block 1–{blocks}; the number in each box: its forward runs in one training step", fontsize=10)
    kept_marker = [Line2D([], [], marker=">", color="black", linestyle="", label="a checkpoint keeps its input")]
    ax.legend(handles=[Patch(color=color, label=label) for label, color in _RUN_STYLE.values()]
              + (kept_marker if kept_inputs else []), fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def check_zero_memory(answer: Sequence[float] | None, *, parameters: float = 1.5e9, ranks: int = 8,
                      optimizer_bytes: int = 12, solution: bool = False) -> CheckResult:
    """Exercise 1: GB (10**9 bytes) per rank for (DDP, ZeRO-1, ZeRO-2, ZeRO-3) in mixed-precision Adam training:
    2 bytes of fp16 weights and 2 of fp16 gradients per parameter, ``optimizer_bytes`` of fp32 state (K);
    ``solution=True`` shows how they are found."""
    p, n, k = parameters / 1e9, ranks, optimizer_bytes
    expected = [sum(zero_bytes_per_parameter(stage, n, k).values()) * p for stage in ZERO_SHARDED]
    return check_numbers(
        answer, expected, names=["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"], rtol=1e-2, solution=solution,
        hints=[f"section 4: DDP shards nothing, so every rank holds the fp16 weights, the fp16 gradients and the "
               f"optimizer state of every parameter; 1 byte per parameter is {p:g} GB here",
               "start from DDP: ZeRO-1 splits only the optimizer state among the ranks (section 4's table)",
               "start from ZeRO-1: ZeRO-2 splits the gradients among the ranks too",
               "ZeRO-3 splits the weights too: what is left that every rank holds whole?"],
        why=[f"DDP: every rank holds everything: (2 + 2 + {k}) B × {p:g} G = {expected[0]:g} GB",
             f"ZeRO-1: the optimizer state is split: (2 + 2) × {p:g} + {k} × {p:g} / {n} = {expected[1]:g} GB",
             f"ZeRO-2: the gradients too: 2 × {p:g} + (2 + {k}) × {p:g} / {n} = {expected[2]:g} GB",
             f"ZeRO-3: and the weights: (2 + 2 + {k}) × {p:g} / {n} = {expected[3]:g} GB"])


def check_accumulation(answer: Sequence[int] | None, *, global_batch: int = 512, micro_batch: int = 16,
                       ranks: int = 4, solution: bool = False) -> CheckResult:
    """Exercise 2: (micro-steps per optimizer step, all-reduce rounds per optimizer step without ``no_sync``, with
    ``no_sync`` on all micro-steps but the last); ``solution=True`` shows how they are found."""
    if global_batch % (micro_batch * ranks):
        raise ValueError("the global batch must be a multiple of micro_batch × ranks.")
    k = global_batch // (micro_batch * ranks)
    return check_numbers(
        answer, [k, k, 1], names=["micro-steps", "rounds without no_sync", "rounds with no_sync"], solution=solution,
        hints=["section 2: a micro-step runs on every rank at once; did you count the samples of all the ranks in "
               "one micro-step?",
               "section 2, under DDP: which backward passes all-reduce the gradients when nothing turns it off?",
               "section 2: no_sync is on for every micro-step but the last; which backward passes still all-reduce?"],
        why=[f"micro-steps: each micro-step consumes {micro_batch} × {ranks} = {micro_batch * ranks} samples, so "
             f"an optimizer step takes {global_batch} / {micro_batch * ranks} = {k}",
             f"rounds without no_sync: DDP all-reduces all the gradients (in buckets) in every backward pass, one "
             f"round per micro-step: {k}",
             "rounds with no_sync: under no_sync the gradients only accumulate locally, and the last backward pass "
             "all-reduces their sum: 1"])


def shard_rows(rows: int, ranks: int) -> list[int]:
    """Rows of a dim-0 ``Shard`` (FSDP2's placement) on each rank: ``torch.chunk``'s split, ranks past the last
    chunk holding none."""
    if rows < 1 or ranks < 1:
        raise ValueError(f"rows and ranks must be positive, got {rows} and {ranks}.")
    chunks = [len(c) for c in torch.chunk(torch.empty(rows), ranks)]
    return chunks + [0] * (ranks - len(chunks))


def shard_spans(rows: int, ranks: int) -> list[tuple[int, int]]:
    """The rows ``[start, stop)`` each rank holds of a dim-0 ``Shard`` (:func:`shard_rows`, in order)."""
    sizes = shard_rows(rows, ranks)
    return [(stop - n, stop) for stop, n in zip(np.cumsum(sizes).tolist(), sizes)]


def files_read(rows: int, saved_ranks: int, loading_ranks: int) -> list[list[int]]:
    """For each rank of a job of ``loading_ranks``, the files (by the rank that wrote each, in a checkpoint of
    ``saved_ranks``) that hold some of its rows: DCP reads those pieces, as its ``.metadata`` directs."""
    saved = shard_spans(rows, saved_ranks)
    return [[f for f, (a, b) in enumerate(saved) if a < stop and start < b and a < b]
            for start, stop in shard_spans(rows, loading_ranks)]


def draw_resharding(ax: Axes, rows: int, saved_ranks: int, loading_ranks: int) -> None:
    """The rows of one weight as the checkpoint's files hold them (top) and as the ranks of the loading job need them
    (bottom), with each shard's first and last row."""
    for y, (label, spans, color) in enumerate([
            (f"saved by {saved_ranks} ranks", shard_spans(rows, saved_ranks), MEMORY_COLORS["parameters"]),
            (f"loaded by {loading_ranks} ranks", shard_spans(rows, loading_ranks), "dimgray")]):
        for i, (start, stop) in enumerate(spans):
            name = f"__{i}_0.distcp" if y == 0 else f"rank {i}"
            ax.barh(y, stop - start, left=start, color=color, edgecolor="white", linewidth=2)
            ax.text((start + stop) / 2, y, f"{name}\nrows {start}–{stop - 1}", ha="center", va="center",
                    fontsize=9, color="white")
        ax.text(-rows * 0.01, y, label, ha="right", va="center", fontsize=9)
    for start, _ in shard_spans(rows, saved_ranks)[1:]:
        ax.axvline(start, color="black", linestyle=":", linewidth=1)
    ax.set_ylim(1.6, -0.6)
    ax.set_xlim(0, rows)
    ax.set_yticks([])
    ax.set_xlabel(f"rows of a weight with {rows} rows")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def check_shard_rows(answer: Sequence[int] | None, *, rows: int = 300, ranks: int = 8,
                     solution: bool = False) -> CheckResult:
    """Exercise 4: (rows on rank 0, rows on the last rank) of a weight with ``rows`` rows under ``fully_shard``;
    ``solution=True`` shows how they are found."""
    split = shard_rows(rows, ranks)
    size = math.ceil(rows / ranks)
    last = ranks - 1
    return check_numbers(
        answer, [split[0], split[-1]], names=["rank 0", f"rank {last}"], solution=solution,
        hints=["section 5: fully_shard cuts dimension 0 as torch.chunk would; how large does torch.chunk make its "
               "chunks when the rows do not divide evenly among the ranks?",
               f"the ranks before rank {last} each take a full chunk: what is left for rank {last}?"],
        why=[f"rank 0: dim 0 is cut into chunks of ceil({rows} / {ranks}) = {size} rows, as torch.chunk does: "
             f"{split[0]} rows",
             f"rank {last}: FSDP pads its shard to {size} rows for the collectives, but it holds what is left: "
             f"{rows} - {last} × {size} = {split[-1]} rows" if split[-1] else
             f"rank {last}: {rows} rows make only {len([s for s in split if s])} chunks of {size}, so rank {last} "
             f"holds none: 0 rows"])


def check_reshard_files(answer: Sequence[int] | None, *, rows: int = 1000, saved_ranks: int = 4,
                        loading_ranks: int = 3, rank: int = 1, solution: bool = False) -> CheckResult:
    """Exercise 6: (first file, last file), by the rank that saved each, that ``rank`` of a ``loading_ranks`` job
    reads from a checkpoint of ``saved_ranks`` of a weight with ``rows`` rows; ``solution=True`` shows how."""
    if not 0 <= rank < loading_ranks:
        raise ValueError(f"rank must be in 0..{loading_ranks - 1}, got {rank}.")
    files = files_read(rows, saved_ranks, loading_ranks)[rank]
    saved = ", ".join(f"{a}–{b - 1}" for a, b in shard_spans(rows, saved_ranks) if b > a)
    start, stop = shard_spans(rows, loading_ranks)[rank]
    return check_numbers(
        answer, [files[0], files[-1]], names=["first file", "last file"], solution=solution,
        hints=[f"section 6: each file holds the rows of the rank that saved it, cut as torch.chunk cuts; which rows "
               f"does rank {rank} of {loading_ranks} need?",
               f"which saved files hold the last rows that rank {rank} of {loading_ranks} needs?"],
        why=[f"saved by {saved_ranks} ranks, the files hold rows {saved} (chunks of ceil({rows} / {saved_ranks}) = "
             f"{math.ceil(rows / saved_ranks)}); rank {rank} of {loading_ranks} needs rows {start}–{stop - 1} (chunks "
             f"of ceil({rows} / {loading_ranks}) = {math.ceil(rows / loading_ranks)}): its first rows are in file "
             f"{files[0]}",
             f"its last in file {files[-1]}, so it reads {len(files)} file(s)"])


PLAN_COSTS = {"checkpointing": "a second forward pass of every block (about a third more compute)",
              "ZeRO-3": "half again DDP's communication (the weights gathered for forward and again for backward)"}


def memory_plans(*, parameters: float = 7e9, ranks: int = 8, samples_per_gpu: int = 8, activation_gb: float = 5.0,
                 checkpointed_gb: float = 1.5, state_bytes: int = 12
                 ) -> dict[tuple[int, bool], tuple[float, list[str]]]:
    """GB per GPU and extra work (beyond DDP's) of each (ZeRO stage, checkpointing) plan: the states of section 4 for
    ``parameters`` over ``ranks`` plus the activations of ``samples_per_gpu`` samples at once (section 3)."""
    plans = {}
    for stage in ZERO_SHARDED:
        states = sum(zero_bytes_per_parameter(stage, ranks, state_bytes).values()) * parameters / 1e9
        for checkpointing in (False, True):
            activations = samples_per_gpu * (checkpointed_gb if checkpointing else activation_gb)
            costs = [PLAN_COSTS[name] for name, on in (("checkpointing", checkpointing), ("ZeRO-3", stage == 3)) if on]
            plans[stage, checkpointing] = (states + activations, costs)
    return plans


def check_memory_plan(answer: Sequence[Any] | None, *, gpu_gb: float = 80.0, headroom: float = 0.1,
                      solution: bool = False, **sizes: Any) -> CheckResult:
    """Exercise 3: the (ZeRO stage, checkpointing) plan that fits in ``gpu_gb`` less a ``headroom`` share (what the
    counts leave out) with the least extra work, among :func:`memory_plans` (``sizes`` overrides its defaults);
    ``solution=True`` shows every plan."""
    if not 0 <= headroom < 1:
        raise ValueError(f"headroom is the share of the GPU kept free, in [0, 1), got {headroom!r}.")
    plans, usable = memory_plans(**sizes), gpu_gb * (1 - headroom)
    room = f"{usable:.4g} GB ({gpu_gb:g} GB less {headroom:.0%})"
    fitting = {plan: cost for plan, cost in plans.items() if cost[0] <= usable}
    best = min(fitting, key=lambda plan: len(fitting[plan][1]))
    def name(plan: tuple[int, bool]) -> str:
        return ("DDP" if plan[0] == 0 else f"ZeRO-{plan[0]}") + (" + checkpointing" if plan[1] else "")

    def verdict(plan: tuple[int, bool]) -> str:
        gb, costs = plans[plan]
        if gb > usable:
            return f"{name(plan)}: {gb:.4g} GB, does not fit"
        return f"{name(plan)}: {gb:.4g} GB, pays for {' and '.join(costs) or 'nothing beyond DDP'}"

    if solution:
        return worked_solution(
            "per GPU, the states (section 4: 2 + 2 + 12 bytes per parameter, the sharded parts divided by the ranks) "
            f"plus the activations of its samples at once (section 3), against {room}: "
            f"{'; '.join(map(verdict, plans))}. ZeRO-1 and "
            "ZeRO-2 communicate as much as DDP (a reduce-scatter and an all-gather make an all-reduce), so the plan "
            f"to take is {name(best)}.")
    if answer is None:
        return NO_ANSWER
    if (not isinstance(answer, Sequence) or len(answer) != 2 or isinstance(answer[0], bool)
            or answer[0] not in ZERO_SHARDED or not isinstance(answer[1], bool)):
        return CheckResult(False, f"answer with a pair (stage, checkpointing): a ZeRO stage from 0 (DDP) to 3 and "
                                  f"True or False, not {answer!r}.")
    gb, costs = plans[answer[0], answer[1]]
    if gb > usable:
        return not_yet(f"that plan does not fit in {room}. Add up what one GPU holds: the states at that "
                       "stage (section 4's bytes per parameter) and the activations of all its samples at once, with "
                       "or without checkpointing (section 3).")
    if len(costs) > len(fitting[best][1]):  # plans that fit at the same least cost are all right
        return not_yet(f"it fits, but it pays for {' and '.join(costs)}. Another plan fits and pays less: which "
                       "stage saves memory without extra communication (section 4), and is checkpointing needed then?")
    return CheckResult(True, f"{verdict((answer[0], answer[1]))}: of the plans that fit in {room}, one with the least "
                             "extra work. ZeRO-1 and ZeRO-2 communicate as much as DDP, and nothing runs twice.")


FSDP_EXERCISE_SAMPLES, FSDP_EXERCISE_WORLD = 2048, 2


def check_my_fsdp(script: Path | str, *, solution: bool = False, timeout: float = 240.0) -> CheckResult:
    """Exercise 5: launch the student's FSDP2 script with ``torchrun`` on 2 processes and read what each reports.

    The script's ``report`` writes, per process, which modules are FSDP units, how many of the parameters are
    sharded (DTensors) and how many elements the rank holds, whether the optimizer holds the model's parameters,
    the losses and a fingerprint of the whole weights. Right means: both blocks and the model are units, every
    parameter sharded, each rank holding half, the optimizer holding the shards, and the loss falling.
    ``solution=True`` shows the worked solution without launching anything.

    Raises:
        FileNotFoundError: if ``script`` does not exist (run the cell that writes it first).
    """
    if solution:
        return worked_solution(
            "three changes to the DDP script: (1) instead of `model = DDP(model)`, make each block a unit and then the "
            "model: `for block in (model[1], model[2]): fully_shard(block)`, then `fully_shard(model)` (the root unit "
            "takes what the blocks left: the last Linear); (2) `from torch.distributed.fsdp import fully_shard`; (3) "
            "build the optimizer *after* `fully_shard`: it replaces each parameter with a sharded one (a DTensor), so "
            "an optimizer built before holds tensors that no longer get gradients, and the model never changes. "
            "Each rank then holds half of every weight (rows 0-127 or 128-255 of a 256-row weight).")
    reports = launch_exercise(script, samples=FSDP_EXERCISE_SAMPLES, world=FSDP_EXERCISE_WORLD, timeout=timeout)
    if isinstance(reports, CheckResult):
        return reports
    first, units = reports[0], sorted(reports[0]["units"])
    if not units:
        return not_yet(f"no module is an FSDP unit: each rank holds all {first['total']:,} elements of the weights, "
                       "as with DDP. Section 5's recipe makes a module a unit with `fully_shard`.")
    if units != ["1", "2", "the model"]:
        return not_yet(f"the units are {', '.join(units)}: FSDP gathers a unit whole before it computes, so one "
                       "unit for the whole model gathers every weight at once. Make each block a unit, then the model.")
    losses = first["losses"]
    if not first["optimizer_has_them"]:
        return not_yet(f"the loss went from {losses[0]:.3f} to {losses[-1]:.3f}: the model did not learn. The "
                       "optimizer holds other tensors than the model's parameters now: what did `fully_shard` do to "
                       "them, and when was the optimizer built?")
    if first["held"] * FSDP_EXERCISE_WORLD != first["total"] or first["sharded"] != first["parameters"]:
        return not_yet(f"rank 0 holds {first['held']:,} of the {first['total']:,} elements: every parameter should "
                       f"be sharded over the {FSDP_EXERCISE_WORLD} ranks.")
    return CheckResult(True, f"{first['parameters']} parameters sharded in 3 units (both blocks and the model); each "
                             f"rank holds {first['held']:,} of the {first['total']:,} elements, and the optimizer "
                             f"updates those shards: the loss went from {losses[0]:.3f} to {losses[-1]:.3f}.")
