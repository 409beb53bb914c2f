"""What a lesson's deck shows, and the rule that keeps it a lecture: at most :data:`MAX_WORDS` words (the title
slide :data:`MAX_TITLE_WORDS`) and :data:`MAX_CODE_LINES` lines of code on a slide (CONTRIBUTING.md, "Slides";
``python -m course_utils slides --check``).

A cell whose ``slideshow.slide_type`` is ``slide`` or ``subslide`` starts a slide, as in nbconvert; ``fragment`` and
``-`` (or none) continue it; ``notes`` go to the slide's speaker notes; ``skip`` is left out. A code cell with
``slideshow.excerpt = "first-last"`` shows those lines on its slide and the whole cell in the notes
(:class:`Excerpts`, which ``make slides`` runs). The Colab badge, an image from the web, becomes a text link in the
deck (:class:`ColabLink`), so that a deck opened offline shows no broken image.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbconvert.preprocessors import Preprocessor

Cell = dict[str, Any]
MAX_WORDS = 50  # of prose on a slide: a few lines, or a few bullets
MAX_TITLE_WORDS = 100  # on the title slide: the title, the Colab badge and the learning objectives
MAX_CODE_LINES = 15  # of code on a slide: what the back of a lecture hall can read
ELLIPSIS = "# ⋮"


def slide_type(cell: Cell) -> str:
    """The cell's role in the deck (``-`` when unset)."""
    return str(cell.get("metadata", {}).get("slideshow", {}).get("slide_type") or "-")


def source(cell: Cell) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def words(markdown: str) -> int:
    """Words a reader sees in Markdown: link targets, HTML tags and comments left out; a formula counts once."""
    text = re.sub(r"<!--.*?-->", " ", markdown, flags=re.S)
    text = re.sub(r"\$\$.+?\$\$|\$[^$\n]+\$", " formula ", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return len([token for token in text.split() if re.search(r"\w", token)])


def code_lines(code: str) -> int:
    """Non-blank lines of a code cell."""
    return sum(1 for line in code.splitlines() if line.strip())


def excerpt(cell: Cell) -> str:
    """The code a cell shows on its slide: the lines of ``slideshow.excerpt`` (``"first-last"``, from 1) with ⋮ where
    lines are left out, or the whole cell.

    Raises:
        ValueError: for an excerpt that is not ``"first-last"`` within the cell.
    """
    span = cell.get("metadata", {}).get("slideshow", {}).get("excerpt")
    if not span:
        return source(cell)
    lines = source(cell).splitlines()
    match = re.fullmatch(r"(\d+)-(\d+)", str(span))
    if not match or not 1 <= int(match[1]) <= int(match[2]) <= len(lines):
        raise ValueError(f"slideshow.excerpt must be 'first-last' within the cell's {len(lines)} lines, got {span!r}.")
    first, last = int(match[1]), int(match[2])
    shown = lines[first - 1:last]
    return "\n".join(([ELLIPSIS] if first > 1 else []) + shown + ([ELLIPSIS] if last < len(lines) else []))


@dataclass
class Slide:
    """One slide of a deck: the cells on screen and those in its speaker notes."""

    cells: list[Cell] = field(default_factory=list)
    notes: list[Cell] = field(default_factory=list)

    @property
    def words(self) -> int:
        return sum(words(source(c)) for c in self.cells if c["cell_type"] == "markdown")

    @property
    def code_lines(self) -> int:
        return sum(code_lines(excerpt(c)) for c in self.cells if c["cell_type"] == "code")

    @property
    def title(self) -> str:
        """The slide's first line of text, to find it."""
        return next((line.strip() for c in self.cells for line in source(c).splitlines() if line.strip()), "")[:70]


def deck(nb: dict[str, Any]) -> list[Slide]:
    """The slides of a notebook, in order."""
    slides: list[Slide] = []
    for cell in nb["cells"]:
        kind = slide_type(cell)
        if kind == "skip":
            continue
        if kind in ("slide", "subslide") or not slides:
            slides.append(Slide())
        (slides[-1].notes if kind == "notes" else slides[-1].cells).append(cell)
    return [slide for slide in slides if slide.cells]


def too_full(nb: dict[str, Any]) -> list[str]:
    """The slides of a notebook that break the rule, each with what it shows."""
    return [f"slide {i} ({slide.title!r}): {slide.words} words, {slide.code_lines} code lines"
            for i, slide in enumerate(deck(nb), 1)
            if slide.words > (MAX_TITLE_WORDS if i == 1 else MAX_WORDS) or slide.code_lines > MAX_CODE_LINES]


class Excerpts(Preprocessor):  # type: ignore[misc]
    """For ``make slides``: a code cell with ``slideshow.excerpt`` shows its excerpt; the whole code goes to the
    speaker notes, after the slide's other notes."""

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        from nbformat.v4 import new_markdown_cell

        cells = []
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.metadata.get("slideshow", {}).get("excerpt"):
                whole = new_markdown_cell(f"The whole cell:\n\n```python\n{cell.source}\n```", id=f"{cell.id}-whole",
                                          metadata={"slideshow": {"slide_type": "notes"}})
                cell.source = excerpt(cell)
                cells += [cell, whole]
            else:
                cells.append(cell)
        nb.cells = cells
        return nb, resources


COLAB_BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\((https://colab\.research\.google\.com/[^)]+)\)")


class ColabLink(Preprocessor):  # type: ignore[misc]
    """For ``make slides``: the Colab badge (an image on Google's servers) becomes the text link "Open in Colab", which
    shows offline too."""

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = COLAB_BADGE.sub(r"[Open in Colab](\1)", cell.source)
        return nb, resources


def stats(notebooks: Sequence[Path]) -> str:
    """The Markdown table of issue 23: per lesson, its slides, their words and code, its speaker notes."""
    rows = ["| lesson | slides | median words on a slide | slides over 100 words | longest | slides with > 25 code "
            "lines | speaker-notes cells |", "|---|---|---|---|---|---|---|"]
    for path in notebooks:
        nb = json.loads(Path(path).read_text())
        slides = deck(nb)
        counts = [s.words for s in slides]
        rows.append(f"| {Path(path).name[:2]} | {len(slides)} | {statistics.median(counts):g} | "
                    f"{sum(c > 100 for c in counts)} | {max(counts)} | {sum(s.code_lines > 25 for s in slides)} | "
                    f"{sum(slide_type(c) == 'notes' for c in nb['cells'])} |")
    return "\n".join(rows)
