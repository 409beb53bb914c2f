"""The platforms and Pythons the course supports, the lock that pins its whole environment on each of them
(requirements.lock, which `make lock` makes from requirements.txt), and Colab's runtime, the other stack the course
runs on (tests/colab/, which `make test-colab` builds): shared by tests/test_lock.py, which reads them offline, and
tests/test_platforms.py, which asks the package registry."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "requirements.lock"
COLAB_LIST = sorted((REPO / "tests" / "colab").glob("pip-freeze-*.txt"))[-1]  # the newest: `make test-colab` builds it

# pip's --platform takes exact tags: list the older manylinux tags a glibc 2.35 system (Ubuntu 22.04) accepts.
_LINUX = [f"manylinux_2_{minor}_{{arch}}" for minor in range(35, 16, -1)] + ["manylinux2014_{arch}"]
PLATFORMS = {
    "Linux x86-64 (also WSL2, Docker, Colab)": [tag.format(arch="x86_64") for tag in _LINUX],
    "Linux aarch64 (Docker on Apple Silicon)": [tag.format(arch="aarch64") for tag in _LINUX],
    "macOS arm64 (Apple Silicon, macOS 14)": ["macosx_14_0_arm64"],  # pip adds the older macOS versions
    "Windows x86-64 (pip only: the course runs in WSL2)": ["win_amd64"],
}
_LINUX_MARKERS, _MAC, _WINDOWS = ({"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"},
                                  {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix"},
                                  {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt"})
MARKERS = {  # the values of environment markers on each platform
    "Linux x86-64 (also WSL2, Docker, Colab)": {**_LINUX_MARKERS, "platform_machine": "x86_64"},
    "Linux aarch64 (Docker on Apple Silicon)": {**_LINUX_MARKERS, "platform_machine": "aarch64"},
    "macOS arm64 (Apple Silicon, macOS 14)": {**_MAC, "platform_machine": "arm64"},
    "Windows x86-64 (pip only: the course runs in WSL2)": {**_WINDOWS, "platform_machine": "AMD64"},
}


def supported_pythons() -> list[str]:
    """The Makefile's SUPPORTED_PYTHONS: the Pythons the course promises."""
    return re.search(r"^SUPPORTED_PYTHONS := (.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)[1].split()


def environment(platform: str, python: str) -> dict[str, str]:
    """The values of every environment marker for ``platform`` and Python ``python`` (``"3.12"``)."""
    return {**MARKERS[platform], "python_version": python, "python_full_version": f"{python}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "platform_release": "",
            "platform_version": "", "implementation_version": f"{python}.0", "extra": ""}


def pins() -> list[Requirement]:
    """The lines of requirements.txt, as requirements (each ``name==version``, some with a marker)."""
    lines = (REPO / "requirements.txt").read_text().splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


@dataclass(frozen=True)
class Locked:
    """One entry of the lock: a package at one version, where its marker holds, with its files' hashes and what
    asked for it (``-r requirements.txt`` for a pin)."""

    name: str
    version: str
    marker: Marker | None
    hashes: tuple[str, ...]
    via: tuple[str, ...]

    def applies(self, platform: str, python: str) -> bool:
        return self.marker is None or self.marker.evaluate(environment(platform, python))


def read_lock(path: Path = LOCK) -> list[Locked]:
    """The entries of a lock written by ``uv pip compile --generate-hashes`` (with its ``# via`` annotations).

    Raises:
        ValueError: for a line the format does not allow.
    """
    entries: list[dict] = []
    for line in path.read_text().splitlines():
        if not line.strip() or (line.startswith("#") and not entries):
            continue
        if not line.startswith(" "):
            requirement = Requirement(line.rstrip(" \\"))
            (spec,) = requirement.specifier
            if spec.operator != "==":
                raise ValueError(f"a lock pins exactly: {line!r}")
            entries.append({"name": canonicalize_name(requirement.name), "version": spec.version,
                            "marker": requirement.marker, "hashes": [], "via": []})
        elif line.strip().startswith("--hash="):
            entries[-1]["hashes"].append(line.strip().rstrip(" \\").removeprefix("--hash="))
        elif line.strip().startswith("#"):
            via = line.strip().lstrip("#").strip().removeprefix("via").strip()
            if via:
                entries[-1]["via"].append(via)
        else:
            raise ValueError(f"not a line of a uv lock: {line!r}")
    return [Locked(e["name"], e["version"], e["marker"], tuple(e["hashes"]), tuple(e["via"])) for e in entries]


def locked_for(platform: str, python: str, path: Path = LOCK) -> dict[str, str]:
    """``{name: version}`` of what the lock installs on ``platform`` with Python ``python``."""
    chosen: dict[str, str] = {}
    for entry in read_lock(path):
        if entry.applies(platform, python):
            if chosen.setdefault(entry.name, entry.version) != entry.version:
                raise ValueError(f"{entry.name}: two versions on {platform}, Python {python}")
    return chosen


def colab_versions(path: Path = COLAB_LIST) -> dict[str, str]:
    """``{name: version}`` of Colab's published package list: its ``name==version`` lines, and the version in the file
    name of a package it installs from a URL (``torch @ https://…/torch-2.11.0%2Bcpu-…whl``: ``2.11.0``)."""
    versions: dict[str, str] = {}
    for line in path.read_text().splitlines():
        pinned = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        from_url = re.fullmatch(r"([A-Za-z0-9_.-]+) @ \S+/[A-Za-z0-9_]+-(\d[\w.]*?)(?:%2B\w+)?-\S+\.whl", line.strip())
        if match := pinned or from_url:
            versions[canonicalize_name(match[1])] = match[2]
    return versions
