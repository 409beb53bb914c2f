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


def pruned_conv() -> nn.Conv2d:
    """A 2-channel conv with one channel pruned away and one weight of the other, and a gradient."""
    torch.manual_seed(0)
    conv = nn.Conv2d(1, 2, 2)
    prune.custom_from_mask(conv, "weight", mask=torch.tensor([[[[1.0, 0.0], [1.0, 1.0]]], [[[0.0, 0.0], [0.0, 0.0]]]]))
    conv(torch.randn(3, 1, 4, 4)).sum().backward()
    return conv


def test_the_pruned_parameter_picture_draws_orig_mask_weight_and_gradient():
    import matplotlib.pyplot as plt

    conv = pruned_conv()
    fig, axes = plt.subplots(1, 4)
    lesson08.draw_pruned_parameter(conv, axes)
    titles = [ax.get_title() for ax in axes]
    assert titles[0].startswith("weight_orig\nParameter: the optimizer") and "forward pre-hook" in titles[2]
    assert titles[3] == "weight_orig.grad\n0 wherever the mask is 0"
    assert [t.get_text() for t in axes[1].texts] == ["1", "0", "1", "1", "0", "0", "0", "0", "="]  # row by row
    assert [t.get_text() for t in axes[0].texts] == ["⊙"] and not axes[2].texts
    drawn = [ax.images[0].get_array() for ax in axes]
    assert drawn[0].shape == (2, 4) and drawn[2].mask.tolist() == [[False, True, False, False], [True] * 4]
    assert drawn[3].mask[1].all() and not drawn[3].mask[0, 0]  # the gradient: zero (grey) where the mask is 0
    assert axes[0].get_ylabel() == "output channel" and axes[0].get_xlabel() == "its 4 weights"
    fig2, axes2 = plt.subplots(1, 4)
    lesson08.draw_pruned_parameter(conv, axes2, rows=1, cols=3)
    assert axes2[0].images[0].get_array().shape == (1, 3) and axes2[0].get_xlabel() == "its first 3 of 4 weights"
    plt.close("all")


def test_the_pruned_parameter_picture_asks_for_a_pruned_module_with_a_gradient():
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4)
    with pytest.raises(ValueError, match="not pruned"):
        lesson08.draw_pruned_parameter(nn.Linear(3, 2), axes)
    fresh = nn.Linear(3, 2)
    prune.random_unstructured(fresh, "weight", amount=0.5)
    with pytest.raises(ValueError, match="backward pass"):
        lesson08.draw_pruned_parameter(fresh, axes)
    with pytest.raises(ValueError, match="need 4 axes"):
        lesson08.draw_pruned_parameter(pruned_conv(), axes[:3])
    plt.close(fig)


def test_the_global_pruning_picture_puts_each_layer_s_share_beside_the_uniform_amount():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson08.draw_global_vs_uniform({"conv1": (1, 54), "fc1": (30, 100)}, 0.2, ax)
    uniform, global_ = ax.containers
    assert [b.get_height() for b in uniform] == pytest.approx([100 * 11 / 54, 20.0])  # round(0.2 · 54) = 11
    assert [b.get_height() for b in global_] == pytest.approx([100 / 54, 30.0])
    assert [t.get_text() for t in ax.texts] == ["1.9", "30.0"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["conv1\n54 weights", "fc1\n100 weights"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["each layer by 20%", "global 20%"]
    with pytest.raises(ValueError, match="between 0 and 1"):
        lesson08.draw_global_vs_uniform({"fc1": (30, 100)}, 20, ax)
    with pytest.raises(ValueError, match="layer_sparsity"):
        lesson08.draw_global_vs_uniform({"fc1": (130, 100)}, 0.2, ax)
    plt.close(fig)


def test_the_accuracy_picture_draws_both_curves_from_the_dense_accuracy():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson08.draw_accuracy_vs_sparsity([0.5, 0.9], [0.8, 0.7, 0.2], [0.8, 0.82, 0.75], ax)
    dense, one_shot, imp = ax.lines
    assert list(dense.get_ydata()) == pytest.approx([80.0, 80.0])
    assert list(one_shot.get_xdata()) == pytest.approx([0, 50, 90])
    assert list(one_shot.get_ydata()) == pytest.approx([80, 70, 20])
    assert list(imp.get_ydata()) == pytest.approx([80, 82, 75])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["dense", "one-shot, no fine-tuning",
                                                                  "IMP + fine-tuning"]
    assert ax.get_xlabel() == "weights pruned (%)" and ax.get_ylabel() == "test accuracy (%)"
    with pytest.raises(ValueError, match="3 values each"):
        lesson08.draw_accuracy_vs_sparsity([0.5, 0.9], [0.8, 0.7], [0.8, 0.82, 0.75], ax)
    with pytest.raises(ValueError, match="not percentages"):
        lesson08.draw_accuracy_vs_sparsity([0.5, 0.9], [80, 70, 20], [80, 82, 75], ax)
    plt.close(fig)
