"""The lecture-to-notebook map (``docs/lecture_map.yml``): every teachable item of the four lectures the course
follows, with the lesson cell that teaches it and its status, for instructors moving from their slides to the
notebooks. The site renders it (``docs/site_hooks.py``, page ``lectures/``); ``tests/test_lecture_map.py`` holds it
to the notebooks (every link resolves, every correction has its proving cell, every correction of a lesson is
mapped).

An item's status is one of:

- ``taught``: ``cell`` (``04_tensorboard#c12``: a notebook's stem and a cell id) teaches it as the lecture does;
- ``corrected``: ``cell`` is the lesson's correction of the lecture (a "The lecture says (lecture 00N) … In fact"
  quote cell followed by the code cell that proves it, or a "… Predict:" quote cell followed by the prediction);
- ``erratum``: a slip or dated code of the lecture, too small for the lesson's narrative: ``says`` (quoted),
  ``fact`` and ``evidence``; ``cell`` optional (where the topic is taught);
- ``out of scope``: ``reason``, no cell.

It is a tool for the course's repository (it reads ``docs/`` and ``notebooks/``), not imported by ``course_utils``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
MAP = REPO / "docs" / "lecture_map.yml"
NOTEBOOKS = REPO / "notebooks"
STATUSES = ("taught", "corrected", "erratum", "out of scope")
NEEDS = {"taught": ("cell",), "corrected": ("cell",), "erratum": ("says", "fact", "evidence"),
         "out of scope": ("reason",)}
ALLOWED = {"audit", "item", "status", "cell", "says", "fact", "evidence", "reason"}
CORRECTION = re.compile(r"> \*\*The lecture says\*\* \(lecture (00[0-3])\)")


@dataclass(frozen=True)
class Item:
    """One teachable item of a lecture."""

    item: str
    status: str
    cell: str | None = None  # "NN_slug#cell-id"
    audit: int | None = None  # its number in the audit's item table (../shared/audits/2026-11-25/)
    says: str = ""
    fact: str = ""
    evidence: str = ""
    reason: str = ""

    @property
    def notebook(self) -> str | None:
        """The notebook's stem (``04_tensorboard``), or ``None``."""
        return self.cell.split("#", 1)[0] if self.cell else None

    @property
    def cell_id(self) -> str | None:
        return self.cell.split("#", 1)[1] if self.cell and "#" in self.cell else None


@dataclass(frozen=True)
class Lecture:
    """One lecture deck (``../shared/lectures/00N_*.txt``) and its items, in the lecture's order."""

    deck: str  # "000"
    file: str  # the deck's text in ../shared/lectures/: "000_8532af7fbc10edf3.txt"
    title: str
    lessons: tuple[str, ...]
    items: tuple[Item, ...] = field(default_factory=tuple)


def load(path: Path = MAP) -> list[Lecture]:
    """The map's lectures.

    Raises:
        ValueError: for an entry that is not of the map's form (unknown key or status, a field its status needs).
    """
    data = yaml.safe_load(path.read_text())
    lectures = []
    for entry in data["lectures"]:
        items = []
        for number, raw in enumerate(entry["items"], 1):
            where = f"{path.name}, lecture {entry['deck']}, item {number} ({raw.get('item', '?')!r})"
            unknown = set(raw) - ALLOWED
            if unknown:
                raise ValueError(f"{where}: unknown keys {sorted(unknown)}; an item has {sorted(ALLOWED)}.")
            status = raw.get("status")
            if status not in STATUSES:
                raise ValueError(f"{where}: status {status!r}; use one of {STATUSES}.")
            missing = [key for key in ("item", *NEEDS[status]) if not str(raw.get(key) or "").strip()]
            if missing:
                raise ValueError(f"{where}: a {status!r} item needs {', '.join(missing)}.")
            if status == "out of scope" and raw.get("cell"):
                raise ValueError(f"{where}: an item out of scope links no cell; say why in `reason`.")
            items.append(Item(**{key: raw[key] for key in raw}))
        lectures.append(Lecture(str(entry["deck"]), entry["file"], entry["title"], tuple(entry["lessons"]),
                                tuple(items)))
    return lectures


def _cells(stem: str) -> list[dict[str, Any]]:
    return list(json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())["cells"])


def _source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"])


def problems(lectures: list[Lecture]) -> list[str]:
    """What does not hold between the map and the notebooks: links to cells that do not exist, corrections without
    their quote or proving cell, and corrections of a lesson that the map does not list."""
    found = []
    cells = {path.stem: _cells(path.stem) for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))}
    mapped = set()
    for lecture in lectures:
        for item in lecture.items:
            if not item.cell:
                continue
            where = f"lecture {lecture.deck}, {item.item!r}"
            if item.notebook not in cells or not item.cell_id:
                found.append(f"{where}: {item.cell!r} is not NN_lesson#cell-id of a lesson in notebooks/")
                continue
            ids = [cell.get("id") for cell in cells[item.notebook]]
            if item.cell_id not in ids:
                found.append(f"{where}: {item.notebook} has no cell {item.cell_id!r}")
                continue
            if item.status != "corrected":
                continue
            index = ids.index(item.cell_id)
            quote = CORRECTION.match(_source(cells[item.notebook][index]))
            if not quote or quote[1] != lecture.deck:
                found.append(f"{where}: cell {item.cell} is not a correction of lecture {lecture.deck} "
                             f"(> **The lecture says** (lecture {lecture.deck}): …)")
                continue
            following = cells[item.notebook][index + 1:index + 2]
            if not following or following[0]["cell_type"] != "code":
                found.append(f"{where}: no code cell proves the correction {item.cell}")
            mapped.add(item.cell)
    for stem, notebook in cells.items():
        for cell in notebook:
            quote = CORRECTION.match(_source(cell))
            if quote and f"{stem}#{cell.get('id')}" not in mapped:
                found.append(f"{stem}#{cell.get('id')} corrects lecture {quote[1]}, but no `corrected` item of the "
                             "map links it")
    return found


def section_title(stem: str, cell_id: str) -> str:
    """The heading of the section that holds a cell (the title of the notebook for cells before the first)."""
    title = ""
    for cell in _cells(stem):
        if cell["cell_type"] == "markdown":
            for line in _source(cell).splitlines():
                if match := re.match(r"#{1,2} (.+)", line):
                    title = match[1].strip()
        if cell.get("id") == cell_id:
            return title
    raise ValueError(f"{stem} has no cell {cell_id!r}")


def _escape(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _link(item: Item) -> str:
    assert item.notebook and item.cell_id
    return f"[{item.notebook[:2]} · {_escape(section_title(item.notebook, item.cell_id))}]" \
           f"({item.notebook}.ipynb#cell-id={item.cell_id})"


def markdown(lectures: list[Lecture]) -> str:
    """The map as the site's page: per lecture, its counts by status, a table of its items and its errata."""
    out = ["# Lecture map", "",
           "Every teachable item of the four lectures the course follows, in the lectures' order, with the lesson "
           "cell that teaches it: **taught** as the lecture does, **corrected** by the lesson (the link opens the "
           "correction; the cell after it proves it), an **erratum** (a slip or dated code of the lecture, with "
           "what is true and the evidence), or **out of scope** (and why). The source is "
           "`docs/lecture_map.yml`; the tests hold it to the notebooks.", ""]
    for lecture in lectures:
        counts = {status: sum(item.status == status for item in lecture.items) for status in STATUSES}
        out += [f"## Lecture {lecture.deck}: {lecture.title}", "",
                f"Lessons {', '.join(lecture.lessons)}; the deck's text is `{lecture.file}`. "
                f"{len(lecture.items)} items: "
                + ", ".join(f"{n} {status}" for status, n in counts.items()) + ".", "",
                "| # | item | status | where |", "|---|---|---|---|"]
        errata = []
        for number, item in enumerate(lecture.items, 1):
            where = _escape(item.reason) if item.status == "out of scope" else _link(item) if item.cell else ""
            if item.status == "erratum":
                errata.append(f"- **{number}. {_escape(item.item)}.** The lecture says: {_escape(item.says)} "
                              f"In fact: {_escape(item.fact)} Evidence: {_escape(item.evidence)}")
                where = f"{where} (erratum {number} below)".strip()
            out.append(f"| {number} | {_escape(item.item)} | {item.status} | {where} |")
        if errata:
            out += ["", f"### Errata of lecture {lecture.deck}", "", *errata]
        out.append("")
    return "\n".join(out)
