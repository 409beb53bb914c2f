"""course_utils.handouts and `python -m course_utils handouts`: what they refuse (printing itself is tested with
lesson 01's deck in tests/test_slides.py)."""

from __future__ import annotations

import pytest

from course_utils import handouts
from course_utils.__main__ import main


def test_page_count_counts_page_objects_not_the_page_tree(tmp_path):
    pdf = tmp_path / "two.pdf"
    pdf.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 2 >>\n2 0 obj << /Type /Page >>\n"
                    b"3 0 obj <</Type/Page/Parent 1 0 R>>\n")
    assert handouts.page_count(pdf) == 2


def test_print_deck_refuses_what_is_not_a_deck(tmp_path):
    with pytest.raises(FileNotFoundError, match="make slides"):
        handouts.print_deck(tmp_path / "missing.slides.html", tmp_path / "out.pdf")
    page = tmp_path / "page.slides.html"
    page.write_text('<script src="https://unpkg.com/reveal.js@4.0.2/dist/reveal.js"></script>')
    with pytest.raises(ValueError, match="vendored reveal.js"):
        handouts.print_deck(page, tmp_path / "out.pdf")


def test_the_command_says_to_build_the_decks_first(tmp_path, capsys):
    assert main(["handouts", "notebooks/01_autograd.ipynb", "--decks", str(tmp_path), "--out", str(tmp_path)]) == 1
    assert "make slides" in capsys.readouterr().out
