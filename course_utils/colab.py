"""Where the course is published, in one place: the repository, the ref, and everything derived from them.

Badges ("Open in Colab"), the install line of every setup cell, ``pyproject.toml``'s URL and the site's links
all follow ``REPOSITORY`` and ``REF``. A fork (or a release tag) changes those two lines, then runs
``python -m course_utils links`` (``make links``) to rewrite the copies that cannot import this module: the
notebooks and ``pyproject.toml``. The site reads this module when it is built; ``tests/test_links.py`` fails
while a copy disagrees.
"""

from __future__ import annotations

import re
from pathlib import Path

REPOSITORY = "hpml-course/accelerated-deep-learning"  # owner/name on GitHub
REF = "main"  # the branch or tag that badges open and the install line installs

REPOSITORY_URL = f"https://github.com/{REPOSITORY}"


def pip_spec(repository: str = REPOSITORY, ref: str = REF) -> str:
    """What a setup cell installs when (and only when) it runs in Colab: the package from the notebook's own
    repository and ref, with the extra that Colab lacks (torchao; Colab's torch, TensorFlow and Keras stay)."""
    return f"course-utils[torchao] @ git+https://github.com/{repository}@{ref}"


PIP_SPEC = pip_spec()

_COLAB_PREFIX = "https://colab.research.google.com/github/"
# Any earlier value of the links, whatever repository and ref they named.
_BADGE = re.compile(re.escape(_COLAB_PREFIX) + r"[\w.-]+/[\w.-]+/blob/[\w./-]+?/notebooks/")
_INSTALL = re.compile(r"course-utils(\[[\w,]*\])? @ git\+https://github\.com/[\w.-]+/[\w.-]+(@[\w./-]+)?(?=\\?[\"'])")
_PROJECT_URL = re.compile(r'^Repository = "[^"]*"$', re.MULTILINE)


def colab_url(notebook: str) -> str:
    """The "Open in Colab" address of a notebook file name such as ``01_autograd.ipynb``."""
    if not notebook.endswith(".ipynb") or "/" in notebook:
        raise ValueError(f"pass a notebook file name like '01_autograd.ipynb', got {notebook!r}.")
    return f"{_COLAB_PREFIX}{REPOSITORY}/blob/{REF}/notebooks/{notebook}"


def blob_url(path: str = "") -> str:
    """The address of a file of the repository on GitHub, at ``REF`` (``""``: the folder of all files)."""
    return f"{REPOSITORY_URL}/blob/{REF}/{path}"


def relink(text: str, repository: str = REPOSITORY, ref: str = REF) -> str:
    """``text`` (a notebook's JSON or ``pyproject.toml``) with every badge, install line and project URL pointing
    at ``repository`` and ``ref``."""
    text = _BADGE.sub(f"{_COLAB_PREFIX}{repository}/blob/{ref}/notebooks/", text)
    text = _INSTALL.sub(pip_spec(repository, ref), text)
    return _PROJECT_URL.sub(f'Repository = "https://github.com/{repository}"', text)


def unlinked(text: str) -> str:
    """``text`` with each install line's repository and ref replaced by a placeholder: what a digest of code
    hashes, so that a fork or a new tag does not make the published runs stale."""
    return _INSTALL.sub("course-utils @ git+REPOSITORY@REF", text)


def linked_files(root: Path) -> list[Path]:
    """The files of a checkout that name the repository: ``pyproject.toml``, the lessons, their published
    full-profile copies and the template notebook."""
    notebooks = root / "notebooks"
    return [root / "pyproject.toml", *sorted(notebooks.glob("[0-9][0-9]_*.ipynb")),
            *sorted((notebooks / "full").glob("[0-9][0-9]_*.ipynb")), root / "docs" / "00_template.ipynb"]


def stale_links(root: Path) -> list[Path]:
    """The files under ``root`` whose links disagree with ``REPOSITORY`` and ``REF``."""
    return [path for path in linked_files(root) if path.is_file() and relink(path.read_text()) != path.read_text()]


def write_links(root: Path) -> list[Path]:
    """Rewrite the links of every file under ``root`` that disagrees; return the files rewritten."""
    stale = stale_links(root)
    for path in stale:
        path.write_text(relink(path.read_text()))
    return stale
