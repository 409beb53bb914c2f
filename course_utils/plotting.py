"""Small, labelled matplotlib figures that keep notebooks light (dpi <= 100)."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

DPI = 80


def set_figure_defaults() -> None:
    """Make every new figure small and light: ``DPI`` dots per inch, a 5 x 3 inch default size.

    :func:`course_utils.setup` calls it, after pyplot has installed Jupyter's inline backend, so
    that no notebook passes ``dpi=``.
    """
    plt.rcParams.update({"figure.dpi": DPI, "figure.figsize": (5.0, 3.0)})


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


@dataclass(frozen=True)
class DescribedFigure:
    """A rendered figure and its alt text: what a screen reader reads, and what text-only views show."""

    png: bytes
    alt: str

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        data = base64.b64encode(self.png).decode("ascii")
        return {"text/html": f'<img src="data:image/png;base64,{data}" alt="{html.escape(self.alt)}">',
                "text/plain": f"[figure] {self.alt}"}

    def __repr__(self) -> str:
        return f"[figure] {self.alt}"


def show(fig: Figure | None = None, *, alt: str) -> None:
    """Display a figure (default: pyplot's current one) with its alt text, then close it.

    Use it instead of ``plt.show()``: JupyterLab, Colab, the published pages and the decks render an
    ``<img alt=...>``, and text-only views (and nbval) see the description. Describe what the figure shows
    and what to read from it, in a sentence or two; leave out measured numbers that change between runs.

    Raises:
        ValueError: if ``alt`` is blank or longer than 600 characters.
    """
    if not alt.strip():
        raise ValueError("alt is empty: describe what the figure shows, e.g. alt='Loss against step for ...'.")
    if len(alt) > 600:
        raise ValueError(f"alt has {len(alt)} characters: keep it under 600, and put the rest in the text.")
    fig = plt.gcf() if fig is None else fig
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi, bbox_inches="tight")
    plt.close(fig)
    from IPython.display import display
    display(DescribedFigure(buffer.getvalue(), alt.strip()))
