"""`make site` builds the course's static site: the README's notebook table as home, one page per notebook.

The build runs with ``--strict`` (a broken link or a missing page is an error), from the committed
outputs (nothing is re-executed), so it takes seconds and CI keeps the site from breaking.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import NOTEBOOKS, REPO

SITE = REPO / "build" / "site"

@pytest.fixture(scope="module")
def site():
    out = subprocess.run(["make", "--no-print-directory", "site"], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return SITE


def test_home_page_is_the_notebook_table(site):
    home = (site / "index.html").read_text()
    assert "<table>" in home
    linked = re.findall(r'href="(\d\d_\w+)/"', home)
    assert sorted(set(linked)) == [nb.stem for nb in NOTEBOOKS]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_is_a_page_with_its_outputs(site, notebook):
    page = (site / notebook.stem / "index.html").read_text()
    cells = json.loads(notebook.read_text())["cells"]
    title = "".join(cells[0]["source"]).splitlines()[0].removeprefix("# ")
    assert f"<title>{title} - " in page
    images = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
    assert page.count("data:image/png;base64,") >= images, "every committed plot is on the page"
    assert (site / notebook.stem / notebook.name).is_file(), "the page offers the notebook for download"


def test_home_page_links_each_published_full_profile_run(site):
    home = (site / "index.html").read_text()
    assert sorted(set(re.findall(r'href="full/(\d\d_\w+)/"', home))) == [nb.stem for nb in NOTEBOOKS]
    assert 'id="the-full-profile"' in home


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_published_full_profile_run_is_a_page_beside_its_lesson(site, notebook):
    page = (site / "full" / notebook.stem / "index.html").read_text()
    assert "Lecture-scale results." in page and "profile full (" in page
