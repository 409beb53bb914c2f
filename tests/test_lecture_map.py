"""The lecture-to-notebook map (docs/lecture_map.yml): every lecture, every item with a status, every link resolves,
every correction is a correction with its proving cell, and every correction a lesson makes is in the map."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import REPO
from course_utils import lecture_map
from course_utils.lecture_map import Item, Lecture

LECTURES = REPO.parent / "shared" / "lectures"  # the decks' text, beside the checkout (CI has it)


@pytest.fixture(scope="module")
def lectures() -> list[Lecture]:
    return lecture_map.load()


def test_the_map_covers_the_four_lectures_in_order(lectures):
    assert [lecture.deck for lecture in lectures] == ["000", "001", "002", "003"]
    assert all(lecture.items for lecture in lectures)


def test_each_lecture_names_its_deck_file(lectures):
    for lecture in lectures:
        assert lecture.file.startswith(f"{lecture.deck}_") and lecture.file.endswith(".txt")
    if not LECTURES.is_dir():
        pytest.skip(f"{LECTURES} is not here: the decks' names were not compared with the files")
    assert sorted(lecture.file for lecture in lectures) == sorted(p.name for p in LECTURES.glob("00[0-9]_*.txt"))


def test_every_link_resolves_and_every_correction_is_proven_and_mapped(lectures):
    assert lecture_map.problems(lectures) == []


def test_the_map_lists_each_audited_item_once(lectures):
    for lecture in lectures:
        numbers = [item.audit for item in lecture.items if item.audit is not None]
        assert len(numbers) == len(set(numbers)), f"lecture {lecture.deck}: an audit item is listed twice"


def test_an_entry_of_the_wrong_form_is_refused_with_what_to_write(tmp_path: Path):
    def write(item: dict) -> Path:
        path = tmp_path / "map.yml"
        path.write_text(yaml.safe_dump({"lectures": [{"deck": "000", "file": "000_x.txt", "title": "t",
                                                      "lessons": ["04"], "items": [item]}]}))
        return path

    with pytest.raises(ValueError, match="status 'maybe'"):
        lecture_map.load(write({"item": "x", "status": "maybe"}))
    with pytest.raises(ValueError, match="needs says, fact, evidence"):
        lecture_map.load(write({"item": "x", "status": "erratum", "cell": "04_tensorboard#c00"}))
    with pytest.raises(ValueError, match="needs reason"):
        lecture_map.load(write({"item": "x", "status": "out of scope"}))
    with pytest.raises(ValueError, match="unknown keys \\['where'\\]"):
        lecture_map.load(write({"item": "x", "status": "taught", "cell": "04_tensorboard#c00", "where": "?"}))
    assert lecture_map.load(write({"item": "x", "status": "taught", "cell": "04_tensorboard#c00"}))[0].items == (
        Item("x", "taught", "04_tensorboard#c00"),)


def test_links_that_do_not_resolve_are_reported():
    lecture = Lecture("000", "000_x.txt", "t", ("04",), (
        Item("no such lesson", "taught", "99_nothing#c00"),
        Item("no such cell", "taught", "04_tensorboard#no-such-cell"),
        Item("not a correction", "corrected", "04_tensorboard#c00"),
    ))
    found = lecture_map.problems([lecture])
    assert any("'99_nothing#c00' is not NN_lesson#cell-id" in p for p in found)
    assert any("04_tensorboard has no cell 'no-such-cell'" in p for p in found)
    assert any("is not a correction of lecture 000" in p for p in found)
    assert any("corrects lecture 000, but no `corrected` item of the map links it" in p for p in found)


def test_the_page_has_a_table_per_lecture_and_links_cells(lectures):
    page = lecture_map.markdown(lectures)
    for lecture in lectures:
        assert f"\n## Lecture {lecture.deck}: {lecture.title}\n" in page
    linked = [item for lecture in lectures for item in lecture.items if item.cell]
    assert page.count(".ipynb#cell-id=") == len(linked)
    assert "| 1 | " in page and "](04_tensorboard.ipynb#cell-id=" in page
