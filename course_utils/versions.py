"""The versions the course's stored outputs were made with, and where this runtime differs from them.

They are the pins of ``requirements.txt`` (``tests/test_setup.py`` keeps the two equal), carried in the
package because a Colab runtime has the package but no checkout.
"""

from __future__ import annotations

import platform
import sys

from course_utils.device import package_version

# The packages whose version changes the lessons' numbers, as pinned in requirements.txt.
REFERENCE: dict[str, str] = {
    "torch": "2.14.1",
    "torchvision": "0.29.1",
    "tensorflow": "2.21.0",  # the distribution is tensorflow-cpu on x86-64 Linux and Windows
    "keras": "3.15.1",
    "torchao": "0.18.0",
}
# Distributions that install a package's module under another name.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {"tensorflow": ("tensorflow-cpu", "tensorflow", "tensorflow-macos")}


def to_install(name: str, machine: str | None = None) -> str:
    """The distribution that requirements.txt installs for a package on this machine (or on ``machine``)."""
    if name == "tensorflow":
        return "tensorflow-cpu" if (machine or platform.machine()) in ("x86_64", "AMD64") else "tensorflow"
    return name


def same_version(installed: str, pin: str) -> bool:
    """Equal, ignoring a local build tag (``2.14.1+cu130`` matches ``2.14.1``)."""
    return installed.split("+")[0] == pin.split("+")[0]


def installed(name: str) -> str | None:
    """The installed version of a package (any of its distributions), without importing it; ``None``: absent."""
    return next((v for d in DISTRIBUTIONS.get(name, (name,)) if (v := package_version(d))), None)


def differences() -> dict[str, tuple[str, str]]:
    """``{package: (reference version, installed version)}`` for each installed package that differs."""
    found = {name: (ref, installed(name)) for name, ref in REFERENCE.items()}
    return {name: (ref, here) for name, (ref, here) in found.items() if here and not same_version(here, ref)}


def drift_warning() -> str | None:
    """One line saying which versions differ from the reference ones (``None``: none does)."""
    diff = differences()
    if not diff:
        return None
    listed = ", ".join(f"{name} {here} (outputs: {ref})" for name, (ref, here) in diff.items())
    advice = ("Every lesson is tested on Colab's runtime (`make test-colab`, README): keep Colab's versions."
              if "google.colab" in sys.modules else "`make lab` (README) installs exactly those.")
    return (f"warning: this runtime has {listed}; the stored outputs come from the pinned versions, so numbers "
            f"may differ slightly. {advice}")
