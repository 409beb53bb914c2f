"""`python -m course_utils execute` (make execute, make full): how lessons are run, recorded and published."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

from conftest import REPO
from course_utils import execute
from course_utils.__main__ import main


def tiny_notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}, "authors": ["dropped"]})
    nb.cells = [nbformat.v4.new_markdown_cell("# 00 · Tiny", metadata={"slideshow": {"slide_type": "slide"}}),
                *(nbformat.v4.new_code_cell(code, metadata={"tags": ["t"], "scrolled": True}) for code in cells)]
    nbformat.write(nb, path)
    return path


def test_a_notebook_runs_top_to_bottom_as_nbval_runs_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tiny_notebook(tmp_path / "tiny.ipynb", "import os\nprint(os.environ['COURSE_PROFILE'], "
                         "os.environ['COURSE_PROGRESS'], os.getcwd())\nos.write(2, b'from C\\n')", "1 + 1")
    nb, seconds = execute.execute_notebook(path, "full")
    first, second = (cell for cell in nb.cells if cell.cell_type == "code")
    assert first.outputs[0].text == f"full off {tmp_path}\n"  # the profile, no progress bars, the notebook's folder
    assert second.outputs[0].data["text/plain"] == "2"
    assert [first.execution_count, second.execution_count] == [1, 2] and len(seconds) == 2
    assert dict(nb.metadata) == {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    assert [dict(c.metadata) for c in nb.cells] == [{"slideshow": {"slide_type": "slide"}}, {"tags": ["t"]},
                                                    {"tags": ["t"]}]
    assert "from C" in (tmp_path / "build" / "execute" / "full" / "tiny.log").read_text()  # not in the outputs


def test_a_failing_cell_keeps_the_partial_notebook_for_reading(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tiny_notebook(tmp_path / "broken.ipynb", "print('before')", "1 / 0", "print('never')")
    with pytest.raises(CellExecutionError, match="ZeroDivisionError"):
        execute.execute_notebook(path, "quick")
    partial = nbformat.read(tmp_path / "build" / "execute" / "quick" / "broken.ipynb", as_version=4)
    assert partial.cells[1].outputs[0].text == "before\n" and partial.cells[3].outputs == []
    assert (tmp_path / "build" / "execute" / "quick" / "broken.log").is_file()  # the kernel's stderr


@pytest.mark.parametrize("name", ["notes.ipynb", "02_optimizers.py", "42_warp.ipynb", "2_x.ipynb"])
def test_only_lesson_notebooks_are_run(name):
    with pytest.raises(ValueError, match="lesson"):
        execute.lesson_number(Path("notebooks") / name)


@pytest.fixture
def lesson_copy(tmp_path) -> Path:
    """A copy of lesson 08 in a notebooks/ folder of its own."""
    (tmp_path / "notebooks").mkdir()
    return Path(shutil.copy(REPO / "notebooks" / "08_pruning.ipynb", tmp_path / "notebooks"))


def edit_cell(path: Path, cell_type: str, text: str) -> None:
    nb = json.loads(path.read_text())
    next(cell for cell in nb["cells"] if cell["cell_type"] == cell_type)["source"].append(text)
    path.write_text(json.dumps(nb))


def test_the_digest_follows_the_code_not_the_prose(lesson_copy):
    before = execute.source_digest(lesson_copy)
    edit_cell(lesson_copy, "markdown", "\nMore prose.")
    assert execute.source_digest(lesson_copy) == before
    edit_cell(lesson_copy, "code", "\nx = 1")
    assert execute.source_digest(lesson_copy) != before


def fake_publish(lesson: Path) -> None:
    """A published copy of ``lesson`` whose record says it ran the current code (nothing is executed)."""
    nb = nbformat.read(lesson, as_version=4)
    record = execute.RunRecord(profile="full", wall_seconds=7, machine="CPU", hardware="CPU AVX2",
                               versions={"torch": "2.14.1"}, cell_seconds=[0.1],
                               source_digest=execute.source_digest(lesson))
    execute.publish(lesson, nb, record)


def test_a_current_published_copy_is_skipped_and_a_stale_one_is_not(lesson_copy, capsys, monkeypatch):
    assert not execute.is_current(lesson_copy)
    fake_publish(lesson_copy)
    published = execute.published_path(lesson_copy)
    assert published == lesson_copy.parent / "full" / "08_pruning.ipynb"
    assert execute.run_record(published).wall_seconds == 7
    banner = nbformat.read(published, as_version=4).cells[1]
    assert banner.id == execute.BANNER_ID and "executed top to bottom with the `full` profile" in banner.source
    assert execute.is_current(lesson_copy)

    monkeypatch.setattr(execute, "execute_notebook", lambda *args: pytest.fail("a current copy was run again"))
    assert execute.run([lesson_copy], "full") == 0
    assert ("08_pruning.ipynb: published copy is current (7 s), its prose unchanged; FORCE=1 runs it again."
            in capsys.readouterr().out)

    edit_cell(lesson_copy, "markdown", "\nNew prose.")  # prose: the copy takes it, its outputs stay
    assert execute.run([lesson_copy], "full") == 0
    assert "(7 s), its prose refreshed from the lesson;" in capsys.readouterr().out
    lesson_cells = nbformat.read(lesson_copy, as_version=4).cells
    published_cells = nbformat.read(published, as_version=4).cells
    assert published_cells[0].source.endswith("\nNew prose.") and len(published_cells) == len(lesson_cells) + 1
    assert execute.run([lesson_copy], "full") == 0
    assert "(7 s), its prose unchanged;" in capsys.readouterr().out

    edit_cell(lesson_copy, "code", "\nx = 1")
    assert not execute.is_current(lesson_copy)


def test_the_command_line_refuses_what_is_not_a_lesson(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["execute", str(tmp_path / "missing.ipynb")])
    assert exit_info.value.code == 2 and "no such notebook" in capsys.readouterr().err
    other = tiny_notebook(tmp_path / "scratchpad.ipynb")
    with pytest.raises(SystemExit):
        main(["execute", str(other)])
    assert "is not a lesson notebook" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["execute", "--profile", "huge", str(other)])
    assert "invalid choice: 'huge'" in capsys.readouterr().err
