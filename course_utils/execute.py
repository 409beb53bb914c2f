"""Execute lessons with a run profile: their committed outputs, and the published lecture-scale runs.

``python -m course_utils execute NOTEBOOK...`` (``make execute``) re-runs lessons with the quick profile in
place: the outputs committed in ``notebooks/`` and compared by nbval. With ``--profile full`` (``make full``)
each lesson runs with the full profile into ``notebooks/full/``, the lecture-scale results published beside
the lessons, and the copy records its run in its metadata (``course_run``): wall time, machine, versions,
each code cell's seconds and the digest of the code that ran. A lesson whose published copy came from its
current code is skipped unless forced (it only takes the lesson's present prose), so an interrupted
``make full`` resumes where it stopped. Each run of a lesson of this checkout writes its wall time into the
record of run times (``course_utils/lessons/run_times.json``), which everything that quotes a lesson's time reads.

Notebooks run as nbval runs them (their folder as working directory, the kernel's C-level output not
captured), with progress bars off inside the kernel and one progress bar per lesson on the terminal.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from tqdm import tqdm

from course_utils import colab, hardware
from course_utils.device import device_name
from course_utils.lessons import RUN_TIMES, lesson, record_run_time
from course_utils.profile import PROFILE_ENV, get_profile
from course_utils.progress import PROGRESS_ENV
from course_utils.versions import installed as installed_version

PUBLISHED_DIR = "full"  # notebooks/full/: the full profile's executed copies
# Per profile, relative to the working directory (the checkout, under make): each kernel's stderr (C libraries'
# log lines) as NN_name.log, and the partial notebook of a failed run as NN_name.ipynb.
LOG_DIR = Path("build") / "execute"
CELL_TIMEOUT_S = {"quick": 900, "full": 3600}
KERNEL_AS_NBVAL = ["--IPKernelApp.capture_fd_output=False"]
# The notebook metadata policy (CONTRIBUTING.md): a notebook keeps its kernelspec, a cell its tags and slide type.
KEPT_NOTEBOOK_METADATA = ("kernelspec",)
KEPT_CELL_METADATA = ("tags", "slideshow")
BANNER_ID = "full-profile-run"
CHECKOUT = Path(__file__).resolve().parent.parent  # the checkout this package is installed from (editable)
RECORDED_VERSIONS = ("torch", "tensorflow", "keras")  # the packages whose versions a run's record keeps


@dataclass(frozen=True)
class RunRecord:
    """What a published copy says about the run that made it (``metadata.course_run``)."""

    profile: str
    wall_seconds: int
    machine: str  # the CPU (or GPU) model
    hardware: str  # the setup cell's `hardware:` line
    versions: dict[str, str]
    cell_seconds: list[float]  # each code cell's wall time, in order
    source_digest: str  # of the code that ran: see source_digest()


def lesson_number(notebook: Path) -> str:
    """``"02"`` for ``.../02_optimizers.ipynb``.

    Raises:
        ValueError: for a file that is not a lesson's notebook.
    """
    number = notebook.name[:2]
    if not (notebook.suffix == ".ipynb" and number.isdigit() and notebook.name[2:3] == "_"):
        raise ValueError(f"{notebook} is not a lesson notebook (NN_name.ipynb, e.g. notebooks/02_optimizers.ipynb).")
    lesson(number)  # an unknown number raises with the list of lessons
    return number


def code_cells(nb: dict[str, Any]) -> list[str]:
    """The sources of a notebook's code cells, in order."""
    return ["".join(cell["source"]) for cell in nb["cells"] if cell["cell_type"] == "code"]


def source_digest(notebook: Path) -> str:
    """SHA-256 of what decides a lesson's results: its code cells (whatever repository their Colab install line
    names) and its module ``course_utils.lessons.lessonNN``."""
    module = Path(__file__).resolve().parent / "lessons" / f"lesson{lesson_number(notebook)}.py"
    cells = colab.unlinked(json.dumps(code_cells(json.loads(notebook.read_text()))))
    digest = hashlib.sha256(cells.encode())
    digest.update(module.read_bytes())
    return digest.hexdigest()


def in_this_checkout(notebook: Path) -> bool:
    """Whether ``notebook`` is one of the lessons of the checkout this package is installed from (editable), whose
    run times the record keeps; a copy elsewhere (a test's, a student's) leaves the record alone."""
    return notebook.resolve().parent == CHECKOUT / "notebooks"


def published_path(notebook: Path) -> Path:
    """Where the full profile's copy of a lesson is published: ``notebooks/full/NN_name.ipynb``."""
    return notebook.parent / PUBLISHED_DIR / notebook.name


def run_record(path: Path) -> RunRecord | None:
    """The record of a published copy, or ``None`` when there is no copy or it has no record."""
    if not path.is_file():
        return None
    record = json.loads(path.read_text())["metadata"].get("course_run")
    return RunRecord(**record) if record else None


def is_current(notebook: Path) -> bool:
    """Whether the published copy of ``notebook`` ran the full profile on the lesson's current code."""
    record = run_record(published_path(notebook))
    return record is not None and record.profile == "full" and record.source_digest == source_digest(notebook)


def _versions() -> dict[str, str]:
    return {name: version for name in RECORDED_VERSIONS if (version := installed_version(name))}


def clean_metadata(nb: nbformat.NotebookNode) -> None:
    """Keep only what the metadata policy keeps: no timings, no Python version, nothing a re-run would change."""
    nb.metadata = nbformat.from_dict({k: v for k, v in nb.metadata.items() if k in KEPT_NOTEBOOK_METADATA})
    for cell in nb.cells:
        cell.metadata = nbformat.from_dict({k: v for k, v in cell.metadata.items() if k in KEPT_CELL_METADATA})


def _tick(bar: tqdm, stop: threading.Event, every_s: float = 2.0) -> None:
    """Redraw ``bar`` every few seconds, so that its clock runs during a cell that takes minutes."""
    while not stop.wait(every_s):
        bar.refresh()


def execute_notebook(notebook: Path, profile: str) -> tuple[nbformat.NotebookNode, list[float]]:
    """Execute ``notebook`` top to bottom with ``profile``; return the executed notebook and each code cell's seconds.

    The kernel's stderr goes to ``build/execute/<profile>/NN_name.log``, not to the terminal.

    Raises:
        CellExecutionError: when a cell fails (the partial notebook is written to ``build/execute/<profile>/``).
    """
    nb = nbformat.read(notebook, as_version=4)
    n_code = sum(cell.cell_type == "code" for cell in nb.cells)
    started: dict[int, float] = {}
    seconds: list[float] = []
    log_dir = LOG_DIR / profile
    log_dir.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=n_code, desc=f"{notebook.stem} ({profile})", unit="cell", file=sys.stderr, dynamic_ncols=True)

    def cell_started(cell: nbformat.NotebookNode, cell_index: int, **_: Any) -> None:
        started[cell_index] = time.perf_counter()
        bar.set_postfix_str(f"cell {cell_index}", refresh=False)

    def cell_executed(cell: nbformat.NotebookNode, cell_index: int, **_: Any) -> None:
        seconds.append(round(time.perf_counter() - started[cell_index], 1))
        bar.update()

    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S[profile], extra_arguments=KERNEL_AS_NBVAL,
                            resources={"metadata": {"path": str(notebook.parent)}}, record_timing=False,
                            on_cell_start=cell_started, on_cell_executed=cell_executed)
    environ = {PROFILE_ENV: profile, PROGRESS_ENV: "off"}
    saved = {name: os.environ.get(name) for name in environ}
    os.environ.update(environ)  # the kernel inherits this process's environment
    ticking = threading.Event()
    ticker = threading.Thread(target=_tick, args=(bar, ticking), daemon=True)
    ticker.start()
    try:
        with open(log_dir / f"{notebook.stem}.log", "w") as kernel_stderr:
            client.execute(stderr=kernel_stderr)
    except CellExecutionError:
        nbformat.write(nb, log_dir / notebook.name)
        print(f"\n{notebook.name} failed in the {profile} profile: the partial notebook is {log_dir / notebook.name}, "
              f"the kernel's log {log_dir / notebook.stem}.log.", file=sys.stderr)
        raise
    finally:
        ticking.set()
        ticker.join()
        bar.close()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    clean_metadata(nb)
    return nb, seconds


def banner(notebook: Path, record: RunRecord) -> str:
    """The note at the top of a published copy: what it is, where it ran, how to make it again."""
    versions = ", ".join(f"{name} {record.versions[name]}" for name in RECORDED_VERSIONS if name in record.versions)
    return (f"> **Lecture-scale results.** This is lesson {lesson_number(notebook)} (`notebooks/{notebook.name}`) "
            f"executed top to bottom with the `full` profile by `make full`, in {record.wall_seconds} s on "
            f"{record.machine} ({record.hardware}; {versions}). Every output below comes from that run; the "
            f"lesson's own copy holds the `quick` profile's outputs, which CI re-checks. To run it again: "
            f"`make full NOTEBOOKS=notebooks/{notebook.name} FORCE=1`.")


def publish(notebook: Path, nb: nbformat.NotebookNode, record: RunRecord) -> Path:
    """Write the executed full-profile copy, with its banner and record, to ``notebooks/full/``."""
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(banner(notebook, record), id=BANNER_ID))
    nb.metadata["course_run"] = asdict(record)
    path = published_path(notebook)
    path.parent.mkdir(exist_ok=True)
    nbformat.write(nb, path)
    return path


def refresh_prose(notebook: Path) -> bool:
    """Give a current published copy the lesson's present prose; return whether anything changed.

    The copy's code cells ran the lesson's present code (:func:`is_current`), so its outputs stay; its markdown
    cells, and every cell's tags and slide types, are taken from the lesson. The copy is then the lesson plus
    the full profile's outputs.
    """
    path = published_path(notebook)
    record = run_record(path)
    published = nbformat.read(path, as_version=4)
    executed = iter([cell for cell in published.cells if cell.cell_type == "code"])
    lesson_nb = nbformat.read(notebook, as_version=4)
    for cell in lesson_nb.cells:
        if cell.cell_type == "code":
            ran = next(executed)
            if ran.source != cell.source:
                raise RuntimeError(f"{path} did not run the present code of {notebook}: run `make full` again.")
            cell.outputs, cell.execution_count = ran.outputs, ran.execution_count
    clean_metadata(lesson_nb)
    if record is None:
        raise RuntimeError(f"{path} has no record of its run: run `make full` again.")
    publish(notebook, lesson_nb, record)
    return nbformat.writes(lesson_nb) != nbformat.writes(published)


def run(notebooks: list[Path], profile: str, *, force: bool = False) -> int:
    """Execute each notebook with ``profile`` (see the module's docstring); return 1 if any failed, else 0."""
    profile = get_profile(profile).name
    for notebook in notebooks:
        lesson_number(notebook)
    failures = []
    for notebook in notebooks:
        if profile == "full" and not force and is_current(notebook):
            record = run_record(published_path(notebook))
            assert record is not None
            prose = "refreshed from the lesson" if refresh_prose(notebook) else "unchanged"
            print(f"{notebook.name}: published copy is current ({record.wall_seconds} s), its prose {prose}; "
                  f"FORCE=1 runs it again.")
            continue
        start, digest = time.perf_counter(), source_digest(notebook)  # the code that runs, whatever changes meanwhile
        try:
            nb, seconds = execute_notebook(notebook, profile)
        except CellExecutionError:
            failures.append(notebook.name)
            continue
        wall = max(1, round(time.perf_counter() - start))
        if profile == "quick":
            nbformat.write(nb, notebook)
            print(f"{notebook.name}: {wall} s (quick), outputs written in place")
        else:
            record = RunRecord(profile=profile, wall_seconds=wall, machine=device_name("cpu"),
                               hardware=hardware.detect().summary(), versions=_versions(), cell_seconds=seconds,
                               source_digest=digest)
            path = publish(notebook, nb, record)
            print(f"{notebook.name}: {wall} s (full), published as {path}")
        if in_this_checkout(notebook):
            record_run_time(lesson_number(notebook), profile, wall)
            print(f"    recorded in {RUN_TIMES.relative_to(CHECKOUT)}: regenerate the README's tables "
                  "(CONTRIBUTING.md, step 5)")
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0
