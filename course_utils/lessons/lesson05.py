"""Lesson 05 (distributed PyTorch): what the collectives leave on each rank, a ring all-reduce step by step,
a torchrun launch's nodes, agents and workers, DataParallel's four steps and DDP's buckets (with their pictures), and
the exercise checks, the last of which launches the student's DDP script with torchrun."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle
from numpy.typing import ArrayLike

from course_utils.checks import CheckResult, check_numbers, launch_exercise, not_yet, worked_solution
from course_utils.timing import format_seconds

COLLECTIVES = ("broadcast", "reduce", "all_reduce", "reduce_scatter", "all_gather")


def collective(name: str, inputs: ArrayLike, *, root: int = 0) -> list[np.ndarray]:
    """What each rank holds after the collective ``name`` of ``torch.distributed`` (sum as the reduction).

    ``inputs[r]`` is rank r's tensor. ``reduce`` defines the sum on the root only: the other ranks' tensors are left
    undefined (NaN here; gloo leaves partial sums in them). ``reduce_scatter`` leaves rank r the r-th of ``world``
    equal chunks of the sum; ``all_gather`` leaves every rank the concatenation of all inputs, in rank order.

    Raises:
        ValueError: for an unknown collective, ranks holding tensors of different sizes, a sum that does not split into
            one chunk per rank, or a root that is not a rank.
    """
    if name not in COLLECTIVES:
        raise ValueError(f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}.")
    x = _per_rank(inputs)
    world = len(x)
    if not 0 <= root < world:
        raise ValueError(f"root must be a rank, 0 to {world - 1}, got {root}.")
    if name == "reduce_scatter" and x.shape[1] % world:
        raise ValueError(f"reduce_scatter splits the sum into {world} equal chunks: {x.shape[1]} elements do not.")
    total = x.sum(axis=0)
    if name == "broadcast":
        return [x[root].copy() for _ in range(world)]
    if name == "reduce":
        return [total.copy() if r == root else np.full_like(x[r], np.nan) for r in range(world)]
    if name == "all_reduce":
        return [total.copy() for _ in range(world)]
    if name == "reduce_scatter":
        return [chunk.copy() for chunk in np.split(total, world)]
    return [x.reshape(-1).copy() for _ in range(world)]


def _per_rank(inputs: ArrayLike) -> np.ndarray:
    try:
        x = np.asarray(inputs, dtype=float)
    except ValueError:
        x = np.empty(0)
    if x.ndim != 2:
        raise ValueError(f"every rank holds a 1-D tensor of the same size, got {inputs!r}.")
    return x


def draw_collectives(inputs: ArrayLike, axes: np.ndarray) -> None:
    """Each collective in a column of ``axes`` (``plt.subplots(2, 5)``: before, after), a row of boxes per rank.

    The last column gathers what reduce-scatter left, so the last two columns together show all-reduce.
    """
    x = _per_rank(inputs)
    world = len(x)
    reduce_scatter = collective("reduce_scatter", x)
    vmax = float(np.max(reduce_scatter))
    for column, name in enumerate(COLLECTIVES):
        before = reduce_scatter if name == "all_gather" else list(x)
        after = collective(name, before)
        for row, (held, label) in enumerate(((before, "before"), (after, "after"))):
            ax = axes[row, column]
            _draw_ranks(ax, held, vmax)
            ax.set_title(f"{name}: {label}" if row == 0 else "after", fontsize=10)
    for row in range(2):
        axes[row, 0].set_yticks(range(world), [f"rank {r}" for r in range(world)], fontsize=9)


def draw_rank_tensors(held: ArrayLike, ax: Axes, *, title: str = "") -> None:
    """What each rank holds, a row of boxes per rank (the style of ``draw_collectives``): the picture to ask from."""
    x = _per_rank(held)
    _draw_ranks(ax, list(x), float(np.max(x)))
    ax.set_yticks(range(len(x)), [f"rank {r}" for r in range(len(x))], fontsize=9)
    ax.set_title(title, fontsize=10)


def _box(ax: Axes, x: float, y: float, text: str, fill: str | tuple[float, ...], *, fontsize: int,
         text_color: str = "black") -> None:
    """``text`` in a box at (x, y) filled with the colour ``fill``."""
    ax.add_patch(Rectangle((x, y - 0.4), 0.95, 0.8, color=fill))
    ax.text(x + 0.47, y, text, ha="center", va="center", fontsize=fontsize, color=text_color)


def _shaded_box(ax: Axes, x: float, y: float, value: float, shade: float, colors: str, fontsize: int,
                dark: bool) -> None:
    """A value in a box shaded from light (0) to dark (1) in the colormap ``colors``; white text if dark."""
    _box(ax, x, y, f"{value:g}", plt.get_cmap(colors)(shade), fontsize=fontsize,
         text_color="white" if dark else "black")


def _draw_ranks(ax: Axes, held: Sequence[np.ndarray], vmax: float) -> None:
    """A row of boxes per rank; an undefined value (NaN) is a gray box with a question mark."""
    width = max(len(v) for v in held)
    for r, values in enumerate(held):
        for c, value in enumerate(values):
            if np.isnan(value):
                _box(ax, c, r, "?", "0.85", fontsize=9, text_color="0.35")
            else:
                _shaded_box(ax, c, r, value, 0.2 + 0.7 * value / vmax, "Blues", 9, dark=value / vmax > 0.45)
    ax.set_xlim(0, max(width, 4))
    ax.set_ylim(len(held) - 0.5, -0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)


@dataclass(frozen=True)
class RingTrace:
    """A ring all-reduce, step by step: what each rank sent, and what each rank held after each step."""

    outputs: list[np.ndarray]  # every rank's result: the sum
    sends: list[list[int]]  # sends[step][r]: the chunk rank r sent to rank r + 1 at that step
    held: list[list[list[float]]]  # held[step][r][c]: rank r's chunk c after the step (step 0: the inputs)
    contributions: list[list[list[int]]]  # how many ranks' inputs each of those chunks sums
    sent_elements: list[int]  # per rank, the elements it sent in all

    @property
    def world(self) -> int:
        return len(self.outputs)


def ring_all_reduce(inputs: ArrayLike) -> RingTrace:
    """All-reduce (sum) by the ring algorithm: N − 1 reduce-scatter steps, then N − 1 all-gather steps.

    Rank r sends one chunk (1/N of its tensor) to rank r + 1 at each step, so each rank sends 2(N − 1)/N of its
    tensor in all, whatever N: the reason NCCL and gloo use rings for large tensors.

    Raises:
        ValueError: with fewer than 2 ranks, or a tensor that does not split into one chunk per rank.
    """
    x = _per_rank(inputs)
    world = len(x)
    if world < 2 or x.shape[1] % world:
        raise ValueError(f"a ring needs 2 or more ranks, each holding a 1-D tensor of a multiple of {world} "
                         f"elements (one chunk per rank); got shape {x.shape}.")
    chunks = [list(np.split(v.copy(), world)) for v in x]
    count = [[1] * world for _ in range(world)]
    sends, held, contributions = [], [[[float(c.sum()) for c in row] for row in chunks]], [[list(c) for c in count]]
    sent = [0] * world
    for step in range(2 * (world - 1)):
        gather = step >= world - 1  # the second phase forwards finished sums instead of adding
        chunk_of = [(r - step) % world for r in range(world)]  # each rank passes on what it received last
        payload = [(chunks[r][chunk_of[r]].copy(), count[r][chunk_of[r]]) for r in range(world)]
        for r, (data, n) in enumerate(payload):
            receiver, c = (r + 1) % world, chunk_of[r]
            chunks[receiver][c] = data if gather else chunks[receiver][c] + data
            count[receiver][c] = n if gather else count[receiver][c] + n
            sent[r] += data.size
        sends.append(chunk_of)
        held.append([[float(c.sum()) for c in row] for row in chunks])
        contributions.append([list(c) for c in count])
    return RingTrace([np.concatenate(row) for row in chunks], sends, held, contributions, sent)


def draw_ring_all_reduce(trace: RingTrace, ax: Axes) -> None:
    """Each step a row, each rank's chunks side by side: the shade counts the ranks summed, a box marks a send."""
    world = trace.world
    for step, (row, counts) in enumerate(zip(trace.held, trace.contributions, strict=True)):
        for r in range(world):
            for c in range(world):
                x = r * (world + 0.6) + c
                share = counts[r][c] / world
                _shaded_box(ax, x, step, row[r][c], 0.15 + 0.75 * share, "Greens", 8, dark=share > 0.5)
                if step < len(trace.sends) and trace.sends[step][r] == c:
                    ax.add_patch(Rectangle((x, step - 0.4), 0.95, 0.8, fill=False, edgecolor="tab:red", lw=2))
    ax.set_xlim(-0.2, world * (world + 0.6))
    ax.set_ylim(len(trace.held) - 0.5, -0.5)
    ax.set_xticks([r * (world + 0.6) + world / 2 - 0.03 for r in range(world)], [f"rank {r}" for r in range(world)])
    ax.xaxis.tick_top()
    ax.set_title(f"ring all-reduce of {world} ranks. Red: the chunk each rank sends to the next one (rank {world - 1} "
                 "to rank 0) in the step below.\nDarker: more ranks' inputs summed.", fontsize=9, pad=22)
    phase = ["inputs"] + [f"reduce-scatter {s + 1}" if s < world - 1 else f"all-gather {s - world + 2}"
                          for s in range(2 * (world - 1))]
    ax.set_yticks(range(len(phase)), [f"after {p}" if i else p for i, p in enumerate(phase)], fontsize=8)
    for side in ax.spines.values():
        side.set_visible(False)


DATA_PARALLEL_STEPS = ("1. scatter", "2. replicate", "3. parallel_apply", "4. gather")


def draw_data_parallel(batch: Sequence[int], chunks: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
                       gathered: Sequence[int], ax: Axes) -> None:
    """``nn.DataParallel``'s forward as four columns, a row per device, labelled with the shapes of a run: the batch
    split into ``chunks``, a replica of the module per device, a thread per replica giving ``outputs``, and their
    concatenation ``gathered`` on device 0; an arrow below, right to left, for the backward pass, which adds the
    replicas' weight gradients into device 0's weights (reduce-add).

    Raises:
        ValueError: if there are not as many outputs as chunks, or no chunk at all.
    """
    if not chunks or len(chunks) != len(outputs):
        raise ValueError(f"one output per chunk: got {len(chunks)} chunks and {len(outputs)} outputs.")
    devices = len(chunks)
    shape = lambda s: "(" + ", ".join(str(int(n)) for n in s) + ")"  # noqa: E731
    columns = [0.0, 2.6, 5.2, 7.8, 10.4]
    colors = ["0.85", "#c6dbef", "#fdd0a2", "#c7e9c0", "#c6dbef"]

    def box(x: float, y: float, height: float, text: str, color: str) -> None:
        ax.add_patch(Rectangle((x, y - height / 2), 2.0, height, facecolor=color, edgecolor="0.3", lw=1))
        ax.text(x + 1.0, y, text, ha="center", va="center", fontsize=8)

    def arrow(x0: float, y0: float, x1: float, y1: float) -> None:
        ax.annotate("", (x1, y1), (x0, y0), arrowprops=dict(arrowstyle="->", color="0.3", lw=1))

    middle = (devices - 1) / 2
    box(columns[0], middle, 0.8 * devices, f"batch\n{shape(batch)}\non device 0", colors[0])
    box(columns[4], middle, 0.8 * devices, f"output\n{shape(gathered)}\non device 0", colors[4])
    for d in range(devices):
        box(columns[1], d, 0.7, f"chunk {shape(chunks[d])}\ndevice {d}", colors[1])
        box(columns[2], d, 0.7, f"replica {d}\n(copied weights)", colors[2])
        box(columns[3], d, 0.7, f"thread {d}: replica {d}\n(chunk) → {shape(outputs[d])}", colors[3])
        arrow(columns[0] + 2.0, middle, columns[1], d)
        for a, b in ((1, 2), (2, 3)):
            arrow(columns[a] + 2.0, d, columns[b], d)
        arrow(columns[3] + 2.0, d, columns[4], middle)
    for x, title in zip(columns[1:], DATA_PARALLEL_STEPS, strict=True):
        ax.text(x + 1.0, -0.75, title, ha="center", va="bottom", fontsize=9, fontweight="bold")
    below = devices - 0.35
    ax.annotate("", (columns[2], below), (columns[4] + 2.0, below),
                arrowprops=dict(arrowstyle="->", color="tab:red", lw=1.5))
    ax.text((columns[2] + columns[4] + 2.0) / 2, below + 0.1, "backward: each replica's weight gradients are added "
            "(reduce-add) into device 0's weights", ha="center", va="top", fontsize=8, color="tab:red")
    ax.set_xlim(-0.1, columns[4] + 2.1)
    ax.set_ylim(devices + 0.2, -1.0)
    ax.axis("off")


LAUNCH_KEYS = ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")  # what torchrun sets a worker


def draw_launch(identities: Sequence[Mapping[str, int]], ax: Axes, *, title: str = "") -> None:
    """A ``torchrun`` launch as ``whoami.py`` recorded it: a box per node (``GROUP_RANK``), in it the node's agent
    (the workers' parent process) and a box per worker with its ``RANK`` and ``LOCAL_RANK``; the node's
    ``LOCAL_WORLD_SIZE`` under it, the ``WORLD_SIZE`` in the title, and a dashed arrow between the agents, which
    meet at the rendezvous and number the ranks node by node.

    ``identities`` holds one record per worker: the keys of :data:`LAUNCH_KEYS` and ``pid``, ``parent_pid``.

    Raises:
        ValueError: if a record lacks a key, the workers disagree on the world size, a node's workers have
            different parents (agents) or its local world size differs from its worker count.
    """
    needed = (*LAUNCH_KEYS, "pid", "parent_pid")
    if not identities or any(set(needed) - set(i) for i in identities):
        raise ValueError(f"one record per worker, each with {', '.join(needed)}; got {list(identities)!r}.")
    worlds = {i["WORLD_SIZE"] for i in identities}
    if worlds != {len(identities)}:
        raise ValueError(f"{len(identities)} workers report WORLD_SIZE {sorted(worlds)}: every worker of the "
                         "launch must be in `identities`.")
    nodes: dict[int, list[Mapping[str, int]]] = {}
    for identity in sorted(identities, key=lambda i: (i["GROUP_RANK"], i["LOCAL_RANK"])):
        nodes.setdefault(identity["GROUP_RANK"], []).append(identity)
    width = max(max(len(workers) for workers in nodes.values()) * 2.4 + 0.4, 4.0)  # the node's title fits
    for n, (group_rank, workers) in enumerate(nodes.items()):
        agents = {w["parent_pid"] for w in workers}
        if len(agents) != 1 or {w["LOCAL_WORLD_SIZE"] for w in workers} != {len(workers)}:
            raise ValueError(f"node {group_rank}: its {len(workers)} workers need one agent (parent) and "
                             f"LOCAL_WORLD_SIZE {len(workers)}; got parents {sorted(agents)}.")
        left = n * (width + 0.6)
        ax.add_patch(Rectangle((left, 0), width, 4.1, facecolor="0.94", edgecolor="0.3", lw=1.2))
        ax.text(left + width / 2, 3.75, f"node {group_rank} (GROUP_RANK = {group_rank})", ha="center", va="center",
                fontsize=10, fontweight="bold")
        agent_x = left + width / 2
        ax.add_patch(Rectangle((agent_x - 1.1, 2.55), 2.2, 0.85, facecolor="#fdd0a2", edgecolor="0.3", lw=1))
        ax.text(agent_x, 2.975, f"torchrun agent\npid {agents.pop()}", ha="center", va="center", fontsize=9)
        for k, worker in enumerate(workers):
            x = left + (width - 2.4 * len(workers) + 0.2) / 2 + k * 2.4  # the workers centred in the node
            ax.add_patch(Rectangle((x, 0.55), 2.2, 1.3, facecolor="#c6dbef", edgecolor="0.3", lw=1))
            ax.text(x + 1.1, 1.2, f"worker pid {worker['pid']}\nRANK = {worker['RANK']}\n"
                    f"LOCAL_RANK = {worker['LOCAL_RANK']}", ha="center", va="center", fontsize=9)
            ax.annotate("", (x + 1.1, 1.85), (agent_x, 2.55), arrowprops=dict(arrowstyle="->", color="0.3", lw=1))
        ax.text(left + width / 2, 0.25, f"LOCAL_WORLD_SIZE = {len(workers)}", ha="center", va="center", fontsize=9)
        if n:  # the agents meet at the rendezvous, on node 0's address, and agree on the ranks
            previous = agent_x - width - 0.6
            ax.annotate("", (agent_x - 1.1, 2.975), (previous + 1.1, 2.975),
                        arrowprops=dict(arrowstyle="<->", color="tab:red", lw=1.2, ls="--"))
            ax.text((previous + agent_x) / 2, 3.05, "rendezvous", ha="center", va="bottom", fontsize=8,
                    color="tab:red")
    ax.set_title(title or f"WORLD_SIZE = {len(identities)}: RANK counts the workers of all {len(nodes)} nodes, "
                 "node by node", fontsize=10)
    ax.set_xlim(-0.1, len(nodes) * (width + 0.6) - 0.5)
    ax.set_ylim(-0.05, 4.2)
    ax.axis("off")


@dataclass(frozen=True)
class BucketTimeline:
    """One rank's backward pass under DDP: when each gradient landed and when each bucket was all-reduced (ms from the
    start of ``backward``), as ``ddp_overlap.py`` records them through a comm hook and gradient hooks."""

    ready: dict[str, float]  # parameter name -> ms when its gradient was in .grad
    buckets: tuple[tuple[float, float, tuple[str, ...]], ...]  # (start, end, parameter names), in DDP's bucket order
    backward_ms: float  # when loss.backward() returned

    @classmethod
    def from_record(cls, record: dict) -> BucketTimeline:
        return cls(dict(record["ready"]), tuple((b["start"], b["end"], tuple(b["parameters"])) for b in
                                                 record["buckets"]), float(record["backward_ms"]))

    @property
    def last_gradient_ms(self) -> float:
        return max(self.ready.values())

    def started_during_backward(self) -> int:
        """Buckets whose all-reduce began before the last gradient was computed."""
        return sum(start < self.last_gradient_ms for start, _, _ in self.buckets)

    def overlapped_ms(self) -> tuple[float, float]:
        """(ms of all-reduce that ran while gradients were still being computed, ms of all-reduce in all), the time
        of the union of the buckets' intervals in both cases."""
        def union(intervals: list[tuple[float, float]]) -> float:
            total, reach = 0.0, -math.inf
            for a, b in sorted(intervals):
                total += max(0.0, b - max(a, reach))
                reach = max(reach, b)
            return total
        spans = [(a, b) for a, b, _ in self.buckets]
        return union([(a, min(b, self.last_gradient_ms)) for a, b in spans if a < self.last_gradient_ms]), union(spans)


def draw_bucket_timeline(timeline: BucketTimeline, ax: Axes) -> None:
    """A row per bucket, its all-reduce as a bar; above them, a tick where each layer's gradient landed."""
    layers: dict[str, float] = {}
    for name, ms in timeline.ready.items():  # a layer's weight and bias land together: one tick per layer
        layer = name.rsplit(".", 1)[0]
        layers[layer] = max(ms, layers.get(layer, 0.0))
    for layer, ms in layers.items():
        ax.plot([ms, ms], [-0.35, 0.35], color="tab:blue", lw=2)
        ax.annotate(f"layer {layer.split('.')[0]}", (ms, -0.45), ha="center", fontsize=7, rotation=90, va="bottom")
    for row, (start, end, params) in enumerate(timeline.buckets, start=1):
        ax.barh(row, end - start, left=start, height=0.6, color="tab:orange")
        members = sorted({p.split(".")[0] for p in params}, key=int)
        ax.text(end + 0.01 * timeline.backward_ms, row, "layers " + ", ".join(members), va="center", fontsize=7)
    ax.axvline(timeline.last_gradient_ms, color="0.4", ls="--", lw=1)
    ax.axvline(timeline.backward_ms, color="0.1", lw=1)
    ax.set_yticks(range(len(timeline.buckets) + 1), ["gradients\nready"] + [f"bucket {i}" for i in
                                                                             range(len(timeline.buckets))], fontsize=8)
    ax.set_ylim(len(timeline.buckets) + 0.6, -2.2)
    ax.set_xlim(0, timeline.backward_ms * 1.18)
    ax.set_xlabel("ms since backward() started (dashed: last gradient computed; solid: backward() returned)")
    ax.set_title("DDP all-reduces each bucket as soon as its gradients are in, while backward goes on", fontsize=9)


@dataclass(frozen=True)
class PipelineTimes:
    """The time of one pipelined step for each micro-batch count m (the slower rank's median, as ``pipeline.py``
    reports per rank), beside GPipe's bubble-only ideal for ``stages`` balanced stages."""

    seconds: dict[int, float]  # m -> seconds per step
    stages: int = 2

    @classmethod
    def from_ranks(cls, ranks: Sequence[Mapping], *, stages: int = 2) -> PipelineTimes:
        """From the ranks' records: a step lasts until its slower rank is done."""
        steps = [{int(m): float(s) for m, s in r["seconds_per_step"].items()} for r in ranks]
        if not steps or any(step.keys() != steps[0].keys() for step in steps) or 1 not in steps[0]:
            raise ValueError("every rank must time the same micro-batch counts, m = 1 among them.")
        return cls({m: max(step[m] for step in steps) for m in sorted(steps[0])}, stages)

    def ratio(self, m: int) -> float:
        """The step with m micro-batches over the step with one (the unpipelined schedule)."""
        return self.seconds[m] / self.seconds[1]

    def ideal(self, m: float) -> float:
        """(m + p - 1) / (m p): the ratio if the bubble were the only cost (balanced stages, free messages)."""
        return (m + self.stages - 1) / (m * self.stages)

    def table(self, extra: Mapping[str, Mapping[int, str]] | None = None) -> str:
        """A row per m: the step, its ratio to m = 1, the ideal ratio, then each ``extra`` column (name: m: text)."""
        extra = extra or {}
        rows = [" m |     step | × m=1 | ideal (m+p−1)/(mp)" + "".join(f" | {name}" for name in extra)]
        rows += [f"{m:>2} | {format_seconds(s):>8} | {self.ratio(m):5.2f} | {self.ideal(m):18.2f}"
                 + "".join(f" | {column[m]:>{len(name)}}" for name, column in extra.items())
                 for m, s in self.seconds.items()]
        return "\n".join(rows)

    def alt(self) -> str:
        """The figure's alt text, from the numbers."""
        measured = ", ".join(f"{self.ratio(m):.2f} at m = {m}" for m in self.seconds)
        return (f"The step time over the m = 1 step against the number of micro-batches m, {self.stages} stages: "
                f"measured {measured}; the ideal curve (m + p − 1)/(mp) falls from 1 to "
                f"{self.ideal(max(self.seconds)):.2f} at m = {max(self.seconds)}.")


def draw_pipeline_ratios(times: PipelineTimes, ax: Axes, *, label: str = "measured") -> None:
    """The measured ratios to m = 1 as points, the bubble-only ideal (m + p - 1)/(mp) as a curve, m on a log axis."""
    ms = sorted(times.seconds)
    fine = np.geomspace(ms[0], ms[-1], 100)
    ax.plot(fine, [times.ideal(m) for m in fine], color="0.5", lw=2,
            label=f"ideal (m + p − 1)/(mp), p = {times.stages}")
    ax.plot(ms, [times.ratio(m) for m in ms], "o-", color="tab:blue", ms=7, label=label)
    for m in ms:
        ax.annotate(f"{times.ratio(m):.2f}", (m, times.ratio(m)), textcoords="offset points", xytext=(0, 8),
                    ha="center", fontsize=9)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.set_ylim(0, 1.15 * max(1.0, *(times.ratio(m) for m in ms)))
    ax.set_xlabel("micro-batches m", fontsize=10)
    ax.set_ylabel("step / step at m = 1", fontsize=10)
    ax.tick_params(labelsize=9)
    ax.legend(fontsize=9, loc="lower left")


# ---------------------------------------- exercise checks


def check_bubble_fraction(answer: float | None, *, stages: int = 4, microbatches: int = 12,
                          solution: bool = False) -> CheckResult:
    """Exercise 1: the idle fraction of a GPipe schedule with ``stages`` stages and ``microbatches`` micro-batches.

    ``solution=True`` shows the worked solution instead of checking the answer.
    """
    p, m = stages, microbatches
    expected = (p - 1) / (m + p - 1)
    return check_numbers(
        answer, [expected], names=["bubble fraction"], solution=solution,
        hints=["section 5 derives the bubble: count all the time slots of one phase, fill and drain included, and "
               "how many of them a stage is busy; the bubble is a share of all the slots, not of the busy ones"],
        why=[f"each stage is busy for m = {m} of the m + p - 1 = {m + p - 1} time slots of a phase, so the bubble "
             f"fraction is (p - 1)/(m + p - 1) = {p - 1}/{m + p - 1} = {expected:.4g}"],
        rtol=1e-3,
    )


def check_ring_allreduce_megabytes(answer: float | None, *, parameters: int = 25_600_000, workers: int = 8,
                                   bytes_per_value: int = 4, solution: bool = False) -> CheckResult:
    """Exercise 2: megabytes (10**6 bytes) that each worker sends in one ring all-reduce of all the gradients.

    ``solution=True`` shows the worked solution instead of checking the answer.
    """
    size = parameters * bytes_per_value
    expected = 2 * (workers - 1) / workers * size / 1e6
    return check_numbers(
        answer, [expected], names=["MB sent per worker"], solution=solution,
        hints=["start from the size of all the gradients in bytes; section 2's ring sends one chunk of 1/N per step: "
               "count the steps of the reduce-scatter, then do not forget the all-gather that follows it"],
        why=[f"the gradients take {parameters:,} × {bytes_per_value} B = {size / 1e6:g} MB; a ring all-reduce is a "
             f"reduce-scatter then an all-gather, each sending (N - 1)/N of the data, so each worker sends "
             f"2·(N - 1)/N · {size / 1e6:g} MB = {expected:g} MB with N = {workers}"],
        rtol=1e-3,
    )


def check_ddp_bookkeeping(answer: Sequence[float] | None, *, nodes: int = 2, gpus_per_node: int = 4,
                          batch_per_process: int = 32, dataset_size: int = 60_000,
                          solution: bool = False) -> CheckResult:
    """Exercise 3: (world size, global batch, samples per rank per epoch, optimizer steps per epoch).

    One process per GPU, ``DistributedSampler`` (which pads the dataset to a multiple of the world
    size) and a ``DataLoader`` that keeps the last, smaller batch. ``solution=True`` shows the worked
    solution instead of checking the answer.
    """
    world = nodes * gpus_per_node
    global_batch = world * batch_per_process
    per_rank = math.ceil(dataset_size / world)
    steps = math.ceil(per_rank / batch_per_process)
    return check_numbers(
        answer, [world, global_batch, per_rank, steps],
        names=["world size", "global batch", "samples per rank", "steps per epoch"], solution=solution,
        hints=["DDP runs one process per GPU (section 6): count the processes of all the nodes, not of one",
               "`--batch-size` is the batch of one process; the global batch is what one optimizer step consumes "
               "over the whole world",
               "DistributedSampler (section 6) splits the whole dataset, not the global batch, into disjoint shares",
               "each rank iterates over its own share only, in batches of `--batch-size`; the DataLoader keeps the "
               "last, smaller batch, and it is a step too"],
        why=[f"world size: one process per GPU, {nodes} × {gpus_per_node} = {world}",
             f"global batch: each step consumes one batch on every rank, {world} × {batch_per_process} = "
             f"{global_batch}",
             f"samples per rank: DistributedSampler gives each rank ceil({dataset_size} / {world}) = {per_rank}",
             f"steps per epoch: each rank iterates over its own share, ceil({per_rank} / {batch_per_process}) = "
             f"{steps}"],
    )


DDP_EXERCISE_SAMPLES = 2048  # the training examples the check gives the student's script
DDP_EXERCISE_GLOBAL_BATCH = 64
DDP_EXERCISE_WORLD = 2


def check_my_ddp(script: Path | str, *, solution: bool = False, timeout: float = 240.0) -> CheckResult:
    """Exercise 5: launch the student's DDP script with ``torchrun`` on 2 processes and read what each reports.

    The script's ``report`` writes, per process, its world size, the indices of the examples it trained on, its
    number of steps and a fingerprint of its final weights. Right means: a world of 2, disjoint halves of the
    data, a global batch of 64 (32 examples a step on each process) and bit-identical weights on both.
    ``solution=True`` shows the worked solution without launching anything.

    Raises:
        FileNotFoundError: if ``script`` does not exist (run the cell that writes it first).
    """
    n, world, batch = DDP_EXERCISE_SAMPLES, DDP_EXERCISE_WORLD, DDP_EXERCISE_GLOBAL_BATCH
    per_process, steps = n // world, math.ceil(n // world / (batch // world))
    if solution:
        return worked_solution(
            "five changes, four of them section 6's diff: (1) `dist.init_process_group(\"gloo\")` first in `main` "
            "(torchrun has set RANK, WORLD_SIZE and the rendezvous address); (2) `model = DDP(model)` (it broadcasts "
            "rank 0's weights and all-reduces the gradients in `backward`); (3) `sampler = DistributedSampler(dataset)`"
            " passed to the DataLoader instead of `shuffle=True`, so that each process trains on its own half; "
            "(4) the new one: `batch_size=64 // dist.get_world_size()`, because one optimizer step consumes a batch "
            f"on every process, so the global batch is the world size times the batch per process: {world} × "
            f"{batch // world} = {batch}, and each process takes {per_process} / {batch // world} = {steps} steps; "
            "(5) `dist.destroy_process_group()` at the end. With several epochs, also call `sampler.set_epoch(epoch)`.")
    reports = launch_exercise(script, samples=n, world=world, timeout=timeout)
    if isinstance(reports, CheckResult):
        return reports
    worlds = sorted({r["world_size"] for r in reports})
    seen = [set(r["seen"]) for r in reports]
    if len(reports) == world and worlds == [1] and not seen[0] & seen[1]:
        return not_yet("the processes trained on disjoint shares, so they had joined one group, but each reported a "
                       "world of 1: `report(...)` ran after `dist.destroy_process_group()`. Leave the group last, "
                       "after the report.")
    if len(reports) != world or worlds != [world]:
        return not_yet(f"{len(reports)} processes reported a world of {' and '.join(map(str, worlds))}, not "
                       f"{world}: each trained alone.\nA process joins the others with section 6's first change, "
                       "`dist.init_process_group(...)`.\n")
    shared = len(seen[0] & seen[1])
    if shared:
        return not_yet(f"the 2 processes trained on {shared} of the same examples (each on {len(seen[0])}): every "
                       "process still iterates over the whole dataset. Section 6 gives each its own share, with a "
                       "sampler.")
    if len(seen[0] | seen[1]) != n:
        return not_yet(f"together the processes trained on {len(seen[0] | seen[1])} of the {n} examples: each needs "
                       "its share, and the shares must cover the dataset.")
    taken = [r["steps"] for r in reports]
    if taken != [steps] * world:
        global_batch = per_process / taken[0] * world
        return not_yet(f"each process took {taken[0]} steps over its {per_process} examples, so one optimizer step "
                       f"consumes about {global_batch:g} examples over the {world} processes, not {batch}: what "
                       "`batch_size` must each process use for a global batch of 64?")
    if len({r["weights"] for r in reports}) != 1:
        return not_yet("each process trained on its own half, but their weights differ at the end: nothing "
                       "averaged the gradients. Section 6's `DDP(model)` does, in `backward`.")
    return CheckResult(True, f"{world} processes, each trained on {per_process} of the {n} examples (disjoint), "
                             f"{steps} steps of {batch // world} examples each, a global batch of {batch}, and "
                             f"bit-identical weights at the end (sha256 {reports[0]['weights'][:12]}…): the "
                             "all-reduce in `backward` kept the two replicas equal.")
