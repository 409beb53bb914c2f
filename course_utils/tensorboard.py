"""TensorBoard plumbing: read event files into pandas, draw a sweep, run a real server and stop it.

The lesson writes its logs itself (``SummaryWriter``, ``keras.callbacks.TensorBoard``, the hparams
API); these helpers only read them back and serve them::

    scalars = read_scalars("scratch/04/runs")     # one row per (run, tag, step)
    table = read_hparams("scratch/04/runs")       # the HPARAMS table: one row per run
    server = start_tensorboard("scratch/04/runs")   # 127.0.0.1, a free port
    print(get_json(server.url + "/data/runs"))
    stop_tensorboard(server)                         # by its own process id

Reading uses TensorBoard's own event reader
(:class:`tensorboard.backend.event_processing.event_accumulator.EventAccumulator`), one run folder
at a time, so a run is exactly a folder that holds event files, as in TensorBoard.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.util import tensor_util

from course_utils.launch import LOCALHOST, free_port, stop_process_group
from course_utils.plotting import DPI

EVENT_FILE_MARKER = "tfevents"
LIVE_ENV = "COURSE_TENSORBOARD"
_AUTOMATED_DRIVERS = ("nbconvert", "nbclient", "pytest", "papermill")
# Keep every scalar and tensor point (0 = no limit); images and histograms are not read here.
_SIZE_GUIDANCE = {event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0,
                  event_accumulator.HISTOGRAMS: 1, event_accumulator.IMAGES: 1,
                  event_accumulator.COMPRESSED_HISTOGRAMS: 1, event_accumulator.AUDIO: 1}


# ----------------------------------------------------------------------------- reading event files

def _existing_dir(logdir: Path | str) -> Path:
    path = Path(logdir)
    if not path.is_dir():
        raise FileNotFoundError(f"logdir {str(logdir)!r} is not a folder: pass the folder the writers logged into.")
    return path


def run_dirs(logdir: Path | str) -> dict[str, Path]:
    """The runs under ``logdir``: every folder (``logdir`` itself included) that holds event files.

    Returns:
        ``{run name: folder}`` sorted by name, the name being the folder's path relative to
        ``logdir`` (``"."`` for ``logdir`` itself), as TensorBoard names runs.
    """
    root = _existing_dir(logdir)
    runs = {}
    for folder, _, files in os.walk(root):
        if any(EVENT_FILE_MARKER in f for f in files):
            runs[Path(folder).relative_to(root).as_posix()] = Path(folder)
    return dict(sorted(runs.items()))


def _load(folder: Path) -> event_accumulator.EventAccumulator:
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance=_SIZE_GUIDANCE)
    acc.Reload()
    return acc


def _plugin_content(acc: event_accumulator.EventAccumulator, plugin: str) -> dict[str, bytes]:
    """``{tag: plugin data}`` of one plugin in a run (empty when the run has none of its summaries)."""
    try:
        return acc.PluginTagToContent(plugin)
    except KeyError:
        return {}


def _scalar_rows(run: str, acc: event_accumulator.EventAccumulator) -> Iterator[tuple[str, str, int, float, float]]:
    tags = acc.Tags()
    for tag in tags["scalars"]:  # PyTorch's add_scalar writes simple values
        for e in acc.Scalars(tag):
            yield run, tag, e.step, float(e.value), e.wall_time
    scalar_tensors = set(_plugin_content(acc, "scalars"))
    for tag in tags["tensors"]:  # TF2's tf.summary.scalar writes rank-0 tensors tagged by the scalars plugin
        if tag in scalar_tensors:
            for e in acc.Tensors(tag):
                yield run, tag, e.step, float(tensor_util.make_ndarray(e.tensor_proto)), e.wall_time


def read_scalars(logdir: Path | str) -> pd.DataFrame:
    """Every scalar logged under ``logdir``, from PyTorch (``add_scalar``) or TF2 (``tf.summary.scalar``).

    Returns:
        A long table with columns ``run, tag, step, value, wall_time`` sorted by run, tag and step
        (empty, with those columns, when nothing was logged).
    """
    rows = [row for run, folder in run_dirs(logdir).items() for row in _scalar_rows(run, _load(folder))]
    table = pd.DataFrame(rows, columns=["run", "tag", "step", "value", "wall_time"])
    return table.sort_values(["run", "tag", "step"], kind="stable").reset_index(drop=True)


def _hparam_value(value: Any) -> Any:
    """The Python value of a ``google.protobuf.Value`` (number, string or bool)."""
    kind = value.WhichOneof("kind")
    return None if kind in (None, "null_value") else getattr(value, kind)


def read_hparams(logdir: Path | str) -> pd.DataFrame:
    """The HPARAMS table of ``logdir``: one row per run (session) that logged hyper-parameters.

    A session is a folder holding a hparams *session start* summary (``add_hparams`` in PyTorch,
    ``hp.hparams`` in TF). Its columns are the hyper-parameters, then one column per metric that
    an *experiment* summary declares, holding the metric's last logged value in that session (in
    the session's folder, or in its ``group`` sub-folder for Keras metrics such as ``validation``).

    Returns:
        A table indexed by run name (empty when no session was logged). PyTorch stores booleans
        as numbers 0/1, TF keeps them boolean.
    """
    runs = run_dirs(logdir)
    accumulators = {run: _load(folder) for run, folder in runs.items()}
    sessions: dict[str, dict[str, Any]] = {}
    metrics: dict[tuple[str, str], None] = {}  # ordered set of (group, tag)
    for run, acc in accumulators.items():
        content = _plugin_content(acc, hparams_metadata.PLUGIN_NAME)
        if hparams_metadata.EXPERIMENT_TAG in content:
            experiment = hparams_metadata.parse_experiment_plugin_data(content[hparams_metadata.EXPERIMENT_TAG])
            metrics.update({(m.name.group, m.name.tag): None for m in experiment.metric_infos})
        if hparams_metadata.SESSION_START_INFO_TAG in content:
            start = hparams_metadata.parse_session_start_info_plugin_data(
                content[hparams_metadata.SESSION_START_INFO_TAG])
            sessions[run] = {name: _hparam_value(v) for name, v in sorted(start.hparams.items())}
    scalars = read_scalars(logdir)
    last = scalars.groupby(["run", "tag"])["value"].last() if len(scalars) else pd.Series(dtype=float)
    for run, row in sessions.items():
        for group, tag in metrics:
            metric_run = run if not group else (Path(run) / group).as_posix()
            row[tag if not group else f"{group}/{tag}"] = last.get((metric_run, tag), np.nan)
    return pd.DataFrame.from_dict(sessions, orient="index").rename_axis("run")


# ----------------------------------------------------------------------------- plots of a sweep

def plot_parallel_coordinates(table: pd.DataFrame, columns: Sequence[str], *, color_by: str,
                              log_columns: Sequence[str] = (), ax: Axes | None = None) -> Axes:
    """Parallel coordinates, as in TensorBoard's HPARAMS view: one line per run across ``columns``.

    Each axis is scaled to [0, 1] between its column's min and max (after ``log10`` for
    ``log_columns``, whose ends are still labelled with the real values); lines are coloured by ``color_by``.
    """
    missing = [c for c in [*columns, color_by] if c not in table.columns]
    if missing:
        raise KeyError(f"columns {missing} are not in the table (it has {list(table.columns)}).")
    if len(columns) < 2 or len(table) == 0:
        raise ValueError("need at least two columns and one row to draw parallel coordinates.")
    values = table[list(columns)].astype(float)
    for c in log_columns:
        values[c] = np.log10(values[c])
    low, high = values.min(), values.max()
    scaled = (values - low) / (high - low).replace(0, 1)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3), dpi=DPI)
    colour = table[color_by].astype(float)
    norm = plt.Normalize(colour.min(), colour.max())
    cmap = plt.get_cmap("viridis")
    xs = np.arange(len(columns))
    for i in range(len(table)):
        ax.plot(xs, scaled.iloc[i].to_numpy(), color=cmap(norm(colour.iloc[i])), alpha=0.8, marker="o")
    for x, c in zip(xs, columns):
        raw = table[c].astype(float)
        ax.text(float(x), -0.08, f"{raw.min():.3g}", ha="center", va="top", fontsize=7)
        ax.text(float(x), 1.08, f"{raw.max():.3g}", ha="center", va="bottom", fontsize=7)
    labels = [c.replace(" ", "\n").replace("_", "\n") + ("\n(log)" if c in log_columns else "") for c in columns]
    ax.set_xticks(xs, labels, fontsize=7)
    ax.set_ylim(-0.2, 1.2)
    ax.set_yticks([])
    ax.set_ylabel("scaled value (min → max)")
    fig = ax.get_figure(root=True)
    assert fig is not None  # the axes were drawn on a figure above
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=color_by)
    fig.tight_layout()
    return ax


# ----------------------------------------------------------------------------- a real server

def live_view_allowed() -> tuple[bool, str]:
    """Whether a notebook may start an interactive TensorBoard (``%tensorboard``), and why.

    ``$COURSE_TENSORBOARD`` decides when set (``1`` yes, ``0`` no). Otherwise no under CI (``$CI``)
    or when an automated runner drives the kernel (nbconvert, nbclient, pytest/nbval, papermill:
    they would leave a server behind and gain nothing), yes for a person in Jupyter or Colab.
    """
    explicit = os.environ.get(LIVE_ENV, "").strip()
    if explicit in ("0", "1"):
        return explicit == "1", f"${LIVE_ENV}={explicit}"
    if os.environ.get("CI"):
        return False, "running under CI ($CI is set)"
    driver = _automated_driver()
    if driver:
        return False, f"the notebook is executed by {driver}, not by a person"
    return True, "interactive session"


def _automated_driver() -> str | None:
    """The automated runner that is this process or one of its ancestors, if any."""
    try:
        import psutil
    except ImportError:  # without psutil, assume a person
        return None
    me = psutil.Process()
    for proc in [me, *me.parents()]:
        try:
            cmdline = " ".join(proc.cmdline())
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        for driver in _AUTOMATED_DRIVERS:
            if driver in cmdline:
                return driver
    return None


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
    """GET ``url`` and decode its JSON answer (raises ``urllib.error.URLError`` when unreachable)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


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
