"""Lesson 01 (tensors and autograd): draw the graph that autograd records, and check the exercises."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from torch import nn

from course_utils.checks import CheckResult, check_numbers


def _walk_graph(output: torch.Tensor, leaves: dict[str, torch.Tensor] | None = None,
                ) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Edges ``(child, parent)`` of the backward graph and a display label for each node; ``leaves`` names the leaf
    tensors (``{"x": x}``) in the labels of their ``AccumulateGrad`` nodes."""
    if not isinstance(output, torch.Tensor) or output.grad_fn is None:
        raise ValueError("output must be a tensor produced by operations on tensors with requires_grad=True.")
    names: dict[int, str] = {}
    labels: dict[str, str] = {}
    # A node's Python object lives only while referenced (torch 2.11 makes a new one at each access once the last
    # is freed, often at the same address): keep every one alive, so that id() names each node once.
    alive: list[Any] = []

    def name(fn: Any) -> str:
        if id(fn) not in names:
            alive.append(fn)
            names[id(fn)] = f"{type(fn).__name__}#{len(names)}"
            leaf = getattr(fn, "variable", None)
            named = next((n for n, t in (leaves or {}).items() if t is leaf), None) if leaf is not None else None
            value = f"{' =' if named else ''} {leaf.item():g}" if leaf is not None and leaf.numel() == 1 else ""
            named = named or "leaf"
            labels[names[id(fn)]] = type(fn).__name__ + (f"\n{named}{value}" if leaf is not None else "")
        return names[id(fn)]

    edges, stack, seen = [], [output.grad_fn], set()
    name(output.grad_fn)
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        for parent, _ in fn.next_functions:
            if parent is not None:
                edges.append((name(fn), name(parent)))
                stack.append(parent)
    return edges, labels


def autograd_graph_edges(output: torch.Tensor) -> list[tuple[str, str]]:
    """Edges ``(child, parent)`` of the backward graph of ``output``, found by walking
    ``grad_fn.next_functions``; nodes are named ``"<type>#<n>"``, leaves are ``AccumulateGrad``."""
    return _walk_graph(output)[0]


def _depths(edges: list[tuple[str, str]], root: str) -> dict[str, int]:
    """Each node's longest distance from ``root`` along the edges ``(child, parent)`` (the graph is acyclic)."""
    depth: dict[str, int] = {root: 0}
    for _ in range(len(edges) + 1):  # longest path from the output: relax until stable
        changed = False
        for child, parent in edges:
            if child in depth and depth.get(parent, -1) < depth[child] + 1:
                depth[parent] = depth[child] + 1
                changed = True
        if not changed:
            break
    return depth


def graph_levels(output: torch.Tensor) -> list[list[str]]:
    """The nodes of the backward graph of ``output`` grouped by their longest distance from it, as type names.

    A path from one node to another makes the second one deeper, so two nodes of the same group are never
    connected: nothing orders them, and they could run at the same time.
    """
    edges, labels = _walk_graph(output)
    root = f"{type(output.grad_fn).__name__}#0"
    levels: dict[int, list[str]] = {}
    for node, d in _depths(edges, root).items():
        levels.setdefault(d, []).append(node)
    return [[labels[node].split("\n")[0] for node in sorted(levels[d], key=lambda n: int(n.rsplit("#", 1)[1]))]
            for d in sorted(levels)]


def draw_autograd_graph(output: torch.Tensor, *, title: str = "backward graph", depths: bool = False,
                        leaves: dict[str, torch.Tensor] | None = None) -> Axes:
    """Draw the backward graph of ``output`` as layered boxes, the output at the top; ``depths`` labels each layer
    with its longest distance from the output (the groups of :func:`graph_levels`), ``leaves`` names the leaves."""
    edges, labels = _walk_graph(output, leaves)
    depth = _depths(edges, edges[0][0]) if edges else {next(iter(labels)): 0}
    layers: dict[int, list[str]] = {}
    for node, d in depth.items():
        layers.setdefault(d, []).append(node)
    pos = {node: (i - (len(nodes) - 1) / 2, -d) for d, nodes in layers.items() for i, node in enumerate(nodes)}
    widest = max(len(nodes) for nodes in layers.values())
    _, ax = plt.subplots(figsize=(max(5.0, 1.8 * widest + (1.2 if depths else 0)), 1.1 * len(layers) + 0.6))
    for child, parent in edges:
        (x0, y0), (x1, y1) = pos[child], pos[parent]
        ax.annotate("", xy=(x1, y1 + 0.15), xytext=(x0, y0 - 0.15), arrowprops={"arrowstyle": "->"})
    for node, (x, y) in pos.items():
        ax.text(x, y, labels[node], ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round", "fc": "#dbe9f6" if "Accumulate" not in node else "#f6e3db"})
    left = min(x for x, _ in pos.values()) - 1
    if depths:
        for d in layers:
            ax.text(left - 0.4, -d, f"depth {d}", ha="left", va="center", fontsize=9, color="0.35")
            ax.axhspan(-d - 0.35, -d + 0.35, color="0.95" if d % 2 else "0.9", zorder=0)
        left -= 0.6
    ax.set_xlim(left, max(x for x, _ in pos.values()) + 1)
    ax.set_ylim(-len(layers) + 0.4, 0.6)
    ax.set_title(f"{title} (gradients flow downward, to the leaves)")
    ax.axis("off")
    return ax


# ---------------------------------------- exercise checks

def draw_probability_map(model: nn.Module, points: torch.Tensor, targets: torch.Tensor, ax: Axes, *,
                         title: str, margin: float = 0.5, steps: int = 101) -> float:
    """Shade the probability a 2-input classifier gives over the square around ``points``, draw its p = 0.5 line
    and the points (filled: target 1, hollow: target 0).

    Returns:
        the spread of p over the square (its largest minus its smallest value): near 0 for a model that answers
        the same everywhere.
    """
    lo, hi = points.min().item() - margin, points.max().item() + margin
    axis = torch.linspace(lo, hi, steps)
    grid = torch.cartesian_prod(axis, axis)                       # (x1, x2) pairs, x1 slowest
    with torch.no_grad():
        p = model(grid.to(next(model.parameters()).device)).reshape(steps, steps).T.cpu().numpy()  # rows: x2
    ax.imshow(p, origin="lower", extent=(lo, hi, lo, hi), cmap="RdBu_r", vmin=0, vmax=1)
    if p.min() < 0.5 < p.max() and p.max() - p.min() > 0.01:   # a line where p crosses 0.5, if it really varies
        ax.contour(axis.numpy(), axis.numpy(), p, levels=[0.5], colors="k", linewidths=1)
    for (x1, x2), target in zip(points.tolist(), targets.flatten().tolist()):
        ax.scatter(x1, x2, s=80, marker="o", edgecolors="k", linewidths=1.5,
                   facecolors="k" if target > 0.5 else "white")
    ax.set(title=title, xlabel="x₁", ylabel="x₂", xlim=(lo, hi), ylim=(lo, hi))
    return float(p.max() - p.min())


def check_chain_rule(answer: Sequence[float] | None, *, solution: bool = False) -> CheckResult:
    """Exercise 1: ``(df/dx, df/dy, df/dz)`` for ``f = (x*y + z)**2`` at x=1, y=2, z=-1."""
    x, y, z = (torch.tensor(v, requires_grad=True) for v in (1.0, 2.0, -1.0))
    q = x * y + z
    expected = [g.item() for g in torch.autograd.grad(q**2, (x, y, z))]
    outer = "write q = xy + z and f = q²: df/dq = 2q, evaluated at the given point"
    return check_numbers(
        answer, expected, names=["df/dx", "df/dy", "df/dz"], solution=solution,
        hints=[f"{outer}, times dq/dx", f"{outer}, times dq/dy", f"{outer}, times dq/dz"],
        why=[f"with q = xy + z = {q.item():g}, df/dx = 2q·y = {expected[0]:g}",
             f"df/dy = 2q·x = {expected[1]:g}",
             f"df/dz = 2q·1 = {expected[2]:g}"],
    )


def check_vector_jacobian(answer: float | None, *, solution: bool = False) -> CheckResult:
    """Exercise 2: every entry of ``x.grad`` after ``z.backward(v)``, z = 3x², x = ones(2,2), v = 0.5."""
    x = torch.ones(2, 2, requires_grad=True)
    (grad,) = torch.autograd.grad(3 * x**2, x, grad_outputs=torch.full((2, 2), 0.5))
    expected = grad[0, 0].item()
    return check_numbers(
        answer, [expected], names=["x.grad"], solution=solution,
        hints=["backward(v) does not give dz/dx itself: section 6 says what it multiplies it by"],
        why=[f"backward(v) computes vᵀJ: each entry of x.grad is v·dz/dx = 0.5·6x = {expected:g}"],
    )


def check_parameter_count(answer: int | None, *, solution: bool = False) -> CheckResult:
    """Exercise 3: trainable parameters of the MLP 784 → 300 → 100 → 10 (with biases)."""
    model = nn.Sequential(nn.Linear(784, 300), nn.ReLU(), nn.Linear(300, 100), nn.ReLU(), nn.Linear(100, 10))
    expected = sum(p.numel() for p in model.parameters())
    return check_numbers(
        answer, [expected], names=["parameters"], solution=solution,
        hints=["count each of the three Linear layers apart: a weight matrix and a bias vector each; "
               "the biases are the usual slip"],
        why=[f"each Linear(n_in, n_out) holds n_in·n_out weights plus n_out biases: "
             f"784·300+300 + 300·100+100 + 100·10+10 = {expected} parameters"],
    )
