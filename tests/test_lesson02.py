"""Lesson 02: the optimizer plumbing (course_utils.optimizers) and the exercise checks."""

from __future__ import annotations

import pytest
import torch

from course_utils.checks import NO_ANSWER
from course_utils.lessons import lesson02
from course_utils.lessons.lesson02 import (
    TrainResult,
    check_problem,
    compare_with_torch,
    train_and_evaluate,
)


def rmsprop(p, g, state, t, lr=0.01, gamma=0.9, eps=1e-8):
    if t == 1:
        state["E_g2"] = torch.zeros_like(p)
    state["E_g2"] = gamma * state["E_g2"] + (1 - gamma) * g * g
    p -= lr * g / (state["E_g2"].sqrt() + eps)


def rmsprop_momentum(p, g, state, t, lr=0.01, gamma=0.9, eps=1e-8, mu=0.9):
    if t == 1:
        state["E_g2"], state["b"] = torch.zeros_like(p), torch.zeros_like(p)
    state["E_g2"] = gamma * state["E_g2"] + (1 - gamma) * g * g
    state["b"] = mu * state["b"] + g / (state["E_g2"].sqrt() + eps)
    p -= lr * state["b"]


def rmsprop_momentum_lecture_form(p, g, state, t, lr=0.01, gamma=0.9, eps=1e-8, mu=0.9):
    """The learning rate inside the velocity, as in the lecture's momentum: the same with a constant lr."""
    if t == 1:
        state["E_g2"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
    state["E_g2"] = gamma * state["E_g2"] + (1 - gamma) * g * g
    state["v"] = mu * state["v"] + lr * g / (state["E_g2"].sqrt() + eps)
    p -= state["v"]


def sgd(p, g, state, t, lr=0.1):
    p -= lr * g


# --- compare_with_torch -------------------------------------------------------------------------

def test_a_correct_rule_agrees_to_rounding():
    model, batches = check_problem()
    got = compare_with_torch(sgd, lambda ps: torch.optim.SGD(ps, lr=0.1), model, batches, steps=6)
    assert got.moved and len(got.diffs) == 6 and len(got.losses) == 6
    assert got.max_abs_diff < 1e-12 and got.first_step_above(1e-12) is None
    assert got.losses[-1] < got.losses[0]


def test_a_wrong_rule_is_located_and_the_model_is_untouched():
    model, batches = check_problem()
    before = [p.detach().clone() for p in model.parameters()]
    got = compare_with_torch(sgd, lambda ps: torch.optim.SGD(ps, lr=0.2), model, batches, steps=3)
    assert got.first_step_above(1e-6) == 1 and got.max_abs_diff > 1e-3
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


def test_states_of_both_sides_are_returned():
    model, batches = check_problem()
    got = compare_with_torch(rmsprop, lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.9),
                             model, batches, steps=3)
    assert torch.allclose(got.states[0]["E_g2"], got.torch_states[0]["square_avg"])


def test_a_rule_that_rebinds_p_does_not_move():
    def rebinding(p, g, state, t):
        p = p - 0.1 * g  # noqa: F841 (the mistake under test)

    model, batches = check_problem()
    assert not compare_with_torch(rebinding, lambda ps: torch.optim.SGD(ps, lr=0.1), model, batches, steps=2).moved


@pytest.mark.parametrize("kwargs", [{"steps": 0}, {"steps": 2, "batches": []}])
def test_compare_rejects_bad_arguments(kwargs):
    model, batches = check_problem()
    batches = kwargs.pop("batches", batches)
    with pytest.raises(ValueError):
        compare_with_torch(sgd, lambda ps: torch.optim.SGD(ps, lr=0.1), model, batches, **kwargs)
    with pytest.raises(TypeError):
        compare_with_torch("adam", lambda ps: torch.optim.SGD(ps, lr=0.1), model, batches, steps=1)


def test_check_problem_is_reproducible_and_validated():
    (m1, b1), (m2, b2) = check_problem(seed=3), check_problem(seed=3)
    assert all(torch.equal(x1, x2) and torch.equal(y1, y2) for (x1, y1), (x2, y2) in zip(b1, b2))
    assert all(torch.equal(p, q) for p, q in zip(m1.parameters(), m2.parameters()))
    assert b1[0][0].dtype == torch.float64 and len(b1) == 4
    with pytest.raises(ValueError):
        check_problem(n_classes=1)


# --- training loop --------------------------------------------------------------------------------

def toy_classification(n: int = 256) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=gen)
    y = (x[:, 0] > 0).long()
    return (x[: n // 2], y[: n // 2]), (x[n // 2:], y[n // 2:])


def test_train_and_evaluate_records_every_step_and_learns():
    train, test = toy_classification()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    result = train_and_evaluate(model, torch.optim.Adam(model.parameters(), lr=0.05), train, test,
                                epochs=3, batch_size=32)
    assert isinstance(result, TrainResult) and len(result.losses) == 3 * 4 and result.seconds > 0
    assert result.test_accuracy > 0.9
    assert result.final_loss(window=4) < result.losses[0]
    with pytest.raises(ValueError):
        result.final_loss(window=0)


def test_train_and_evaluate_is_reproducible():
    train, test = toy_classification()
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        runs.append(train_and_evaluate(model, torch.optim.SGD(model.parameters(), lr=0.1), train, test,
                                       epochs=2, batch_size=16, seed=5).losses)
    assert runs[0] == runs[1]


@pytest.mark.parametrize("kwargs", [{"epochs": 0}, {"batch_size": 0}])
def test_train_and_evaluate_validates(kwargs):
    train, test = toy_classification()
    model = torch.nn.Linear(4, 2)
    with pytest.raises(ValueError):
        train_and_evaluate(model, torch.optim.SGD(model.parameters(), lr=0.1), train, test,
                           **{"epochs": 1, "batch_size": 8, **kwargs})


# --- exercise checks --------------------------------------------------------------------------------

def test_rmsprop_check_right_wrong_and_none():
    assert lesson02.check_rmsprop_momentum(None) is NO_ANSWER
    assert lesson02.check_rmsprop_momentum(rmsprop_momentum)
    assert lesson02.check_rmsprop_momentum(rmsprop_momentum_lecture_form)
    assert "plain RMSprop" in repr(lesson02.check_rmsprop_momentum(rmsprop))
    verdict = lesson02.check_rmsprop_momentum(sgd)
    assert not verdict and "differ from torch.optim.RMSprop's" in repr(verdict) and "after step 1" in repr(verdict)


def test_rmsprop_check_names_typical_mistakes():
    def eps_inside(p, g, state, t, lr=0.01, gamma=0.9, eps=1e-8, mu=0.9):
        state["E_g2"] = gamma * state.get("E_g2", 0.0) + (1 - gamma) * g * g
        state["b"] = mu * state.get("b", 0.0) + g / (state["E_g2"] + eps).sqrt()
        p -= lr * state["b"]

    def no_one_minus(p, g, state, t, lr=0.01, gamma=0.9, eps=1e-8, mu=0.9):
        state["E_g2"] = gamma * state.get("E_g2", 0.0) + g * g
        state["b"] = mu * state.get("b", 0.0) + g / (state["E_g2"].sqrt() + eps)
        p -= lr * state["b"]

    assert "inside the square root" in repr(lesson02.check_rmsprop_momentum(eps_inside))
    assert "(1 − γ)" in repr(lesson02.check_rmsprop_momentum(no_one_minus))


def test_rmsprop_check_explains_non_functions_errors_and_rebinding():
    assert "pass your function itself" in repr(lesson02.check_rmsprop_momentum(0.01))

    def broken(p, g, state, t):
        raise KeyError("E_g2")

    def rebinding(p, g, state, t):
        p = p - 0.01 * g  # noqa: F841 (the mistake under test)

    assert "raised KeyError" in repr(lesson02.check_rmsprop_momentum(broken))
    assert "in place" in repr(lesson02.check_rmsprop_momentum(rebinding))


def test_divergence_threshold():
    assert lesson02.check_divergence_threshold(None) is NO_ANSWER
    assert lesson02.check_divergence_threshold(0.2)
    verdict = lesson02.check_divergence_threshold(2.0)  # 2/λ_min: the wrong eigenvalue
    assert not verdict and "2/λ_max = 0.2" in repr(verdict)


def test_adam_first_step():
    assert lesson02.check_adam_first_step(None) is NO_ANSWER
    assert lesson02.check_adam_first_step((0.001, 0.00316))
    verdict = lesson02.check_adam_first_step((0.001, 0.001))
    assert not verdict and "without" in repr(verdict) and "with bias correction:" not in repr(verdict)
