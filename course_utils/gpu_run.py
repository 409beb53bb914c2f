"""Run the lessons on a GPU machine and record what ran: ``python -m course_utils gpu-run``.

A GPU machine for a few minutes is rare, and often bare: its own torch, no TensorFlow, no package registry. This
command runs every lesson there top to bottom in the quick profile, and instead of stopping at a lesson's first
error it records, cell by cell, what ran, what was skipped and why (a cell that needs a module this machine lacks,
TensorFlow above all), what failed (and whether a skipped cell came before it), each claim's outcome
(``cu.expect``'s ✓ and ○ lines), and which compared cells printed something else than the committed outputs (what
nbval would report on this machine). Lessons may run side by side (``--jobs``), each in its own process; a lesson
still running at ``--deadline`` is stopped and recorded as far as it got.

Out: ``gpu-run.json`` (the machine's facts and one record per lesson), ``gpu-run.md`` (the same as a table, for the
README's "Verified on"), and the executed notebooks.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from configparser import ConfigParser
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from course_utils.execute import KERNEL_AS_NBVAL
from course_utils.profile import PROFILE_ENV
from course_utils.progress import PROGRESS_ENV

CHECKOUT = Path(__file__).resolve().parent.parent
SANITIZE = CHECKOUT / "tests" / "nbval_sanitize.cfg"
OPTIONAL_MODULES = ("tensorflow", "keras")  # what a GPU machine may lack; a cell that needs one is skipped
NOT_COMPARED = {"nbval-ignore-output", "nbval-skip", "raises-exception"}
CLAIM = re.compile(r"^([✓○]) (.+?): ")


@dataclass
class LessonRun:
    """What one lesson did on this machine."""

    notebook: str
    seconds: float = 0.0
    finished: bool = False  # every cell was run or skipped
    stopped: str = ""  # why not: "the deadline", "the kernel died at cell ..."
    ran: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"cell", "reason"}
    errors: list[dict[str, Any]] = field(default_factory=list)  # {"cell", "error", "after_skip"}
    claims: dict[str, list[str]] = field(default_factory=lambda: {"checked": [], "not_checked": []})
    drift: list[str] = field(default_factory=list)  # compared cells whose outputs differ from the committed ones


def missing_modules(without: tuple[str, ...] = ()) -> list[str]:
    """The optional modules this machine does not have, and those in ``without`` (treated as absent)."""
    return sorted({name for name in OPTIONAL_MODULES if importlib.util.find_spec(name) is None} | set(without))


def _names_used(source: str) -> set[str]:
    """Top-level module names a cell imports or names (``tf.x``), magics and shell lines left out."""
    lines = source.splitlines()
    if lines and lines[0].startswith("%%writefile"):
        lines = lines[1:]
    code = "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set(re.findall(r"^\s*(?:import|from)\s+(\w+)", code, re.M))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return names


def skip_reason(source: str, missing: list[str]) -> str | None:
    """Why a cell cannot run here (it needs a missing module; ``tf`` counts as TensorFlow), or None."""
    used = _names_used(source)
    if "tf" in used:
        used.add("tensorflow")
    needs = sorted(used & set(missing))
    return f"needs {', '.join(needs)}, not installed on this machine" if needs else None


def _sanitizers() -> list[tuple[re.Pattern[str], str]]:
    config = ConfigParser()
    config.read(SANITIZE)
    return [(re.compile(config[s]["regex"]), config[s]["replace"]) for s in config.sections()]


def comparable(outputs: list[Any], sanitizers: list[tuple[re.Pattern[str], str]]) -> list[str]:
    """The text nbval compares in a cell's outputs (streams, consecutive ones of a name merged, and ``text/plain``),
    sanitized as the tests do."""
    texts: list[str] = []
    last_stream = None
    for output in outputs:
        kind = output.get("output_type")
        text = output.get("text", "") if kind == "stream" else output.get("data", {}).get("text/plain", "")
        text = "".join(text) if isinstance(text, list) else text
        if kind == "stream" and output.get("name") == last_stream:
            texts[-1] += text
            continue
        last_stream = output.get("name") if kind == "stream" else None
        if kind == "stream" or (kind in ("execute_result", "display_data") and text):
            texts.append(text)
    for pattern, replace in sanitizers:
        texts = [pattern.sub(replace, text) for text in texts]
    return texts


def _error_text(cell: Any) -> str:
    """A failed cell's exception and the first line of its message."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            message = str(output.get("evalue") or "").splitlines()
            return f"{output.get('ename')}: {message[0][:300] if message else ''}"
    return "error (no message)"


def run_lesson(notebook: Path, out: Path, cell_timeout: int, missing: list[str]) -> LessonRun:
    """Execute one lesson cell by cell into ``out``, writing its record after every cell."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    committed = nbformat.read(notebook, as_version=4)
    nb = nbformat.read(notebook, as_version=4)
    record = LessonRun(notebook.name)
    sanitizers = _sanitizers()
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3", allow_errors=False,
                            extra_arguments=KERNEL_AS_NBVAL,
                            resources={"metadata": {"path": str(notebook.parent)}})
    os.environ.update({PROFILE_ENV: "quick", PROGRESS_ENV: "off"})
    start = time.perf_counter()
    skipped_before = False

    def save() -> None:
        record.seconds = round(time.perf_counter() - start, 1)
        (out / f"{notebook.stem}.json").write_text(json.dumps(asdict(record), indent=1, ensure_ascii=False))
        nbformat.write(nb, out / notebook.name)

    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            name = cell.get("id", str(index))
            reason = skip_reason(cell.source, missing)
            if reason:
                record.skipped.append({"cell": name, "reason": reason})
                cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=f"[gpu-run] skipped: {reason}\n")]
                skipped_before = True
                save()
                continue
            try:
                client.execute_cell(cell, index)
                record.ran += 1
            except CellExecutionError:
                record.ran += 1
                record.errors.append({"cell": name, "error": _error_text(cell), "after_skip": skipped_before})
            except DeadKernelError:
                record.stopped = f"the kernel died in cell {name}"
                save()
                return record
            for output in cell.outputs:
                if output.get("output_type") == "stream":
                    for line in output.get("text", "").splitlines():
                        if match := CLAIM.match(line):
                            record.claims["checked" if match[1] == "✓" else "not_checked"].append(match[2])
            tags = set(cell.metadata.get("tags", []))
            if not tags & NOT_COMPARED and comparable(cell.outputs, sanitizers) != comparable(
                    committed.cells[index].outputs, sanitizers):
                record.drift.append(name)
            save()
    record.finished = True
    save()
    return record


def machine_facts(missing: list[str]) -> dict[str, Any]:
    """The GPUs, driver, torch and CUDA versions, CPU cores, and the optional modules that are absent."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpus = [{"name": torch.cuda.get_device_name(i), "memory_gib": round(torch.cuda.get_device_properties(i).total_memory
                                                                         / 2**30, 1),
             "capability": ".".join(map(str, torch.cuda.get_device_capability(i)))} for i in range(count)]
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.split("\n")[0].strip()
    except (OSError, subprocess.SubprocessError):
        driver = ""
    return {"gpus": gpus, "driver": driver, "torch": torch.__version__, "cuda": torch.version.cuda,
            "python": sys.version.split()[0], "cpu_cores": os.cpu_count(), "missing": missing}


def summary(facts: dict[str, Any], runs: list[LessonRun], wall_s: float) -> str:
    """The run as Markdown: the machine, then one row per lesson."""
    gpus = ", ".join(f"{g['name']} (sm {g['capability']}, {g['memory_gib']} GiB)" for g in facts["gpus"]) or "no GPU"
    lines = [f"GPU run: {gpus}; driver {facts['driver'] or '?'}, torch {facts['torch']} (CUDA {facts['cuda']}), "
             f"Python {facts['python']}, {facts['cpu_cores']} CPU cores; not installed: "
             f"{', '.join(facts['missing']) or 'nothing'}; {wall_s:.0f} s in all.", "",
             "| lesson | s | cells run | skipped | failed | claims ✓ / ○ | outputs unlike the CPU's | first failure |",
             "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        first = run.errors[0] if run.errors else None
        failure = (f"`{first['cell']}` {first['error']}" + (" (after a skipped cell)" if first["after_skip"] else "")
                   if first else "–")
        state = "" if run.finished else f" (stopped: {run.stopped})"
        lines.append(f"| {run.notebook} | {run.seconds:.0f}{state} | {run.ran} | {len(run.skipped)} | "
                     f"{len(run.errors)} | {len(run.claims['checked'])} / {len(run.claims['not_checked'])} | "
                     f"{len(run.drift)} | {failure.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def run(notebooks: list[Path], out: Path, *, jobs: int = 1, deadline_s: float = 3600, cell_timeout: int = 600,
        without: tuple[str, ...] = ()) -> int:
    """Run ``notebooks`` (``jobs`` at a time, each in its own process) and write the record; 1 if a cell failed or a
    lesson did not finish. ``without``: modules to treat as absent (their cells are skipped)."""
    out.mkdir(parents=True, exist_ok=True)
    missing = missing_modules(without)
    # The kernels run this interpreter (a kernelspec that says "python" finds it first on the PATH) and import this
    # checkout's course_utils, installed or not.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))
    start = time.perf_counter()
    pending = list(notebooks)
    running: dict[Path, tuple[subprocess.Popen[bytes], Any]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            notebook = pending.pop(0)
            command = [sys.executable, "-m", "course_utils", "gpu-run", "--one", str(notebook), "--out", str(out),
                       "--cell-timeout", str(cell_timeout), *(f"--without={name}" for name in missing)]
            log = open(out / f"{notebook.stem}.log", "w")
            running[notebook] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log)
        for notebook, (process, log) in list(running.items()):
            if process.poll() is not None or time.perf_counter() - start > deadline_s:
                if process.poll() is None:
                    process.kill()
                    process.wait()
                log.close()
                del running[notebook]
        if time.perf_counter() - start > deadline_s:
            pending.clear()
        time.sleep(0.5)
    runs = []
    for notebook in notebooks:
        part = out / f"{notebook.stem}.json"
        lesson = LessonRun(**json.loads(part.read_text())) if part.exists() else LessonRun(notebook.name)
        if not lesson.finished and not lesson.stopped:
            lesson.stopped = "the deadline" if time.perf_counter() - start > deadline_s else "its process ended early"
        runs.append(lesson)
    wall = time.perf_counter() - start
    facts = machine_facts(missing)
    (out / "gpu-run.json").write_text(json.dumps({"machine": facts, "jobs": jobs, "wall_seconds": round(wall),
                                                  "lessons": [asdict(r) for r in runs]}, indent=1, ensure_ascii=False))
    table = summary(facts, runs, wall)
    (out / "gpu-run.md").write_text(table)
    print(table)
    return 1 if any(r.errors or not r.finished for r in runs) else 0
