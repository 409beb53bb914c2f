"""Lesson 04: the exercise checks and the TensorBoard helpers (event files into pandas, plots)."""

from __future__ import annotations

import base64
import json
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

import course_utils  # noqa: F401  (first: fixes the torch/TensorFlow import order)
import tensorboard_server
from conftest import REPO
from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.lessons import lesson04

matplotlib.use("Agg")


# ----------------------------------------------------------------------------- exercise checks

def test_no_answer_asks_for_one():
    assert lesson04.check_parameter_count(None) is NO_ANSWER
    assert lesson04.check_steps_per_epoch(None) is NO_ANSWER
    assert lesson04.check_random_search_trials(None) is NO_ANSWER


def test_parameter_count_right_and_wrong():
    by_hand = (6 * 1 * 25 + 6) + (12 * 6 * 25 + 12) + (192 * 120 + 120) + (120 * 60 + 60) + (60 * 10 + 10)
    assert lesson04.check_parameter_count(by_hand)
    verdict = lesson04.check_parameter_count(by_hand - 10)  # forgot the output biases
    assert not verdict and "did you count the biases of every layer" in repr(verdict)
    assert "12·4·4 = 192" not in repr(verdict) and str(by_hand) not in repr(verdict)  # the solution stays hidden
    assert repr(verdict).endswith(ASK_FOR_SOLUTION)
    for answer in (None, by_hand - 10, by_hand):
        shown = lesson04.check_parameter_count(answer, solution=True)
        assert shown.is_solution and "12·4·4 = 192" in repr(shown) and f"= {by_hand} parameters." in repr(shown)


def test_steps_per_epoch_right_and_wrong():
    assert lesson04.check_steps_per_epoch([6000, 600, 60])
    verdict = lesson04.check_steps_per_epoch([6000, 600, 6])
    assert not verdict and "batch size 1000: you have 6; hint: the optimizer steps once per batch" in repr(verdict)
    assert "batch size 10:" not in repr(verdict) and "ceil(" not in repr(verdict)
    shown = lesson04.check_steps_per_epoch([6000, 600, 6], solution=True)
    assert shown.is_solution and "ceil(60000 / 1000) = 60." in repr(shown) and "ceil(60000 / 10) = 6000" in repr(shown)
    assert "expected 3 number(s)" in repr(lesson04.check_steps_per_epoch(6000))


def test_random_search_trials_right_and_wrong():
    assert lesson04.check_random_search_trials(59)
    verdict = lesson04.check_random_search_trials(20)
    assert not verdict and "misses the best 5 %" in repr(verdict) and "average wait" in repr(verdict)
    assert "0.95ⁿ" not in repr(verdict) and "59" not in repr(verdict)
    shown = lesson04.check_random_search_trials(None, solution=True)
    assert shown.is_solution and "0.95ⁿ" in repr(shown) and "n = 59" in repr(shown)


@pytest.mark.parametrize(("top", "confidence"), [(0.05, 0.95), (0.01, 0.5), (0.1, 0.99), (0.5, 0.75)])
def test_trials_for_top_fraction_is_the_smallest_n(top, confidence):
    n = lesson04.trials_for_top_fraction(top, confidence)
    assert 1 - (1 - top) ** n >= confidence > 1 - (1 - top) ** (n - 1)


def test_trials_for_top_fraction_validates():
    for bad in [(0, 0.5), (0.5, 1), (1.5, 0.5)]:
        with pytest.raises(ValueError):
            lesson04.trials_for_top_fraction(*bad)


# ----------------------------------------------------------------------------- reading event files

@pytest.fixture(scope="module")
def torch_logs(tmp_path_factory):
    """Two runs written the way the lesson writes them: scalars per epoch and add_hparams(run_name='.')."""
    from torch.utils.tensorboard import SummaryWriter

    logdir = tmp_path_factory.mktemp("runs")
    for lr, shuffle, accuracy in [(0.01, True, 0.8), (0.001, False, 0.7)]:
        with SummaryWriter(log_dir=logdir / f"lr={lr}_shuffle={shuffle}") as writer:
            for epoch in range(3):
                writer.add_scalar("Loss", 1.0 / (epoch + 1), epoch)
            writer.add_hparams({"lr": lr, "shuffle": shuffle, "optimizer": "adam"},
                               {"hparam/accuracy": accuracy}, run_name=".")
    return logdir


def test_run_dirs_names_runs_like_tensorboard(torch_logs, tmp_path):
    assert list(lesson04.run_dirs(torch_logs)) == ["lr=0.001_shuffle=False", "lr=0.01_shuffle=True"]
    assert lesson04.run_dirs(tmp_path) == {}
    with pytest.raises(FileNotFoundError, match="not a folder"):
        lesson04.run_dirs(tmp_path / "missing")


def test_read_scalars_from_pytorch(torch_logs):
    scalars = lesson04.read_scalars(torch_logs)
    assert list(scalars.columns) == ["run", "tag", "step", "value", "wall_time"]
    loss = scalars[(scalars.run == "lr=0.01_shuffle=True") & (scalars.tag == "Loss")]
    assert loss.step.tolist() == [0, 1, 2] and np.allclose(loss.value, [1, 1 / 2, 1 / 3])
    assert set(scalars.tag) == {"Loss", "hparam/accuracy"}


def test_read_hparams_from_pytorch(torch_logs):
    table = lesson04.read_hparams(torch_logs)
    assert list(table.index) == ["lr=0.001_shuffle=False", "lr=0.01_shuffle=True"]
    row = table.loc["lr=0.01_shuffle=True"]
    assert math.isclose(row["lr"], 0.01) and row["shuffle"] == 1.0 and row["optimizer"] == "adam"
    assert math.isclose(row["hparam/accuracy"], 0.8, rel_tol=1e-6)


def test_empty_logdir_gives_empty_tables(tmp_path):
    assert lesson04.read_scalars(tmp_path).empty and list(lesson04.read_scalars(tmp_path).columns)[0] == "run"
    assert lesson04.read_hparams(tmp_path).empty


def test_read_tf2_scalars_and_hparams_api(tmp_path):
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp

    hp_lr = hp.HParam("lr", hp.Discrete([0.01, 0.001]))
    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        hp.hparams_config(hparams=[hp_lr], metrics=[hp.Metric("epoch_accuracy", group="validation"),
                                                     hp.Metric("test_accuracy")])
    for lr in hp_lr.domain.values:
        with tf.summary.create_file_writer(str(tmp_path / f"lr={lr}")).as_default():
            hp.hparams({hp_lr: lr})
            tf.summary.scalar("test_accuracy", 10 * lr, step=1)
        with tf.summary.create_file_writer(str(tmp_path / f"lr={lr}" / "validation")).as_default():
            tf.summary.scalar("epoch_accuracy", lr, step=0)
            tf.summary.scalar("epoch_accuracy", 2 * lr, step=1)
    table = lesson04.read_hparams(tmp_path)
    assert list(table.columns) == ["lr", "validation/epoch_accuracy", "test_accuracy"]
    assert np.allclose(table.loc["lr=0.01", ["lr", "validation/epoch_accuracy", "test_accuracy"]].astype(float),
                       [0.01, 0.02, 0.1])
    scalars = lesson04.read_scalars(tmp_path)
    assert len(scalars[scalars.tag == "epoch_accuracy"]) == 4


# ----------------------------------------------------------------------------- plots and the live view

def test_parallel_coordinates_draws_one_line_per_run():
    table = pd.DataFrame({"lr": [0.01, 0.001, 0.01], "batch": [10, 100, 1000], "acc": [0.8, 0.7, 0.6]})
    ax = lesson04.plot_parallel_coordinates(table, ["lr", "batch", "acc"], color_by="acc", log_columns=["lr", "batch"])
    assert len(ax.lines) == 3 and [t.get_text() for t in ax.get_xticklabels()] == ["lr\n(log)", "batch\n(log)", "acc"]
    assert np.allclose(ax.lines[0].get_ydata(), [1, 0, 1])  # scaled between each column's min and max
    with pytest.raises(KeyError, match="not in the table"):
        lesson04.plot_parallel_coordinates(table, ["lr", "missing"], color_by="acc")
    with pytest.raises(ValueError, match="at least two columns"):
        lesson04.plot_parallel_coordinates(table, ["lr"], color_by="acc")
    matplotlib.pyplot.close("all")


def test_server_arguments_are_validated(tmp_path):
    with pytest.raises(FileNotFoundError):
        tensorboard_server.start_tensorboard(tmp_path / "missing")
    with pytest.raises(ValueError, match="timeout"):
        tensorboard_server.start_tensorboard(tmp_path, timeout=0)
    command = tensorboard_server.tensorboard_command(tmp_path, 6123)
    assert command[1:3] == ["-m", "tensorboard.main"] and command[-4:] == ["--host", "127.0.0.1", "--port", "6123"]


# ----------------------------------------------------------------------------- what a run folder holds

def test_event_kinds_counts_graphs_and_summaries_by_plugin(tmp_path):
    import warnings

    import torch
    from torch.utils.tensorboard import SummaryWriter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # add_graph's torch.jit.trace is deprecated
        with SummaryWriter(log_dir=tmp_path) as writer:
            writer.add_scalar("Loss", 1.0, 0)
            writer.add_scalar("Loss", 0.5, 1)
            writer.add_histogram("w", torch.arange(4.0), 0)
            writer.add_graph(torch.nn.Linear(3, 2), torch.zeros(1, 3))
    # one header per file, 2 plain scalars and 1 histogram (legacy fields, no plugin), the traced graph
    # and its run metadata
    assert lesson04.event_kinds(tmp_path) == {"file_version": 1, "graph_def": 1, "summary:histo": 1,
                                              "summary:simple_value": 2, "tagged_run_metadata": 1}
    with pytest.raises(FileNotFoundError, match="not a folder"):
        lesson04.event_kinds(tmp_path / "missing")


def test_keras_model_graph_reads_the_layer_config(tmp_path):
    import json

    import tensorflow as tf

    config = {"class_name": "Sequential", "config": {"name": "seq", "layers": [
        {"class_name": "InputLayer", "config": {"name": "input"}},
        {"class_name": "Dense", "config": {"name": "dense"}}]}}
    metadata = tf.compat.v1.SummaryMetadata()
    metadata.plugin_data.plugin_name = "graph_keras_model"  # what keras.callbacks.TensorBoard(write_graph=True) writes
    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        tf.summary.write("keras", tf.constant(json.dumps(config)), step=0, metadata=metadata)
        tf.summary.scalar("epoch_loss", 1.0, step=0)
    assert lesson04.keras_model_graph(tmp_path) == [("seq/input", "InputLayer"), ("seq/dense", "Dense")]
    assert lesson04.event_kinds(tmp_path) == {"file_version": 1, "summary:graph_keras_model": 1, "summary:scalars": 1}
    with pytest.raises(KeyError, match="no Keras model summary tagged 'model'"):
        lesson04.keras_model_graph(tmp_path, tag="model")


def test_graph_nodes_read_the_traced_graph_with_shapes_and_no_device(tmp_path):
    import warnings

    import torch
    from torch.utils.tensorboard import SummaryWriter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # add_graph's torch.jit.trace is deprecated
        with SummaryWriter(log_dir=tmp_path) as writer:
            writer.add_graph(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()), torch.zeros(1, 3))
    nodes = lesson04.graph_nodes(tmp_path)
    # the input (1, 3), Linear[0] and ReLU[1] inside the Sequential's box, then the output (1, 2)
    assert nodes.scope.tolist() == ["input", "Sequential/Linear[0]", "Sequential/ReLU[1]", "output"]
    assert nodes.op.tolist() == ["IO Node", "aten::linear", "aten::relu", "IO Node"]
    assert nodes["output shape"].tolist() == [(1, 3), (1, 2), (1, 2), (1, 2)]
    assert set(nodes.device) == {""}, "PyTorch's graph names no device on its nodes"
    assert lesson04.run_metadata_devices(tmp_path) == ["/device:CPU:0"]  # hard-coded by add_graph


def test_graph_nodes_needs_a_graph(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(log_dir=tmp_path) as writer:
        writer.add_scalar("Loss", 1.0, 0)
    with pytest.raises(KeyError, match="no op graph"):
        lesson04.graph_nodes(tmp_path)
    assert lesson04.run_metadata_devices(tmp_path) == []
    with pytest.raises(FileNotFoundError, match="not a folder"):
        lesson04.graph_nodes(tmp_path / "missing")


def test_the_lesson_shows_the_hparams_screenshot_of_the_readme():
    """Lesson 04 embeds docs/images/tensorboard-hparams.png as a cell attachment: a path outside notebooks/ would
    not resolve on the site (docs_dir: notebooks) nor in Colab (one file opened from GitHub)."""
    notebook = json.loads((REPO / "notebooks" / "04_tensorboard.ipynb").read_text())
    (cell,) = [c for c in notebook["cells"] if "(attachment:tensorboard-hparams.png)" in "".join(c["source"])]
    embedded = base64.b64decode(cell["attachments"]["tensorboard-hparams.png"]["image/png"])
    assert embedded == (REPO / "docs" / "images" / "tensorboard-hparams.png").read_bytes(), (
        "`make screenshots` retook docs/images/tensorboard-hparams.png: put the new file's base64 into the "
        f"attachments of lesson 04's cell {cell['id']!r} (attachments['tensorboard-hparams.png']['image/png'])")
