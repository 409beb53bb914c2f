import pytest

from course_utils.profile import PROFILES, get_profile


def test_quick_under_ci_and_full_otherwise(clean_env):
    assert get_profile().name == "full"
    clean_env.setenv("CI", "true")
    assert get_profile().name == "quick"


def test_environment_variable_wins_and_is_case_insensitive(clean_env):
    clean_env.setenv("CI", "true")
    clean_env.setenv("COURSE_PROFILE", " FULL ")
    assert get_profile().name == "full"


def test_explicit_name_and_pick():
    quick, full = get_profile("quick"), get_profile("full")
    assert quick.is_quick and not full.is_quick
    assert quick.pick(quick=1, full=2) == 1 and full.pick(quick=1, full=2) == 2
    assert quick.train_samples < 60_000 and full.train_samples is None


def test_unknown_profile_is_a_clear_error(clean_env):
    clean_env.setenv("COURSE_PROFILE", "fast")
    with pytest.raises(ValueError, match=r"Unknown run profile 'fast'.*\['full', 'quick'\]"):
        get_profile()


def test_profiles_are_consistent():
    for name, profile in PROFILES.items():
        assert profile.name == name and profile.epochs >= 1 and profile.repeats >= 3
