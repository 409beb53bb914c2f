"""The code is typed and linted: the checks of .pre-commit-config.yaml, which a maintainer runs before a commit."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_lints_the_package_the_tests_the_site_hooks_and_the_notebooks():
    out = run("ruff", "check", "--no-cache", "course_utils", "tests", "docs", "notebooks")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_type_checks_the_package(tmp_path: Path):
    # The cache lives with the environment where it may (its libraries' stubs are most of the work); mypy checks
    # again whatever changed.
    cache = Path(sys.prefix) / "mypy-cache" if os.access(sys.prefix, os.W_OK) else tmp_path
    out = run("mypy", "--cache-dir", str(cache), "course_utils")
    assert out.returncode == 0, out.stdout + out.stderr
