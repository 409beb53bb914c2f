"""course_utils.memory: bytes of tensors, what autograd saves for backward, the peak of a block."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils.memory import peak_memory, saved_for_backward, tensor_bytes


def test_tensor_bytes_counts_each_storage_once():
    a = torch.zeros(10, 10)                                          # 400 B
    assert tensor_bytes([a, a[2:], a.t(), torch.zeros(3, dtype=torch.float64)]) == 400 + 24
    assert tensor_bytes([]) == 0
    with pytest.raises(TypeError, match="tensors"):
        tensor_bytes([a, 3])


def test_saved_for_backward_excludes_what_exists_anyway():
    layer = nn.Linear(8, 4)
    x = torch.randn(5, 8)
    with saved_for_backward(exclude=[*layer.parameters(), x]) as saved:
        torch.relu(layer(x)).sum()
    assert (saved.bytes, saved.count) == (5 * 4 * 4, 1)             # only the ReLU's output
    with saved_for_backward() as everything:
        torch.relu(layer(x)).sum()
    assert everything.bytes == saved.bytes + 5 * 8 * 4  # + the input (not the weight: x needs no gradient)
    with pytest.raises(TypeError, match="exclude"):
        with saved_for_backward(exclude=[layer]):
            pass


def test_peak_memory_sees_temporaries_not_views_or_in_place_results():
    base = torch.ones(1000)                                          # created before: not counted
    with peak_memory() as peak:
        temporary = base * 2                                          # 4000 B
        view = temporary[:10]
        base.add_(1)                                                  # in place: no new memory
        del temporary, view
        kept = base + 1                                               # 4000 B, alive at the end
    assert (peak.bytes, peak.current) == (4000, 4000)
    assert kept.shape == (1000,)


def test_peak_memory_through_backward():
    layer = nn.Linear(100, 100)
    x = torch.randn(50, 100, requires_grad=True)
    loss = layer(x).square().sum()
    with peak_memory() as peak:
        loss.backward()
    grads = tensor_bytes([layer.weight.grad, layer.bias.grad, x.grad])
    assert peak.current == grads and peak.bytes >= grads


def test_peak_memory_is_frozen_when_the_block_ends():
    with peak_memory() as peak:
        kept = torch.ones(100)
    del kept                                                          # freed after the block: not counted
    assert (peak.bytes, peak.current) == (400, 400)
