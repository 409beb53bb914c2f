"""Launching multi-process demos safely: free ports, scratch folders, timeouts and cleanup.

Lessons write their worker scripts with ``%%writefile`` into a scratch folder and launch them as a
student would on a cluster (``torchrun``, several TensorFlow workers). Everything here runs on
127.0.0.1, picks ports the OS reports free, kills whole process groups on timeout, and never hangs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCALHOST = "127.0.0.1"
_RANK_LINE = re.compile(r"^\[rank(\d+)\]:(?: |$)(.*)$", re.M)  # torchrun prefixes each rank's stderr lines
_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):.*?\brank\s*:\s*(\d+)", re.S)


def free_ports(n: int = 1, host: str = LOCALHOST) -> list[int]:
    """``n`` distinct TCP ports that are free on ``host`` right now (all bound at once, then released)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}.")
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]


def free_port(host: str = LOCALHOST) -> int:
    """One TCP port that is free on ``host`` right now."""
    return free_ports(1, host)[0]


def scratch_dir(name: str, *, clean: bool = True, base: Path | str | None = None) -> Path:
    """A folder ``<base>/scratch/<name>`` for a lesson's scripts, logs and checkpoints.

    ``base`` defaults to the current folder (the notebook's). With ``clean`` the folder is
    emptied first, so that a re-run starts from nothing.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"name must be a simple folder name (letters, digits, _ . -), got {name!r}.")
    folder = Path(base or Path.cwd()) / "scratch" / name
    if clean and folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass(frozen=True)
class ProcessResult:
    """What one launched process did."""

    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def errors(self) -> str:
        """What went wrong, to read first. Under ``torchrun`` the stderr ends with the launcher's own traceback,
        which says only *that* a rank failed: this is the error of the rank it names as the root cause (the
        others' last lines after it), or, before a process group prefixes the ranks' lines, the first traceback
        that is not the launcher's. Otherwise, the end of stderr."""
        ranks: dict[int, list[str]] = {}
        for line in _RANK_LINE.finditer(self.stderr):
            ranks.setdefault(int(line[1]), []).append(line[2])
        if not ranks:
            return _first_traceback(self.stderr) or self.stderr.strip()[-3000:]
        root = _ROOT_CAUSE.search(self.stderr)
        first = int(root[1]) if root and int(root[1]) in ranks else next(iter(ranks))
        text = "\n".join(ranks[first]).strip()[-3000:]
        after = "".join(f"\nthen rank {r}: {lines[-1].strip()[:300]}" for r, lines in ranks.items() if r != first)
        return f"rank {first} failed first:\n{text}{after}"

    def check(self) -> ProcessResult:
        """Return self if the process succeeded, else raise with the end of its output and its :attr:`errors`."""
        if self.returncode != 0:
            raise RuntimeError(f"{' '.join(self.command)} exited with {self.returncode}:\n"
                               f"--- stdout (end) ---\n{self.stdout[-3000:]}\n"
                               f"--- errors ---\n{self.errors}")
        return self


def _first_traceback(text: str) -> str:
    """The first Python traceback in ``text`` that is not ``torchrun``'s own, with its exception line; '' if none."""
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            end = start + 1
            while end < len(lines) and lines[end].startswith(" "):
                end += 1
            block = "\n".join(lines[start:end + 1])
            if "ChildFailedError" not in block:
                return block
    return ""


def stop_process_group(proc: subprocess.Popen[bytes], grace: float = 3.0) -> None:
    """Stop a process started with ``start_new_session=True`` and everything it started:
    SIGTERM to its process group, then SIGKILL if it is still there after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_processes(commands: Sequence[Sequence[str]], *, timeout: float, env: Mapping[str, str] | None = None,
                  cwd: Path | str | None = None) -> list[ProcessResult]:
    """Run commands concurrently and wait for all of them, within ``timeout`` seconds in total.

    Each command runs in its own process group with its output captured to temporary files
    (no pipe can fill up and block). On timeout every group is killed and ``TimeoutError``
    is raised with the end of each output; on any exit path no process is left behind.

    Args:
        env: variables added to (not replacing) the current environment.
    """
    if not commands or any(not cmd for cmd in commands):
        raise ValueError("commands must be a non-empty list of non-empty argument lists.")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive seconds, got {timeout}.")
    full_env = {**os.environ, **(env or {})}
    with ExitStack() as stack:
        logs = [(stack.enter_context(tempfile.TemporaryFile()), stack.enter_context(tempfile.TemporaryFile()))
                for _ in commands]
        start = time.perf_counter()
        procs = [subprocess.Popen(list(cmd), stdout=out, stderr=err, env=full_env, cwd=cwd, start_new_session=True)
                 for cmd, (out, err) in zip(commands, logs, strict=True)]
        ended: dict[int, float] = {}
        try:
            for i, proc in enumerate(procs):
                remaining = timeout - (time.perf_counter() - start)
                proc.wait(timeout=max(remaining, 0.01))
                ended[i] = time.perf_counter() - start
        except subprocess.TimeoutExpired:
            pass
        finally:
            for proc in procs:
                stop_process_group(proc)

        def text(f: object) -> str:
            f.seek(0)  # type: ignore[attr-defined]
            return f.read().decode(errors="replace")  # type: ignore[attr-defined]

        results = [ProcessResult(tuple(cmd), proc.returncode, text(out), text(err), ended.get(i, timeout))
                   for i, (cmd, proc, (out, err)) in enumerate(zip(commands, procs, logs, strict=True))]
    if len(ended) < len(procs):
        tails = "\n".join(f"[{' '.join(r.command)}]\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}" for r in results)
        raise TimeoutError(f"processes did not finish within {timeout} s and were killed:\n{tails}")
    return results


def read_rank_results(folder: Path | str, *, prefix: str = "rank", key: str = "rank") -> list[dict[str, Any]]:
    """The JSON results that the processes of a launch wrote as ``<prefix><N>.json`` in ``folder``, sorted by
    ``key`` (the rank each wrote, or ``"RANK"`` for the variable torchrun set).

    Raises:
        FileNotFoundError: when no process wrote one (the launch failed before the end, or wrote elsewhere).
    """
    paths = sorted(Path(folder).glob(f"{prefix}*.json"))
    if not paths:
        raise FileNotFoundError(f"no {prefix}*.json in {folder}: the processes did not write their results there.")
    return sorted((json.loads(path.read_text()) for path in paths), key=lambda result: result[key])


def torchrun_command(script: Path | str, *script_args: str, nproc_per_node: int = 2, nnodes: int = 1,
                     node_rank: int = 0, master_port: int | None = None) -> list[str]:
    """The ``torchrun`` command line (as ``python -m torch.distributed.run``) for a script.

    With one node it is ``--standalone`` (a local rendezvous on a free port). With several
    "nodes" on this machine, all of them must get the same ``master_port`` on 127.0.0.1.
    """
    if nproc_per_node < 1 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(f"need nproc_per_node >= 1, nnodes >= 1 and 0 <= node_rank < nnodes, got "
                         f"{nproc_per_node}, {nnodes}, {node_rank}.")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc_per_node}"]
    if nnodes == 1:
        cmd.append("--standalone")
    else:
        if master_port is None:
            raise ValueError("several nodes need one shared master_port: pass master_port=free_port().")
        cmd += [f"--nnodes={nnodes}", f"--node_rank={node_rank}", f"--master_addr={LOCALHOST}",
                f"--master_port={master_port}"]
    return [*cmd, str(script), *map(str, script_args)]


