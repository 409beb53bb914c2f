import pytest

from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER, check_numbers, reveal
from course_utils.lessons import lesson01


def test_no_answer_asks_for_one():
    assert lesson01.check_chain_rule(None) is NO_ANSWER
    assert "Replace `None`" in repr(NO_ANSWER) and not NO_ANSWER


def test_a_miss_gets_a_hint_and_the_solution_only_when_asked():
    assert lesson01.check_chain_rule((4, 2, 2))
    verdict = lesson01.check_chain_rule((4, 3, 2))
    assert not verdict and repr(verdict).startswith("❌ Not yet: df/dy: you have 3; hint: write q = xy + z")
    assert "df/dx" not in repr(verdict)  # only the wrong item gets a hint
    assert "2q·x = 2" not in repr(verdict) and repr(verdict).endswith(ASK_FOR_SOLUTION)  # the answer stays hidden
    for answer in (None, (4, 3, 2), (4, 2, 2)):
        shown = lesson01.check_chain_rule(answer, solution=True)
        assert not shown and shown.is_solution
        assert repr(shown) == ("📖 Solution: with q = xy + z = 1, df/dx = 2q·y = 4; df/dy = 2q·x = 2; "
                               "df/dz = 2q·1 = 2.")


def test_vector_jacobian_explains_the_product():
    assert lesson01.check_vector_jacobian(3.0)
    assert "section 6" in repr(lesson01.check_vector_jacobian(6.0))
    assert "vᵀJ" in repr(lesson01.check_vector_jacobian(None, solution=True))


def test_parameter_count():
    assert lesson01.check_parameter_count(266_610)
    assert "biases" in repr(lesson01.check_parameter_count(266_600))
    assert "784·300+300" in repr(lesson01.check_parameter_count(None, solution=True))


def test_hints_and_derivations_match_the_numbers():
    with pytest.raises(ValueError, match="one name, hint and derivation per expected number"):
        check_numbers(1, [1, 2], names=["a", "b"], hints=["h"], why=["a = 1", "b = 2"])


@pytest.mark.parametrize("answer", ["four", (1, 2), [[1, 2, 3]]])
def test_malformed_answers_are_explained(answer):
    verdict = check_numbers(answer, [1, 2, 3], names=["a", "b", "c"], hints=["", "", ""], why=["", "", ""])
    assert not verdict and "expected 3 number(s) (a, b, c)" in repr(verdict)


def test_a_prediction_is_shown_beside_the_result() -> None:
    # measured 5561x: a guess of 100x is 55.6 times too low, 4000x is within a factor of 2
    assert repr(reveal(100, 5561, what="speed-up", unit="x")) == (
        "🔎 speed-up: 5,561x. You predicted 100x: 55.6 times more than you expected.")
    assert repr(reveal(4000, 5561, what="speed-up", unit="x")).endswith("within a factor of 2: well predicted.")
    assert repr(reveal(20000, 5561, what="speed-up", unit="x")) == (
        "🔎 speed-up: 5,561x. You predicted 20,000x: 3.6 times less than you expected.")
    assert repr(reveal(2, 5.2345, what="speed-up", unit="x")).startswith("🔎 speed-up: 5.23x.")
    assert repr(reveal(40, 45.2, what="peak", within=1.05)).endswith("1.13 times more than you expected.")
    assert repr(reveal(44, 45.2, what="peak", within=1.05)).endswith("within 5%: well predicted.")
    assert repr(reveal(0.9, 1.78, what="FSDP / DDP", unit="x", pivot=1)) == (
        "🔎 FSDP / DDP: 1.78x. You predicted 0.9x: it is more than 1x, see why below.")
    assert repr(reveal(1.5, 1.78, what="FSDP / DDP", unit="x", pivot=1)).endswith("well predicted.")
    assert repr(reveal(13, 26, what="x.grad", exact=True)) == "🔎 x.grad: 26. You predicted 13: not 13: see why below."
    assert repr(reveal(26.0, 26, what="x.grad", exact=True)) == "🔎 x.grad: 26. You predicted 26: right."
    assert repr(reveal(None, 26, what="x.grad", exact=True)) == "🔎 x.grad: 26 (no prediction made)."
    with pytest.raises(TypeError, match="one number"):
        reveal("26", 26, what="x.grad")
