"""The README's main command, `make lab`, really serves JupyterLab on the course's notebooks."""

import json
import subprocess
import time
import urllib.request

from conftest import REPO
from course_utils.launch import free_port, stop_process_group


def test_make_lab_serves_the_notebooks():
    port, token = free_port(), "course-test"
    args = f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} --IdentityProvider.token={token}"
    server = subprocess.Popen(["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline, status = time.monotonic() + 120, None
        while status is None and time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as reply:
                    status = json.load(reply)
            except OSError:
                time.sleep(0.5)
        assert status is not None, f"JupyterLab did not answer (exit code {server.poll()})"
        with urllib.request.urlopen(f"{base}/api/contents?token={token}", timeout=10) as reply:
            names = {item["name"] for item in json.load(reply)["content"]}
        assert {p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")} <= names
        with urllib.request.urlopen(f"{base}/lab/tree/01_autograd.ipynb?token={token}", timeout=10) as reply:
            assert reply.status == 200 and b"JupyterLab" in reply.read()
    finally:
        stop_process_group(server, grace=10)
    assert server.poll() is not None
