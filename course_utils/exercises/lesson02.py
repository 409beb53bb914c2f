"""Exercise checks for lesson 02 (gradient-descent optimizers). Expected values are computed here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from course_utils.checks import NO_ANSWER, CheckResult, check_numbers
from course_utils.optimizers import UpdateRule, check_problem, compare_with_torch

# Exercise 1: the hyperparameters of the student's RMSprop with momentum, and how closely it must follow torch.
RMSPROP_LR, RMSPROP_GAMMA, RMSPROP_EPS, RMSPROP_MOMENTUM = 0.01, 0.9, 1e-8, 0.9
RMSPROP_STEPS, RMSPROP_TOL = 10, 1e-10

# Exercise 2: the quadratic f(θ) = ½ θᵀAθ of the lesson's section 2 (the problem, not the answer).
QUADRATIC_A = ((5.5, 4.5), (4.5, 5.5))

# Exercise 3: Adam's hyperparameters and the gradient of the first step.
ADAM_LR, ADAM_BETAS, ADAM_EPS, ADAM_GRAD = 1e-3, (0.9, 0.999), 1e-8, 0.5


def _rmsprop_variant(eps_inside: bool = False, no_one_minus: bool = False, no_sqrt: bool = False,
                     no_momentum: bool = False) -> UpdateRule:
    """The right rule, RMSprop with momentum (no flags), or one with a typical mistake."""

    def rule(p: torch.Tensor, g: torch.Tensor, state: dict[str, Any], t: int) -> None:
        e = state.get("E_g2", torch.zeros_like(p))
        e = RMSPROP_GAMMA * e + (1.0 if no_one_minus else 1 - RMSPROP_GAMMA) * g * g
        state["E_g2"] = e
        if no_sqrt:
            denom = e + RMSPROP_EPS
        elif eps_inside:
            denom = (e + RMSPROP_EPS).sqrt()
        else:
            denom = e.sqrt() + RMSPROP_EPS
        if no_momentum:
            p -= RMSPROP_LR * g / denom
            return
        state["b"] = RMSPROP_MOMENTUM * state.get("b", torch.zeros_like(p)) + g / denom
        p -= RMSPROP_LR * state["b"]

    return rule


_RMSPROP_MISTAKES = {
    "eps_inside": "you put ε inside the square root, √(E[g²] + ε) (Ruder's form); torch.optim.RMSprop adds it "
                  "outside, √E[g²] + ε. Close, but not the same update",
    "no_one_minus": "your running average adds g² without the factor (1 − γ): E[g²] = γE[g²] + (1 − γ)g²",
    "no_sqrt": "you divide by E[g²] instead of its square root (the root mean square of the gradient)",
    "no_momentum": "that is plain RMSprop: add the momentum buffer b = μb + g/(√E[g²] + ε) and step θ -= α·b",
}


def check_rmsprop_momentum(rule: UpdateRule | None) -> CheckResult:
    """Exercise 1: a function ``rule(p, g, state, t)`` implementing RMSprop with momentum (lr = 0.01,
    γ = 0.9, ε = 1e-8, μ = 0.9), run beside ``torch.optim.RMSprop(lr=0.01, alpha=0.9, eps=1e-8, momentum=0.9)``."""
    if rule is None:
        return NO_ANSWER
    if not callable(rule):
        return CheckResult(False, f"pass your function itself (answer_1 = my_rmsprop), got {type(rule).__name__}.")

    def torch_rmsprop(params: Any) -> torch.optim.Optimizer:
        return torch.optim.RMSprop(params, lr=RMSPROP_LR, alpha=RMSPROP_GAMMA, eps=RMSPROP_EPS,
                                   momentum=RMSPROP_MOMENTUM)

    model, batches = check_problem(seed=2)
    try:
        got = compare_with_torch(rule, torch_rmsprop, model, batches, steps=RMSPROP_STEPS)
    except Exception as exc:  # the student's code may fail in any way: report it as the reason
        return CheckResult(False, f"your function raised {type(exc).__name__}: {exc}")
    if not got.moved:
        return CheckResult(False, "the parameters did not change: update p in place (p -= ... or p.copy_(...)), "
                                  "since rebinding the name p inside the function changes nothing outside.")
    if got.max_abs_diff <= RMSPROP_TOL:
        return CheckResult(True, f"your rule follows torch.optim.RMSprop(momentum=0.9) to "
                                 f"{got.max_abs_diff:.1e} over {RMSPROP_STEPS} steps: E[g²] = γE[g²] + (1 − γ)g², "
                                 f"b = μb + g/(√E[g²] + ε), θ -= α·b.")
    for flag, why in _RMSPROP_MISTAKES.items():
        mistaken = compare_with_torch(_rmsprop_variant(**{flag: True}), torch_rmsprop, model, batches,
                                      steps=RMSPROP_STEPS)
        if max(abs(a - b) for a, b in zip(mistaken.losses, got.losses)) < 1e-12:
            return CheckResult(False, f"{why} (your parameters differ from torch's by {got.max_abs_diff:.1e}).")
    step = got.first_step_above(RMSPROP_TOL)
    assert step is not None  # the rule did not agree, so some step was above the tolerance
    return CheckResult(False, f"your parameters differ from torch.optim.RMSprop's by {got.diffs[step - 1]:.1e} "
                              f"after step {step}. Keep E[g²] and b per parameter in state, start them at zero, "
                              f"and use "
                              f"E[g²] = γE[g²] + (1 − γ)g², b = μb + g/(√E[g²] + ε), θ -= α·b.")


def check_divergence_threshold(answer: float | None) -> CheckResult:
    """Exercise 2: the learning rate above which gradient descent diverges on f(θ) = ½ θᵀAθ."""
    eigenvalues = torch.linalg.eigvalsh(torch.tensor(QUADRATIC_A, dtype=torch.float64))
    lam_min, lam_max = eigenvalues.min().item(), eigenvalues.max().item()
    expected = 2 / lam_max
    return check_numbers(
        answer, [expected], names=["α_max"], rtol=1e-3,
        why=[f"along each eigenvector GD multiplies the error by (1 − αλ); A has eigenvalues {lam_min:g} and "
             f"{lam_max:g}, and |1 − αλ| < 1 for both needs α < 2/λ_max = {expected:g}"],
    )


def check_adam_first_step(answer: Sequence[float] | None) -> CheckResult:
    """Exercise 3: |Δθ| of Adam's first step (gradient 0.5), with and without bias correction."""
    p = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([p], lr=ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS)
    p.grad = torch.full_like(p, ADAM_GRAD)
    optimizer.step()
    with_correction = p.detach().abs().item()
    (b1, b2), g = ADAM_BETAS, ADAM_GRAD
    m, v = (1 - b1) * g, (1 - b2) * g * g
    without = ADAM_LR * m / (v**0.5 + ADAM_EPS)
    return check_numbers(
        answer, [with_correction, without], names=["with bias correction", "without"], rtol=2e-3,
        why=[f"m̂ = m/(1 − β₁) = g and v̂ = v/(1 − β₂) = g², so the step is α·g/(|g| + ε) ≈ α = "
             f"{with_correction:.6g}",
             f"m = (1 − β₁)g = {m:g} and √v = √(1 − β₂)·|g| = {v**0.5:.6g}, so the step is α·m/(√v + ε) = "
             f"{without:.6g}, about {without / ADAM_LR:.3g}·α: the first steps would be too large"],
    )
