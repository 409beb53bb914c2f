"""A lesson that sends the student to another lesson sends them to the one that teaches it.

Each lesson's registry entry lists the terms it teaches (``Lesson.teaches``). A sentence of a lesson's text that
refers to other lessons may name a taught term only if the lesson that teaches it is among those it refers to
(or is the lesson itself), and "lesson NN (section N)" must name a section that lesson has.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import NOTEBOOKS, TEMPLATE, load_notebook, source
from course_utils.lessons import LESSONS, lesson

REFERENCE = re.compile(r"\b[Ll]essons? (\d\d)\b")
LESSON_NUMBER = re.compile(r"\b(0[1-9]|1[0-2])\b")  # in a referring sentence: "lessons 01 (tensors) and 03"
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z*(])")
SECTION_REFERENCES = (re.compile(r"\b[Ll]esson (\d\d) \(section (\d+)\)"),
                      re.compile(r"\(section (\d+), lesson (\d\d)\)"))


def owner_of() -> dict[str, str]:
    return {term: entry.number for entry in LESSONS for term in entry.teaches}


def term_pattern(term: str) -> re.Pattern[str]:
    """The term and its inflections; an acronym (ZeRO, DDP) in its own case, so that zero_grad is not ZeRO."""
    acronym = any(c.isupper() for c in term[1:])
    return re.compile(rf"(?<![\w.]){re.escape(term)}\w*", 0 if acronym else re.IGNORECASE)


def sentences(path: Path) -> list[str]:
    text = "\n\n".join(source(c) for c in load_notebook(path)["cells"] if c["cell_type"] == "markdown")
    return [" ".join(s.split()) for paragraph in text.split("\n\n") for s in SENTENCE_END.split(paragraph)]


def section_numbers(number: str) -> set[str]:
    nb = load_notebook(next(p for p in NOTEBOOKS if p.name.startswith(f"{number}_")))
    return {m.group(1) for c in nb["cells"] if c["cell_type"] == "markdown"
            for m in re.finditer(r"^## (\d+) · ", source(c), re.MULTILINE)}


def test_each_term_belongs_to_one_lesson_and_appears_in_it():
    terms = [term.lower() for entry in LESSONS for term in entry.teaches]
    assert len(terms) == len(set(terms)), "a term is taught by one lesson"
    for entry in LESSONS:
        assert entry.teaches, f"lesson {entry.number} lists the terms it teaches"
        text = "\n".join(sentences(next(p for p in NOTEBOOKS if p.name.startswith(f"{entry.number}_"))))
        for term in entry.teaches:
            assert term_pattern(term).search(text), f"lesson {entry.number} never says {term!r}"


def misattributed(sentence: str, own: str) -> list[str]:
    """The taught terms of a sentence that refers to other lessons, but not to the one that teaches the term."""
    if not {n for n in REFERENCE.findall(sentence) if n != own}:
        return []
    referred = set(LESSON_NUMBER.findall(sentence)) | {own}
    return [f"{term!r} is lesson {number}'s ({lesson(number).title}): {sentence}"
            for term, number in owner_of().items() if number not in referred and term_pattern(term).search(sentence)]


def test_the_review_s_wrong_reference_is_caught():
    wrong = "Gradient accumulation over micro-batches is taught in lesson 05."
    assert misattributed(wrong, "01") == [
        f"'gradient accumulation' is lesson 12's (Memory and sharded training): {wrong}"]
    assert not misattributed(wrong.replace("05", "12"), "01")
    assert not misattributed("Lessons 01 (autograd) and 03 (the `DataLoader`) come first.", "10")


@pytest.mark.parametrize("path", [*NOTEBOOKS, TEMPLATE], ids=lambda p: p.name)
def test_references_point_at_the_lesson_that_teaches(path: Path):
    wrong = [line for sentence in sentences(path) for line in misattributed(sentence, path.name[:2])]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", [*NOTEBOOKS, TEMPLATE], ids=lambda p: p.name)
def test_section_references_exist(path: Path):
    for sentence in sentences(path):
        for pattern in SECTION_REFERENCES:
            for m in pattern.finditer(sentence):
                number, section = m.groups() if pattern is SECTION_REFERENCES[0] else m.groups()[::-1]
                assert section in section_numbers(number), f"lesson {number} has no section {section}: {sentence}"
