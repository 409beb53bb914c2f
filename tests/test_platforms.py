"""Every platform the README names installs the locked stack from wheels: uv resolves requirements.txt, held to
the versions of requirements.lock, for each platform and supported Python against the package registry, wheels only
(nothing to compile on a student's laptop), so that a locked version without a wheel for one of them fails here
rather than on a laptop. Only metadata is fetched; nothing is installed. It asks the registry (about a minute), so
`make lock` runs it (with COURSE_ASK_REGISTRY=1) and `make test` leaves it out: tests/test_lock.py checks the lock
offline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from stacks import LOCK, MARKERS, PLATFORMS, REPO, locked_for, read_lock, supported_pythons

pytestmark = pytest.mark.skipif(not os.environ.get("COURSE_ASK_REGISTRY"),
                                reason="asks the package registry: `make lock` runs it")

UV = Path(sys.executable).with_name("uv")  # requirements.txt pins it: the venv has it
TARGETS = {  # uv's --python-platform for each platform (glibc 2.35: Ubuntu 22.04; macOS 14), and its environment
    "Linux x86-64 (also WSL2, Docker, Colab)": ("x86_64-manylinux_2_35", {}),
    "Linux aarch64 (Docker on Apple Silicon)": ("aarch64-manylinux_2_35", {}),
    "macOS arm64 (Apple Silicon, macOS 14)": ("aarch64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": "14.0"}),
    "Windows x86-64 (pip only: the course runs in WSL2)": ("x86_64-pc-windows-msvc", {}),
}


def lock_versions(tmp: Path) -> Path:
    """The lock without its hashes, as a constraints file in ``tmp``."""
    constraints = tmp / "lock-versions.txt"
    constraints.write_text("".join(f"{e.name}=={e.version}" + (f" ; {e.marker}" if e.marker else "") + "\n"
                                   for e in read_lock(LOCK)))
    return constraints


def resolve(platform: str, python: str, tmp: Path, constraints: Path | None) -> tuple[int, str]:
    """uv's resolution of requirements.txt for a platform and Python, wheels only, held to ``constraints`` (or
    not): (exit status, the resolved file or uv's error)."""
    out = tmp / (re.sub(r"\W+", "-", platform) + f"-{python}.txt")
    target, env = TARGETS[platform]
    run = subprocess.run(
        [str(UV), "pip", "compile", str(REPO / "requirements.txt"), *(["-c", str(constraints)] if constraints else []),
         "--python-platform", target, "--python-version", python, "--only-binary", ":all:", "--quiet",
         "--no-header", "--output-file", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    return run.returncode, out.read_text() if run.returncode == 0 else run.stderr[-3000:]


@pytest.fixture(scope="module")
def resolutions(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[int, str]]:
    """All resolutions, two at a time."""
    tmp = tmp_path_factory.mktemp("resolve")
    constraints = lock_versions(tmp)  # written once: the threads only read it
    cases = [(platform, python) for platform in PLATFORMS for python in supported_pythons()]
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(cases, pool.map(lambda case: resolve(*case, tmp, constraints), cases)))


def test_every_platform_has_a_target():
    assert set(TARGETS) == set(PLATFORMS) == set(MARKERS)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_locked_stack_has_wheels_for(platform, resolutions, tmp_path):
    for python in supported_pythons():
        status, result = resolutions[platform, python]
        assert status == 0, f"{platform}, Python {python}: no wheels of the locked versions:\n{result}"
        resolved = tmp_path / f"{python}.txt"
        resolved.write_text(result)
        installed = {e.name: e.version for e in read_lock(resolved)}
        locked = locked_for(platform, python)
        assert installed == {name: locked[name] for name in installed}, "uv held to the lock resolves the lock"
        tensorflow = "tensorflow-cpu" if MARKERS[platform]["platform_machine"] in ("x86_64", "AMD64") else "tensorflow"
        assert installed.get(tensorflow) == "2.21.0" and installed["torch"] == "2.14.1", (platform, python)
        if platform.startswith("macOS"):
            assert not [name for name in installed if name.startswith("nvidia-")], "no CUDA libraries on a Mac"


@pytest.mark.parametrize("python", ["3.10", "3.14"])
def test_the_range_is_as_wide_as_the_wheels_allow(python, tmp_path):
    """Just outside the range a pin has no wheels (NumPy 2.4, pandas 3 and Keras 3.15 need 3.11, TensorFlow 2.21
    stops at 3.13): widen SUPPORTED_PYTHONS when this starts to fail."""
    status, error = resolve("Linux x86-64 (also WSL2, Docker, Colab)", python, tmp_path, None)
    assert status != 0 and "No solution found" in error
