"""requirements.lock, the course's whole environment with hashes (`make lock`), read offline in a second: it is made
from requirements.txt as it is now, every entry is pinned and hashed, and every platform and Python the course
supports gets the whole stack from it. Whether the registry has wheels of those versions for each is
tests/test_platforms.py's question, which `make lock` asks."""

from __future__ import annotations

import pytest
from packaging.utils import canonicalize_name
from stacks import LOCK, MARKERS, PLATFORMS, REPO, environment, locked_for, pins, read_lock, supported_pythons

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
