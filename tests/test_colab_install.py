"""The Colab install, end to end and offline: a lesson's setup cell, run as in Colab, installs the package with pip
from a git repository at the ref (``git+file://`` in place of ``git+https://github.com``) into a fresh virtual
environment that already has torch, TensorFlow and the rest (as Colab has its own), then imports it and runs
``cu.setup``. Nothing is downloaded: pip gets ``--no-index`` and no configuration (no wheel folder either), and
builds with the setuptools it finds (``PIP_NO_BUILD_ISOLATION=0`` turns build isolation off)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import REPO
from course_utils import colab

# pip with no index, no configuration (so no local wheel folder either) and no user site: nothing downloaded.
OFFLINE = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PYTHONNOUSERSITE": "1"}
OURS = ("course_utils", "course_utils-", "course_utils.", "__editable__", "__pycache__")


def package_repository(where: Path) -> Path:
    """A git repository of the package's files, committed on a branch named ``colab.REF``."""
    where.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, where / name)
    shutil.copytree(REPO / "course_utils", where / "course_utils", ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-C", str(where), "-c", "user.name=test", "-c", "user.email=test@example.org"]
    for args in (["init", "-q", "-b", colab.REF], ["add", "."], ["commit", "-q", "-m", "the package"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return where


def colab_like_venv(where: Path) -> Path:
    """A new virtual environment that sees this one's packages, but not course_utils; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    shared = where.parent / "preinstalled"
    shared.mkdir()
    ours = Path(sysconfig.get_paths()["purelib"])
    for entry in ours.iterdir():
        if not entry.name.startswith(OURS) and entry.suffix != ".pth":
            (shared / entry.name).symlink_to(entry)
    python = where / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "preinstalled.pth").write_text(f"{shared}\n")
    return python


def without_pip_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}


def lesson_01_setup_cell() -> str:
    nb = json.loads((REPO / "notebooks" / "01_autograd.ipynb").read_text())
    return "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git, as pip does for git+ URLs")
def test_a_setup_cell_installs_the_package_as_in_colab(tmp_path: Path, fake_root: Path):
    repo = package_repository(tmp_path / "repo")
    python = colab_like_venv(tmp_path / "venv")
    setup = lesson_01_setup_cell()
    assert colab.REPOSITORY_URL in setup
    url = f"file://localhost{repo}"  # PEP 508 wants a host in a git+file URL
    script = "\n".join([
        "import sys, types",
        "sys.modules['google.colab'] = types.ModuleType('google.colab')  # what Colab has loaded",
        setup.replace(colab.REPOSITORY_URL, url),
        "import importlib.metadata",
        "print('installed at', cu.__file__)",
        "print('times:', cu.lessons.reference_times('01', 'quick'))  # a person's setup line prints them",
        "print('from', importlib.metadata.distribution('course-utils').read_text('direct_url.json'))",
    ])
    env = {**without_pip_settings(), **OFFLINE,
           "PIP_NO_BUILD_ISOLATION": "0", "COURSE_PROFILE": "quick"}
    out = subprocess.run([str(python), "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert f"installed at {tmp_path / 'venv'}" in out.stdout, "course_utils must come from the fresh install"
    assert "profile quick ($COURSE_PROFILE=quick)" in out.stdout
    assert "times: the reference machine" in out.stdout, "the record of run times is installed with the package"
    origin = json.loads(out.stdout.split("\nfrom ", 1)[1])
    assert origin["url"] == url and origin["vcs_info"]["requested_revision"] == colab.REF


def test_a_failed_install_stops_with_the_message(tmp_path: Path, fake_root: Path):
    python = colab_like_venv(tmp_path / "venv")
    setup = lesson_01_setup_cell()
    script = "import sys, types\nsys.modules['google.colab'] = types.ModuleType('google.colab')\n" + setup.replace(
        colab.REPOSITORY_URL, f"file://localhost{tmp_path}/no-such-repository")
    out = subprocess.run([str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**without_pip_settings(), **OFFLINE})
    assert out.returncode == 1 and "pip could not install course-utils[torchao]" in out.stderr
    assert "Traceback" not in out.stderr, "a SystemExit with the message, not a stack of subprocess internals"
