"""Lesson 08 (pruning): count zeros, measure bytes, and check the exercises.

The pruning calls themselves (``torch.nn.utils.prune``) stay in the notebook; this module only
answers "how sparse is it?" and "how many bytes does it take?"::

    from course_utils.lessons import lesson08
    print(lesson08.sparsity_table(model))
    lesson08.tensor_bytes(weight.to_sparse_csr())

The exercise checks of the lesson follow its plumbing.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import torch
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
