"""`make site` builds the course's static site: the README's notebook table as home, one page per notebook.

The build runs with ``--strict`` (a broken link or a missing page is an error), from the committed
outputs (nothing is re-executed), so it takes seconds and CI keeps the site from breaking.
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from browser import chromium_page, screenshot
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
    outputs = [o.get("data", {}) for c in cells for o in c.get("outputs", [])]
    described = ["".join(d["text/plain"]).removeprefix("[figure] ")
                 for d in outputs if "data:image/png;base64," in "".join(d.get("text/html", ""))]
    images = sum("image/png" in d for d in outputs) + len(described)
    assert page.count("data:image/png;base64,") >= images, "every committed plot is on the page"
    alts = {html.unescape(alt) for alt in re.findall(r'alt="([^"]*)"', page)}
    for text in described:  # cu.show's figures keep their description on the page, as alt text
        assert text in alts, f"the page lost the alt text {text[:80]!r}..."
    assert (site / notebook.stem / notebook.name).is_file(), "the page offers the notebook for download"


def test_home_page_links_each_published_full_profile_run(site):
    home = (site / "index.html").read_text()
    assert sorted(set(re.findall(r'href="full/(\d\d_\w+)/"', home))) == [nb.stem for nb in NOTEBOOKS]
    assert 'id="the-full-profile"' in home


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_published_full_profile_run_is_a_page_beside_its_lesson(site, notebook):
    page = (site / "full" / notebook.stem / "index.html").read_text()
    assert "Lecture-scale results." in page and "profile full (" in page


def markdown_headings(notebook) -> list[str]:
    """The titles of a notebook's Markdown headings below its title, as written (inline code in backticks)."""
    titles = []
    for cell in json.loads(notebook.read_text())["cells"]:
        fenced = False
        for line in "".join(cell["source"]).splitlines() if cell["cell_type"] == "markdown" else []:
            fenced ^= line.startswith("```")
            if not fenced and (match := re.match(r"#{2,6} (.+)", line)):
                titles.append(match[1].strip())
    return titles


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_pages_table_of_contents_shows_its_headings_whole(site, notebook):
    for page in (site / notebook.stem / "index.html", site / "full" / notebook.stem / "index.html"):
        text = page.read_text()
        ids = set(re.findall(r'<h[1-6][^>]* id="([^"]+)"', text))
        toc = re.findall(r'<a href="#([^"]+)" class="md-nav__link">\s*<span class="md-ellipsis">\s*(.*?)\s*</span>',
                         text, re.S)
        assert toc and {anchor for anchor, _ in toc} <= ids, "every entry links a heading of the page"
        titles = {title for _, title in toc}
        for heading in markdown_headings(notebook):
            assert re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(heading, quote=False)) in titles, heading


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """The folder over HTTP on a free port of 127.0.0.1 (the site's search worker refuses file:// pages)."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_port}/"
        finally:
            server.shutdown()
            thread.join(timeout=5)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


# Every word of the titles and topics (code included) that the browser split over two lines; a break after a
# hyphen is a break between words.
SPLIT_WORDS = """() => [...document.querySelectorAll('.course-lessons td:is(:nth-child(2), :nth-child(3))')]
  .flatMap(cell => {
    const split = [], walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/[^\\s\\u2013-]+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        if (range.getClientRects().length > 1) split.push(word[0]);
      }
    }
    return split;
  })"""


@pytest.mark.browser
def test_the_home_table_reads_at_a_laptops_width(site, tmp_path):
    with served(site) as url, chromium_page(tmp_path / "profile", width=1366, height=768) as page:
        page.goto(url)
        page.wait_for_load_state("networkidle")
        wrapper = "document.querySelector('.course-lessons table').parentElement"
        assert page.evaluate(f"() => {wrapper}.scrollWidth <= {wrapper}.clientWidth"), "the table scrolls sideways"
        assert page.evaluate("() => document.querySelector('.course-lessons td:nth-child(3)').offsetWidth") >= 240
        assert page.evaluate(SPLIT_WORDS) == [], "words broken over two lines"
        page.locator(".course-lessons table").scroll_into_view_if_needed()
        screenshot(page, "site_home_table")


def test_the_lecture_map_is_a_page_whose_links_open_their_cells(site):
    """Every item of docs/lecture_map.yml that links a cell links an anchor that the lesson's page has."""
    from course_utils import lecture_map

    page = (site / "lectures" / "index.html").read_text()
    assert "<h1" in page and "Lecture map" in page
    links = re.findall(r'href="\.\./(\d\d_\w+)/#cell-id=([\w-]+)"', page)
    linked = [item for lecture in lecture_map.load() for item in lecture.items if item.cell]
    assert len(links) == len(linked) > 0
    ids = {}
    for stem, cell_id in links:
        if stem not in ids:
            ids[stem] = set(re.findall(r'id="cell-id=([\w-]+)"', (site / stem / "index.html").read_text()))
        assert cell_id in ids[stem], f"{stem}/#cell-id={cell_id} is not an anchor of the page"
    home = (site / "index.html").read_text()
    assert 'href="lectures/"' in home, "the home page links the lecture map"


TYPESET = """async () => {
    const pause = ms => new Promise(done => setTimeout(done, ms));
    for (let i = 0; i < 300 && !(window.MathJax && MathJax.isReady && MathJax.Hub.queue.pending === 0); i++)
        await pause(200);
    if (!(window.MathJax && MathJax.isReady)) return null;
    const formulas = [...document.querySelectorAll('script[type^="math/tex"]')];
    const raw = [...document.querySelectorAll('.jp-MarkdownOutput')].flatMap(cell => {
        const text = cell.cloneNode(true);   // the prose as read: no code, no TeX source, no typeset formula
        text.querySelectorAll('code, pre, script, .MathJax_Preview, .MathJax_CHTML, .mjx-chtml')
            .forEach(e => e.remove());
        const tex = /\\$\\$[^]*?\\$\\$|\\$[^$\\n]*[\\\\_^{][^$\\n]*\\$|\\\\(?:\\(|\\[|[A-Za-z]{2,})/g;  // TeX as text
        return [...text.textContent.matchAll(tex)].map(m => m[0].slice(0, 60));
    });
    return {formulas: formulas.length, drawn: formulas.filter(f => document.getElementById(f.id + '-Frame')).length,
            errors: document.querySelectorAll('.mjx-merror, .MathJax_Error').length, raw};
}"""


@pytest.fixture(scope="module")
def site_in_chromium(site, tmp_path_factory):
    """The site over HTTP and one Chromium page for the module's pages (a browser each would add seconds a page)."""
    with served(site) as url, chromium_page(tmp_path_factory.mktemp("profile")) as page:
        yield url, page


@pytest.mark.browser
@pytest.mark.timeout(300)
@pytest.mark.parametrize("page_path", [f"{nb.stem}/" for nb in NOTEBOOKS])
def test_every_formula_of_a_notebook_page_is_typeset(site_in_chromium, page_path):
    """The site's MathJax (vendored, served with the site) typesets every formula: no TeX is left as text. The page
    of a published full-profile copy is not typeset again: its Markdown is the lesson's (tests/test_published_runs.py)
    and the same build renders it."""
    notebook = REPO / "notebooks" / page_path.rstrip("/")
    markdown = "".join("".join(c["source"]) for c in json.loads(notebook.with_suffix(".ipynb").read_text())["cells"]
                       if c["cell_type"] == "markdown")
    url, page = site_in_chromium
    requests: list[str] = []

    def record(request) -> None:
        requests.append(request.url)

    page.on("request", record)
    try:
        page.goto(url + page_path)
        found = page.evaluate(TYPESET)
    finally:
        page.remove_listener("request", record)
    assert found is not None, "MathJax did not load"
    assert not [r for r in requests if "mathjax" in r.lower() and not r.startswith(url)], "MathJax from outside"
    assert found["raw"] == [], f"TeX shown as text: {found['raw'][:5]}"
    assert found["errors"] == 0
    assert found["drawn"] == found["formulas"], "a formula was not typeset"
    assert (found["formulas"] > 0) == ("$" in markdown), f"{found['formulas']} formulas typeset"
