"""Lesson 02: the optimizer plumbing (course_utils.optimizers) and the exercise checks."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.lessons import lesson02
from course_utils.lessons.lesson02 import (
    check_problem,
    compare_with_torch,
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


# --- exercise checks --------------------------------------------------------------------------------

def test_rmsprop_check_right_wrong_and_none():
    assert lesson02.check_rmsprop_momentum(None) is NO_ANSWER
    assert lesson02.check_rmsprop_momentum(rmsprop_momentum)
    assert lesson02.check_rmsprop_momentum(rmsprop_momentum_lecture_form)
    assert "plain RMSprop" in repr(lesson02.check_rmsprop_momentum(rmsprop))
    verdict = lesson02.check_rmsprop_momentum(sgd)
    assert not verdict and "differ from torch.optim.RMSprop's" in repr(verdict) and "after step 1" in repr(verdict)
    assert "section 3's RMSprop" in repr(verdict) and repr(verdict).endswith(ASK_FOR_SOLUTION)
    assert "(1 - gamma)" not in repr(verdict)  # the worked solution stays hidden


def test_rmsprop_check_shows_the_solution_only_when_asked():
    for answer in (None, sgd, rmsprop_momentum):
        shown = lesson02.check_rmsprop_momentum(answer, solution=True)
        assert not shown and shown.is_solution and repr(shown).startswith("📖 Solution: ")
        assert "(1 - gamma) * g * g" in repr(shown) and "p -= lr * state[\"b\"]" in repr(shown)


def test_rmsprop_solution_passes_its_own_check():
    def from_the_solution(p, g, state, t, lr=0.01, gamma=0.9, eps=1e-8, mu=0.9):
        state["E_g2"] = gamma * state.get("E_g2", 0) + (1 - gamma) * g * g
        state["b"] = mu * state.get("b", 0) + g / (state["E_g2"].sqrt() + eps)
        p -= lr * state["b"]

    assert "state.get(\"E_g2\", 0) + (1 - gamma) * g * g" in lesson02.RMSPROP_SOLUTION
    assert lesson02.check_rmsprop_momentum(from_the_solution)


def test_rmsprop_check_names_typical_mistakes():
    def eps_inside(p, g, state, t, lr=0.01, gamma=0.9, eps=1e-8, mu=0.9):
        state["E_g2"] = gamma * state.get("E_g2", 0.0) + (1 - gamma) * g * g
        state["b"] = mu * state.get("b", 0.0) + g / (state["E_g2"] + eps).sqrt()
        p -= lr * state["b"]

    def no_one_minus(p, g, state, t, lr=0.01, gamma=0.9, eps=1e-8, mu=0.9):
        state["E_g2"] = gamma * state.get("E_g2", 0.0) + g * g
        state["b"] = mu * state.get("b", 0.0) + g / (state["E_g2"].sqrt() + eps)
        p -= lr * state["b"]

    def no_sqrt(p, g, state, t, lr=0.01, gamma=0.9, eps=1e-8, mu=0.9):
        state["E_g2"] = gamma * state.get("E_g2", 0.0) + (1 - gamma) * g * g
        state["b"] = mu * state.get("b", 0.0) + g / (state["E_g2"] + eps)
        p -= lr * state["b"]

    for rule, hint in ((eps_inside, "inside the square root"), (no_one_minus, "adds the whole g²"),
                       (no_sqrt, "root mean square"), (rmsprop, "plain RMSprop")):
        verdict = lesson02.check_rmsprop_momentum(rule)
        assert not verdict and hint in repr(verdict) and repr(verdict).endswith(ASK_FOR_SOLUTION)
        assert "√E[g²] + ε" not in repr(verdict)  # names the mistake, not the corrected formula


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
    assert not verdict and "α_max: you have 2; hint: section 2" in repr(verdict)
    assert "which eigenvalue sets the limit?" in repr(verdict) and repr(verdict).endswith(ASK_FOR_SOLUTION)
    assert "2/λ_max" not in repr(verdict) and "0.2" not in repr(verdict)
    for answer in (None, 2.0, 0.2):
        shown = lesson02.check_divergence_threshold(answer, solution=True)
        assert shown.is_solution and "eigenvalues 1 and 10" in repr(shown) and "2/λ_max = 0.2." in repr(shown)


def test_adam_first_step():
    assert lesson02.check_adam_first_step(None) is NO_ANSWER
    assert lesson02.check_adam_first_step((0.001, 0.00316))
    verdict = lesson02.check_adam_first_step((0.001, 0.001))
    assert not verdict and "without: you have 0.001; hint: the same first step" in repr(verdict)
    assert "with bias correction:" not in repr(verdict)  # only the wrong item gets a hint
    assert "0.00316" not in repr(verdict) and "√(1 − β₂)·|g|" not in repr(verdict)
    shown = lesson02.check_adam_first_step(None, solution=True)
    assert shown.is_solution and "m̂ = m/(1 − β₁) = g" in repr(shown) and "√(1 − β₂)·|g| = 0.0158114" in repr(shown)
    assert "α·m/(√v + ε) = 0.00316" in repr(shown)


# --- training several copies side by side ------------------------------------------------------------

def small_net(seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 5), torch.nn.Sigmoid(), torch.nn.Linear(5, 4),
                               torch.nn.ReLU(), torch.nn.Linear(4, 3)).double()


def test_side_by_side_trains_like_separate_loops():
    makers = [lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: torch.optim.Adam(ps, lr=0.01),
              lambda ps: torch.optim.Adagrad(ps, lr=0.05)]
    separate = [small_net() for _ in makers]
    runs = lesson02.SideBySide([small_net() for _ in makers])
    separate_opts = [make(m.parameters()) for make, m in zip(makers, separate)]
    stacked_opts = [make(runs.run_parameters(k)) for k, make in enumerate(makers)]
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 6, generator=gen, dtype=torch.float64), torch.randint(3, (40,), generator=gen)
    for idx in lesson02.minibatches(40, 8, 7, seed=1):
        for model, opt in zip(separate, separate_opts):
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        logits = runs(x[idx])
        assert logits.shape == (3, 8, 3)
        losses = F.cross_entropy(logits.flatten(0, 1), y[idx].repeat(3), reduction="none").view(3, -1).mean(1)
        runs.zero_grad(set_to_none=True)
        losses.sum().backward()
        runs.split_grads()
        for opt in stacked_opts:
            opt.step()
    for k, model in enumerate(separate):
        ours = runs.run_parameters(k)
        assert [p.shape for p in ours] == [p.shape for p in model.parameters()]
        assert max((p - q).abs().max().item() for p, q in zip(model.parameters(), ours)) < 1e-12
    assert len(runs.preactivations) == 3 and runs.preactivations[1].shape == (3, 8, 4)


def test_side_by_side_eval_and_validation():
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.zero_()
        lin.bias.copy_(torch.tensor([0.0, 1.0]))
    runs = lesson02.SideBySide([lin, copy.deepcopy(lin)])
    x, y = torch.zeros(4, 2), torch.tensor([1, 1, 1, 0])
    loss, acc = lesson02.side_by_side_eval(runs, x, y, chunk=3)
    # logits (0, 1) for every input: predicted class 1, right 3 times of 4; loss ln(1 + e) for class 0,
    # ln(1 + e^-1) for class 1: (3 · 0.313262 + 1.313262) / 4 = 0.563262
    assert acc.tolist() == [0.75, 0.75]
    assert loss.tolist() == pytest.approx([0.563262, 0.563262], abs=1e-6)
    with pytest.raises(ValueError, match="same architecture"):
        lesson02.SideBySide([small_net(), torch.nn.Sequential(torch.nn.Linear(6, 3))])
    with pytest.raises(ValueError, match="expected Flatten"):
        lesson02.SideBySide([torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.Sigmoid(), torch.nn.Tanh())])
    with pytest.raises(ValueError):
        lesson02.SideBySide([])


def test_minibatches_are_full_reshuffled_and_reproducible():
    batches = list(lesson02.minibatches(10, 4, 5, seed=0))
    assert [len(b) for b in batches] == [4] * 5            # 10 // 4 = 2 full batches an epoch, the rest dropped
    epoch1, epoch2 = torch.cat(batches[:2]), torch.cat(batches[2:4])
    assert len(set(epoch1.tolist())) == 8 and not torch.equal(epoch1, epoch2)
    assert all(torch.equal(a, b) for a, b in zip(batches, lesson02.minibatches(10, 4, 5, seed=0)))
    with pytest.raises(ValueError):
        next(lesson02.minibatches(3, 4, 1))
