"""mkdocs hooks for the course site: the home page is the README's introduction, the notebook table of the
registry of lessons (course_utils.lessons) with the README's notes on it, and the README's full-profile section."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from course_utils import colab
from course_utils.lessons import markdown_table

README = Path(__file__).resolve().parent.parent / "README.md"


def _section(readme: str, title: str) -> str:
    """The text of the README's section ``## title``, up to the next section."""
    return readme.split(f"\n## {title}\n\n", 1)[1].split("\n## ", 1)[0]


def home_page(readme: str) -> str:
    """The README's title and introduction, the registry's notebook table with the README's notes under it, and
    the README's section on the full profile. Links to notebooks (lessons and their published full-profile runs)
    point at their pages, which sit where the notebooks sit; other relative links point at the file on GitHub."""
    intro = readme.split("\n## ", 1)[0]
    notes = _section(readme, "Notebooks").split("\n\n", 1)[1]
    full = _section(readme, "The full profile")
    text = f"{intro}\n## Notebooks\n\n{markdown_table()}\n\n{notes}\n## The full profile\n\n{full}"
    text = re.sub(r"\]\(notebooks/((?:full/)?\d\d_\w+\.ipynb)\)", r"](\1)", text)
    return re.sub(r"\]\((?!https?://|#|(?:full/)?\d\d_\w+\.ipynb\))([^)]+)\)", rf"]({colab.blob_url()}\1)", text)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """The repository's links (header and each page's "edit" button) from course_utils.colab."""
    config.repo_url = colab.REPOSITORY_URL
    config.repo_name = "GitHub"
    config.edit_uri = f"blob/{colab.REF}/notebooks/"
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "index.md", content=home_page(README.read_text())))
    return files
