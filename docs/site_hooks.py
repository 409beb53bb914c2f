"""mkdocs hooks for the course site: the home page is the README's introduction and the notebook table of
the registry of lessons (course_utils.lessons), with the README's notes on it."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from course_utils.lessons import markdown_table

README = Path(__file__).resolve().parent.parent / "README.md"
REPO_BLOB = "https://github.com/hpml-course/accelerated-deep-learning/blob/main/"


def home_page(readme: str) -> str:
    """The README's title and introduction, the registry's notebook table and the README's notes under it.
    Links to notebooks point at their pages (which sit where the notebooks sit); other relative links point
    at the file on GitHub."""
    intro = readme.split("\n## ", 1)[0]
    notes = readme.split("\n## Notebooks\n\n", 1)[1].split("\n## ", 1)[0].split("\n\n", 1)[1]
    text = f"{intro}\n## Notebooks\n\n{markdown_table()}\n\n{notes}"
    text = re.sub(r"\]\(notebooks/(\d\d_\w+\.ipynb)\)", r"](\1)", text)
    return re.sub(r"\]\((?!https?://|#|\d\d_\w+\.ipynb\))([^)]+)\)", rf"]({REPO_BLOB}\1)", text)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "index.md", content=home_page(README.read_text())))
    return files
