"""requirements.lock, the course's whole environment with hashes (`make lock`), read offline in a second: it is made
from requirements.txt as it is now, every entry is pinned and hashed, and every platform and Python the course
supports gets the whole stack from it. Whether the registry has wheels of those versions for each is
tests/test_platforms.py's question, which `make lock` asks. And the package's floors (pyproject.toml): each is a
version that the lock or Colab's runtime (tests/colab/, `make test-colab`) has run."""

from __future__ import annotations

import re

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from stacks import (
    COLAB_LIST,
    LOCK,
    MARKERS,
    PLATFORMS,
    REPO,
    colab_versions,
    environment,
    locked_for,
    pins,
    read_lock,
    supported_pythons,
)

CASES = [(platform, python) for platform in PLATFORMS for python in supported_pythons()]


def test_every_entry_is_pinned_and_hashed():
    entries = read_lock()
    assert len(entries) > len(pins()), "the lock holds the transitive packages too"
    for entry in entries:
        assert entry.hashes and all(h.startswith("sha256:") for h in entry.hashes), f"{entry.name} has no sha256"
    assert LOCK.read_text().splitlines()[1].strip() == "#    make lock", "the lock says how it was made"


def test_the_lock_is_made_from_requirements_txt():
    """A pin moved, added or dropped without `make lock` fails here: run `make lock` and commit both files."""
    pinned = {canonicalize_name(r.name) for r in pins()}
    asked = {entry.name for entry in read_lock() if "-r requirements.txt" in entry.via}
    assert asked == pinned, f"pinned but not locked: {sorted(pinned - asked)}; locked as pins: {sorted(asked - pinned)}"
    for platform, python in CASES:
        chosen = locked_for(platform, python)
        for requirement in pins():
            (spec,) = requirement.specifier
            wanted = requirement.marker is None or requirement.marker.evaluate(environment(platform, python))
            assert chosen.get(canonicalize_name(requirement.name)) == (spec.version if wanted else None), (
                f"{requirement} on {platform}, Python {python}: the lock has "
                f"{chosen.get(canonicalize_name(requirement.name))}")


@pytest.mark.parametrize(("platform", "python"), CASES)
def test_the_lock_gives_the_whole_stack_on(platform, python):
    chosen = locked_for(platform, python)
    machine = MARKERS[platform]["platform_machine"]
    tensorflow, other = (("tensorflow-cpu", "tensorflow") if machine in ("x86_64", "AMD64")
                         else ("tensorflow", "tensorflow-cpu"))
    assert chosen.get(tensorflow) == "2.21.0" and other not in chosen, f"one TensorFlow module: {tensorflow}"
    if platform.startswith("macOS"):
        assert not [name for name in chosen if name.startswith("nvidia-")], "no CUDA libraries on a Mac"


def test_the_venv_installs_the_lock_with_hashes():
    """With uv where it runs (about 8 times faster), else with pip: the same lock, hash-checked either way."""
    makefile = (REPO / "Makefile").read_text()
    assert '"$(BIN)/uv" pip install --quiet --require-hashes -r requirements.lock' in makefile
    assert '"$(BIN)/python" -m pip install --quiet --require-hashes -r requirements.lock' in makefile
    assert "UV_PIN := $(shell sed -n 's/^uv==//p' requirements.txt)" in makefile, "the uv that requirements.txt pins"
    assert 'open("requirements.lock", "rb")' in makefile, "the venv is keyed by the lock's hash"


def test_each_floor_of_the_package_is_a_version_a_tested_stack_has_run():
    """pyproject.toml's ranges promise what installs beside another stack (Colab's): a floor below every tested
    stack's version promises a version nothing has run."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *(d for extra in project["optional-dependencies"].values() for d in extra)]
    tested: dict[str, list[Version]] = {}
    for entry in read_lock():
        tested.setdefault(entry.name, []).append(Version(entry.version))
    tested.setdefault("tensorflow", []).extend(tested.get("tensorflow-cpu", []))  # the same module on x86-64
    for name, version in colab_versions().items():
        tested.setdefault(name, []).append(Version(version))
    for line in declared:
        requirement = Requirement(line)
        name, floors = canonicalize_name(requirement.name), [s for s in requirement.specifier if s.operator == ">="]
        assert len(floors) == 1, f"{line}: give it one floor (>=), the oldest version a tested stack has run"
        seen = tested.get(name)
        assert seen, f"{line}: neither the lock nor Colab's list ({COLAB_LIST.name}) has {name}"
        assert Version(floors[0].version) >= min(seen), (
            f"{line}: no tested stack has run {floors[0].version}; the oldest that has is {min(seen)}")


SANITIZERS = [REPO / "tests" / "nbval_sanitize.cfg", REPO / "tests" / "colab" / "nbval_sanitize.cfg"]


@pytest.mark.parametrize("path", SANITIZERS, ids=["course", "colab"])
def test_every_sanitizing_rule_is_one_nbval_reads(path):
    """nbval reads a rule only as a `regex: ` line right above a `replace: ` line (an empty replacement is not read):
    a rule it skips would let an output differ without a word."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("regex:"):
            assert line.startswith("regex: ") and i + 1 < len(lines) and re.fullmatch(r"replace: \S.*", lines[i + 1]), (
                f"{path.name}, line {i + 1}: a `regex: ` line needs a non-empty `replace: ` line right below it")
            re.compile(line.removeprefix("regex: "))
    assert sum(line.startswith("regex: ") for line in lines) == sum(line.startswith("replace: ") for line in lines)
