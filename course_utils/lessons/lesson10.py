"""Lesson 10 (profiling): read the traces the profiler writes, draw them, draw a roofline, and the exercise checks.

The lesson profiles with ``torch.profiler`` itself, in its cells; these helpers only read and draw what it
wrote::

    files = trace_files("scratch/10/traces")        # the Chrome traces of tensorboard_trace_handler, oldest first
    events = trace_events(files[0])                 # their complete ("X") events: name, start, duration
    plot_timeline(events, ["forward", "backward"])  # one bar per labelled range
    plot_roofline(peak, bandwidth, points)          # the machine's roofline, measured operations on it
    draw_schedule([sched(step) for step in range(10)])   # what a profiler schedule does at each step
    draw_phases({"slow loop": slow, "fixed loop": fast})  # ms per step of each labelled phase, stacked
"""

from __future__ import annotations

import gzip
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle
from torch.profiler import ProfilerAction, ProfilerActivity, profile, schedule

from course_utils.checks import CheckResult, check_numbers
from course_utils.plotting import DPI

TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")  # what tensorboard_trace_handler writes


def trace_files(folder: Path | str) -> list[Path]:
    """The profiler's Chrome traces under ``folder`` (``*.pt.trace.json[.gz]``), oldest first.

    Raises:
        FileNotFoundError: if ``folder`` does not exist.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"no folder {root}: run the profiling cell that writes the traces first.")
    found = [p for p in root.rglob("*") if p.name.endswith(TRACE_SUFFIXES)]
    return sorted(found, key=lambda p: p.stat().st_mtime_ns)


def trace_events(path: Path | str) -> list[dict[str, Any]]:
    """The complete events (``"ph": "X"``: a name, a start ``ts`` and a duration ``dur`` in µs) of a Chrome
    trace, as ``prof.export_chrome_trace`` or ``tensorboard_trace_handler`` write it (plain or gzipped JSON).

    Raises:
        ValueError: if the file is not a Chrome trace (no ``traceEvents``).
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        trace = json.load(f)
    if not isinstance(trace, dict) or "traceEvents" not in trace:
        raise ValueError(f"{path} is not a Chrome trace: it has no 'traceEvents'.")
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and "dur" in e]


def plot_timeline(events: Sequence[Mapping[str, Any]], names: Sequence[str], *, ax: Axes | None = None) -> Axes:
    """Draw the ranges named ``names`` of a trace on a time axis (ms from the first one), one row per name.

    Raises:
        ValueError: if none of ``names`` occurs in ``events``.
    """
    chosen = [e for e in events if e["name"] in names]
    if not chosen:
        raise ValueError(f"none of {list(names)} is in the trace; its ranges are named e.g. "
                         f"{sorted({e['name'] for e in events})[:5]}.")
    start = min(float(e["ts"]) for e in chosen)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 0.5 + 0.4 * len(names)))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, name in enumerate(names):
        spans = [((float(e["ts"]) - start) / 1e3, float(e["dur"]) / 1e3) for e in chosen if e["name"] == name]
        ax.broken_barh(spans, (row - 0.4, 0.8), color=colors[row % len(colors)])
    ax.set_yticks(range(len(names)), labels=list(names))
    ax.invert_yaxis()
    ax.set_xlabel("time since the first range (ms)")
    return ax


def plot_roofline(peak: float, bandwidth: float, points: Mapping[str, tuple[float, float]], *,
                  ax: Axes | None = None) -> Axes:
    """The roofline ``min(peak, intensity × bandwidth)`` and measured operations on it.

    Args:
        peak: FLOP/s the machine reaches (the flat roof).
        bandwidth: bytes/s it moves (the slope).
        points: name -> (arithmetic intensity in FLOP/byte, FLOP/s measured).
    """
    if peak <= 0 or bandwidth <= 0:
        raise ValueError(f"peak and bandwidth must be positive, got {peak} and {bandwidth}.")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    ridge = peak / bandwidth
    lows = [i for i, _ in points.values()] + [ridge]
    intensity = np.logspace(np.log10(min(lows) / 4), np.log10(max(max(lows), ridge) * 8), 200)
    ax.loglog(intensity, np.minimum(peak, intensity * bandwidth) / 1e9, color="black", label="roofline")
    ax.axvline(ridge, color="grey", linestyle=":", label=f"ridge {ridge:.3g} FLOP/byte")
    for name, (i, flops) in points.items():
        ax.scatter([i], [flops / 1e9], zorder=3, label=name)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.legend(fontsize="x-small", loc="lower right")
    return ax


SCHEDULE_ACTIONS = {  # what a schedule returns for a step: its colour and what it means, for the legend
    ProfilerAction.NONE: ("0.85", "NONE: not profiled"),
    ProfilerAction.WARMUP: ("tab:orange", "WARMUP: warm-up, nothing kept"),
    ProfilerAction.RECORD: ("tab:blue", "RECORD"),
    ProfilerAction.RECORD_AND_SAVE: ("navy", "RECORD_AND_SAVE: last of a cycle"),
}


def draw_schedule(actions: Sequence[ProfilerAction], *, ax: Axes | None = None) -> Axes:
    """A profiler schedule step by step: a box per step coloured by the ``ProfilerAction`` the schedule returned
    for it, and an arrow where the profiler hands the recorded steps to ``on_trace_ready`` (at the ``prof.step()``
    that ends a ``RECORD_AND_SAVE`` step).

    Args:
        actions: the schedule called for each step, ``[sched(step) for step in range(steps)]``.

    Raises:
        ValueError: if ``actions`` is empty or holds something other than what a schedule returns.
    """
    actions = list(actions)
    wrong = [a for a in actions if a not in SCHEDULE_ACTIONS]
    if not actions or wrong:
        raise ValueError(f"pass the schedule's action for each step, [sched(step) for step in range(steps)], one of "
                         f"{[a.name for a in SCHEDULE_ACTIONS]}; got {wrong[:3] if wrong else 'no steps'}.")
    if ax is None:
        _, ax = plt.subplots(figsize=(min(10.0, 1.5 + 0.75 * len(actions)), 2.2), dpi=DPI)
    for step, action in enumerate(actions):
        color, _ = SCHEDULE_ACTIONS[action]
        ax.add_patch(Rectangle((step, 0), 0.92, 1, facecolor=color, edgecolor="white"))
    recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
    traces = [step for step, action in enumerate(actions) if action == ProfilerAction.RECORD_AND_SAVE]
    for n, last in enumerate(traces, 1):
        first = last
        while first > 0 and actions[first - 1] in recording and actions[first - 1] != ProfilerAction.RECORD_AND_SAVE:
            first -= 1  # the cycle's recorded steps: the RECORD steps just before it
        steps = f"step {last}" if first == last else f"steps {first}–{last}"
        ax.annotate(f"trace {n}: {steps}\n→ on_trace_ready", xy=(last + 0.96, 1.0), xytext=(last + 0.96, 1.75),
                    ha="center", va="bottom", fontsize=9, arrowprops={"arrowstyle": "->", "lw": 1.2})
    ax.legend(handles=[Rectangle((0, 0), 1, 1, facecolor=c, edgecolor="0.5", label=label)
                       for action, (c, label) in SCHEDULE_ACTIONS.items() if action in actions],
              fontsize=9, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False)
    ax.set_xlim(-0.1, len(actions) + 0.1)
    ax.set_ylim(0, 2.6)
    ax.set_xticks([step + 0.46 for step in range(len(actions))], [str(step) for step in range(len(actions))],
                  fontsize=9)
    ax.set_yticks([])
    ax.set_xlabel("step (the loop calls prof.step() after each)", fontsize=9)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    return ax


def draw_phases(phases: Mapping[str, Mapping[str, float]], *, ax: Axes | None = None) -> Axes:
    """A stacked horizontal bar per loop, split into its labelled phases (ms per step), the first loop on top.

    Args:
        phases: loop name -> phase name -> ms per step; every loop has the same phases, in the same order.

    Raises:
        ValueError: if there is no loop, the loops' phases differ, or a time is negative.
    """
    if not phases:
        raise ValueError("phases is empty: pass {loop name: {phase: ms per step}}, e.g. {'slow loop': slow_phases}.")
    order = list(next(iter(phases.values())))
    if any(list(split) != order for split in phases.values()):
        raise ValueError(f"every loop needs the same phases in the same order, {order}; got "
                         f"{ {loop: list(split) for loop, split in phases.items()} }.")
    if any(ms < 0 for split in phases.values() for ms in split.values()):
        raise ValueError("a phase's time is negative: pass ms per step, as the profile's labels give them.")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 0.9 + 0.55 * len(phases)), dpi=DPI)
    loops = list(phases)
    left = np.zeros(len(loops))
    for phase in order:
        widths = np.array([phases[loop][phase] for loop in loops])
        ax.barh(loops, widths, left=left, label=phase)
        left += widths
    ax.set_xlabel("ms per step (profiled)", fontsize=9)
    ax.tick_params(labelsize=9)
    ax.invert_yaxis()
    ax.legend(ncol=len(order), fontsize=9, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return ax


# ----------------------------------------------------------------------------- exercise checks

def _steps_traced(*, wait: int, warmup: int, active: int, repeat: int, skip_first: int, steps: int) -> tuple[int, int]:
    """Run a real profiler with this schedule over ``steps`` steps: (steps recorded, traces handed over)."""
    recorded: list[int] = []

    def on_trace_ready(prof: profile) -> None:
        recorded.append(sum(1 for e in prof.events() if e.name == "ProfilerStep*"))  # a step's range, aggregated

    sched = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    x = torch.ones(4)
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": expected here
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=on_trace_ready) as prof:
            for _ in range(steps):
                x = x + 1
                prof.step()
    return sum(recorded), len(recorded)


def check_schedule(answer: Sequence[int] | None, *, wait: int, warmup: int, active: int, repeat: int,
                   skip_first: int, steps: int, solution: bool = False) -> CheckResult:
    """Exercise 1: how many steps a profiler with this schedule records over ``steps`` steps, and how many
    times it calls ``on_trace_ready``: ``(recorded steps, traces)``. The expected answer comes from running
    the profiler with that schedule; ``solution=True`` shows how it is found."""
    recorded, traces = _steps_traced(wait=wait, warmup=warmup, active=active, repeat=repeat,
                                     skip_first=skip_first, steps=steps)
    cycle = wait + warmup + active
    limit = f"repeat={repeat}" if repeat else "repeat=0: until the loop ends"
    total = (f"{traces} cycle(s) run ({limit}): {traces} × {active} = {recorded}" if recorded == traces * active
             else f"{traces} cycle(s) run ({limit}), the last one cut short by the end of the loop: {recorded} in all")
    return check_numbers(
        answer, [recorded, traces], names=["recorded steps", "traces"], solution=solution,
        hints=["section 3: skip_first counts once, not per cycle; the warm-up steps are traced but thrown away; "
               "repeat caps the cycles. Did you count the warm-up steps as recorded?",
               "section 3: on_trace_ready receives one cycle's recorded steps at a time; how many cycles run?"],
        why=[f"recorded steps: after the skip_first={skip_first} step(s), skipped once, each cycle of wait + warmup "
             f"+ active = {wait} + {warmup} + {active} = {cycle} steps records only its {active} active step(s) (the "
             f"warm-up is thrown away); {total}",
             f"traces: on_trace_ready is called once at the end of each cycle's active steps: {traces} time(s)"])


def linear_intensity(batch: int, features_in: int, features_out: int) -> tuple[int, int]:
    """FLOPs and bytes of an fp32 ``nn.Linear`` forward: the profiler's FLOP count of the product, and the
    bytes of its input, weight, bias and output (each read or written once)."""
    layer = torch.nn.Linear(features_in, features_out)
    x = torch.zeros(batch, features_in)
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        y = layer(x)
    flops = sum(int(e.flops) for e in prof.key_averages() if e.flops)
    tensors = (x, layer.weight, layer.bias, y)
    return flops, sum(t.numel() * t.element_size() for t in tensors)


def check_linear_intensity(answer: float | None, *, batch: int, features_in: int, features_out: int,
                           solution: bool = False) -> CheckResult:
    """Exercise 2: the arithmetic intensity (FLOP/byte) of an fp32 linear layer's forward; ``solution=True`` shows
    how it is found."""
    flops, nbytes = linear_intensity(batch, features_in, features_out)
    return check_numbers(
        answer, [flops / nbytes], names=["FLOP/byte"], rtol=0.01, solution=solution,
        hints=["divide the FLOPs of the product x @ W.T (section 2 counts them) by the bytes moved, 4 a float; "
               "did you count the bytes of all four tensors x, W, b and y?"],
        why=[f"the product x @ W.T costs 2·{batch}·{features_in}·{features_out} = {flops:,} FLOPs; x, W, b and y "
             f"hold 4·({batch}·{features_in} + {features_out}·{features_in} + {features_out} + "
             f"{batch}·{features_out}) = {nbytes:,} bytes, each moved once: the arithmetic intensity is "
             f"{flops:,} / {nbytes:,} = {flops / nbytes:.3g} FLOP/byte"])
