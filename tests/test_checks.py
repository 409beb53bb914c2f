import pytest

from course_utils.checks import NO_ANSWER, check_numbers, reveal
from course_utils.lessons import lesson01


def test_no_answer_asks_for_one():
    assert lesson01.check_chain_rule(None) is NO_ANSWER
    assert "Replace `None`" in repr(NO_ANSWER) and not NO_ANSWER


def test_chain_rule_right_and_wrong():
    assert lesson01.check_chain_rule((4, 2, 2))
    verdict = lesson01.check_chain_rule((4, 3, 2))
    assert not verdict and "df/dy: you have 3" in repr(verdict) and "2q·x = 2" in repr(verdict)
    assert "df/dx" not in repr(verdict)  # only the wrong item is explained


def test_vector_jacobian_explains_the_product():
    assert lesson01.check_vector_jacobian(3.0)
    assert "vᵀJ" in repr(lesson01.check_vector_jacobian(6.0))


def test_parameter_count():
    assert lesson01.check_parameter_count(266_610)
    assert "784·300+300" in repr(lesson01.check_parameter_count(266_600))


@pytest.mark.parametrize("answer", ["four", (1, 2), [[1, 2, 3]]])
def test_malformed_answers_are_explained(answer):
    verdict = check_numbers(answer, [1, 2, 3], names=["a", "b", "c"], why=["", "", ""])
    assert not verdict and "expected 3 number(s) (a, b, c)" in repr(verdict)


def test_a_prediction_is_shown_beside_the_result() -> None:
    # measured 5561x: a guess of 100x is 55.6 times too low, 4000x is within a factor of 2
    assert repr(reveal(100, 5561, what="speed-up", unit="x")) == (
        "🔎 speed-up: 5,561x. You predicted 100x: 55.6 times more than you expected.")
    assert repr(reveal(4000, 5561, what="speed-up", unit="x")).endswith("within a factor of 2: well predicted.")
    assert repr(reveal(20000, 5561, what="speed-up", unit="x")) == (
        "🔎 speed-up: 5,561x. You predicted 20,000x: 3.6 times less than you expected.")
    assert repr(reveal(2, 5.2345, what="speed-up", unit="x")).startswith("🔎 speed-up: 5.23x.")
    assert repr(reveal(13, 26, what="x.grad", exact=True)) == "🔎 x.grad: 26. You predicted 13: not 13: see why below."
    assert repr(reveal(26.0, 26, what="x.grad", exact=True)) == "🔎 x.grad: 26. You predicted 26: right."
    assert "You made no prediction" in repr(reveal(None, 26, what="x.grad", exact=True))
    with pytest.raises(TypeError, match="one number"):
        reveal("26", 26, what="x.grad")
