"""Lesson 00: the checks of the template notebook (docs/00_template.ipynb), to copy for a new lesson.

A check computes its expected value with the library itself (never a number typed in), compares the
student's answer with :func:`course_utils.checks.check_numbers`, gives a hint (never the answer) at a
miss, and shows the worked solution only when called with ``solution=True``. ``None`` (no answer yet) is
never an error.
"""

from __future__ import annotations

import torch

from course_utils.checks import CheckResult, check_numbers


def check_square_gradient(answer: float | None, *, solution: bool = False) -> CheckResult:
    """Exercise 1: ``dy/dx`` for ``y = x**2`` at ``x = 3``."""
    x = torch.tensor(3.0, requires_grad=True)
    (grad,) = torch.autograd.grad(x**2, x)
    return check_numbers(answer, [grad.item()], names=["dy/dx"], solution=solution,
                         hints=["the power rule gives d(xⁿ)/dx as a function of x; evaluate it at x = 3"],
                         why=[f"dy/dx = d(x²)/dx = 2x = {grad.item():g} at x = 3"])
