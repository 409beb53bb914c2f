"""Every slide of every deck fits a 16:9 projector, measured in Chromium as an instructor would see it: each slide
visited with all its fragments shown, nothing below the slide, no line of code or output cut at its edge, no picture
missing offline; and every page of the printed handout holds its slide whole.

The deck's own script (docs/slides_template/course_reveal/index.html.j2) shrinks wide tables and tall slides within
limits; these tests fail where that is not enough, naming the lesson and the slide.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from browser import chromium_page
from course_utils import handouts

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
# Every slide, fragments shown: how far its content reaches below the slide, the zoom the deck gave it, the `pre`
# blocks whose lines reach past their right edge, its pictures that did not load, and its formulas that MathJax broke
# into lines (it marks them mjx-full-width).
MEASURE_SLIDES = """async () => {
  const Reveal = require(MODULE), idle = () => new Promise(done => MathJax.Hub.Queue(done));
  const height = Reveal.getConfig().height, out = [];
  const longest = text => text.split("\\n").reduce((a, b) => b.length > a.length ? b : a, "").slice(0, 50);
  const shown = ".jp-Cell, p, li, h1, h2, h3, pre, table, img, .MathJax, .MathJax_Display";
  for (const slide of Reveal.getSlides()) {
    const at = Reveal.getIndices(slide);
    Reveal.slide(at.h, at.v, 999);
    await idle(); await new Promise(done => setTimeout(done, 20));
    const box = slide.getBoundingClientRect();
    out.push({at: `${at.h}.${at.v}`, title: slide.textContent.trim().split("\\n")[0].slice(0, 60),
              below: slide.scrollHeight - height, aside: slide.scrollWidth - slide.clientWidth,
              zoom: +slide.dataset.zoom,
              outside: [...slide.querySelectorAll(shown)].filter(e => !e.closest("aside")).filter(e => {
                const r = e.getBoundingClientRect();
                return r.width && r.height && (r.right > box.right + 1 || r.bottom > box.bottom + 1 ||
                                               r.left < box.left - 1 || r.top < box.top - 1); }).map(
                e => `${e.tagName.toLowerCase()}.${e.className}`.slice(0, 40) + ": " + longest(e.textContent)),
              cut: [...slide.querySelectorAll("pre")].filter(pre => pre.scrollWidth > pre.clientWidth + 1).map(
                pre => longest(pre.textContent)),
              tables: [...slide.querySelectorAll("pre[data-fit='table-too-wide']")].map(
                pre => longest(pre.textContent)),
              broken: [...slide.querySelectorAll("img")].filter(img => !img.complete || !img.naturalWidth).map(
                img => img.src.slice(0, 80)),
              split: [...slide.querySelectorAll(".MathJax_CHTML.mjx-full-width")].filter(
                m => !m.closest("aside")).map(m => m.textContent.slice(0, 40))});
  }
  return out;
}"""
# Every printed page: how far its slide reaches below the page.
MEASURE_PAGES = """() => [...document.querySelectorAll(".pdf-page")].map(page => {
  const slide = page.querySelector("section");
  return {title: slide.textContent.trim().split("\\n")[0].slice(0, 60),
          below: slide.offsetTop + slide.scrollHeight - page.clientHeight};
})"""


def open_deck(page, deck: Path, query: str = "") -> None:
    """Open a deck offline, as in a lecture hall, and wait until its script has laid every slide out."""
    page.goto(deck.as_uri() + query)
    page.wait_for_function("() => window.courseDeck && courseDeck.ready && window.MathJax && MathJax.isReady",
                           timeout=120_000)


# The projectors: the common 1280x720, and 1920x1080, where the deck is zoomed 1.5x and text is laid out anew.
PROJECTORS = ((1280, 720), (1920, 1080))


# The title slide: its objectives, all on the slide, and no picture (the notebook's Colab badge is a link there).
MEASURE_TITLE = """() => { const slide = require(MODULE).getSlides()[0];
    const items = [...slide.querySelectorAll('li')], bottom = slide.getBoundingClientRect().bottom;
    return {objectives: items.length, images: slide.querySelectorAll('img').length,
            shown: items.filter(li => li.getBoundingClientRect().bottom <= bottom + 1).length,
            colab: [...slide.querySelectorAll('a')].filter(
              a => a.href.includes('colab.research.google.com')).map(a => a.textContent)}; }"""


def misfits(decks: list[Path], width: int, height: int, profile: Path) -> tuple[int, list[str]]:
    """Every slide of ``decks`` measured in a Chromium window of ``width`` x ``height``: the number of slides and
    what does not fit, each problem naming its lesson and slide; and each title slide as MEASURE_TITLE says."""
    failures, slides = [], 0
    with chromium_page(profile, width=width, height=height) as page:
        page.route(re.compile(r"^(?!file:)"), lambda route: route.abort())  # offline: what is not on disk fails
        for deck in decks:
            open_deck(page, deck)
            lesson = deck.name[:2]
            title = page.evaluate(MEASURE_TITLE.replace("MODULE", repr(handouts.reveal_module(deck))))
            if not (title["objectives"] >= 3 and title["shown"] == title["objectives"] and not title["images"]
                    and title["colab"] == ["Open in Colab"]):
                failures.append(f"{width}x{height}, {lesson} title slide: 3 objectives or more, all shown, no "
                                f"picture and an 'Open in Colab' link, not {title}")
            for slide in page.evaluate(MEASURE_SLIDES.replace("MODULE", repr(handouts.reveal_module(deck)))):
                slides += 1
                where = f"{width}x{height}, {lesson} slide {slide['at']} ({slide['title']!r})"
                if slide["below"] > 1:
                    failures.append(f"{where}: {slide['below']} px below the slide at zoom {slide['zoom']} (split the "
                                    "slide, or give a cell an excerpt: CONTRIBUTING.md, Slides)")
                if slide["aside"] > 1:
                    failures.append(f"{where}: {slide['aside']} px wider than the slide")
                failures += [f"{where}: outside the slide: {element}" for element in slide["outside"]]
                failures += [f"{where}: a line cut at the right edge: {line!r}" for line in slide["cut"]]
                failures += [f"{where}: a table too wide at the smallest font: {line!r}" for line in slide["tables"]]
                failures += [f"{where}: a picture that does not load offline: {src}" for src in slide["broken"]]
                failures += [f"{where}: a formula broken into lines (MathJax's automatic line breaks): {math!r}"
                             for math in slide["split"]]
    return slides, failures


def test_every_slide_fits_the_projector_and_each_title_slide_shows_its_objectives(decks, tmp_path):
    # One browser per projector, side by side: each renders in its own processes (about 30% less time on 2 cores).
    with ThreadPoolExecutor(len(PROJECTORS)) as pool:
        measured = list(pool.map(lambda size: misfits(decks, *size, tmp_path / f"profile-{size[0]}"), PROJECTORS))
    slides = [count for count, _ in measured]
    failures = [failure for _, found in measured for failure in found]
    assert min(slides) > 12 * 40 and len(set(slides)) == 1, f"slides measured at each projector: {slides}"
    assert not failures, f"{len(failures)} problem(s) in {slides[0]} slides, at " + " and ".join(
        f"{w}x{h}" for w, h in PROJECTORS) + ":\n" + "\n".join(failures)


def test_every_printed_page_holds_its_slide(decks, tmp_path):
    failures = []
    with chromium_page(tmp_path / "profile") as page:
        page.route(re.compile(r"^(?!file:)"), lambda route: route.abort())
        page.emulate_media(media="print")  # as Chromium lays out a page it prints
        for deck in decks:
            open_deck(page, deck, handouts.PRINT_QUERY)
            total = page.evaluate(f"() => require({handouts.reveal_module(deck)!r}).getTotalSlides()")
            pages = page.evaluate(MEASURE_PAGES)
            assert len(pages) == total, f"{deck.name}: {len(pages)} pages for {total} slides"
            failures += [f"{deck.name[:2]} page {i} ({p['title']!r}): cut {p['below']} px above the slide's end"
                         for i, p in enumerate(pages, 1) if p["below"] > 1]
    assert not failures, "\n".join(failures)
