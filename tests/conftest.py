"""Shared fixtures: an isolated environment, small synthetic IDX datasets, and the lessons' notebooks."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
# nbval compares every cell's output with the committed one: the kernels it starts inherit this environment and
# show no progress bars (course_utils.progress).
os.environ["COURSE_PROGRESS"] = "off"
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TEMPLATE = REPO / "docs" / "00_template.ipynb"  # the notebook a new lesson starts from (CONTRIBUTING.md)
SLIDES = REPO / "build" / "slides"


def load_notebook(path: Path) -> dict:
    """A notebook's JSON, as committed."""
    return json.loads(path.read_text())


def source(cell: dict) -> str:
    """A cell's source as one string."""
    return "".join(cell["source"])


@pytest.fixture(params=NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def notebook(request: pytest.FixtureRequest) -> tuple[Path, dict]:
    """Each lesson in turn: its path and its JSON."""
    return request.param, load_notebook(request.param)


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as an IDX file (the MNIST format)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Remove the variables course_utils reads, so each test sets only what it needs."""
    for var in ("COURSE_PROFILE", "COURSE_DATA_DIR", "COURSE_PROGRESS", "COURSE_TENSORBOARD", "COURSE_IN_CONTAINER",
                "CI"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


@pytest.fixture
def fake_root(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> Path:
    """A data root with a tiny 'mnist' (20 train, 10 test images) listed in SHA256SUMS."""
    rng = np.random.default_rng(0)
    lines = []
    for prefix, n in (("train", 20), ("t10k", 10)):
        for kind, arr in (("images-idx3", rng.integers(0, 256, (n, 28, 28))),
                          ("labels-idx1", np.arange(n) % 10)):
            rel = f"MNIST/raw/{prefix}-{kind}-ubyte"
            write_idx(tmp_path / rel, arr)
            lines.append(f"{hashlib.sha256((tmp_path / rel).read_bytes()).hexdigest()}  {rel}")
    (tmp_path / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    clean_env.setenv("COURSE_DATA_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def real_data_root() -> Path:
    """The real datasets, when the test run was given a data root (CI gives ../shared/data)."""
    root = os.environ.get("COURSE_DATA_DIR")
    if not root or not (Path(root) / "MNIST" / "raw").is_dir():
        pytest.skip("COURSE_DATA_DIR does not point at a folder with the real MNIST; set it to run this test.")
    return Path(root)


@pytest.fixture(scope="session")
def decks() -> list[Path]:
    """All lessons' decks and the template's, built once a test run by `make slides` as an instructor builds them."""
    if shutil.which("npm") is None:
        pytest.fail("`make slides` fetches reveal.js, require.js, jQuery and MathJax with npm: install Debian's `npm` "
                    "package, or leave the browser tests out: PYTEST_ARGS=\"-m 'not browser'\".")
    notebooks = [*NOTEBOOKS, TEMPLATE]
    built = subprocess.run(["make", "--no-print-directory", "slides",
                            "NOTEBOOKS=" + " ".join(str(p.relative_to(REPO)) for p in notebooks)],
                           cwd=REPO, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return [SLIDES / f"{p.stem}.slides.html" for p in notebooks]


def exercise_script(folder: Path, notebook: str, cell_id: str, *edits: tuple[str, str]) -> Path:
    """A lesson's exercise starter (its ``%%writefile`` cell ``cell_id``) written to ``folder``, (old, new) edits
    applied, each old text found once."""
    cell = next(c for c in load_notebook(REPO / "notebooks" / notebook)["cells"] if c["id"] == cell_id)
    first, text = source(cell).split("\n", 1)
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    script = folder / Path(first.split()[-1]).name  # %%writefile scratch/NN/name.py
    script.write_text(text)
    return script
