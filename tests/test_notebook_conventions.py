"""Every notebook has the shape described in the course's notebook style guide, and was executed."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from conftest import NOTEBOOKS, REPO, TEMPLATE, load_notebook, source
from course_utils.checks import HOW_TO_CHECK
from course_utils.colab import PIP_SPEC, colab_url

IGNORE = "nbval-ignore-output"
SETUP_LINES = 20  # at most, non-empty: the Colab guard, the first section's imports, cu.setup(...)


@pytest.fixture(params=[*NOTEBOOKS, TEMPLATE], ids=[p.name for p in [*NOTEBOOKS, TEMPLATE]])
def notebook(request: pytest.FixtureRequest) -> tuple[Path, dict]:
    """Each lesson in turn, and the template that a new lesson starts from: its path and its JSON."""
    return request.param, load_notebook(request.param)


def code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code" and source(c).strip()]


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no NN_topic.ipynb notebook"


def test_title_badge_and_objectives(notebook):
    path, nb = notebook
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name)
    first = nb["cells"][0]
    text = source(first)
    assert first["cell_type"] == "markdown" and text.startswith(f"# {path.name[:2]} · ")
    assert f"]({colab_url(path.name)})" in text, "the Colab badge must point at this notebook"
    objectives = text.split("**Learning objectives**", 1)
    assert len(objectives) == 2, "the title cell lists **Learning objectives**"
    bullets = re.findall(r"^- ", objectives[1].split("\n\n")[0], re.MULTILINE)
    assert 3 <= len(bullets) <= 6


def test_one_setup_cell_first(notebook):
    path, nb = notebook
    cells = code_cells(nb)
    setups = [i for i, c in enumerate(cells) if "cu.setup(" in source(c)]
    assert setups == [0], "exactly one setup cell, the first code cell, calls cu.setup(...)"
    setup = cells[0]
    assert IGNORE in setup["metadata"].get("tags", []), "the setup cell prints the environment: ignore its output"
    assert f'"{PIP_SPEC}"' in source(setup), "the setup cell installs course_utils.colab.PIP_SPEC in Colab"
    number = path.name[:2]
    assert f'cu.setup("{number}", seed=0, profile=None)' in source(setup), (
        "the setup call names its lesson (for the reference times) and shows the profile argument")
    lines = [line for line in source(setup).splitlines() if line.strip()]
    assert len(lines) <= SETUP_LINES, (f"the setup cell has {len(lines)} lines: keep the Colab guard, the imports the "
                                       f"first section needs and cu.setup(...); import the rest where it is used")


def colab_guard(setup_source: str) -> types.CodeType:
    """The setup cell's statements up to its `if "google.colab" in sys.modules` block, compiled."""
    body = ast.parse(setup_source).body
    end = next(i for i, node in enumerate(body)
               if isinstance(node, ast.If) and "google.colab" in ast.unparse(node.test))
    return compile(ast.Module(body=body[:end + 1], type_ignores=[]), "<setup cell>", "exec")


def fake_pip(calls: list, returncode: int = 0):
    """A stand-in for subprocess.run that records the command and exits with ``returncode``."""
    def run(args, *_, **__):
        calls.append(args)
        return subprocess.CompletedProcess(args, returncode)
    return run


@pytest.mark.parametrize("in_colab, installed, pip_runs", [(False, True, False), (False, False, False),
                                                           (True, False, True), (True, True, False)])
def test_setup_cell_installs_only_in_colab(notebook, monkeypatch, capsys, in_colab, installed, pip_runs):
    """Run the setup cell's guard for real, in and out of a (simulated) Colab, with pip replaced."""
    calls = []
    monkeypatch.setattr(subprocess, "run", fake_pip(calls))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: real_find_spec(name, *a) if installed or name != "course_utils" else None)
    if in_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(colab_guard(source(code_cells(notebook[1])[0])), {})
    assert calls == ([[sys.executable, "-m", "pip", "install", "-q", PIP_SPEC]] if pip_runs else [])
    assert capsys.readouterr() == ("", ""), "the guard is silent"


def test_a_failed_install_says_what_failed_and_what_to_do(notebook, monkeypatch):
    monkeypatch.setattr(subprocess, "run", fake_pip([], returncode=1))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "course_utils"
                        else real_find_spec(name, *a))
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    with pytest.raises(SystemExit) as stopped:  # IPython shows a SystemExit's message without a traceback
        exec(colab_guard(source(code_cells(notebook[1])[0])), {})
    message = str(stopped.value)
    assert PIP_SPEC in message and "error is above" in message and "github.com" in message and "README" in message


def test_closing_sections_in_order(notebook):
    _, nb = notebook
    headings = [line for c in nb["cells"] if c["cell_type"] == "markdown"
                for line in source(c).splitlines() if line.startswith("## ")]
    tail = [h for h in headings if h in ("## Check your understanding", "## Summary", "## References")]
    assert tail == ["## Check your understanding", "## Summary", "## References"]
    exercises = [c for c in code_cells(nb) if re.search(r"\blesson\d\d\.check_", source(c))]
    assert exercises, "at least one exercise is checked by a call into course_utils.lessons.lessonNN"


def test_checks_hint_first_and_show_the_solution_when_asked(notebook):
    """Every exercise's check takes ``solution=False``, and the exercises say how to use it."""
    _, nb = notebook
    intro = next(source(c) for c in nb["cells"] if source(c).startswith("## Check your understanding"))
    assert HOW_TO_CHECK in " ".join(intro.split()), f"the exercises' introduction says: {HOW_TO_CHECK}"
    calls = {m.groups() for c in code_cells(nb) for m in re.finditer(r"\blesson(\d\d)\.(check_\w+)\(", source(c))}
    for number, name in sorted(calls):
        check = getattr(importlib.import_module(f"course_utils.lessons.lesson{number}"), name)
        parameter = inspect.signature(check).parameters.get("solution")
        assert parameter is not None and parameter.kind is inspect.Parameter.KEYWORD_ONLY, (
            f"lesson{number}.{name} takes `*, solution: bool = False` and returns worked_solution(...) when asked")
        assert parameter.default is False, f"lesson{number}.{name}: solution defaults to False"


def test_executed_top_to_bottom_without_errors(notebook):
    _, nb = notebook
    counts = [c["execution_count"] for c in code_cells(nb)]
    assert counts == list(range(1, len(counts) + 1)), "re-run the notebook top to bottom (make execute)"
    for cell in code_cells(nb):
        for out in cell["outputs"]:
            assert out["output_type"] != "error", source(cell)[:200]
            assert not (out["output_type"] == "stream" and "Traceback" in out["text"])


TIMING_WORDS = re.compile(r"speedup|median|step_time|_over_|efficiency|latency|ratio|\btimes?\b|\bgains?\b")


def test_no_bare_assert_on_timings(notebook):
    """A timing, speedup or ratio depends on the machine: cu.expect states its condition instead of an assert."""
    _, nb = notebook
    for cell in code_cells(nb):
        for line in source(cell).splitlines():
            if re.match(r"\s*assert ", line):
                assert not TIMING_WORDS.search(line), f"use cu.expect(..., when=condition) for: {line.strip()}"


def test_setup_cell_prints_the_hardware_facts(notebook):
    _, nb = notebook
    setup = next(c for c in code_cells(nb) if "cu.setup(" in source(c))
    printed = "".join("".join(o.get("text", "")) for o in setup["outputs"])
    assert "hardware: CPU " in printed and ("bf16 native" in printed or "bf16 emulated" in printed)


def test_small_and_portable(notebook):
    path, nb = notebook
    assert path.stat().st_size < 2_000_000
    for cell in code_cells(nb):
        text = source(cell)
        assert not re.search(r"^\s*[!%]pip ", text, re.MULTILINE), "install only in the guarded Colab setup"
        assert not re.search(r"['\"](/home/|/work/|/Users/|[A-Z]:\\\\)", text), "no absolute paths"
    for cell in nb["cells"]:  # e.g. a tab left by "\t" in `$t_\text{load}$` written from a Python string
        assert not re.search(r"[\x00-\x09\x0b-\x1f]", source(cell)), f"cell {cell.get('id')}: a control character"


def test_figures_take_the_course_defaults(notebook):
    """cu.setup sets the figure size and dpi; a notebook passes neither dpi= nor its own DPI constant."""
    _, nb = notebook
    for cell in code_cells(nb):
        assert not re.search(r"\bdpi\s*=|\"figure\.dpi\"|\bDPI\b", source(cell)), source(cell)[:200]


def test_metadata_is_kernelspec_tags_and_slide_types_only(notebook):
    """No execution timestamps, Python version or editor state: a re-run changes only outputs (`make execute`)."""
    _, nb = notebook
    assert set(nb["metadata"]) == {"kernelspec"}
    for cell in nb["cells"]:
        assert set(cell["metadata"]) <= {"tags", "slideshow"}, f"cell {cell.get('id')}: {sorted(cell['metadata'])}"


CORRECTION = re.compile(r"> \*\*The lecture says\*\* \(lecture 00[0-3]\): .+?\*\*(In fact|Predict)\*\*:? .+", re.DOTALL)


def test_lecture_corrections_take_one_form_and_a_cell_proves_each(notebook):
    """A lecture correction (CONTRIBUTING.md) is one quote cell naming its deck. Stated (**In fact**), the next cell
    proves it; asked (**Predict**), the next cell is the prediction, and an **In fact** cell soon after answers."""
    _, nb = notebook
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        text = source(cell)
        if cell["cell_type"] != "markdown" or "The lecture says" not in text:
            continue
        form = "> **The lecture says** (lecture 00N): … **In fact** … (or **Predict**: …)"
        assert CORRECTION.fullmatch(text.strip()), f"write it as `{form}`:\n{text}"
        assert all(line.startswith(">") for line in text.strip().splitlines()), f"one blockquote:\n{text}"
        following = cells[i + 1] if i + 1 < len(cells) else None
        assert following is not None and following["cell_type"] == "code" and source(following).strip(), (
            f"the cell right after a correction demonstrates it, or takes the prediction:\n{text}")
        if "**In fact**" not in text:
            assert PREDICTION.fullmatch(source(following).strip()), f"a prediction cell follows the question:\n{text}"
            assert any(c["cell_type"] == "markdown" and source(c).lstrip().startswith("**In fact**")
                       for c in cells[i + 2:i + 8]), f"an **In fact** cell answers the question soon after:\n{text}"


PREDICTION = re.compile(r"^(\w+) = None  # PREDICT: \S.+$", re.M)


def test_every_prediction_is_revealed_by_a_later_cell(notebook):
    """A prediction cell (CONTRIBUTING.md, How a lesson teaches) is one line, and a later cell reveals it on a later
    slide or fragment: the deck shows stored outputs, so a reveal on the question's slide gives the answer away."""
    _, nb = notebook
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        text = source(cell) if cell["cell_type"] == "code" else ""
        for name in PREDICTION.findall(text):
            assert text.strip().count("\n") == 0, f"a prediction cell holds the prediction only:\n{text}"
            reveal = next((j for j in range(i + 1, len(cells)) if cells[j]["cell_type"] == "code"
                           and f"cu.reveal({name}," in source(cells[j])), None)
            assert reveal is not None, f"`{name}` is predicted but no later cell calls cu.reveal({name}, ...)"
            kinds = [c["metadata"].get("slideshow", {}).get("slide_type", "-") for c in cells[i:reveal + 1]]
            if set(kinds) == {"notes"}:
                continue  # a question for the reader in the speaker notes: the deck shows neither it nor the answer
            assert {"slide", "subslide", "fragment"} & set(kinds[1:]), (
                f"cell {cells[reveal]['id']} reveals `{name}` on the slide that asks for it: make it a subslide")


def test_lessons_predict_before_their_results():
    """Every lesson and the template have prediction moments (CONTRIBUTING.md, How a lesson teaches)."""
    for path in [*NOTEBOOKS, TEMPLATE]:
        predictions = [c for c in code_cells(load_notebook(path)) if PREDICTION.search(source(c))]
        assert predictions, f"{path.name} has no prediction cell (CONTRIBUTING.md, How a lesson teaches)"


MARKDOWN_IMAGE = re.compile(r"!\[([^\]]*)\]\(")
OUTPUT_IMAGE_ALT = re.compile(r'<img src="data:image/png;base64,[^"]+" alt="([^"]*)">')


@pytest.mark.parametrize("path", [*NOTEBOOKS, *(REPO / "notebooks" / "full" / p.name for p in NOTEBOOKS), TEMPLATE],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_image_has_alt_text(path):
    """A figure is shown with `cu.show(alt=...)` (an `<img>` with its description), never as a bare PNG; a
    markdown image has its alt text between the brackets."""
    nb = load_notebook(path)
    for cell in nb["cells"]:
        for alt in MARKDOWN_IMAGE.findall(source(cell)):
            assert len(alt.split()) >= 2, f"{path.name}, cell {cell['id']}: the image ![{alt}](...) needs alt text"
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            assert "image/png" not in data, (
                f"{path.name}, cell {cell['id']}: a figure without alt text; show it with cu.show(alt=...)")
            for alt in OUTPUT_IMAGE_ALT.findall("".join(data.get("text/html", ""))):
                assert len(alt.split()) >= 5, f"{path.name}, cell {cell['id']}: describe the figure, not {alt!r}"
