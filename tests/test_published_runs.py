"""The published lecture-scale runs (notebooks/full/, made by `make full`): executed top to bottom with the full
profile, without errors, from the lessons' current code, within the time budget, and quoted right in the README."""

from __future__ import annotations

import base64
import re

import pytest

from conftest import NOTEBOOKS, REPO, load_notebook, source
from course_utils import execute
from course_utils.lessons import LESSONS, full_profile_table, lesson

LESSON_BUDGET_S, COURSE_BUDGET_S = 15 * 60, 60 * 60  # on 2 cores
REFERENCE_SHARE = 0.8  # of the budget, at most, on the reference machine: a slower laptop still fits
MAX_IMAGE_BYTES = 150_000


@pytest.fixture(params=NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def published(request: pytest.FixtureRequest):
    """Each lesson, its published copy's JSON and the record of the run that made it."""
    path = execute.published_path(request.param)
    assert path.is_file(), f"no published run of {request.param.name}: run `make full NOTEBOOKS={request.param}`"
    record = execute.run_record(path)
    assert record is not None, f"{path} has no metadata.course_run: it was not made by `make full`"
    return request.param, load_notebook(path), record


def test_it_ran_the_lessons_current_code(published):
    notebook, nb, record = published
    rerun = f"the published copy is stale: run `make full NOTEBOOKS=notebooks/{notebook.name}` and commit it"
    assert execute.code_cells(nb) == execute.code_cells(load_notebook(notebook)), f"code cells differ; {rerun}"
    assert record.source_digest == execute.source_digest(notebook), f"lesson{notebook.name[:2]}.py changed; {rerun}"


def test_it_is_the_lesson_with_the_full_profiles_outputs(published):
    notebook, nb, _ = published

    def text(cells):
        return [(cell["cell_type"], source(cell), cell["metadata"]) for cell in cells]

    lesson_cells = load_notebook(notebook)["cells"]
    assert text(nb["cells"][:1] + nb["cells"][2:]) == text(lesson_cells), (
        f"the published copy's prose is not the lesson's: `make full NOTEBOOKS=notebooks/{notebook.name}` takes it")


def test_it_ran_top_to_bottom_with_the_full_profile_and_no_error(published):
    notebook, nb, record = published
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    assert record.profile == "full" and len(record.cell_seconds) == len(code)
    assert [cell["execution_count"] for cell in code] == list(range(1, len(code) + 1))
    errors = [o for cell in code for o in cell["outputs"] if o["output_type"] == "error"]
    assert not errors, errors[0]["evalue"] if errors else ""
    setup = "".join("".join(o.get("text", "")) for o in code[0]["outputs"])
    assert "\nprofile full (" in setup and f"hardware: {record.hardware}" in setup


def test_it_says_what_it_is_at_the_top(published):
    notebook, nb, record = published
    banner = nb["cells"][1]
    assert banner["id"] == execute.BANNER_ID and source(banner) == execute.banner(notebook, record)


def test_its_images_are_small(published):
    _, nb, _ = published
    outputs = [o.get("data", {}) for cell in nb["cells"] for o in cell.get("outputs", [])]
    pngs = [d["image/png"] for d in outputs if "image/png" in d]
    html = "".join("".join(d.get("text/html", "")) for d in outputs)
    pngs += re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    sizes = [len(base64.b64decode(png)) for png in pngs]
    assert max(sizes, default=0) <= MAX_IMAGE_BYTES


def test_the_record_of_run_times_holds_its_time(published):
    notebook, _, record = published
    recorded = lesson(notebook.name[:2]).full_s
    assert recorded == record.wall_seconds, (
        f"course_utils/lessons/run_times.json says lesson {notebook.name[:2]} took {recorded} s in the full profile, "
        f"its published copy {record.wall_seconds} s: `make full` writes both")


@pytest.mark.parametrize("path", [*NOTEBOOKS, *(execute.published_path(p) for p in NOTEBOOKS)],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_stored_copy_quotes_no_time_but_its_banners(path):
    """A run cannot print its own time at its start: the setup line of a stored copy would quote the run before it.
    The one time a copy shows is its banner's, from its own record (the quick copies' times are the README's)."""
    code = next(c for c in load_notebook(path)["cells"] if c["cell_type"] == "code")
    printed = "".join("".join(o.get("text", "")) for o in code["outputs"])
    assert "ran this lesson in" not in printed, f"{path.name}: re-execute it (`make execute` / `make full`)"


def test_every_lesson_and_the_course_fit_the_time_budget():
    times = {entry.number: entry.full_s for entry in LESSONS}
    assert None not in times.values()
    assert max(times.values()) <= REFERENCE_SHARE * LESSON_BUDGET_S, (
        f"leave 20% of the {LESSON_BUDGET_S // 60}-minute budget free on the reference machine: {times}")
    assert sum(times.values()) <= COURSE_BUDGET_S


def test_the_readme_says_what_runs_on_which_machine():
    """The published runs may come from several machines (a session gets the CPU it gets): the README names each
    machine, its hardware line and the lessons it ran, so that no time is compared across machines unawares."""
    records = {path.name[:2]: execute.run_record(execute.published_path(path)) for path in NOTEBOOKS}
    machines: dict[tuple[str, str], list[str]] = {}
    for number, record in records.items():
        machines.setdefault((record.machine, record.hardware), []).append(number)
    readme = (REPO / "README.md").read_text()
    table = readme.split("\n## The full profile\n\n", 1)[1].split("\n\n", 1)[1].split("\n\n", 1)[0]
    assert table == full_profile_table()
    flat = readme.replace("\n", " ")
    for (machine, hardware), numbers in machines.items():
        assert f"lessons {', '.join(numbers)} on a 2-core {machine} (`{hardware}`)" in flat, (
            f"the README does not say that lessons {numbers} ran on {machine} ({hardware})")
    assert all(entry.full_scale for entry in LESSONS)


RUN_TIME_TALK = re.compile(r"\b(?:quick|full)\b[^.]*\bprofile\b|\bprofile\b[^.]*\b(?:takes|runs)\b"
                           r"|make (?:full|execute)")
DURATION = re.compile(r"(?<![\d.,])\d+(?:[.,]\d+)?(?: to \d+(?:[.,]\d+)?)? ?(?:s|min|minutes|seconds)\b")


@pytest.mark.parametrize("plan", sorted((REPO / "docs" / "instructors").glob("[0-9][0-9].md")), ids=lambda p: p.name)
def test_instructors_plans_quote_no_run_times(plan):
    """A lesson's times live in one record (the README's tables, the banners); a plan that typed them would drift."""
    for sentence in re.split(r"(?<=[.;:])\s+|\n-\s|\|", plan.read_text()):
        if RUN_TIME_TALK.search(sentence):
            assert not DURATION.search(sentence), (
                f"{plan.name}: point at the README's table instead of typing a lesson's run time: {sentence.strip()!r}")
