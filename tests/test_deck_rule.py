"""course_utils.slides: how a deck is grouped and measured, excerpts of long code cells, and the command."""

from __future__ import annotations

import json

import nbformat
import pytest

from course_utils import slides
from course_utils.__main__ import main


def cell(kind: str, text: str, slide: str = "-", **slideshow: str) -> dict:
    return {"cell_type": kind, "id": f"c{abs(hash(text)) % 10**8}", "source": text,
            "metadata": {"slideshow": {"slide_type": slide, **slideshow}}, "outputs": [], "execution_count": None}


def test_words_leave_out_link_targets_tags_and_formulas():
    assert slides.words("A [link](https://example.com/a/very/long/path) and <b>bold</b> text.") == 5
    assert slides.words("The gradient $\\partial y / \\partial x$ is $$2x + 2$$ here.") == 6
    assert slides.words("- one\n- two\n\n<!-- a comment -->") == 2


def test_deck_groups_cells_as_nbconvert_does():
    nb = {"cells": [cell("markdown", "# Title words here", "slide"), cell("code", "setup()", "skip"),
                    cell("markdown", "notes for the title", "notes"), cell("markdown", "## One", "slide"),
                    cell("code", "a = 1\nb = 2", "-"), cell("markdown", "step", "fragment"),
                    cell("markdown", "### Two", "subslide")]}
    deck = slides.deck(nb)
    assert [len(s.cells) for s in deck] == [1, 3, 1] and [len(s.notes) for s in deck] == [1, 0, 0]
    assert (deck[1].words, deck[1].code_lines, deck[1].title) == (2, 2, "## One")
    assert slides.too_full(nb) == []


def test_excerpts_show_their_lines_and_count_them():
    code = "\n".join(f"x{i} = {i}" for i in range(1, 31))
    long = cell("code", code, "slide")
    nb = {"cells": [long]}
    assert slides.too_full(nb) == ["slide 1 ('x1 = 1'): 0 words, 30 code lines"]
    long["metadata"]["slideshow"]["excerpt"] = "5-14"
    assert slides.excerpt(long).splitlines() == [slides.ELLIPSIS, *code.splitlines()[4:14], slides.ELLIPSIS]
    assert slides.too_full(nb) == []
    for bad in ("14-5", "0-3", "1-31", "five"):
        long["metadata"]["slideshow"]["excerpt"] = bad
        with pytest.raises(ValueError, match="first-last"):
            slides.excerpt(long)


def test_the_preprocessor_puts_the_whole_cell_in_the_notes():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a = 1\nb = 2\nc = 3", id="abc",
                                                                   metadata={"slideshow": {"excerpt": "2-2"}})])
    out, _ = slides.Excerpts().preprocess(nb, {})
    assert [c.source for c in out.cells] == [f"{slides.ELLIPSIS}\nb = 2\n{slides.ELLIPSIS}",
                                             "The whole cell:\n\n```python\na = 1\nb = 2\nc = 3\n```"]
    assert out.cells[1].metadata.slideshow.slide_type == "notes" and out.cells[1].id == "abc-whole"


def test_the_command_lists_slides_over_the_rule(tmp_path, capsys):
    path = tmp_path / "99_words.ipynb"
    path.write_text(json.dumps({"cells": [cell("markdown", "# 99 · Title\n\n" + "word " * 120, "slide")]}))
    assert main(["slides", str(path)]) == 0
    assert main(["slides", "--check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "| 99 | 1 | 122 | 1 | 122 | 0 | 0 |" in out and "122 words" in out
    assert main(["slides", str(tmp_path / "missing.ipynb")]) == 2
