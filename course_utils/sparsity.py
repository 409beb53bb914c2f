"""Counting zeros and measuring bytes, for the pruning lesson (08).

The pruning calls themselves (``torch.nn.utils.prune``) stay in the notebook; this module only
answers "how sparse is it?" and "how many bytes does it take?"::

    from course_utils import sparsity
    print(sparsity.sparsity_table(model))
    sparsity.tensor_bytes(weight.to_sparse_csr())
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

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
