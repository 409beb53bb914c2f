"""The course's recipe scripts, shared between lessons: one training script and its distributed versions.

Lesson 05 turns ``train_single.py`` into ``train_ddp.py``; lesson 12 turns ``train_ddp.py`` into
``train_fsdp.py``. A lesson copies a recipe into its scratch folder and shows it, or the change from another::

    single, ddp = cu.recipe("train_single.py", scratch), cu.recipe("train_ddp.py", scratch)
    cu.show_script(single)
    cu.script_diff(single, ddp)
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

RECIPES = Path(__file__).resolve().parent
NAMES = tuple(sorted(p.name for p in RECIPES.glob("train_*.py")))


def recipe(name: str, into: Path | str) -> Path:
    """Copy the recipe ``name`` into the folder ``into`` (created if needed); return the copy's path.

    Raises:
        ValueError: for a name that is not a recipe (the message lists them).
    """
    if name not in NAMES:
        raise ValueError(f"no recipe {name!r}: the recipes are {', '.join(NAMES)} (in {RECIPES}).")
    folder = Path(into)
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(RECIPES / name, folder / name))


@dataclass(frozen=True)
class Script:
    """A script's text, shown as highlighted code in a notebook and as plain text everywhere else."""

    name: str
    text: str

    def __repr__(self) -> str:
        return f"# {self.name}\n{self.text.rstrip()}"

    def _repr_markdown_(self) -> str:
        return f"`{self.name}`\n\n```python\n{self.text.rstrip()}\n```"


def show_script(path: Path | str) -> Script:
    """The script at ``path``, to display as a cell's result.

    Raises:
        FileNotFoundError: if there is no such file (run the cell that writes or copies it first).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: run the cell that writes or copies it first.")
    return Script(path.name, path.read_text())
