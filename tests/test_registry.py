"""The registry of lessons (course_utils.lessons) and notebooks/ agree in both directions, and the README's
notebook table is the registry's."""

from __future__ import annotations

import importlib

import pytest

from conftest import NOTEBOOKS, REPO, load_notebook, source
from course_utils import lessons
from course_utils.lessons import LESSONS, Branch, Lesson, lesson


def test_every_notebook_is_registered_and_every_entry_has_its_notebook():
    assert [entry.notebook for entry in LESSONS] == [path.name for path in NOTEBOOKS]


def test_numbers_are_consecutive_from_01():
    assert [entry.number for entry in LESSONS] == [f"{n:02d}" for n in range(1, len(LESSONS) + 1)]


@pytest.mark.parametrize("entry", LESSONS, ids=lambda entry: entry.number)
def test_the_registry_title_is_the_notebooks_heading(entry):
    first_line = source(load_notebook(REPO / "notebooks" / entry.notebook)["cells"][0]).splitlines()[0]
    assert first_line == f"# {entry.number} · {entry.title}"


@pytest.mark.parametrize("entry", LESSONS, ids=lambda entry: entry.number)
def test_each_lesson_has_its_module_of_checks(entry):
    module = importlib.import_module(f"course_utils.lessons.lesson{entry.number}")
    assert any(name.startswith("check_") for name in vars(module))


def test_the_readme_table_is_generated_from_the_registry():
    readme = (REPO / "README.md").read_text()
    table = readme.split("\n## Notebooks\n\n", 1)[1].split("\n\n", 1)[0]
    assert table == lessons.markdown_table(), (
        "README's notebook table differs from the registry: paste the output of\n"
        "  python -c 'from course_utils import lessons; print(lessons.markdown_table())'")


def test_markdown_row_of_a_lesson():
    first = lessons.markdown_table().splitlines()[2]
    assert first.startswith("| 01 | [`notebooks/01_autograd.ipynb`](notebooks/01_autograd.ipynb) | tensors, dtypes")
    assert first.endswith(" | optional: adds a GPU matmul timing |")
    # times change with every measurement: their format does not
    assert [lessons._duration(s) for s in (21, 60, 838, None)] == ["21 s", "1 min 00 s", "13 min 58 s", "not measured"]


def test_lookup_and_validation():
    assert lesson("07").slug == "quantization" and lesson("07").notebook == "07_quantization.ipynb"
    with pytest.raises(ValueError, match="no lesson '42'"):
        lesson("42")
    with pytest.raises(ValueError, match="unknown requirement 'quantum'"):
        Branch("quantum", "then", "otherwise")
    with pytest.raises(ValueError, match="lesson 10 needs unknown requirements"):
        Lesson("10", "warp", "Warp drive", "topics", "gpu", needs=("warp_core",))


def test_site_row_of_a_lesson():
    header, _, first = lessons.site_table().splitlines()[:3]
    assert header == "| # | lesson | topics | quick · full |"
    assert first.startswith("| 01 | [Tensors and autograd](notebooks/01_autograd.ipynb) | tensors, dtypes")
    assert "<br>*GPU:* optional: adds a GPU matmul timing | " in first
    assert len(lessons.site_table().splitlines()) == 2 + len(lessons.LESSONS)


def test_every_lesson_has_both_times_in_the_record():
    record = lessons.run_times()
    assert sorted(record) == [entry.number for entry in LESSONS], "one entry per lesson in run_times.json"
    for entry in LESSONS:
        assert isinstance(entry.quick_s, int) and isinstance(entry.full_s, int), (
            f"lesson {entry.number}: run `make execute` and `make full` for it (they record its times)")


def test_recording_a_time_writes_the_one_record(tmp_path, monkeypatch):
    monkeypatch.setattr(lessons, "RUN_TIMES", tmp_path / "run_times.json")
    lessons.record_run_time("03", "quick", 41)
    lessons.record_run_time("03", "full", 213)
    lessons.record_run_time("03", "quick", 40)
    assert lessons.run_times() == {"03": {"quick_s": 40, "full_s": 213}}
    assert (lesson("03").quick_s, lesson("03").full_s) == (40, 213)
    for number, profile, seconds, message in (("42", "quick", 1, "no lesson"), ("03", "medium", 1, "unknown profile"),
                                              ("03", "full", 0, "positive"), ("03", "full", 2.5, "positive")):
        with pytest.raises(ValueError, match=message):
            lessons.record_run_time(number, profile, seconds)
