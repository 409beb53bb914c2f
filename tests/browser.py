"""Headless Debian Chromium for the browser tests, driven by Playwright (no downloaded browser).

Screenshots go to ``build/screenshots/`` (ignored by git); ``make screenshots`` copies the README's
two from there into ``docs/images/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import REPO
from course_utils import handouts

SCREENSHOTS = REPO / "build" / "screenshots"
# Closed-network friendly: no background requests to Google's services, no QUIC, no first-run UI.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def chromium_executable() -> str:
    """Path of Debian's ``chromium`` (the one ``make handouts`` prints with); fails (not skips) with what to do
    when it is missing."""
    try:
        return handouts.chromium()
    except RuntimeError:
        pytest.fail("Chromium not found. `make test` installs Debian's chromium when run as root; otherwise "
                    "`sudo apt-get install chromium`, or leave the browser tests out: "
                    "PYTEST_ARGS=\"-m 'not browser'\".")


@contextmanager
def chromium_page(profile_dir: Path, width: int = 1400, height: int = 900) -> Iterator:
    """A Playwright page in a fresh headless Chromium with its own, new user-data-dir."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            user_data_dir=str(profile_dir), executable_path=chromium_executable(), headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": width, "height": height})
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def screenshot(page, name: str) -> Path:
    """Save a PNG of the page as ``build/screenshots/<name>.png`` and return its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path
