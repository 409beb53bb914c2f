"""A real TensorBoard server for the tests: start it on 127.0.0.1, query its JSON API, stop it.

Lesson 04 shows TensorBoard live with ``%tensorboard``; these helpers let the tests check that the
same event files appear in a real server and in its web page (tests/test_tensorboard_*.py).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from course_utils.launch import LOCALHOST, free_port, stop_process_group
from course_utils.lessons.lesson04 import _existing_dir


@dataclass
class TensorBoardServer:
    """A ``tensorboard`` process started by :func:`start_tensorboard`."""

    process: subprocess.Popen[bytes]
    port: int
    logdir: Path
    log: IO[bytes] = field(repr=False)

    @property
    def pid(self) -> int:
        """Process id of the server (it leads its own process group)."""
        return self.process.pid

    @property
    def url(self) -> str:
        """Base address, e.g. ``http://127.0.0.1:6006``."""
        return f"http://{LOCALHOST}:{self.port}"

    def output(self) -> str:
        """What the server has printed so far (stdout and stderr)."""
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")


def tensorboard_command(logdir: Path | str, port: int) -> list[str]:
    """The command line of TensorBoard from this Python environment, bound to 127.0.0.1 only."""
    return [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", LOCALHOST,
            "--port", str(port)]


def get_json(url: str, *, timeout: float = 10.0) -> Any:
    """GET ``url`` and decode its JSON answer, gzipped or not (the profile plugin gzips its answers); raises
    ``urllib.error.URLError`` when unreachable."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body = response.read()
    return json.loads(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)


def post_json(url: str, payload: Mapping[str, Any], *, timeout: float = 10.0) -> Any:
    """POST ``payload`` as JSON to ``url`` and decode the JSON answer (the hparams plugin's API)."""
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def start_tensorboard(logdir: Path | str, *, port: int | None = None, timeout: float = 90.0) -> TensorBoardServer:
    """Start ``tensorboard --logdir`` on 127.0.0.1 and wait until it answers ``/data/runs``.

    Args:
        port: the port to serve on; default a free one (:func:`course_utils.free_port`).
        timeout: seconds to wait for the first answer; the server is stopped if it does not come.

    Raises:
        RuntimeError: if the server exits before answering (with its output).
        TimeoutError: if it does not answer within ``timeout`` seconds.
    """
    logdir = _existing_dir(logdir)
    if timeout <= 0:
        raise ValueError(f"timeout must be positive seconds, got {timeout}.")
    port = free_port() if port is None else port
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(tensorboard_command(logdir, port), stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    server = TensorBoardServer(process, port, logdir, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = server.output()
            log.close()
            raise RuntimeError(f"tensorboard exited with {process.returncode} before answering:\n{text[-3000:]}")
        try:
            get_json(server.url + "/data/runs", timeout=2.0)
            return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    text = server.output()
    stop_tensorboard(server)
    raise TimeoutError(f"tensorboard did not answer on {server.url} within {timeout} s:\n{text[-3000:]}")


def stop_tensorboard(server: TensorBoardServer, *, grace: float = 15.0) -> int:
    """Stop the server by its process id: SIGTERM to its process group, SIGKILL after ``grace`` seconds.

    The group also holds the data server that TensorBoard starts. Returns the exit status.
    """
    stop_process_group(server.process, grace=grace)
    returncode = server.process.wait(timeout=grace)
    server.log.close()
    return returncode
