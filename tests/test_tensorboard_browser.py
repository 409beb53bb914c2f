"""TensorBoard's HParams dashboard in headless Chromium, over the logs that lesson 04 writes.

The lesson's own cells, from its setup through the sweep (sections 1-4), run in a copy of the
notebook in a temporary folder; TensorBoard then serves that folder's ``scratch/04/runs`` on
127.0.0.1, and the page must list every run of the sweep (screenshot in build/screenshots/).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import tensorboard_server as tb
from browser import chromium_page, screenshot
from conftest import REPO

LESSON = REPO / "notebooks" / "04_tensorboard.ipynb"


def run_the_sweep(folder: Path) -> Path:
    """Execute lesson 04 up to its TensorBoard section in ``folder``; return the runs folder it logged to."""
    nb = nbformat.read(LESSON, as_version=4)
    end = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "\n## 5 " in f"\n{c.source}")
    nb.cells = nb.cells[:end]
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    return folder / "scratch" / "04" / "runs"


@pytest.mark.browser
@pytest.mark.timeout(600)
def test_hparams_dashboard_lists_the_lessons_runs(real_data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "quick")  # the lesson's kernel inherits it: 8 short runs
    runs_dir = run_the_sweep(tmp_path)
    runs = sorted(p.name for p in runs_dir.iterdir())
    assert runs, "the lesson wrote no runs"
    server = tb.start_tensorboard(runs_dir, timeout=120)
    try:
        with chromium_page(tmp_path / "profile") as page:
            page.goto(f"{server.url}/#hparams")
            table = page.locator("tf-hparams-table-view")
            for run in runs:  # one row per run of the sweep, its trial ID the run's folder name
                table.get_by_text(run, exact=True).wait_for(timeout=120_000)
            header = table.locator("vaadin-grid-cell-content").all_inner_texts()
            screenshot(page, "tensorboard-hparams")
    finally:
        tb.stop_tensorboard(server)
    assert {"Trial ID", "lr", "batch_size", "shuffle", "hparam/accuracy"} <= {t.strip() for t in header}
    assert sum(t.strip() in runs for t in header) == len(runs)
