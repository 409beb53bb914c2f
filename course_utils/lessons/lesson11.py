"""Lesson 11 (compilers): a frame's graphs and graph breaks, the calls that recompile and the bytes that fusion
saves, drawn; and the exercise checks.

The lesson compiles with ``torch.compile``, ``torch.export`` and ``tf.function`` in its own cells; the checks
answer with the same tools: they run TorchDynamo on the function or the calls of the exercise and count, or run the
function on the ``meta`` device (shapes, no memory) to see the temporaries it allocates.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from course_utils.checks import CheckResult, check_numbers
from course_utils.timing import format_bytes

_GRAPH, _PYTHON, _COMPILE = "#e2f0d9", "#fdf0d5", "#f8cbad"


def graph_pieces(explained: Any) -> list[tuple[str, str]]:
    """A frame as TorchDynamo ran it, from ``torch._dynamo.explain(fn)(*args)``: in order, ``("graph", its
    operations)`` for each captured graph and ``("python", the line it broke on)`` for each graph break."""
    pieces = []
    for i, graph_module in enumerate(explained.graphs):
        ops = [getattr(node.target, "__name__", str(node.target)) for node in graph_module.graph.nodes
               if node.op in ("call_function", "call_method", "call_module")]
        pieces.append(("graph", ", ".join(ops)))
        if i < len(explained.break_reasons):
            reason = explained.break_reasons[i]
            line = reason.user_stack[-1].line if reason.user_stack else ""
            code = line.split("  #")[0].strip()  # the line without its comment
            pieces.append(("python", code or reason.reason.strip().splitlines()[0]))
    return pieces


def draw_graph_breaks(pieces: Sequence[tuple[str, str]], ax: Axes, title: str) -> None:
    """The pieces of :func:`graph_pieces` left to right: compiled graphs (green), Python at the breaks (orange)."""
    boxes, graphs = [], 0
    for k, (kind, text) in enumerate(pieces):
        graphs += kind == "graph"
        label = f"graph {graphs}:\n{text}" if kind == "graph" else f"Python:\n{text}"
        boxes.append(ax.text((k + 0.5) / len(pieces), 0.5, label, ha="center", va="center", fontsize=8.5,
                             bbox={"boxstyle": "round,pad=0.5", "facecolor": _GRAPH if kind == "graph" else _PYTHON,
                                   "edgecolor": "0.4"}))
    for before, after in zip(boxes, boxes[1:]):  # from the right edge of one box to the left edge of the next
        ax.annotate("", xy=(-0.08, 0.5), xycoords=after, xytext=(1.08, 0.5), textcoords=before,
                    arrowprops={"arrowstyle": "->", "color": "0.3"})
    ax.set(xlim=(0, 1), ylim=(0, 1), title=title)
    ax.axis("off")


MMAP_THRESHOLD_MAX = 32 * 2**20
"""glibc's largest dynamic mmap threshold on 64-bit Linux (``DEFAULT_MMAP_THRESHOLD_MAX``): a block of this size or
more is always mapped afresh by ``malloc`` and unmapped by ``free``, so its pages fault again at every call."""


def graphs_and_breaks(fn: Callable[..., Any], *args: Any) -> tuple[int, int]:
    """How many graphs TorchDynamo captures from ``fn(*args)``, and how many graph breaks split them (the
    function's own prints and Dynamo's warnings, which would give the answer away, are not shown)."""
    dynamo_log = logging.getLogger("torch._dynamo")
    level = dynamo_log.level
    dynamo_log.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            explained = torch._dynamo.explain(fn)(*args)
    finally:
        dynamo_log.setLevel(level)
    return explained.graph_count, explained.graph_break_count


def check_graph_breaks(answer: Sequence[int] | None, fn: Callable[..., Any], *args: Any,
                       solution: bool = False) -> CheckResult:
    """Exercise 1: ``(graphs, graph breaks)`` of ``fn(*args)``, counted by ``torch._dynamo.explain``;
    ``solution=True`` shows how they are found."""
    graphs, breaks = graphs_and_breaks(fn, *args)
    return check_numbers(
        answer, [graphs, breaks], names=["graphs", "graph breaks"], solution=solution,
        hints=["count the breaks first (section 2): at each one the graph so far ends, and a new one starts after it",
               "read the function line by line for what section 2 says Dynamo cannot trace: a side effect such as "
               "print, a Python branch on a tensor's value, or a tensor's value read into a Python number "
               "(.item()). Did you count every one of them?"],
        why=[f"graphs: each graph break ends the graph so far and a new one starts after it; "
             f"torch._dynamo.explain counts {graphs} graph(s)",
             f"graph breaks: each call that Dynamo cannot trace (a print, a branch on a tensor's value, .item() "
             f"into Python) breaks the graph; torch._dynamo.explain counts {breaks} break(s)"])


def compilations(shapes: Sequence[Sequence[int]], *, dynamic: bool | None) -> int:
    """How many times ``torch.compile(fn, dynamic=dynamic)`` compiles a function called on tensors of ``shapes``
    in that order (a backend that only counts, so nothing is really compiled)."""
    count = 0

    def counting_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
        nonlocal count
        count += 1
        return gm.forward

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (2 * x + 1).relu().sum()

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=counting_backend, dynamic=dynamic)
    for shape in shapes:
        compiled(torch.ones(tuple(shape)))
    torch._dynamo.reset()
    return count


def check_recompilations(answer: int | None, *, shapes: Sequence[Sequence[int]], dynamic: bool | None,
                         solution: bool = False) -> CheckResult:
    """Exercise 2: how many compilations a sequence of calls costs, counted by compiling them for real;
    ``solution=True`` shows how they are found."""
    expected = compilations(shapes, dynamic=dynamic)
    distinct = list(dict.fromkeys(tuple(shape) for shape in shapes))
    if dynamic is False:
        how = ("every shape not seen before fails the shape guards and compiles a fully specialised graph, and a "
               "shape seen before reuses its graph"
               + (f"; the calls have {len(distinct)} distinct shape(s), {', '.join(map(str, distinct))}"
                  if len(distinct) == expected else ""))
    elif dynamic is None:
        how = ("the first shape compiles a specialised graph; the first new size fails its guard and recompiles "
               "once with that size symbolic, and later sizes reuse that graph")
    else:
        how = "sizes are symbolic from the start (only sizes 0 and 1 are specialised), so new sizes reuse the graph"
    return check_numbers(
        answer, [expected], names=["compilations"], solution=solution,
        hints=[f"section 3's first slide says what a new shape does under dynamic={dynamic}; go through the calls in "
               "order. " + ("Did you count a shape seen before as a new compilation?" if dynamic is False else
                            "Did you count a compilation for every new size?")],
        why=[f"compilations: with dynamic={dynamic}, {how}: {expected} compilation(s)"])


@dataclass(frozen=True)
class Call:
    """One call of a compiled function as its backend saw it: the input's shape, and the input shape of the graph
    the call compiled, a symbolic size as its name (``("s77", 4)``), or ``None`` where it reused a cached graph."""

    shape: tuple[int, ...]
    compiled_for: tuple[int | str, ...] | None


def record_call(compiled: Callable[[torch.Tensor], Any], graphs: Sequence[torch.fx.GraphModule],
                x: torch.Tensor) -> Call:
    """Call ``compiled(x)`` and say whether it compiled, from ``graphs``, the list its backend appends each graph
    it receives to (section 1's inspecting backend)."""
    before = len(graphs)
    compiled(x)
    new = list(graphs[before:])
    if len(new) > 1:
        raise ValueError(f"the call compiled {len(new)} graphs: the function has graph breaks. Record a function "
                         "that compiles whole (torch._dynamo.explain counts its breaks).")
    if not new:
        return Call(tuple(x.shape), None)
    values = [node.meta.get("example_value") for node in new[0].graph.nodes if node.op == "placeholder"]
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if not tensors:
        raise ValueError("the compiled graph takes no tensor: pass the list that the backend appends its graphs "
                         "to, and a function of one tensor.")
    return Call(tuple(x.shape), tuple(s if isinstance(s, int) else str(s) for s in tensors[0].shape))


def draw_recompilations(calls: Mapping[str, Sequence[Call]], ax: Axes) -> None:
    """A row per policy (``{"dynamic=False": [Call, ...], ...}``), a box per call, in order: a call that compiled
    (orange, the input shape its graph was compiled for) or reused a cached graph (green)."""
    rows = list(calls.values())
    if not rows or not rows[0]:
        raise ValueError("calls is empty: pass {policy: [lesson11.record_call(...) for each call]}.")
    shapes = [call.shape for call in rows[0]]
    if any([call.shape for call in row] != shapes for row in rows):
        raise ValueError("every policy must make the same calls, in the same order: record them on the same "
                         "input shapes.")
    for r, row in enumerate(rows):
        for c, call in enumerate(row):
            compiled = call.compiled_for is not None
            symbolic = compiled and any(isinstance(s, str) for s in call.compiled_for or ())
            ax.add_patch(Rectangle((c + 0.04, r - 0.4), 0.92, 0.8, facecolor=_COMPILE if compiled else _GRAPH,
                                   edgecolor="0.2" if symbolic else "0.5", linewidth=2.5 if symbolic else 1))
            label = (f"compiles for\n({', '.join(map(str, call.compiled_for or ()))})" if compiled
                     else "cached graph")
            ax.text(c + 0.5, r, label, ha="center", va="center", fontsize=10,
                    fontweight="bold" if symbolic else "normal")
    counts = [sum(call.compiled_for is not None for call in row) for row in rows]
    ax.set_yticks(range(len(rows)), [f"{policy}\n{n} graph{'s' * (n != 1)}" for policy, n in zip(calls, counts)],
                  fontsize=10)
    ax.set_xticks([c + 0.5 for c in range(len(shapes))], [f"call {c + 1}: {shape}" for c, shape in
                                                          enumerate(shapes)], fontsize=10)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    ax.set_xlim(0, len(shapes))
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_title("Each call compiles a graph (orange: for the shape shown; bold: a symbolic size sN) or reuses one "
                 "(green)", fontsize=10, pad=28)
    for side in ax.spines.values():
        side.set_visible(False)


def break_even_calls(compile_seconds: float, eager_seconds: float, compiled_seconds: float) -> int | None:
    """The number of calls after which compiling has paid for itself (``None`` if the compiled call is not faster)."""
    if compile_seconds < 0 or eager_seconds <= 0 or compiled_seconds <= 0:
        raise ValueError("times must be positive seconds (the compile time may be 0).")
    saved = eager_seconds - compiled_seconds
    return math.ceil(compile_seconds / saved) if saved > 0 else None


def check_break_even(answer: int | None, *, compile_seconds: float, eager_seconds: float,
                     compiled_seconds: float, solution: bool = False) -> CheckResult:
    """Exercise 3: the calls it takes for a compile time to pay off; ``solution=True`` shows how they are found."""
    expected = break_even_calls(compile_seconds, eager_seconds, compiled_seconds)
    if expected is None:
        raise ValueError("the exercise needs a compiled call faster than the eager one.")
    saved = eager_seconds - compiled_seconds
    return check_numbers(
        answer, [expected], names=["calls"], solution=solution,
        hints=["section 4, 'Does it pay?': weigh what one call saves against what the compile costs. Did you put "
               "both times in the same unit (ms against s), and round up to a whole call?"],
        why=[f"break-even: each call saves {eager_seconds:g} s - {compiled_seconds:g} s = {saved:g} s, so the "
             f"{compile_seconds:g} s compile is paid back after ⌈{compile_seconds:g} / {saved:g}⌉ = "
             f"{expected:,} calls"])


class _TensorsMade(TorchDispatchMode):
    """Records the byte size of every new tensor the operators under it return (views of a tensor and the tensors
    an in-place operator returns allocate nothing: they are left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []
        # each operator that made a tensor: its name, its tensor inputs, the new tensors (kept: no storage reused)
        self.kernels: list[tuple[str, list[torch.Tensor], list[torch.Tensor]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        given = {a.untyped_storage()._cdata for a in inputs}
        made = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)
                and t.untyped_storage()._cdata not in given]     # a new storage, not an input's
        self.sizes += [t.untyped_storage().nbytes() for t in made]
        if made:
            self.kernels.append((func.overloadpacket.__name__, inputs, made))
        return out


def tensors_made(fn: Callable[[torch.Tensor], Any], shape: Sequence[int],
                 dtype: torch.dtype = torch.float32) -> list[int]:
    """The byte sizes of the tensors eager ``fn`` allocates from an input of ``shape``, in order (its result
    included), found on the ``meta`` device: shapes only, nothing allocated."""
    x = torch.empty(tuple(shape), dtype=dtype, device="meta")
    made = _TensorsMade()
    with made:
        fn(x)
    return made.sizes


@dataclass(frozen=True)
class Kernel:
    """One eager operator as a kernel: the bytes it reads (its tensor inputs) and writes (the tensors it makes),
    and of those, the intermediates: tensors that one operator of the chain writes for another to read back."""

    name: str
    read: int
    written: int
    read_back: int      # of ``read``: intermediates an earlier kernel wrote
    written_out: int    # of ``written``: intermediates, not the chain's result


@dataclass(frozen=True)
class Traffic:
    """The bytes a chain moves through memory: eager, a kernel per operator; fused, one kernel that reads the
    chain's input once and writes its result once (the intermediates stay in registers)."""

    eager: tuple[Kernel, ...]
    fused_read: int
    fused_written: int

    @property
    def eager_bytes(self) -> int:
        """Bytes that eager's kernels read and write, together."""
        return sum(k.read + k.written for k in self.eager)

    @property
    def fused_bytes(self) -> int:
        """Bytes that the fused kernel reads and writes."""
        return self.fused_read + self.fused_written

    @property
    def ratio(self) -> float:
        """Eager's bytes over the fused kernel's."""
        return self.eager_bytes / self.fused_bytes


def memory_traffic(fn: Callable[[torch.Tensor], Any], shape: Sequence[int],
                   dtype: torch.dtype = torch.float32) -> Traffic:
    """The bytes eager ``fn`` and one fused kernel move for an input of ``shape`` (numel x element size of each
    tensor read or made), found on the ``meta`` device; views and in-place operators are left out, and no tensor
    is assumed to stay in a cache."""
    x = torch.empty(tuple(shape), dtype=dtype, device="meta")
    if x.numel() == 0:
        raise ValueError(f"shape {tuple(shape)} has no element: pass the shape of the chain's input, e.g. x.shape.")
    made = _TensorsMade()
    with made:
        result = fn(x)
    if not made.kernels:
        raise ValueError("fn made no tensor (views and in-place operators only): pass a chain of operators that "
                         "make tensors, such as section 1's chain.")
    results = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
    kept = {t.untyped_storage()._cdata for t in results}
    inside = {t.untyped_storage()._cdata for _, _, outs in made.kernels for t in outs}
    kernels = tuple(Kernel(name, read=sum(t.nbytes for t in ins), written=sum(t.nbytes for t in outs),
                           read_back=sum(t.nbytes for t in ins if t.untyped_storage()._cdata in inside),
                           written_out=sum(t.nbytes for t in outs if t.untyped_storage()._cdata not in kept))
                    for name, ins, outs in made.kernels)
    return Traffic(kernels, fused_read=x.nbytes, fused_written=sum(t.nbytes for t in results))


def draw_memory_traffic(traffic: Traffic, ax: Axes) -> None:
    """Two rows of kernels on a scale of bytes: eager's, each reading (blue) then writing (orange), and the fused
    one; hatched, the intermediates written and read back, which fusion removes."""
    if not traffic.eager or traffic.fused_bytes <= 0:
        raise ValueError("traffic has no kernel: build it with lesson11.memory_traffic(fn, x.shape, x.dtype).")
    scale, unit = next((2.0**p, u) for p, u in ((30, "GiB"), (20, "MiB"), (10, "KiB"), (0, "B"))
                       if traffic.eager_bytes >= 2**p * 8 or p == 0)
    width = traffic.eager_bytes / scale
    fused = Kernel("one fused kernel", traffic.fused_read, traffic.fused_written, 0, 0)
    rows = [(f"eager\n{len(traffic.eager)} kernels", traffic.eager), ("compiled\n1 kernel", (fused,))]
    for row, (_, kernels) in enumerate(rows):
        left = 0.0
        for kernel in kernels:
            start = left
            parts = ((kernel.read - kernel.read_back, "tab:blue", "", "read"),
                     (kernel.read_back, "tab:blue", "//", "read"),
                     (kernel.written_out, "tab:orange", "//", "write"),
                     (kernel.written - kernel.written_out, "tab:orange", "", "write"))
            for nbytes, color, hatch, word in parts:
                if nbytes > 0:
                    ax.barh(row, nbytes / scale, left=left, height=0.55, color=color, alpha=0.75, hatch=hatch,
                            edgecolor="white", linewidth=0.5)
                    if nbytes / scale > 0.07 * width:
                        ax.text(left + nbytes / scale / 2, row, word, ha="center", va="center", fontsize=9,
                                color="white", fontweight="bold")
                    left += nbytes / scale
            narrow = left - start < 0.2 * width                   # a short kernel: its name from its start
            ax.text(start if narrow else (start + left) / 2, row - 0.32, kernel.name, ha="left" if narrow else
                    "center", va="bottom", fontsize=10)
            ax.plot([left, left], [row - 0.3, row + 0.3], color="0.2", lw=1.5)   # the kernel's end
        total = traffic.eager_bytes if row == 0 else traffic.fused_bytes
        ax.text(left + 0.01 * width, row, format_bytes(total), va="center", fontsize=10)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=10)
    ax.set_ylim(len(rows) - 0.5, -0.75)
    ax.set_xlim(0, width * 1.12)
    ax.set_xlabel(f"{unit} read and written (hatched: intermediates, written then read back)", fontsize=10)
    ax.tick_params(axis="x", labelsize=9)
    ax.set_title(f"Bytes through memory: eager moves {traffic.ratio:.1f}x what the fused kernel moves", fontsize=10)


def remapped_pages(fn: Callable[[torch.Tensor], Any], shape: Sequence[int], *, page_size: int,
                   dtype: torch.dtype = torch.float32) -> int:
    """The pages that glibc maps afresh at every eager call of ``fn``: those of the tensors of
    :data:`MMAP_THRESHOLD_MAX` bytes or more that it creates (each one a minor page fault at first touch)."""
    if page_size < 1:
        raise ValueError(f"page_size must be a positive number of bytes, got {page_size}.")
    return sum(math.ceil(n / page_size) for n in tensors_made(fn, shape, dtype) if n >= MMAP_THRESHOLD_MAX)


def check_page_faults(answer: int | None, fn: Callable[[torch.Tensor], Any], *, shape: Sequence[int],
                      page_size: int, solution: bool = False) -> CheckResult:
    """Exercise 4: the minor page faults of one eager call of ``fn`` on a float32 input of ``shape`` (Linux, glibc),
    counted from the tensors the function creates; malloc's header page of each block is not counted (the answer
    may include it: within 0.1%). ``solution=True`` shows how they are found."""
    sizes = [n for n in tensors_made(fn, shape) if n >= MMAP_THRESHOLD_MAX]
    expected = remapped_pages(fn, shape, page_size=page_size)
    each = ", ".join(f"{n / 2**20:g} MiB" for n in sizes) or "none"
    return check_numbers(
        answer, [expected], names=["page faults a call"], rtol=1e-3, solution=solution,
        hints=[f"section 4, 'The allocator is in the measurement': list the tensors one call creates (the input "
               f"is not one of them), keep those that glibc maps afresh, and count the pages of {page_size:,} B "
               f"that each spans. Did you count every temporary?"],
        why=[f"page faults a call: the call creates {len(sizes)} tensor(s) of 32 MiB or more ({each}); glibc maps "
             f"each one afresh, and each of its pages of {page_size:,} B faults at first touch: "
             f"{expected:,} page faults"])
