"""mkdocs hooks for the course site: the home page is the README's introduction and notebook table."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parent.parent / "README.md"
REPO_BLOB = "https://github.com/hpml-course/accelerated-deep-learning/blob/main/"


def home_page(readme: str) -> str:
    """The README's title, introduction and notebook table. Links to notebooks point at their pages
    (which sit where the notebooks sit); other relative links point at the file on GitHub."""
    intro = readme.split("\n## ", 1)[0]
    table = readme.split("\n## Notebooks\n", 1)[1].split("\n## ", 1)[0]
    text = f"{intro}\n## Notebooks\n{table}"
    text = re.sub(r"\]\(notebooks/(\d\d_\w+\.ipynb)\)", r"](\1)", text)
    return re.sub(r"\]\((?!https?://|#|\d\d_\w+\.ipynb\))([^)]+)\)", rf"]({REPO_BLOB}\1)", text)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "index.md", content=home_page(README.read_text())))
    return files
