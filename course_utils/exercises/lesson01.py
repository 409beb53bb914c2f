"""Exercise checks for lesson 01 (tensors and autograd). Expected values are computed here."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from course_utils.checks import CheckResult, check_numbers


def check_chain_rule(answer: Sequence[float] | None) -> CheckResult:
    """Exercise 1: ``(df/dx, df/dy, df/dz)`` for ``f = (x*y + z)**2`` at x=1, y=2, z=-1."""
    x, y, z = (torch.tensor(v, requires_grad=True) for v in (1.0, 2.0, -1.0))
    q = x * y + z
    expected = [g.item() for g in torch.autograd.grad(q**2, (x, y, z))]
    return check_numbers(
        answer, expected, names=["df/dx", "df/dy", "df/dz"],
        why=[f"with q = xy + z = {q.item():g}, df/dx = 2q·y = {expected[0]:g}",
             f"df/dy = 2q·x = {expected[1]:g}",
             f"df/dz = 2q·1 = {expected[2]:g}"],
    )


def check_vector_jacobian(answer: float | None) -> CheckResult:
    """Exercise 2: every entry of ``x.grad`` after ``z.backward(v)``, z = 3x², x = ones(2,2), v = 0.5."""
    x = torch.ones(2, 2, requires_grad=True)
    (grad,) = torch.autograd.grad(3 * x**2, x, grad_outputs=torch.full((2, 2), 0.5))
    expected = grad[0, 0].item()
    return check_numbers(
        answer, [expected], names=["x.grad"],
        why=[f"backward(v) computes vᵀJ: each entry is v·dz/dx = 0.5·6x = {expected:g}, not dz/dx itself"],
    )


def check_parameter_count(answer: int | None) -> CheckResult:
    """Exercise 3: trainable parameters of the MLP 784 → 300 → 100 → 10 (with biases)."""
    model = nn.Sequential(nn.Linear(784, 300), nn.ReLU(), nn.Linear(300, 100), nn.ReLU(), nn.Linear(100, 10))
    expected = sum(p.numel() for p in model.parameters())
    return check_numbers(
        answer, [expected], names=["parameters"],
        why=[f"each Linear(n_in, n_out) holds n_in·n_out weights plus n_out biases: "
             f"784·300+300 + 300·100+100 + 100·10+10 = {expected}"],
    )
