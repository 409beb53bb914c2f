"""Lesson 08 (pruning): count zeros, measure bytes, draw the lesson's pruned tensors, and check the exercises.

The pruning calls themselves (``torch.nn.utils.prune``) stay in the notebook; this module only
answers "how sparse is it?" and "how many bytes does it take?", and draws what the notebook computed::

    from course_utils.lessons import lesson08
    print(lesson08.sparsity_table(model))
    lesson08.tensor_bytes(weight.to_sparse_csr())
    lesson08.draw_pruned_parameter(model.conv1, axes)  # weight_orig ⊙ weight_mask = weight, and the gradient

The exercise checks of the lesson follow its plumbing.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from torch import nn
from torch.nn.utils import prune

from course_utils.checks import CheckResult, check_numbers

PRUNABLE = (nn.Conv2d, nn.Linear)


def count_zeros(t: torch.Tensor) -> int:
    """Number of elements of a dense tensor that are exactly zero."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"count_zeros expects a tensor, got {type(t).__name__}.")
    if t.layout != torch.strided:
        raise ValueError(f"count_zeros expects a dense (strided) tensor, got layout {t.layout}; "
                         "call .to_dense() first.")
    return int((t == 0).sum().item())


def layer_sparsity(model: nn.Module, tensor: str = "weight") -> dict[str, tuple[int, int]]:
    """``{layer name: (zeros, elements)}`` of ``tensor`` for every ``Conv2d`` and ``Linear`` of ``model``.

    Reads ``module.<tensor>``, which for a pruned module is the masked tensor that the forward
    pass uses (``<tensor>_orig * <tensor>_mask``), so the zeros of the mask are counted.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}.")
    table = {name: (count_zeros(getattr(m, tensor)), getattr(m, tensor).numel())
             for name, m in model.named_modules() if isinstance(m, PRUNABLE) and getattr(m, tensor, None) is not None}
    if not table:
        raise ValueError(f"model has no Conv2d or Linear layer with a {tensor!r} tensor.")
    return table


def global_sparsity(model: nn.Module, tensor: str = "weight") -> float:
    """Fraction of zeros over ``tensor`` of all ``Conv2d``/``Linear`` layers together."""
    table = layer_sparsity(model, tensor)
    return sum(z for z, _ in table.values()) / sum(n for _, n in table.values())


def sparsity_table(model: nn.Module, tensor: str = "weight") -> str:
    """A printable per-layer table of zeros, elements and sparsity (%), with a total row."""
    table = layer_sparsity(model, tensor)
    zeros, total = sum(z for z, _ in table.values()), sum(n for _, n in table.values())
    lines = [f"{'layer':<8}{'zeros':>8}{'elements':>10}{'sparsity':>10}"]
    lines += [f"{name:<8}{z:>8}{n:>10}{100 * z / n:>9.2f}%" for name, (z, n) in table.items()]
    lines.append(f"{'total':<8}{zeros:>8}{total:>10}{100 * zeros / total:>9.2f}%")
    return "\n".join(lines)


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes that hold a tensor's data: values, plus indices for sparse COO and CSR layouts.

    Dense: ``numel × element_size``. COO: ``indices`` (``ndim × nnz`` int64) plus ``values``.
    CSR: ``crow_indices`` (rows + 1) plus ``col_indices`` (nnz) plus ``values`` (nnz).
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"tensor_bytes expects a tensor, got {type(t).__name__}.")
    if t.layout == torch.strided:
        return t.numel() * t.element_size()
    parts: tuple[torch.Tensor, ...]
    if t.layout == torch.sparse_coo:
        t = t.coalesce()
        parts = (t.indices(), t.values())
    elif t.layout == torch.sparse_csr:
        parts = (t.crow_indices(), t.col_indices(), t.values())
    else:
        raise ValueError(f"tensor_bytes supports strided, sparse_coo and sparse_csr tensors, got {t.layout}.")
    return sum(p.numel() * p.element_size() for p in parts)


def state_dict_bytes(state_dict: Mapping[str, torch.Tensor]) -> int:
    """Total bytes of the tensors of a state dict (what ``torch.save`` writes, headers aside)."""
    return sum(tensor_bytes(v) for v in state_dict.values())


# ---------------------------------------- pictures

def draw_pruned_parameter(module: nn.Module, axes: Sequence[Axes], *, name: str = "weight", rows: int = 8,
                          cols: int = 9) -> None:
    """A pruned tensor's re-parametrisation, in four panels (``plt.subplots(1, 4)``): ``<name>_orig`` ⊙
    ``<name>_mask`` = ``<name>``, then the gradient of ``<name>_orig``; each the top-left ``rows`` × ``cols`` of
    the tensor flattened to 2-D (a conv weight: a row per output channel), exact zeros in grey.

    Raises:
        ValueError: if ``module.<name>`` is not pruned, ``<name>_orig`` has no gradient yet (run a backward pass
            first), ``rows`` or ``cols`` is below 1, or ``axes`` is not four panels.
    """
    orig, mask = getattr(module, f"{name}_orig", None), getattr(module, f"{name}_mask", None)
    if not isinstance(orig, torch.Tensor) or not isinstance(mask, torch.Tensor):
        raise ValueError(f"module.{name} is not pruned (no {name}_orig and {name}_mask): prune it first, e.g. "
                         f"prune.random_unstructured(module, {name!r}, amount=0.3).")
    if orig.grad is None:
        raise ValueError(f"{name}_orig has no gradient: run a forward and backward pass through the module first.")
    if rows < 1 or cols < 1:
        raise ValueError(f"rows and cols are how much of the tensor to draw, 1 or more, got {rows} and {cols}.")
    if len(axes) != 4:
        raise ValueError(f"need 4 axes (plt.subplots(1, 4)), got {len(axes)}.")
    if orig.dim() < 2:
        raise ValueError(f"draws a tensor of 2 or more dimensions, got {name}_orig of shape {tuple(orig.shape)}.")
    weight = getattr(module, name)  # what the forward pre-hook computed: orig ⊙ mask
    panels = [(orig, f"{name}_orig\nParameter: the optimizer\nupdates it"),
              (mask, f"{name}_mask\nbuffer of 0s and 1s,\nnot trained"),
              (weight, f"{name}\nplain tensor, recomputed\nby the forward pre-hook"),
              (orig.grad, f"{name}_orig.grad\n0 wherever the mask is 0")]
    for i, (ax, (tensor, title)) in enumerate(zip(axes, panels, strict=True)):
        shown = tensor.detach().float().cpu().flatten(1)[:rows, :cols].numpy()
        if i == 1:  # the mask: 0 grey like every zero, 1 green, and each entry written
            ax.imshow(shown, cmap=ListedColormap(["0.8", "#74c476"]), vmin=0, vmax=1)
            for (r, c), v in np.ndenumerate(shown):
                ax.text(c, r, f"{v:.0f}", ha="center", va="center", fontsize=9)
        else:
            limit = float(np.abs(shown).max()) or 1.0
            ax.imshow(np.ma.masked_equal(shown, 0.0), cmap=plt.get_cmap("RdBu_r").with_extremes(bad="0.8"),
                      vmin=-limit, vmax=limit)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        if i < 2:
            ax.text(1.1, 0.5, "⊙="[i], transform=ax.transAxes, ha="center", va="center", fontsize=16)
    total_rows, total_cols = orig.flatten(1).shape
    axes[0].set_ylabel("output channel" if rows >= total_rows else f"output channels 0–{rows - 1} of {total_rows}",
                       fontsize=9)
    axes[0].set_xlabel(f"its {total_cols} weights" if cols >= total_cols else f"its first {cols} of {total_cols} "
                       "weights", fontsize=9)
    axes[3].set_xlabel("grey: exactly 0", fontsize=9)


def draw_global_vs_uniform(table: Mapping[str, tuple[int, int]], amount: float, ax: Axes) -> None:
    """The share of each layer's weights pruned by global pruning (``table``: ``layer_sparsity`` of the globally
    pruned model) beside what pruning each layer by the same fraction ``amount`` would take.

    Raises:
        ValueError: if ``table`` is empty or holds more zeros than elements, or ``amount`` is not in (0, 1).
    """
    if not table or any(not 0 <= z <= n or n == 0 for z, n in table.values()):
        raise ValueError("table must map each layer to (zeros, elements) with 0 <= zeros <= elements: pass "
                         "lesson08.layer_sparsity(model).")
    if not 0 < amount < 1:
        raise ValueError(f"amount is the fraction pruned, between 0 and 1 (0.2 for 20 %), got {amount}.")
    x = np.arange(len(table))
    uniform = [100 * round(amount * n) / n for _, n in table.values()]  # what a float amount prunes per layer
    global_ = [100 * z / n for z, n in table.values()]
    ax.bar(x - 0.2, uniform, 0.4, color="0.7", label=f"each layer by {amount:.0%}")
    bars = ax.bar(x + 0.2, global_, 0.4, color="tab:blue", label=f"global {amount:.0%}")
    ax.bar_label(bars, [f"{g:.1f}" for g in global_], fontsize=9)
    ax.set_xticks(x, [f"{layer}\n{n:,} weights" for layer, (_, n) in table.items()], fontsize=9)
    ax.set_ylabel("weights pruned (%)", fontsize=10)
    ax.set_ylim(0, 1.2 * max(*global_, *uniform))
    ax.tick_params(axis="y", labelsize=9)
    ax.legend(fontsize=9, loc="upper left")
    ax.set_title("one magnitude threshold for all layers: the layers of small weights lose most", fontsize=10)


def draw_accuracy_vs_sparsity(levels: Sequence[float], one_shot: Sequence[float], fine_tuned: Sequence[float],
                              ax: Axes) -> None:
    """Test accuracy (fractions) against the sparsity levels, one-shot beside IMP with fine-tuning; both lists
    start with the dense model's accuracy (sparsity 0), drawn as a dashed line.

    Raises:
        ValueError: if the lists do not hold one accuracy more than ``levels`` (the dense one first), a
            level is not in (0, 1), or an accuracy is not in [0, 1].
    """
    if not levels or len(one_shot) != len(levels) + 1 or len(fine_tuned) != len(levels) + 1:
        raise ValueError(f"one_shot and fine_tuned hold the dense accuracy then one per level: "
                         f"{len(levels) + 1} values each, got {len(one_shot)} and {len(fine_tuned)}.")
    if not all(0 < s < 1 for s in levels):
        raise ValueError(f"levels are fractions of weights pruned, in (0, 1), got {list(levels)}.")
    if not all(0 <= a <= 1 for a in (*one_shot, *fine_tuned)):
        raise ValueError("accuracies are fractions in [0, 1] (cu.accuracy), not percentages.")
    x = [0.0, *(100 * s for s in levels)]
    ax.axhline(100 * one_shot[0], color="0.5", ls="--", lw=1, label="dense")
    ax.plot(x, [100 * a for a in one_shot], "o-", color="tab:red", label="one-shot, no fine-tuning")
    ax.plot(x, [100 * a for a in fine_tuned], "o-", color="tab:blue", label="IMP + fine-tuning")
    ax.set_xlabel("weights pruned (%)", fontsize=10)
    ax.set_ylabel("test accuracy (%)", fontsize=10)
    ax.tick_params(labelsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    ax.set_title("LeNet on Fashion-MNIST", fontsize=10)


# ---------------------------------------- exercise checks

def check_iterative_sparsity(answer: float | None, *, solution: bool = False) -> CheckResult:
    """Exercise 1: fraction of zeros of ``Linear(400, 120).weight`` after two ``l1_unstructured(amount=0.3)``."""
    fc1 = nn.Linear(400, 120)
    prune.l1_unstructured(fc1, "weight", amount=0.3)
    first = count_zeros(fc1.weight) / fc1.weight.numel()
    prune.l1_unstructured(fc1, "weight", amount=0.3)
    expected = count_zeros(fc1.weight) / fc1.weight.numel()
    return check_numbers(
        answer, [expected], names=["sparsity"], rtol=1e-3, solution=solution,
        hints=["pruning the same tensor a second time composes the two masks (section 4): work out which weights "
               "the second call takes its 30 % of, all 48 000 or only some of them"],
        why=[f"the second call prunes 30 % of the weights still alive, not of all of them, so the sparsity is "
             f"{first:g} + 0.3·(1 − {first:g}) = 1 − 0.7² = {expected:g}"],
    )


def _csr_bytes(rows: int, cols: int, nnz: int) -> int:
    """Bytes of a real float32 CSR tensor of shape (rows, cols) with ``nnz`` nonzeros."""
    dense = torch.zeros(rows, cols)
    dense.view(-1)[:nnz] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's one-time "CSR support is in beta" notice
        return tensor_bytes(dense.to_sparse_csr())


def check_csr_break_even(answer: int | None, *, solution: bool = False) -> CheckResult:
    """Exercise 2: the largest nnz for which CSR (int64 indices, float32 values) of a 120×400 matrix is
    smaller than the dense matrix."""
    rows, cols = 120, 400
    dense = rows * cols * torch.zeros(()).element_size()
    fixed = _csr_bytes(rows, cols, 0)                    # the row pointers
    per_nonzero = _csr_bytes(rows, cols, 1) - fixed      # one column index + one value
    expected = (dense - fixed - 1) // per_nonzero
    if not _csr_bytes(rows, cols, expected) < dense <= _csr_bytes(rows, cols, expected + 1):
        raise RuntimeError("PyTorch's CSR layout no longer costs a fixed size plus a constant per nonzero.")
    return check_numbers(
        answer, [expected], names=["largest nnz"], solution=solution,
        hints=["write CSR's size as a fixed part plus a cost per nonzero (section 8.2) and compare it with the "
               "dense float32 size; count the row pointers too, and make sure CSR is strictly smaller at your nnz"],
        why=[f"dense takes {rows}·{cols}·4 = {dense} bytes; CSR takes {fixed} bytes of row pointers "
             f"(({rows} + 1)·8) plus {per_nonzero} bytes per nonzero (8 for the column index, 4 for the value), "
             f"so CSR is smaller while {fixed} + {per_nonzero}·nnz < {dense}, a sparsity of about "
             f"{1 - expected / (rows * cols):.1%}: the largest nnz is {expected}"],
    )


def check_sliced_parameters(answer: Sequence[int] | None, *, solution: bool = False) -> CheckResult:
    """Exercise 3: parameters of the lecture's conv1 and conv2 after removing 3 of conv1's 6 output channels."""
    conv1, conv2 = nn.Conv2d(1, 6, 3), nn.Conv2d(6, 16, 3)
    kept = torch.arange(3)
    narrow1 = nn.Conv2d(1, len(kept), 3)
    narrow2 = nn.Conv2d(len(kept), conv2.out_channels, 3)
    with torch.no_grad():
        narrow1.weight.copy_(conv1.weight[kept])
        narrow2.weight.copy_(conv2.weight[:, kept])
    expected = [sum(p.numel() for p in m.parameters()) for m in (narrow1, narrow2)]
    return check_numbers(
        answer, expected, names=["conv1 parameters", "conv2 parameters"], solution=solution,
        hints=["count the weights of one kept filter from conv1's shape (section 1), then the kept filters, and "
               "do not forget their biases",
               "conv2 keeps its output channels, but its filters read conv1's outputs: section 8.3 says what conv2 "
               "loses when conv1's channels are removed"],
        why=[f"conv1 keeps 3 filters of 1·3·3 weights and 3 biases: 3·9 + 3 = {expected[0]} parameters",
             "conv2 keeps all 16 output channels but only 3 input channels: "
             f"16·3·3·3 + 16 = {expected[1]} parameters"],
    )
