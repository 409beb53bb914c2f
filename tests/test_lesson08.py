"""Lesson 08 (pruning): the exercise checks and the course_utils.sparsity helpers."""

import warnings

import pytest
import torch
from torch import nn
from torch.nn.utils import prune

from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.lessons import lesson08

CHECKS = [lesson08.check_iterative_sparsity, lesson08.check_csr_break_even, lesson08.check_sliced_parameters]


@pytest.mark.parametrize("check", CHECKS)
def test_no_answer_asks_for_one(check):
    assert check(None) is NO_ANSWER


@pytest.mark.parametrize("check", CHECKS)
def test_solution_is_shown_only_when_asked(check):
    shown = check(None, solution=True)
    assert not shown and shown.is_solution and repr(shown).startswith("📖 Solution: ")


def test_iterative_sparsity_compounds():
    assert lesson08.check_iterative_sparsity(0.51)
    verdict = lesson08.check_iterative_sparsity(0.6)  # 0.3 + 0.3 of everything
    assert not verdict and "composes the two masks (section 4)" in repr(verdict) and ASK_FOR_SOLUTION in repr(verdict)
    assert "still alive" not in repr(verdict) and "0.51" not in repr(verdict)
    shown = lesson08.check_iterative_sparsity(0.6, solution=True)
    assert "still alive" in repr(shown) and repr(shown).endswith("= 1 − 0.7² = 0.51.")


def test_csr_break_even():
    assert lesson08.check_csr_break_even(15919)
    verdict = lesson08.check_csr_break_even(16000)  # one third of 48000, forgetting the row pointers
    assert not verdict and "count the row pointers too" in repr(verdict)
    assert "968" not in repr(verdict) and "12 bytes per nonzero" not in repr(verdict)
    shown = repr(lesson08.check_csr_break_even(None, solution=True))
    assert "968" in shown and "12 bytes per nonzero" in shown and shown.endswith("the largest nnz is 15919.")


def test_sliced_parameters():
    assert lesson08.check_sliced_parameters((30, 448))
    verdict = lesson08.check_sliced_parameters((30, 880))  # conv2 left untouched
    assert not verdict and "section 8.3 says what conv2 loses" in repr(verdict)
    assert "conv1 parameters" not in repr(verdict) and "only 3 input channels" not in repr(verdict)
    assert "only 3 input channels" in repr(lesson08.check_sliced_parameters((30, 880), solution=True))
    assert "expected 2 number(s)" in repr(lesson08.check_sliced_parameters(30))


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 4 * 4, 3))


def test_count_zeros_and_layer_sparsity_see_the_mask():
    net = small_net()
    prune.l1_unstructured(net[2], "weight", amount=10)
    assert lesson08.count_zeros(torch.tensor([0.0, 1.0, -0.0, 2.0])) == 2
    assert lesson08.layer_sparsity(net) == {"0": (0, 18), "2": (10, 96)}
    assert lesson08.global_sparsity(net) == pytest.approx(10 / 114)
    table = lesson08.sparsity_table(net)
    assert table.splitlines()[-1].split() == ["total", "10", "114", "8.77%"]


def test_sparsity_rejects_bad_input():
    with pytest.raises(TypeError):
        lesson08.count_zeros([0, 1])
    with pytest.raises(ValueError, match="dense"):
        lesson08.count_zeros(torch.eye(2).to_sparse())
    with pytest.raises(ValueError, match="no Conv2d or Linear"):
        lesson08.layer_sparsity(nn.ReLU())
    with pytest.raises(TypeError):
        lesson08.layer_sparsity("model")


def test_tensor_bytes_of_each_layout():
    w = torch.zeros(4, 5)
    w[0, 1], w[2, 3], w[3, 0] = 1.0, 2.0, 3.0
    assert lesson08.tensor_bytes(w) == 4 * 20
    assert lesson08.tensor_bytes(w.to_sparse()) == 3 * (2 * 8 + 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CSR support is in beta"
        assert lesson08.tensor_bytes(w.to_sparse_csr()) == 5 * 8 + 3 * (8 + 4)
    assert lesson08.tensor_bytes(w.half()) == 2 * 20
    with pytest.raises(ValueError, match="supports"):
        lesson08.tensor_bytes(w.to_sparse_csc())
    with pytest.raises(TypeError):
        lesson08.tensor_bytes(3)


def test_state_dict_grows_with_masks():
    net = small_net()
    before = lesson08.state_dict_bytes(net.state_dict())
    assert before == 4 * (18 + 2 + 96 + 3)
    prune.random_unstructured(net[2], "weight", amount=0.5)
    assert lesson08.state_dict_bytes(net.state_dict()) == before + 4 * 96
    prune.remove(net[2], "weight")
    assert lesson08.state_dict_bytes(net.state_dict()) == before
