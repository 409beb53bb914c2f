"""Progress bars: on where a person watches, off under CI and wherever outputs are recorded."""

from __future__ import annotations

import io
import os

import pytest

from course_utils.progress import keras_verbose, progress, progress_enabled


def test_the_test_suite_runs_its_kernels_without_progress():
    assert os.environ["COURSE_PROGRESS"] == "off"  # set by conftest: nbval compares outputs


def test_on_by_default_off_under_ci(clean_env):
    assert progress_enabled() and keras_verbose() == "auto"
    clean_env.setenv("CI", "true")
    assert not progress_enabled() and keras_verbose() == 0


@pytest.mark.parametrize(("value", "enabled"), [("on", True), ("1", True), (" YES ", True), ("off", False),
                                                ("0", False), ("false", False)])
def test_the_variable_decides(clean_env, value, enabled):
    clean_env.setenv("CI", "true")
    clean_env.setenv("COURSE_PROGRESS", value)
    assert progress_enabled() is enabled


def test_an_unknown_value_says_what_to_write(clean_env):
    clean_env.setenv("COURSE_PROGRESS", "loud")
    with pytest.raises(ValueError, match=r"COURSE_PROGRESS='loud' is neither on nor off.*COURSE_PROGRESS=off"):
        progress_enabled()


def test_off_yields_the_items_and_draws_nothing(clean_env, capsys):
    clean_env.setenv("COURSE_PROGRESS", "off")
    assert list(progress(range(3), desc="steps")) == [0, 1, 2]
    assert capsys.readouterr() == ("", "")


def test_on_draws_a_bar_that_it_removes_at_the_end(clean_env, monkeypatch):
    clean_env.setenv("COURSE_PROGRESS", "on")
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    assert list(progress(iter("abc"), desc="letters", total=3, unit="letter")) == ["a", "b", "c"]
    drawn = err.getvalue()
    assert "letters:" in drawn and "0/3" in drawn and drawn.endswith(" \r")  # leave=False: the line is cleared
