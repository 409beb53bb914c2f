"""The course's public repository, in one place, and what Colab needs from it: links and the install."""

from __future__ import annotations

GITHUB_REPO = "hpml-course/accelerated-deep-learning"
BRANCH = "main"
# What each notebook's setup cell installs when (and only when) it runs in Colab.
PIP_SPEC = f"course-utils @ git+https://github.com/{GITHUB_REPO}"


def colab_url(notebook: str) -> str:
    """The "Open in Colab" address of a notebook file name such as ``01_autograd.ipynb``."""
    if not notebook.endswith(".ipynb") or "/" in notebook:
        raise ValueError(f"pass a notebook file name like '01_autograd.ipynb', got {notebook!r}.")
    return f"https://colab.research.google.com/github/{GITHUB_REPO}/blob/{BRANCH}/notebooks/{notebook}"
