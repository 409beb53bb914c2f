"""Lesson 11: the exercise checks (graph breaks, recompilations, break-even), answered by TorchDynamo itself."""

from __future__ import annotations

import pytest
import torch

import course_utils  # noqa: F401  (first: fixes the torch/TensorFlow import order)
from course_utils.checks import NO_ANSWER
from course_utils.lessons import lesson11


def one_break(x):
    y = x.cos()
    print("a side effect")  # one graph break: the code before and after it make two graphs
    return y + 1


def no_break(x):
    return (x * 2).relu()


def test_no_answer_is_not_an_error():
    assert lesson11.check_graph_breaks(None, no_break, torch.ones(3)) is NO_ANSWER
    assert lesson11.check_recompilations(None, shapes=[(2,)], dynamic=False) is NO_ANSWER
    assert lesson11.check_break_even(None, compile_seconds=1, eager_seconds=0.2, compiled_seconds=0.1) is NO_ANSWER


def test_graph_breaks_are_counted_silently(capsys):
    assert lesson11.graphs_and_breaks(no_break, torch.ones(3)) == (1, 0)
    assert lesson11.check_graph_breaks((2, 1), one_break, torch.ones(3))
    verdict = lesson11.check_graph_breaks((1, 0), one_break, torch.ones(3))
    assert not verdict and "2 graph(s)" in repr(verdict)
    assert "a side effect" not in capsys.readouterr().out  # the check does not print the function's output


def test_recompilations():
    # dynamic=False: shapes 8, 16, 32 are three graphs; the second (8, 4) reuses the first.
    assert lesson11.compilations([(8, 4), (8, 4), (16, 4), (8, 4), (32, 4)], dynamic=False) == 3
    # dynamic=None: (8, 4) specialised, (16, 4) recompiles with a symbolic size that 32 reuses.
    assert lesson11.compilations([(8, 4), (8, 4), (16, 4), (8, 4), (32, 4)], dynamic=None) == 2
    assert lesson11.compilations([(8, 4), (16, 4)], dynamic=True) == 1
    assert lesson11.check_recompilations(3, shapes=[(8, 4), (8, 4), (16, 4), (8, 4), (32, 4)], dynamic=False)
    assert not lesson11.check_recompilations(5, shapes=[(8, 4), (8, 4), (16, 4), (8, 4), (32, 4)], dynamic=False)


def test_break_even():
    # 20 s / (5 ms - 3 ms) = 10,000 calls exactly; 1 s / 0.3 s = 3.33 -> 4 calls.
    assert lesson11.break_even_calls(20, 0.005, 0.003) == 10_000
    assert lesson11.break_even_calls(1, 0.5, 0.2) == 4
    assert lesson11.break_even_calls(1, 0.2, 0.3) is None  # slower when compiled: never pays off
    assert lesson11.check_break_even(10_000, compile_seconds=20, eager_seconds=0.005, compiled_seconds=0.003)
    assert not lesson11.check_break_even(4_000, compile_seconds=20, eager_seconds=0.005, compiled_seconds=0.003)
    with pytest.raises(ValueError):
        lesson11.break_even_calls(1, 0, 0.1)
    with pytest.raises(ValueError, match="faster"):
        lesson11.check_break_even(1, compile_seconds=1, eager_seconds=0.1, compiled_seconds=0.2)
