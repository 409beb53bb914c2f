"""PDF handouts of the slide decks (``make handouts``): reveal.js's print mode in headless Chromium, a page a slide.

The decks come from ``make slides`` (``build/slides/NN_name.slides.html``, reveal.js vendored beside them), so
printing needs no network. Fragments are printed in their final state; the deck's script fits every slide to its
page, and ``tests/test_deck_fit.py`` checks that no page cuts its slide.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

# reveal.js 4 reads its configuration from the query string too.
PRINT_QUERY = "?print-pdf&pdfSeparateFragments=false&pdfMaxPagesPerSlide=1"
# reveal.js breaks the page after every slide, the last one too: Chromium would print an empty last page.
LAST_PAGE = ".reveal .slides .pdf-page:last-child { page-break-after: auto !important; break-after: auto !important; }"
_REVEAL_MODULE = re.compile(r'"([^"]+/dist/reveal\.js)"')


def chromium() -> str:
    """The Chromium that prints: Debian's ``chromium`` (or ``chromium-browser``) on the PATH.

    Raises:
        RuntimeError: when there is none, with what to install.
    """
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise RuntimeError("no Chromium on the PATH: install Debian's or Ubuntu's `chromium` package (`make browser` "
                           f"does it as root), or print a deck from a browser: open it with {PRINT_QUERY} and print.")
    return path


def reveal_module(deck: Path) -> str:
    """The name under which a deck of ``make slides`` loads its vendored reveal.js with require.js (an AMD module:
    reveal.js is no global there, scripts reach it with ``require(name)``).

    Raises:
        ValueError: when the file is not a deck of ``make slides`` (no vendored reveal.js).
    """
    module = _REVEAL_MODULE.search(Path(deck).read_text())
    if module is None or module.group(1).startswith("http"):
        raise ValueError(f"{deck} is not a deck of `make slides` (it does not load the vendored reveal.js).")
    return module.group(1)


def page_count(pdf: Path) -> int:
    """The number of pages of a PDF file (its page objects)."""
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", Path(pdf).read_bytes()))


def print_deck(deck: Path, pdf: Path, *, executable: str | None = None, timeout_s: float = 120) -> int:
    """Print a reveal.js deck made by ``make slides`` to ``pdf``, one page per slide; return the page count.

    Raises:
        FileNotFoundError: when the deck does not exist (run ``make slides`` first).
        ValueError: when the file is not a deck of ``make slides`` (no vendored reveal.js).
    """
    from playwright.sync_api import sync_playwright  # requirements.txt has it; the package does not need it

    deck = Path(deck).resolve()
    if not deck.is_file():
        raise FileNotFoundError(f"{deck} does not exist: build the decks first with `make slides`.")
    module = reveal_module(deck)
    ready = (f"() => window.require && require.defined({module!r}) && require({module!r}).isReady()"
             " && document.querySelectorAll('.pdf-page').length > 0"
             " && window.MathJax && MathJax.isReady && MathJax.Hub.queue.pending === 0"
             " && window.courseDeck && courseDeck.ready")  # the deck's script has fitted every slide to its page
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable or chromium(), headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.emulate_media(media="print")  # the deck's script fits each slide to its page as printed
            page.route(re.compile(r"^(?!file:)"), lambda route: route.abort())  # offline: the deck is on disk
            page.goto(deck.as_uri() + PRINT_QUERY)
            page.wait_for_function(ready, timeout=timeout_s * 1000)
            page.add_style_tag(content=LAST_PAGE)
            pdf = Path(pdf)
            pdf.parent.mkdir(parents=True, exist_ok=True)
            page.pdf(path=str(pdf), prefer_css_page_size=True, print_background=True)  # reveal sets @page's size
        finally:
            browser.close()
    return page_count(pdf)
