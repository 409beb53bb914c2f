"""The README's main command, `make lab`, really serves JupyterLab on the course's notebooks.

One server for the module, started the way a student starts it (on 127.0.0.1, a free port and a
token), then checked three ways: through its REST API, by running a lesson's cells through its
kernel API, and by opening a lesson in headless Chromium (screenshot in build/screenshots/).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import nbformat
import pytest
import websocket

from browser import chromium_page, screenshot
from conftest import REPO
from course_utils.launch import free_port, stop_process_group

LESSON = "01_autograd.ipynb"


@dataclass
class Lab:
    base: str
    token: str

    def api(self, path: str, body: dict | None = None, method: str = "GET") -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base}{path}", data=data, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.load(reply) if reply.status != 204 else {}


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    port, token = free_port(), uuid.uuid4().hex
    state = tmp_path_factory.mktemp("lab")  # a fresh layout and settings, not the user's
    args = (f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} --IdentityProvider.token={token} "
            f"--LabApp.workspaces_dir={state / 'workspaces'} --LabApp.user_settings_dir={state / 'settings'}")
    server = subprocess.Popen(["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(f"http://127.0.0.1:{port}", token)
    try:
        deadline, status = time.monotonic() + 120, None
        while status is None and time.monotonic() < deadline and server.poll() is None:
            try:
                status = lab.api("/api/status")
            except OSError:
                time.sleep(0.5)
        assert status is not None, f"JupyterLab did not answer (exit code {server.poll()})"
        yield lab
    finally:
        stop_process_group(server, grace=10)
    assert server.poll() is not None


def test_make_lab_serves_the_notebooks(lab: Lab):
    names = {item["name"] for item in lab.api("/api/contents")["content"]}
    assert {p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")} <= names
    with urllib.request.urlopen(f"{lab.base}/lab/tree/{LESSON}?token={lab.token}", timeout=10) as reply:
        assert reply.status == 200 and b"JupyterLab" in reply.read()


def execute(channel: websocket.WebSocket, code: str, timeout: float = 120) -> str:
    """Run code on the kernel behind a channels websocket; return its stdout, fail on an error."""
    msg_id = uuid.uuid4().hex
    channel.send(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": msg_id,
                   "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}}))
    stdout, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        channel.settimeout(max(deadline - time.monotonic(), 0.1))
        msg = json.loads(channel.recv())
        if msg.get("parent_header", {}).get("msg_id") != msg_id or msg["channel"] != "iopub":
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream" and content["name"] == "stdout":
            stdout.append(content["text"])
        elif kind == "error":
            pytest.fail(f"{content['ename']}: {content['evalue']}")
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(stdout)
    pytest.fail(f"no reply from the kernel within {timeout} s")


@pytest.mark.timeout(300)
def test_a_lesson_cell_runs_through_the_kernel_api(lab: Lab):
    """The lesson's setup cell, then its first tensor cell, whose output must match the committed one."""
    cells = [c for c in nbformat.read(REPO / "notebooks" / LESSON, as_version=4).cells if c.cell_type == "code"]
    setup, tensors = cells[0], next(c for c in cells if "tensor: shape=(2, 3)" in str(c.outputs))
    committed = "".join(o["text"] for o in tensors.outputs if o.get("name") == "stdout")
    session = lab.api("/api/sessions", {"path": LESSON, "type": "notebook", "kernel": {"name": "python3"}}, "POST")
    kernel = session["kernel"]["id"]
    channel = websocket.create_connection(
        f"{lab.base.replace('http', 'ws')}/api/kernels/{kernel}/channels?token={lab.token}", timeout=30)
    try:
        assert "data root:" in execute(channel, setup.source)
        assert execute(channel, tensors.source) == committed
    finally:
        channel.close()
        lab.api(f"/api/sessions/{session['id']}", method="DELETE")


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_a_lesson_renders_in_chromium(lab: Lab, tmp_path):
    lesson = REPO / "notebooks" / LESSON
    before = lesson.stat().st_mtime_ns
    with chromium_page(tmp_path / "profile") as page:
        page.goto(f"{lab.base}/lab/tree/{LESSON}?token={lab.token}")
        title = page.wait_for_selector(".jp-Notebook .jp-RenderedMarkdown h1", timeout=120_000)
        assert title.inner_text().startswith("01 · ")
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
        cells = len(nbformat.read(lesson, as_version=4).cells)
        assert page.get_by_text(f"Cell 1/{cells}", exact=True).count() == 1  # the status bar
        outputs = page.locator(".jp-Notebook .jp-OutputArea-output")
        page.locator(".jp-Notebook").first.hover()
        for _ in range(30):  # JupyterLab renders the cells near the viewport: scroll to the first section's output
            if any("tensor: shape=(2, 3)" in text for text in outputs.all_inner_texts()):
                break
            page.mouse.wheel(0, 400)
            page.wait_for_timeout(200)
        else:
            pytest.fail("the first section's output (tensor: shape=(2, 3)) is not rendered")
        page.mouse.wheel(0, -100_000)
        page.wait_for_timeout(500)
        # jupyterlab-rise (see the README) puts its "Render as Reveal Slideshow" button on the notebook toolbar.
        assert page.locator("[data-command='RISE:preview']").count() == 1
        news = page.get_by_role("button", name="No", exact=True)  # JupyterLab's "get notified of news?" toast
        if news.count():
            news.first.click()
            news.first.wait_for(state="detached", timeout=10_000)
        screenshot(page, "jupyterlab")
    assert lesson.stat().st_mtime_ns == before, "opening a lesson must not rewrite it"


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_rise_presents_a_lesson_live(lab: Lab, tmp_path):
    """RISE saves the notebook before presenting it, so it presents a copy in the ignored scratch folder."""
    scratch = REPO / "notebooks" / "scratch" / "lab-test"
    scratch.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "notebooks" / LESSON, scratch / LESSON)
    try:
        with chromium_page(tmp_path / "profile") as page:
            page.goto(f"{lab.base}/lab/tree/scratch/lab-test/{LESSON}?reset&token={lab.token}")
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
            # RISE's shortcut, as the README says (its toolbar button may sit in the toolbar's overflow menu).
            page.locator(".jp-Notebook .jp-Cell").first.click()
            page.keyboard.press("Escape")
            page.keyboard.press("Alt+r")
            deck = page.frame_locator("iframe").locator(".reveal .slides section.present h1").first
            deck.wait_for(timeout=120_000)
            assert deck.inner_text().startswith("01 · ")
            screenshot(page, "jupyterlab-rise")
    finally:
        shutil.rmtree(scratch)
