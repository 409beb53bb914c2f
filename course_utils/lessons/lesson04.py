"""Lesson 04 (TensorBoard): read event files into pandas, draw a sweep (the live view is :mod:`course_utils.live_view`).

The lesson writes its logs itself (``SummaryWriter``, ``keras.callbacks.TensorBoard``, the hparams
API); these helpers only read them back::

    scalars = read_scalars("scratch/04/runs")     # one row per (run, tag, step)
    table = read_hparams("scratch/04/runs")       # the HPARAMS table: one row per run
    kinds = event_kinds("scratch/04/graph_demo")  # what a run folder's event files hold, by kind
    nodes = graph_nodes("scratch/04/graph_demo")  # the op graph of add_graph, as the GRAPHS dashboard reads it

Reading uses TensorBoard's own event reader
(:class:`tensorboard.backend.event_processing.event_accumulator.EventAccumulator`), one run folder
at a time, so a run is exactly a folder that holds event files, as in TensorBoard.

The exercise checks of the lesson follow its plumbing.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat.proto import config_pb2, graph_pb2
from tensorboard.plugins.graph import keras_util
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.util import tensor_util
from torch import nn

from course_utils.checks import CheckResult, check_numbers

# The live view, now the toolkit's (lesson 10 shows profiles the same way); notebook 04 calls it by this module.
from course_utils.live_view import live_view_allowed, live_view_host  # noqa: F401
from course_utils.plotting import DPI

EVENT_FILE_MARKER = "tfevents"
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


def event_kinds(folder: Path | str) -> dict[str, int]:
    """What the event files directly in ``folder`` (one run) hold, counted by kind of event.

    An event is a ``graph_def`` (an op graph, as ``SummaryWriter.add_graph`` writes it), a
    ``tagged_run_metadata``, a ``file_version`` header, or a summary: summaries are counted per
    plugin as ``summary:<plugin>`` (``scalars``, ``histograms``, ``hparams``, ``graph_keras_model`` ...),
    or by their field where they name no plugin (PyTorch's ``add_scalar``, ``add_histogram`` and
    ``add_image`` write ``summary:simple_value``, ``summary:histo`` and ``summary:image``). The events are
    counted as written, before TensorBoard's loader upgrades legacy kinds to plugin summaries.

    Returns:
        ``{kind: number of events or summary values}``, sorted by kind.
    """
    kinds: Counter[str] = Counter()
    for event in _events(folder):  # as written, not upgraded
        what = event.WhichOneof("what")
        if what != "summary":
            kinds[what] += 1
            continue
        for value in event.summary.value:
            plugin = value.metadata.plugin_data.plugin_name or value.WhichOneof("value")
            kinds[f"summary:{plugin}"] += 1
    return dict(sorted(kinds.items()))


def keras_model_graph(folder: Path | str, tag: str = "keras") -> list[tuple[str, str]]:
    """The conceptual graph that TensorBoard's GRAPHS dashboard draws from a Keras model summary.

    ``keras.callbacks.TensorBoard(write_graph=True)`` writes the model's JSON configuration under
    ``tag`` (plugin ``graph_keras_model``); TensorBoard turns it into one node per layer with
    ``keras_util.keras_model_to_graph_def``, as done here.

    Returns:
        ``[(node name, Keras class), ...]`` in the order of the layers.
    """
    acc = _load(_existing_dir(folder))
    if tag not in _plugin_content(acc, "graph_keras_model"):
        raise KeyError(f"{str(folder)!r} holds no Keras model summary tagged {tag!r}.")
    config = json.loads(tensor_util.make_ndarray(acc.Tensors(tag)[-1].tensor_proto).item())
    graph = keras_util.keras_model_to_graph_def(config)
    return [(node.name, node.attr["keras_class"].s.decode()) for node in graph.node]


def _events(folder: Path | str) -> Iterator[Any]:
    """The events of the event files directly in ``folder`` (one run), as written, in file order."""
    for path in sorted(_existing_dir(folder).glob(f"*{EVENT_FILE_MARKER}*")):
        yield from event_file_loader.LegacyEventFileLoader(str(path)).Load()


def graph_nodes(folder: Path | str) -> pd.DataFrame:
    """The op graph that ``SummaryWriter.add_graph`` wrote into ``folder``, as TensorBoard's GRAPHS dashboard reads it.

    The dashboard draws one box per name scope (``Network/Conv2d[conv1]``: the module ``conv1``), which opens on a
    click onto the nodes inside, each with the shape of its output. Constants and attribute reads have no output
    shape and are left out here (the dashboard folds them into their box).

    Returns:
        One row per node with an output shape, in the graph's order but the output last: ``scope`` (the box that
        holds it), ``name``,
        ``op`` (``aten::linear``; ``IO Node`` for the input and the output), ``output shape`` (a tuple) and ``device``
        (the node's own device field, ``""`` when it names none).

    Raises:
        KeyError: if the folder's event files hold no op graph (a ``graph_def`` event).
    """
    graphs = [event.graph_def for event in _events(folder) if event.WhichOneof("what") == "graph_def"]
    if not graphs:
        raise KeyError(f"{str(folder)!r} holds no op graph: SummaryWriter.add_graph writes one.")
    graph = graph_pb2.GraphDef.FromString(graphs[-1])
    rows = []
    for node in graph.node:
        if "_output_shapes" not in node.attr:
            continue
        shape = tuple(d.size for d in node.attr["_output_shapes"].list.shape[0].dim)
        rows.append((node.name.rpartition("/")[0], node.name, node.op, shape, node.device))
    rows.sort(key=lambda row: row[0] == "output" and row[2] == "IO Node")  # stable: the output moves to the end
    return pd.DataFrame(rows, columns=["scope", "name", "op", "output shape", "device"])


def run_metadata_devices(folder: Path | str) -> list[str]:
    """The devices that the run metadata in ``folder`` names (``add_graph`` writes it beside the graph).

    Returns:
        The ``device`` of every device entry of every ``tagged_run_metadata`` event's step statistics, in order
        (empty when there is none).
    """
    devices = []
    for event in _events(folder):
        if event.WhichOneof("what") == "tagged_run_metadata":
            metadata = config_pb2.RunMetadata.FromString(event.tagged_run_metadata.run_metadata)
            devices += [stats.device for stats in metadata.step_stats.dev_stats]
    return devices


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


# ---------------------------------------- exercise checks

FASHION_MNIST_TRAIN = 60_000
LECTURE_BATCH_SIZES = (10, 100, 1000)


def _lecture_cnn() -> nn.Sequential:
    """The lecture's CNN layer by layer (the notebook's ``Network``), for counting parameters."""
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 12, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(12 * 4 * 4, 120), nn.ReLU(), nn.Linear(120, 60), nn.ReLU(), nn.Linear(60, 10),
    )


def check_parameter_count(answer: int | None, *, solution: bool = False) -> CheckResult:
    """Exercise 1: trainable parameters of the lecture's CNN (conv1, conv2, fc1, fc2, out)."""
    layers = [m for m in _lecture_cnn() if isinstance(m, (nn.Conv2d, nn.Linear))]
    counts = [sum(p.numel() for p in m.parameters()) for m in layers]
    terms = " + ".join(str(c) for c in counts)
    return check_numbers(
        answer, [sum(counts)], names=["parameters"], solution=solution,
        hints=["count the five layers of section 2 one by one, weights and biases: a Conv2d's kernels span all "
               "of its input channels, and section 2 says how many inputs fc1 sees after the convolutions and "
               "poolings (did you count the biases of every layer, out's included?)"],
        why=[f"a Conv2d(c_in, c_out, 5) holds c_out·c_in·5·5 weights + c_out biases, a Linear(n_in, n_out) "
             f"n_in·n_out + n_out; fc1 sees 12·4·4 = 192 inputs (28 → 24 → 12 → 8 → 4 after two 5×5 "
             f"convolutions and two 2×2 poolings); conv1, conv2, fc1, fc2 and out hold {terms} = {sum(counts)} "
             f"parameters"],
    )


def check_steps_per_epoch(answer: Sequence[int] | None, *, solution: bool = False) -> CheckResult:
    """Exercise 2: optimizer steps in one epoch over all 60,000 training images, per lecture batch size."""
    expected = [math.ceil(FASHION_MNIST_TRAIN / b) for b in LECTURE_BATCH_SIZES]
    return check_numbers(
        answer, expected, names=[f"steps at batch size {b}" for b in LECTURE_BATCH_SIZES], solution=solution,
        hints=[f"the optimizer steps once per batch: count the batches of {b} images in one pass over all "
               f"{FASHION_MNIST_TRAIN:,} training images" for b in LECTURE_BATCH_SIZES],
        why=[("one optimizer step per batch: " if i == 0 else "")
             + f"steps at batch size {b} = ceil({FASHION_MNIST_TRAIN} / {b}) = {e}"
             for i, (b, e) in enumerate(zip(LECTURE_BATCH_SIZES, expected))],
    )


def trials_for_top_fraction(top: float, confidence: float) -> int:
    """Fewest independent random trials so that one lands in the best ``top`` fraction with ``confidence``.

    Solves ``1 - (1 - top)**n >= confidence`` for the smallest integer ``n`` (Bergstra & Bengio, 2012).
    """
    if not (0 < top < 1 and 0 < confidence < 1):
        raise ValueError(f"top and confidence must be in (0, 1), got {top} and {confidence}.")
    n = math.ceil(math.log1p(-confidence) / math.log1p(-top))
    while 1 - (1 - top) ** n < confidence:  # guard against rounding at the boundary
        n += 1
    return n


def check_random_search_trials(answer: int | None, *, solution: bool = False) -> CheckResult:
    """Exercise 3: random trials needed for a 95 % chance that one is in the top 5 % of configurations."""
    expected = trials_for_top_fraction(0.05, 0.95)
    return check_numbers(
        answer, [expected], names=["trials"], solution=solution,
        hints=["start from the chance that one random trial misses the best 5 %; the trials are independent, "
               "so how likely is it that all n of them miss? Take the smallest whole n that makes at least one "
               "hit 95 % likely (1/5 % = 20 trials is only the average wait for a first hit)"],
        why=[f"each trial misses the top 5 % with probability 0.95, so n trials all miss with 0.95ⁿ; "
             f"1 - 0.95ⁿ ≥ 0.95 first holds at n = {expected} (0.95^{expected} = {0.95 ** expected:.4f}), "
             f"so {expected} trials"],
    )
