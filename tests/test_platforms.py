"""Every platform the README names installs the pinned stack: pip resolves requirements.txt for each platform and
supported Python against the package registry, wheels only (nothing to compile on a student's laptop), so that a
pin without wheels fails here rather than on a laptop. Only metadata is fetched; nothing is installed.

pip's ``--platform`` and ``--python-version`` choose wheels but leave environment markers (``; platform_machine ==
...``) evaluated for this machine, which would give a Mac torch's CUDA libraries and ARM ``tensorflow-cpu``. So pip
runs with its marker environment replaced by the target's (``PIP_FOR``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from conftest import REPO

# pip's --platform takes exact tags: list the older manylinux tags a glibc 2.35 system (Ubuntu 22.04) accepts.
_LINUX = [f"manylinux_2_{minor}_{{arch}}" for minor in range(35, 16, -1)] + ["manylinux2014_{arch}"]
PLATFORMS = {
    "Linux x86-64 (also WSL2, Docker, Colab)": [tag.format(arch="x86_64") for tag in _LINUX],
    "Linux aarch64 (Docker on Apple Silicon)": [tag.format(arch="aarch64") for tag in _LINUX],
    "macOS arm64 (Apple Silicon, macOS 14)": ["macosx_14_0_arm64"],  # pip adds the older macOS versions
    "Windows x86-64 (pip only: the course runs in WSL2)": ["win_amd64"],
}
LINUX, MAC, WINDOWS = ({"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"},
                        {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix"},
                        {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt"})
MARKERS = {  # the values of environment markers on each platform
    "Linux x86-64 (also WSL2, Docker, Colab)": {**LINUX, "platform_machine": "x86_64"},
    "Linux aarch64 (Docker on Apple Silicon)": {**LINUX, "platform_machine": "aarch64"},
    "macOS arm64 (Apple Silicon, macOS 14)": {**MAC, "platform_machine": "arm64"},
    "Windows x86-64 (pip only: the course runs in WSL2)": {**WINDOWS, "platform_machine": "AMD64"},
}
PIP_FOR = """import json, sys
from pip._vendor.packaging import markers
target, host = json.loads(sys.argv[1]), markers.default_environment
markers.default_environment = lambda: {**host(), **target}
from pip._internal.cli.main import main
sys.exit(main(sys.argv[2:]))"""


def supported_pythons() -> list[str]:
    """The Makefile's SUPPORTED_PYTHONS: the Pythons the course promises."""
    return re.search(r"^SUPPORTED_PYTHONS := (.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)[1].split()


@cache
def resolve(platform: str, python: str, tmp: Path) -> tuple[int, dict | str]:
    """pip's resolution of requirements.txt for a platform and Python: (exit status, its report or its error)."""
    report = tmp / (re.sub(r"\W+", "-", platform) + f"-{python}.json")
    tags = [arg for tag in PLATFORMS[platform] for arg in ("--platform", tag)]
    markers = {**MARKERS[platform], "python_version": python, "python_full_version": f"{python}.0"}
    out = subprocess.run(
        [sys.executable, "-c", PIP_FOR, json.dumps(markers), "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", str(report),
         "--target", str(tmp / "never-written"), "--only-binary=:all:", "--python-version", python,
         "--implementation", "cp", *tags, "-r", str(REPO / "requirements.txt")],
        capture_output=True, text=True, timeout=900, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    return out.returncode, json.loads(report.read_text()) if out.returncode == 0 else out.stderr[-3000:]


@pytest.fixture(scope="module")
def resolutions(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[int, dict | str]]:
    """All resolutions, two at a time (about 20 s of CPU each)."""
    tmp = tmp_path_factory.mktemp("resolve")
    cases = [(platform, python) for platform in PLATFORMS for python in supported_pythons()]
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(cases, pool.map(lambda case: resolve(*case, tmp), cases)))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_pinned_stack_has_wheels_for(platform, resolutions):
    for python in supported_pythons():
        status, result = resolutions[platform, python]
        assert status == 0, f"{platform}, Python {python}: pip cannot resolve requirements.txt:\n{result}"
        installed = {re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower(): item["metadata"]["version"]
                     for item in result["install"]}
        tensorflow = "tensorflow-cpu" if MARKERS[platform]["platform_machine"] in ("x86_64", "AMD64") else "tensorflow"
        assert installed.get(tensorflow) == "2.21.0" and installed["torch"].split("+")[0] == "2.14.1", (
            f"{platform}, Python {python}: {tensorflow} {installed.get(tensorflow)}, torch {installed['torch']}")
        other = "tensorflow" if tensorflow == "tensorflow-cpu" else "tensorflow-cpu"
        assert other not in installed, f"{platform}: both {tensorflow} and {other}, one module twice"
        if platform.startswith("macOS"):
            assert not [name for name in installed if name.startswith("nvidia-")], "no CUDA libraries on a Mac"


@pytest.mark.parametrize("python", ["3.10", "3.14"])
def test_the_range_is_as_wide_as_the_wheels_allow(python, tmp_path):
    """Just outside the range a pin has no wheels (NumPy 2.4 and pandas 3 need 3.11, TensorFlow 2.21 stops at 3.13):
    widen SUPPORTED_PYTHONS when this starts to fail."""
    status, error = resolve("Linux x86-64 (also WSL2, Docker, Colab)", python, tmp_path)
    assert status != 0 and "No matching distribution" in error
