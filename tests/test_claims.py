"""Claims with conditions: checked where the condition holds, explained where it does not."""

import numpy as np
import pytest

from course_utils.claims import ANYWHERE, ClaimError, Condition, expect

NATIVE = Condition(True, "oneDNN has native bf16 kernels", "bf16 native (avx512_bf16)")
EMULATED = Condition(False, "oneDNN has native bf16 kernels", "bf16 emulated (CPU kernels AVX2)")


def test_a_claim_that_holds_where_its_condition_holds_is_reported(capsys):
    expect("bf16 is faster", True, measured="x0.41", when=NATIVE)
    assert capsys.readouterr().out == ("✓ bf16 is faster: x0.41. Checked where oneDNN has native bf16 kernels "
                                       "(this machine: bf16 native (avx512_bf16)).\n")


def test_a_claim_that_fails_where_its_condition_holds_raises():
    with pytest.raises(ClaimError) as failed:
        expect("bf16 is faster", False, measured="x1.30", when=NATIVE)
    assert str(failed.value) == ("bf16 is faster: expected where oneDNN has native bf16 kernels, which holds here "
                                 "(this machine: bf16 native (avx512_bf16)), but measured x1.30.")
    assert isinstance(failed.value, AssertionError)  # a failed claim fails a test like an assert


@pytest.mark.parametrize("ok, outcome", [(False, "does not hold here"), (True, "holds here all the same")])
def test_a_claim_whose_condition_does_not_hold_is_explained_not_checked(capsys, ok, outcome):
    expect("bf16 is faster", ok, measured="x36.5", when=EMULATED, otherwise="bf16 is converted to fp32 and back there.")
    assert capsys.readouterr().out == (
        f"○ bf16 is faster: x36.5, {outcome}. Not checked: expected only where oneDNN has native bf16 kernels "
        "(this machine: bf16 emulated (CPU kernels AVX2)). bf16 is converted to fp32 and back there.\n")


def test_a_claim_without_a_condition_holds_anywhere(capsys):
    expect("loops are slower", True, measured="6618x")
    assert capsys.readouterr().out == "✓ loops are slower: 6618x. Checked on every machine (no hardware condition).\n"
    with pytest.raises(ClaimError, match="which holds here, but measured 3x"):
        expect("loops are slower", False, measured="3x", when=ANYWHERE)
    assert ANYWHERE.where == "the lesson runs at all (no hardware condition)"


def test_numpy_booleans_are_claims_too(capsys):
    expect("x", np.float64(1.5) > 1.0, measured="1.5")  # a comparison of NumPy or pandas numbers
    assert capsys.readouterr().out.startswith("✓ x: 1.5.")


def test_conditions_combine_with_and():
    cores = Condition(True, "at least 2 usable cores", "2 usable cores")
    both = cores & EMULATED
    assert not both and bool(cores & NATIVE)
    assert both.where == "at least 2 usable cores and oneDNN has native bf16 kernels"
    assert both.here == "2 usable cores; bf16 emulated (CPU kernels AVX2)"
    assert (cores & cores).here == "2 usable cores"  # a fact is named once


def test_otherwise_is_not_printed_where_only_the_load_fails(capsys):
    busy = Condition(False, "no other process used the CPU", "other processes used 1.2 cores", of_this_run=True)
    expect("bf16 is slower", True, measured="x3", when=NATIVE & busy, otherwise="Emulated bf16 is slower.")
    out = capsys.readouterr().out
    assert "Not checked" in out and "Emulated bf16" not in out  # the machine is not why it was not checked
    expect("bf16 is slower", True, measured="x3", when=EMULATED & busy, otherwise="Native bf16 is faster.")
    assert capsys.readouterr().out.rstrip().endswith("Native bf16 is faster.")
    assert (NATIVE & busy).machine_holds and not (EMULATED & busy).machine_holds and busy.machine_holds


def test_bad_arguments_say_what_to_pass():
    with pytest.raises(TypeError, match="ok must be a bool"):
        expect("x", "yes", measured="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="when must be a Condition"):
        expect("x", True, measured="1", when=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="holds must be a bool"):
        Condition(1, "a", "b")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="say in words"):
        Condition(True, " ", "b")
