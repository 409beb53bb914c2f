"""One place names the course's repository and ref (course_utils/colab.py); every badge, install line, URL and
site link follows it, and a fork changes them with one command."""

from __future__ import annotations

import importlib.util
import json
import re
import types
from pathlib import Path

from conftest import REPO
from course_utils import __main__ as cli
from course_utils import colab, execute

FORK, TAG = "someone/my-fork", "v2027.1"


def test_every_copy_of_the_links_follows_colab_py():
    stale = [str(path.relative_to(REPO)) for path in colab.stale_links(REPO)]
    assert not stale, f"run `make links`: {stale}"


def test_the_cli_checks_the_links(capsys):
    assert cli.main(["links", "--check"]) == 0
    assert f"every link points at {colab.REPOSITORY}@{colab.REF}" in capsys.readouterr().out


def test_a_fork_rewrites_badge_install_line_and_project_url():
    notebook = (REPO / "notebooks" / "01_autograd.ipynb").read_text()
    forked = colab.relink(notebook, FORK, TAG)
    cells = json.loads(forked)["cells"]
    assert f"https://colab.research.google.com/github/{FORK}/blob/{TAG}/notebooks/01_autograd.ipynb" in "".join(
        cells[0]["source"])
    setup = next("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert f'"{colab.pip_spec(FORK, TAG)}"' in setup and colab.REPOSITORY not in forked
    compile(setup, "<setup cell>", "exec")
    assert colab.relink(forked) == notebook, "relinking back restores the file exactly"
    pyproject = colab.relink((REPO / "pyproject.toml").read_text(), FORK, TAG)
    assert f'Repository = "https://github.com/{FORK}"' in pyproject


def test_the_install_line_installs_from_the_ref_the_badge_opens():
    assert colab.PIP_SPEC.endswith(f"@{colab.REF}") and colab.colab_url("01_autograd.ipynb").count(f"/{colab.REF}/")


def test_a_fork_does_not_make_the_published_runs_stale(tmp_path: Path):
    lesson = REPO / "notebooks" / "01_autograd.ipynb"
    forked = tmp_path / lesson.name
    forked.write_text(colab.relink(lesson.read_text(), FORK, TAG))
    assert execute.source_digest(forked) == execute.source_digest(lesson)


def test_the_site_takes_its_links_from_colab_py():
    spec = importlib.util.spec_from_file_location("site_hooks", REPO / "docs" / "site_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    config = hooks.on_config(types.SimpleNamespace())
    assert config.repo_url == colab.REPOSITORY_URL and config.edit_uri == f"blob/{colab.REF}/notebooks/"
    assert not re.search(r"^(repo_url|edit_uri):", (REPO / "mkdocs.yml").read_text(), re.MULTILINE)
