"""Lesson 00: the checks of the template notebook (docs/00_template.ipynb), to copy for a new lesson.

A check computes its expected value with the library itself (never a number typed in), compares the
student's answer with :func:`course_utils.checks.check_numbers`, and says why the right answer is
right. ``None`` (no answer yet) is never an error.
"""

from __future__ import annotations

import torch

from course_utils.checks import CheckResult, check_numbers


def check_square_gradient(answer: float | None) -> CheckResult:
    """Exercise 1: ``dy/dx`` for ``y = x**2`` at ``x = 3``."""
    x = torch.tensor(3.0, requires_grad=True)
    (grad,) = torch.autograd.grad(x**2, x)
    return check_numbers(answer, [grad.item()], names=["dy/dx"],
                         why=[f"d(x²)/dx = 2x = {grad.item():g} at x = 3"])
