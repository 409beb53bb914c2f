"""cu.setup: the profile chosen from the notebook, the lesson's reference times, and the version warning."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import course_utils as cu
from conftest import REPO
from course_utils import lessons, versions
from course_utils.lessons import lesson


@pytest.fixture
def person(monkeypatch: pytest.MonkeyPatch) -> None:
    """A person runs the notebook (the tests themselves run under pytest, an automated driver)."""
    monkeypatch.setattr(cu, "automated_driver", lambda: None)


def test_the_profile_chosen_in_setup_holds_for_the_kernel_and_its_processes(fake_root: Path, capsys, person):
    env = cu.setup("02", profile="quick")
    out = capsys.readouterr().out
    assert env.profile.name == "quick" and os.environ["COURSE_PROFILE"] == "quick"
    assert cu.get_profile().name == "quick"
    entry = lesson("02")
    assert (f"profile quick (chosen in setup()): the reference machine (2 CPU cores, no GPU) ran this lesson in "
            f"{lessons._duration(entry.quick_s)} (full profile: {lessons._duration(entry.full_s)})") in out


def test_without_a_choice_setup_says_where_the_profile_came_from(fake_root: Path, capsys, monkeypatch, person):
    cu.setup("01")
    assert "profile full (the default; setup(profile='quick') runs faster)" in capsys.readouterr().out
    monkeypatch.setenv("CI", "true")
    cu.setup("01")
    assert "profile quick (the default under CI)" in capsys.readouterr().out
    monkeypatch.setenv("COURSE_PROFILE", "full")
    cu.setup("01")
    assert "profile full ($COURSE_PROFILE=full)" in capsys.readouterr().out


def test_the_template_and_an_unnamed_lesson_print_no_times(fake_root: Path, capsys, person):
    cu.setup("00", profile="quick")
    cu.setup(profile="quick")
    assert "reference machine" not in capsys.readouterr().out


def test_a_run_by_an_automated_driver_prints_no_times(fake_root: Path, capsys, monkeypatch):
    """Its output is a stored copy: the time it would print is the run before it (the banner quotes the record)."""
    monkeypatch.setattr(cu, "automated_driver", lambda: "course_utils execute")
    cu.setup("02", profile="full")
    assert "profile full (chosen in setup())\n" in capsys.readouterr().out


@pytest.mark.parametrize("kwargs, message", [({"profile": "medium"}, "Unknown run profile 'medium'"),
                                             ({"lesson": "2"}, "no lesson '2'")])
def test_bad_arguments_are_refused_clearly(fake_root: Path, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cu.setup(**kwargs)


def test_a_version_different_from_the_outputs_gets_one_line(fake_root: Path, capsys, monkeypatch):
    colab_like = {"torch": "2.9.0+cu126"}
    monkeypatch.setattr(versions, "installed", lambda name: colab_like.get(name, versions.REFERENCE[name]))
    cu.setup("01", profile="quick")
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "torch 2.9.0+cu126 (outputs: 2.14.1)" in warnings[0]


def test_in_colab_the_warning_says_to_keep_colabs_versions(monkeypatch):
    import sys
    import types

    monkeypatch.setattr(versions, "installed", lambda name: {"torch": "2.11.0+cpu"}.get(name, versions.REFERENCE[name]))
    assert "`make lab`" in versions.drift_warning()
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    warning = versions.drift_warning()
    assert "keep Colab's versions" in warning and "make lab" not in warning


def test_the_pinned_versions_give_no_warning(monkeypatch):
    monkeypatch.setattr(versions, "installed", lambda name: versions.REFERENCE[name] + "+cpu")
    assert versions.drift_warning() is None
    monkeypatch.setattr(versions, "installed", lambda name: None)  # absent: the lesson's import will say so
    assert versions.drift_warning() is None


def test_the_reference_versions_are_the_pins_of_requirements_txt():
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9_.-]+)==(\S+?)(;.*)?$", line.split("#")[0].strip()):
            pins.setdefault(m[1].lower().removesuffix("-cpu"), set()).add(m[2])
    assert {name: {version} for name, version in versions.REFERENCE.items()} == {n: pins[n] for n in versions.REFERENCE}


@pytest.mark.parametrize("machine, distribution", [("x86_64", "tensorflow-cpu"), ("AMD64", "tensorflow-cpu"),
                                                   ("arm64", "tensorflow"), ("aarch64", "tensorflow")])
def test_the_tensorflow_to_install_depends_on_the_machine(machine, distribution):
    assert versions.to_install("tensorflow", machine) == distribution and versions.to_install("keras") == "keras"


@pytest.mark.parametrize(("preset", "expected"), [(None, "true"), ("false", "false")])
def test_tensorflow_takes_gpu_memory_as_it_needs_it(preset: str | None, expected: str) -> None:
    """Without memory growth TensorFlow takes nearly all of every GPU; an explicit choice is kept."""
    env = {k: v for k, v in os.environ.items() if k != "TF_FORCE_GPU_ALLOW_GROWTH"}
    if preset is not None:
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = preset
    show = "import os, course_utils; print(os.environ['TF_FORCE_GPU_ALLOW_GROWTH'])"
    shown = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True, timeout=120,
                           check=True).stdout.strip()
    assert shown == expected
