"""The lessons as reveal.js slides (`make slides`): slide metadata on every cell, and a deck that really renders."""

from __future__ import annotations

import re

import pytest

from browser import chromium_executable, chromium_page, screenshot
from conftest import NOTEBOOKS, REPO, TEMPLATE, load_notebook, source
from course_utils import handouts, slides

SLIDE_TYPES = {"slide", "subslide", "fragment", "skip", "notes", "-"}
DECK = "01_autograd"


@pytest.fixture(params=[*NOTEBOOKS, TEMPLATE], ids=[p.name for p in [*NOTEBOOKS, TEMPLATE]])
def notebook(request: pytest.FixtureRequest) -> tuple:
    """Each lesson in turn, and the template a new lesson starts from: its path and its JSON."""
    return request.param, load_notebook(request.param)


def slide_type(cell: dict) -> str | None:
    return cell["metadata"].get("slideshow", {}).get("slide_type")


def headings(text: str, level: str) -> list[int]:
    """Line numbers of the markdown headings of one level (``"## "``), outside fenced code blocks."""
    found, fenced = [], False
    for number, line in enumerate(text.split("\n")):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith(level):
            found.append(number)
    return found


def test_every_cell_has_a_slide_type(notebook):
    _, nb = notebook
    for cell in nb["cells"]:
        assert slide_type(cell) in SLIDE_TYPES, f"cell {cell['id']}: slideshow.slide_type must be one of {SLIDE_TYPES}"


def test_title_and_sections_start_slides(notebook):
    _, nb = notebook
    assert slide_type(nb["cells"][0]) == "slide", "the title cell is a slide"
    sections = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        lines = headings(source(cell), "## ")
        assert lines in ([], [0]), f"cell {cell['id']}: a `## ` heading must open its own cell (split the cell there)"
        if lines:
            sections += 1
            setup = source(cell).startswith("## Setup") and slide_type(cell) == "skip"  # plumbing: not on the deck
            assert slide_type(cell) == "slide" or setup, f"cell {cell['id']} opens a section: it must be a slide"
    assert sections >= 3  # Setup, the lesson's sections, Check your understanding, Summary, References


def test_setup_cell_is_skipped_and_derivations_use_fragments(notebook):
    _, nb = notebook
    setup = next(c for c in nb["cells"] if c["cell_type"] == "code" and source(c).strip())
    assert "cu.setup(" in source(setup) and slide_type(setup) == "skip", "the setup cell is plumbing: skip it"
    assert any(slide_type(c) == "fragment" for c in nb["cells"]), "reveal at least one derivation step by step"


def expected_deck(nb: dict) -> tuple[int, int]:
    """(subslides, fragments) that nbconvert's reveal template makes of the notebook.

    nbconvert turns the first cell that is neither skipped nor a note into a slide; from there every
    `slide` opens a horizontal section and a vertical one inside it, every `subslide` a vertical one,
    and every `fragment` a `div.fragment`. Reveal counts the vertical sections (a horizontal section
    that holds vertical ones is a stack, not a slide).
    """
    types = [slide_type(c) or "-" for c in nb["cells"]]
    first = next(i for i, t in enumerate(types) if t not in ("skip", "notes"))
    subslides = 1 + sum(t in ("slide", "subslide") for t in types[first + 1:])
    fragments = sum(t == "fragment" for t in types[first + 1:])
    return subslides, fragments


def expected_math(nb: dict) -> tuple[int, int]:
    """(display, inline) TeX snippets in the markdown cells that the deck shows."""
    display = inline = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown" or slide_type(cell) == "skip":  # notes are typeset too (speaker view)
            continue
        text = re.sub(r"```.*?```|`[^`\n]*`", "", source(cell), flags=re.DOTALL)  # code is not typeset
        display += len(re.findall(r"\$\$.+?\$\$", text, flags=re.DOTALL))
        inline += len(re.findall(r"(?<!\$)\$[^$]+\$(?!\$)", re.sub(r"\$\$.+?\$\$", "", text, flags=re.DOTALL)))
    return display, inline


def normalized(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.browser
@pytest.mark.timeout(900)
def test_make_slides_renders_lesson_01_in_chromium(decks, tmp_path):
    html = next(deck for deck in decks if deck.name == f"{DECK}.slides.html")
    nb = load_notebook(REPO / "notebooks" / f"{DECK}.ipynb")
    subslides, fragments = expected_deck(nb)
    display, inline = expected_math(nb)

    module = handouts.reveal_module(html)  # the template loads the vendored reveal.js with require.js
    reveal = f"const Reveal = require({module!r});"

    def js(body: str):
        return page.evaluate(f"() => {{ {reveal} {body} }}")

    def math_on_screen() -> int:
        """Wait until MathJax has (re)drawn every formula of the current slide, twice in a row; return their number."""
        drawn = page.evaluate(f"""async () => {{ {reveal}
            const drawn = () => {{ const s = [...Reveal.getCurrentSlide().querySelectorAll('script[type^="math/tex"]')];
                const ok = MathJax.Hub.queue.pending === 0 && !document.querySelector('.MathJax_Processing') && s.every(
                    x => {{ const f = document.getElementById(x.id + '-Frame'); return f && f.offsetWidth > 0; }});
                return ok ? s.length : -1; }};
            const pause = ms => new Promise(done => setTimeout(done, ms));
            for (let i = 0; i < 150; i++) {{
                await pause(200);
                if (drawn() >= 0) {{ await pause(300); if (drawn() >= 0) return drawn(); }}
            }}
            return -1; }}""")
        assert drawn >= 0, "MathJax did not draw the formulas of the current slide within 75 s"
        return drawn

    external: list[str] = []
    with chromium_page(tmp_path / "profile", width=1280, height=720) as page:  # the decks' size (16:9)
        def refuse(route) -> None:  # offline, as in a lecture hall: anything not on disk is refused (and recorded)
            external.append(route.request.url)
            route.abort()

        page.route(re.compile(r"^(?!file:)"), refuse)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(html.as_uri())
        page.wait_for_function(f"() => window.require && require.defined({module!r}) "
                               f"&& require({module!r}).isReady()", timeout=60_000)
        page.wait_for_function("() => window.MathJax && MathJax.isReady && MathJax.Hub.queue.pending === 0",
                               timeout=60_000)
        assert errors == [], errors
        assert not [url for url in external if re.search(r"reveal|require|jquery|mathjax", url, re.IGNORECASE)]

        assert js("return Reveal.getTotalSlides();") == subslides
        assert page.locator(".reveal .slides .fragment").count() == fragments

        # MathJax (the vendored copy) typeset every formula of the markdown: one rendered frame per TeX snippet.
        math = page.evaluate("""() => [...document.querySelectorAll('script[type^="math/tex"]')].map(
            s => [s.type.includes('mode=display'), !!document.getElementById(s.id + '-Frame')])""")
        assert (sum(d for d, _ in math), sum(not d for d, _ in math)) == (display, inline)
        assert display > 0 and all(rendered for _, rendered in math)
        assert page.locator(".mjx-merror, .MathJax_Error").count() == 0
        # The deck's text, all slides, without the TeX sources that MathJax keeps in <script> tags.
        text = normalized(page.evaluate("""() => {
            const deck = document.querySelector('.reveal .slides').cloneNode(true);
            deck.querySelectorAll('script').forEach(s => s.remove());
            return deck.textContent; }"""))
        assert "\\frac" not in text and "$$" not in text, "raw TeX left in the deck"

        # Skipped cells are not in the deck, the others are: by cell id, and by the text of the code.
        ids = page.evaluate("() => [...document.querySelectorAll('.jp-Cell')].map(c => c.id.replace('cell-id=', ''))")
        shown = [i for i in ids if not i.endswith("-whole")]  # a code excerpt's whole cell, in the notes
        assert sorted(shown) == sorted(c["id"] for c in nb["cells"] if slide_type(c) != "skip")
        notes = {c["id"] for c in nb["cells"] if slide_type(c) == "notes"}  # a slide's notes: one block, anywhere in it
        assert [i for i in shown if i not in notes] == [c["id"] for c in nb["cells"] if slide_type(c) not in
                                                         ("skip", "notes")]
        code = [(slide_type(c), normalized(source(c))) for c in nb["cells"] if c["cell_type"] == "code"]
        assert [s for t, s in code if t == "skip"] and not [s for t, s in code if t == "skip" and s in text]
        assert all(s in text for t, s in code if t not in ("skip", "notes"))

        screenshot(page, "slides-01-title")
        # The chain rule by hand, every fragment shown, and the formula typeset on screen.
        derivation = next(i for i, c in enumerate(nb["cells"]) if "$$" in source(c) and slide_type(c) == "fragment")
        js(f"const target = document.getElementById('cell-id={nb['cells'][derivation]['id']}').closest('section');"
           "const at = Reveal.getIndices(target); Reveal.slide(at.h, at.v, 99);")
        assert math_on_screen() > 0
        screenshot(page, "slides-01-derivation")
        last = js("const s = Reveal.getSlides(), end = s[s.length - 1], at = Reveal.getIndices(end);"
                  "Reveal.slide(at.h, at.v); return Reveal.isLastSlide() && Reveal.getCurrentSlide() === end;")
        assert last
        # the last slide: the appendix's last, or References
        closing = [c["id"] for c in nb["cells"] if slide_type(c) in ("slide", "subslide")][-1]
        assert js(f"return !!Reveal.getCurrentSlide().querySelector('[id=\"cell-id={closing}\"]');")
        math_on_screen()
        screenshot(page, "slides-01-last")

    # The presenter's view: `s` opens reveal.js's speaker view (offline), with the title slide's notes.
    notes = source(next(c for c in nb["cells"] if slide_type(c) == "notes"))
    with chromium_page(tmp_path / "speaker") as page:
        page.route(re.compile(r"^(?!file:)"), lambda route: route.abort())
        page.goto(html.as_uri())
        page.wait_for_function(f"() => window.require && require.defined({module!r}) "
                               f"&& require({module!r}).isReady()", timeout=60_000)
        with page.context.expect_page() as opened:
            page.keyboard.press("s")
        speaker = opened.value
        speaker.wait_for_function("() => { const n = document.querySelector('.speaker-controls-notes .value');"
                                  " return n && n.textContent.trim().length > 0; }", timeout=60_000)
        shown = normalized(speaker.locator(".speaker-controls-notes .value").inner_text())
        assert normalized(re.sub(r"[*`#]", "", notes))[:40] in normalized(re.sub(r"[*`#]", "", shown))
        speaker.wait_for_timeout(1000)  # the current and upcoming slides load in their frames
        screenshot(speaker, "slides-01-speaker-view")

    # The handout: a page per slide, printed offline by the same Chromium.
    pdf = tmp_path / f"{DECK}.pdf"
    assert handouts.print_deck(html, pdf, executable=chromium_executable()) == subslides


@pytest.mark.parametrize("lesson", [*NOTEBOOKS, TEMPLATE], ids=[p.name for p in [*NOTEBOOKS, TEMPLATE]])
def test_every_slide_fits_a_projector(lesson):
    nb = load_notebook(lesson)
    assert slides.too_full(nb) == [], f"`python -m course_utils slides --check {lesson.relative_to(REPO)}`"
    assert sum(slide_type(c) == "notes" for c in nb["cells"]) >= 3, "the explanation goes into speaker notes"
    for cell in nb["cells"]:
        slides.excerpt(cell)  # an excerpt names lines of its cell


def test_the_colab_badge_becomes_a_text_link_in_the_deck():
    from nbformat.v4 import new_markdown_cell, new_notebook

    title = load_notebook(NOTEBOOKS[0])["cells"][0]
    nb, _ = slides.ColabLink().preprocess(new_notebook(cells=[new_markdown_cell(source(title))]), {})
    assert "[Open in Colab](https://colab.research.google.com/github/" in nb.cells[0].source
    assert "colab-badge.svg" not in nb.cells[0].source and "colab-badge.svg" in source(title)


PLAN_HEADINGS = ["## Sections", "## Before the lecture", "## When the room has no GPU"]


def plan_rows(lesson) -> list[list[str]]:
    """The rows of the plan's table of sections (section, minutes, ...), the total last."""
    table = (REPO / "docs" / "instructors" / f"{lesson.name[:2]}.md").read_text().split("## Sections", 1)[1]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.split("\n## ", 1)[0].splitlines()
            if line.startswith("|") and not line.startswith("|---")][1:]


@pytest.mark.parametrize("lesson", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_each_lesson_has_an_instructor_plan(lesson):
    plan = REPO / "docs" / "instructors" / f"{lesson.name[:2]}.md"
    assert plan.is_file(), f"write {plan.relative_to(REPO)} (CONTRIBUTING.md, Slides)"
    text = plan.read_text()
    title = source(load_notebook(lesson)["cells"][0]).splitlines()[0]
    assert text.startswith(f"{title}: the instructor's plan\n")
    assert [line for line in text.splitlines() if line.startswith("## ")] == PLAN_HEADINGS
    rows = plan_rows(lesson)
    sections = [re.match(r"## (\d+) · ", line)[1] for line in source_lines(load_notebook(lesson))
                if re.match(r"## \d+ · ", line)]
    assert [row[0].split(" · ")[0] for row in rows if re.match(r"\d+ · ", row[0])] == sections, "a row per section"
    assert rows[-1][0] == "total" and int(rows[-1][1]) == sum(int(row[1]) for row in rows[:-1])
    assert 30 <= int(rows[-1][1]) <= 120, "a lecture of 30 to 120 minutes"


SLIDES_PER_MINUTE = 0.65  # about 55 slides in 90 minutes: a minute and a half a slide, with the runs and predictions


@pytest.mark.parametrize("lesson", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_deck_can_be_taught_in_the_plans_minutes(lesson):
    minutes = int(plan_rows(lesson)[-1][1])
    count = len(slides.deck(load_notebook(lesson)))
    most = int(SLIDES_PER_MINUTE * minutes)
    assert count <= most, (f"{count} slides for a {minutes}-minute lecture: at most {most}. Move the results the "
                           "lecture does not discuss into speaker notes (CONTRIBUTING.md, Slides: pace)")


def source_lines(nb: dict) -> list[str]:
    return [line for cell in nb["cells"] if cell["cell_type"] == "markdown" for line in source(cell).splitlines()]
