"""Small, labelled matplotlib figures that keep notebooks light (dpi <= 100)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

DPI = 80


def plot_curves(curves: Mapping[str, Sequence[float]], *, xlabel: str, ylabel: str,
                title: str | None = None, x: Sequence[float] | None = None,
                logy: bool = False, ax: Axes | None = None) -> Axes:
    """Plot one line per named curve against its index (or a shared ``x``).

    Axis labels are required: say what is plotted and in which unit.
    """
    if not curves:
        raise ValueError("curves is empty: pass a mapping such as {'train loss': losses}.")
    if not xlabel or not ylabel:
        raise ValueError("xlabel and ylabel are required; name the quantity and its unit.")
    own_figure = ax is None
    if ax is None:
        fig, ax = plt.subplots(figsize=(5, 3), dpi=DPI)
    for label, values in curves.items():
        ys = np.asarray(values, dtype=float)
        xs = np.arange(len(ys)) if x is None else np.asarray(x, dtype=float)
        if len(xs) != len(ys):
            raise ValueError(f"curve {label!r} has {len(ys)} values but x has {len(xs)}.")
        ax.plot(xs, ys, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    if len(curves) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    if own_figure:
        fig.tight_layout()
    return ax


def show_images(images: torch.Tensor | np.ndarray, labels: Sequence[str] | None = None,
                *, ncols: int = 8, title: str | None = None) -> Figure:
    """Show a grid of greyscale images ``(N, H, W)`` or ``(N, 1, H, W)`` with optional captions."""
    arr = images.detach().cpu().numpy() if isinstance(images, torch.Tensor) else np.asarray(images)
    if arr.ndim == 4 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 3 or len(arr) == 0:
        raise ValueError(f"images must have shape (N, H, W) or (N, 1, H, W) with N >= 1, got {arr.shape}.")
    if labels is not None and len(labels) != len(arr):
        raise ValueError(f"got {len(arr)} images but {len(labels)} labels.")
    ncols = max(1, min(ncols, len(arr)))
    nrows = -(-len(arr) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(1.1 * ncols, 1.25 * nrows), dpi=DPI, squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i < len(arr):
            ax.imshow(arr[i], cmap="gray")
            if labels is not None:
                ax.set_title(str(labels[i]), fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def _walk_graph(output: torch.Tensor) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Edges ``(child, parent)`` of the backward graph and a display label for each node."""
    if not isinstance(output, torch.Tensor) or output.grad_fn is None:
        raise ValueError("output must be a tensor produced by operations on tensors with requires_grad=True.")
    names: dict[int, str] = {}
    labels: dict[str, str] = {}

    def name(fn: Any) -> str:
        if id(fn) not in names:
            names[id(fn)] = f"{type(fn).__name__}#{len(names)}"
            leaf = getattr(fn, "variable", None)
            value = f"\nleaf {leaf.item():g}" if leaf is not None and leaf.numel() == 1 else ""
            labels[names[id(fn)]] = type(fn).__name__ + value
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


def draw_autograd_graph(output: torch.Tensor, *, title: str = "backward graph") -> Axes:
    """Draw the backward graph of ``output`` as layered boxes, the output at the top."""
    edges, labels = _walk_graph(output)
    depth: dict[str, int] = {edges[0][0]: 0}
    for _ in range(len(edges)):  # longest path from the output: relax until stable
        changed = False
        for child, parent in edges:
            if child in depth and depth.get(parent, -1) < depth[child] + 1:
                depth[parent] = depth[child] + 1
                changed = True
        if not changed:
            break
    layers: dict[int, list[str]] = {}
    for node, d in depth.items():
        layers.setdefault(d, []).append(node)
    pos = {node: (i - (len(nodes) - 1) / 2, -d) for d, nodes in layers.items() for i, node in enumerate(nodes)}
    _, ax = plt.subplots(figsize=(5, 1.1 * len(layers) + 0.6), dpi=DPI)
    for child, parent in edges:
        (x0, y0), (x1, y1) = pos[child], pos[parent]
        ax.annotate("", xy=(x1, y1 + 0.15), xytext=(x0, y0 - 0.15), arrowprops={"arrowstyle": "->"})
    for node, (x, y) in pos.items():
        ax.text(x, y, labels[node], ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round", "fc": "#dbe9f6" if "Accumulate" not in node else "#f6e3db"})
    ax.set_xlim(min(x for x, _ in pos.values()) - 1, max(x for x, _ in pos.values()) + 1)
    ax.set_ylim(-len(layers) + 0.4, 0.6)
    ax.set_title(f"{title} (gradients flow downward, to the leaves)")
    ax.axis("off")
    return ax
