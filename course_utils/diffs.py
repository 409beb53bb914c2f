"""A script shown as the change from another: what a distributed version adds to a single-process one.

A lesson writes both scripts, runs both, and shows ``cu.script_diff(single, distributed)``: the lines that
change, in a notebook coloured like a code review, as text everywhere else::

    cu.script_diff(scratch / "train_single.py", scratch / "train_ddp.py")
"""

from __future__ import annotations

import difflib
import html
from dataclasses import dataclass
from pathlib import Path

_STYLE = {"+": "background:rgba(46,160,67,0.18)", "-": "background:rgba(248,81,73,0.18)", "@": "color:#6e7781"}


@dataclass(frozen=True)
class ScriptDiff:
    """The unified diff of two scripts, without context lines unless asked for."""

    before: str  # the scripts' file names
    after: str
    lines: tuple[str, ...]  # the diff's hunks: "@@ ... @@", "-removed", "+added", " context"

    @property
    def added(self) -> int:
        return sum(line.startswith("+") for line in self.lines)

    @property
    def removed(self) -> int:
        return sum(line.startswith("-") for line in self.lines)

    @property
    def summary(self) -> str:
        return f"{self.before} → {self.after}: {self.added} lines added, {self.removed} removed"

    def __repr__(self) -> str:
        return "\n".join([self.summary, *self.lines])

    def _repr_html_(self) -> str:
        rows = "".join(f'<div style="{_STYLE.get(line[:1], "")}">{html.escape(line) or "&nbsp;"}</div>'
                       for line in self.lines)
        return (f"<div><b>{html.escape(self.summary)}</b>"
                f'<pre style="font-size:85%;line-height:1.3;margin-top:4px">{rows}</pre></div>')


def script_diff(before: Path | str, after: Path | str, *, context: int = 0) -> ScriptDiff:
    """The lines that change from the script ``before`` to the script ``after``.

    Args:
        context: unchanged lines shown around each change.

    Raises:
        FileNotFoundError: if either script is missing (run the cells that write them first).
        ValueError: for a negative ``context``.
    """
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise ValueError(f"context is a number of lines, 0 or more, got {context!r}.")
    paths = [Path(before), Path(after)]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: run the cell that writes it (%%writefile) first.")
    old, new = (path.read_text().splitlines() for path in paths)
    lines = list(difflib.unified_diff(old, new, lineterm="", n=context))[2:]  # without the "---"/"+++" header
    return ScriptDiff(paths[0].name, paths[1].name, tuple(lines))
