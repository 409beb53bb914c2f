"""`python -m course_utils gpu-run`: which cells it skips, what it compares, and the record of a run."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from course_utils import gpu_run
from course_utils.__main__ import main

ABSENT = ["keras", "tensorflow"]


@pytest.mark.parametrize(("source", "needs"), [
    ("import tensorflow as tf\nx = 1", "tensorflow"),
    ("y = tf.constant(1)", "tensorflow"),                      # `tf` is TensorFlow's usual name
    ("%%writefile worker.py\nimport keras\n", "keras"),          # a script the notebook writes
    ("from tensorflow.keras import layers", "tensorflow"),
    ("import keras\nimport tensorflow as tf", "keras, tensorflow"),
    ('print("tf.distribute is TensorFlow\'s")', None),           # a name in a string is not a use
    ("import torch\n!pip list", None),                         # shell lines are left out
    ("x = (", None),                                           # does not parse: its imports are read line by line
])
def test_a_cell_is_skipped_when_it_needs_an_absent_module(source: str, needs: str | None) -> None:
    reason = gpu_run.skip_reason(source, ABSENT)
    assert reason == (f"needs {needs}, not installed on this machine" if needs else None)
    assert gpu_run.skip_reason(source, []) is None


def test_outputs_are_compared_as_nbval_compares_them() -> None:
    stream = [nbformat.v4.new_output("stream", name="stdout", text="a at 0x7f00aa11bb22\n"),
              nbformat.v4.new_output("stream", name="stdout", text="b\n")]
    one_chunk = [nbformat.v4.new_output("stream", name="stdout", text="a at 0x7f00cc33dd44\nb\n")]
    figure = [nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"})]
    sanitizers = gpu_run._sanitizers()
    assert gpu_run.comparable(stream, sanitizers) == gpu_run.comparable(one_chunk, sanitizers) == [
        "a at 0xADDRESS\nb\n"]
    assert gpu_run.comparable(figure, sanitizers) == []            # pictures are not compared


def _lesson(folder: Path) -> Path:
    cells = [nbformat.v4.new_code_cell("import tensorflow as tf", id="tf-import"),
             nbformat.v4.new_code_cell('print("✓ a claim: 2.0x. Checked here.")', id="claim", outputs=[
                 nbformat.v4.new_output("stream", name="stdout", text="✓ a claim: 2.0x. Checked here.\n")]),
             nbformat.v4.new_code_cell("x = tf.constant(1)", id="tf-use"),
             nbformat.v4.new_code_cell('raise ValueError("boom")', id="fails"),
             nbformat.v4.new_code_cell("print(1 + 1)", id="drifts",
                                       outputs=[nbformat.v4.new_output("stream", name="stdout", text="3\n")]),
             nbformat.v4.new_code_cell("print(1 + 1)", id="ignored", metadata={"tags": ["nbval-ignore-output"]},
                                       outputs=[nbformat.v4.new_output("stream", name="stdout", text="3\n")])]
    path = folder / "99_probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def test_a_run_records_skips_failures_claims_and_drift(tmp_path: Path) -> None:
    lesson = _lesson(tmp_path)
    status = gpu_run.run([lesson], tmp_path / "out", without=("tensorflow",), cell_timeout=120)
    record = json.loads((tmp_path / "out" / "gpu-run.json").read_text())
    (run,) = record["lessons"]
    assert status == 1                                               # a cell failed
    assert "tensorflow" in record["machine"]["missing"]
    assert run["finished"] and run["ran"] == 4
    assert [s["cell"] for s in run["skipped"]] == ["tf-import", "tf-use"]
    assert run["errors"] == [{"cell": "fails", "error": "ValueError: boom", "after_skip": True}]
    assert run["claims"] == {"checked": ["a claim"], "not_checked": []}
    assert run["drift"] == ["drifts"]                                # "2" printed where "3" was committed
    executed = nbformat.read(tmp_path / "out" / lesson.name, as_version=4)
    assert "[gpu-run] skipped: needs tensorflow" in executed.cells[0].outputs[0].text
    table = (tmp_path / "out" / "gpu-run.md").read_text()
    assert "| 99_probe.ipynb |" in table and "`fails` ValueError: boom (after a skipped cell)" in table


def test_a_lesson_still_running_at_the_deadline_is_stopped(tmp_path: Path) -> None:
    path = tmp_path / "98_slow.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\ntime.sleep(120)")]), path)
    assert gpu_run.run([path], tmp_path / "out", deadline_s=8) == 1
    (run,) = json.loads((tmp_path / "out" / "gpu-run.json").read_text())["lessons"]
    assert not run["finished"] and run["stopped"] == "the deadline"


def test_the_command_refuses_what_is_not_a_lesson(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def refused(*args: str) -> str:
        """What `python -m course_utils gpu-run ARGS` says as it exits with 2 (argparse's usage error)."""
        with pytest.raises(SystemExit) as exit_code:
            main(["gpu-run", *args, "--out", str(tmp_path)])
        assert exit_code.value.code == 2
        return capsys.readouterr().err

    assert "no such notebook" in refused(str(tmp_path / "01_nothing.ipynb"))
    assert "--jobs must be at least 1" in refused("notebooks/01_autograd.ipynb", "--jobs", "0")
