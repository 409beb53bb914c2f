"""Exercise checks for lesson 08 (pruning). Expected values are computed here, with PyTorch itself."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.utils import prune

from course_utils.checks import CheckResult, check_numbers
from course_utils.sparsity import count_zeros, tensor_bytes


def check_iterative_sparsity(answer: float | None) -> CheckResult:
    """Exercise 1: fraction of zeros of ``Linear(400, 120).weight`` after two ``l1_unstructured(amount=0.3)``."""
    fc1 = nn.Linear(400, 120)
    prune.l1_unstructured(fc1, "weight", amount=0.3)
    first = count_zeros(fc1.weight) / fc1.weight.numel()
    prune.l1_unstructured(fc1, "weight", amount=0.3)
    expected = count_zeros(fc1.weight) / fc1.weight.numel()
    return check_numbers(
        answer, [expected], names=["sparsity"], rtol=1e-3,
        why=[f"the second call prunes 30 % of the weights still alive, not of all of them: "
             f"{first:g} + 0.3·(1 − {first:g}) = 1 − 0.7² = {expected:g}"],
    )


def _csr_bytes(rows: int, cols: int, nnz: int) -> int:
    """Bytes of a real float32 CSR tensor of shape (rows, cols) with ``nnz`` nonzeros."""
    dense = torch.zeros(rows, cols)
    dense.view(-1)[:nnz] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's one-time "CSR support is in beta" notice
        return tensor_bytes(dense.to_sparse_csr())


def check_csr_break_even(answer: int | None) -> CheckResult:
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
        answer, [expected], names=["largest nnz"],
        why=[f"dense takes {rows}·{cols}·4 = {dense} bytes; CSR takes {fixed} bytes of row pointers "
             f"(({rows} + 1)·8) plus {per_nonzero} bytes per nonzero (8 for the column index, 4 for the value), "
             f"so {fixed} + {per_nonzero}·nnz < {dense} holds up to nnz = {expected} "
             f"(sparsity {1 - expected / (rows * cols):.2%})"],
    )


def check_sliced_parameters(answer: Sequence[int] | None) -> CheckResult:
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
        answer, expected, names=["conv1 parameters", "conv2 parameters"],
        why=[f"conv1 keeps 3 filters of 1·3·3 weights and 3 biases: 3·9 + 3 = {expected[0]}",
             f"conv2 keeps all 16 output channels but only 3 input channels: 16·3·3·3 + 16 = {expected[1]}"],
    )
