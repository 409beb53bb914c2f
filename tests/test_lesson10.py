"""Lesson 10: the exercise checks, the trace readers and plots, and the lesson's profiles in a real TensorBoard."""

from __future__ import annotations

import gzip
import json
import time

import matplotlib
import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

import course_utils as cu  # noqa: F401  (first: fixes the torch/TensorFlow import order)
import tensorboard_server as tb
from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.lessons import lesson10

matplotlib.use("Agg")


# ----------------------------------------------------------------------------- exercise checks

def test_no_answer_is_not_an_error():
    assert lesson10.check_schedule(None, wait=1, warmup=2, active=3, repeat=2, skip_first=1, steps=20) is NO_ANSWER
    assert lesson10.check_linear_intensity(None, batch=64, features_in=784, features_out=256) is NO_ANSWER


def test_schedule_check():
    # skip_first=1, then cycles of wait 1 + warmup 2 + active 3 = 6 steps: steps 1-6 and 7-12 are the 2 cycles
    # (repeat=2), each records its last 3 steps and hands them over once; steps 13-19 are not profiled.
    assert lesson10.check_schedule((6, 2), wait=1, warmup=2, active=3, repeat=2, skip_first=1, steps=20)
    verdict = lesson10.check_schedule((9, 3), wait=1, warmup=2, active=3, repeat=2, skip_first=1, steps=20)
    assert not verdict and "the warm-up steps are traced but thrown away" in repr(verdict)  # the hints
    assert "how many cycles run?" in repr(verdict) and repr(verdict).endswith(ASK_FOR_SOLUTION)
    assert "2 × 3 = 6" not in repr(verdict)  # the derivation stays hidden at a miss ...
    for answer in (None, (9, 3), (6, 2)):  # ... and is shown when asked for, whatever the answer
        shown = lesson10.check_schedule(answer, wait=1, warmup=2, active=3, repeat=2, skip_first=1, steps=20,
                                        solution=True)
        assert shown.is_solution and "2 cycle(s) run (repeat=2): 2 × 3 = 6" in repr(shown)
        assert "on_trace_ready is called once at the end of each cycle's active steps: 2 time(s)" in repr(shown)
    # repeat=1: one cycle, steps 1-6, records steps 4-6.
    assert lesson10.check_schedule((3, 1), wait=1, warmup=2, active=3, repeat=1, skip_first=1, steps=20)


def test_linear_intensity():
    # FLOPs 2·64·784·256 = 25,690,112; bytes 4·(64·784 + 256·784 + 256 + 64·256) = 4·267,520 = 1,070,080.
    assert lesson10.linear_intensity(64, 784, 256) == (25_690_112, 1_070_080)
    assert lesson10.check_linear_intensity(25_690_112 / 1_070_080, batch=64, features_in=784, features_out=256)
    assert lesson10.check_linear_intensity(24.0, batch=64, features_in=784, features_out=256)  # within 1%
    verdict = lesson10.check_linear_intensity(2 * 64 * 784 * 256 / (4 * 64 * 784), batch=64, features_in=784,
                                              features_out=256)  # counted only the input's bytes
    assert not verdict and "did you count the bytes of all four tensors x, W, b and y?" in repr(verdict)
    assert "1,070,080" not in repr(verdict)
    shown = lesson10.check_linear_intensity(None, batch=64, features_in=784, features_out=256, solution=True)
    assert shown.is_solution and "= 1,070,080 bytes" in repr(shown) and repr(shown).endswith("= 24 FLOP/byte.")


# ----------------------------------------------------------------------------- traces and plots

def _profile_steps(folder, steps=6):
    """Write the traces of a tiny loop the lesson's way: wait 1, warmup 1, active 2, twice."""
    x = torch.ones(8, 8)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
                 acc_events=True, on_trace_ready=tensorboard_trace_handler(str(folder), worker_name="w")) as prof:
        for _ in range(steps + 2):
            with record_function("forward"):
                x = x @ x / 8
            prof.step()
            time.sleep(0.01)  # distinct modification times, in the order the traces were written


def test_trace_files_and_events(tmp_path):
    _profile_steps(tmp_path / "run")
    files = lesson10.trace_files(tmp_path)
    assert len(files) == 2 and all(f.name.startswith("w.") and f.name.endswith(".pt.trace.json") for f in files)
    steps = [sorted(e["name"] for e in lesson10.trace_events(f) if e["name"].startswith("ProfilerStep#"))
             for f in files]
    assert steps == [["ProfilerStep#2", "ProfilerStep#3"], ["ProfilerStep#6", "ProfilerStep#7"]]
    events = lesson10.trace_events(files[0])
    assert sum(e["name"] == "forward" for e in events) == 2 and all("dur" in e and "ts" in e for e in events)

    zipped = tmp_path / "z" / "w.1.pt.trace.json.gz"  # tensorboard_trace_handler(use_gzip=True) writes these
    zipped.parent.mkdir()
    zipped.write_bytes(gzip.compress(files[0].read_bytes()))
    assert lesson10.trace_events(zipped) == events and zipped in lesson10.trace_files(tmp_path)


def test_trace_readers_say_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the profiling cell"):
        lesson10.trace_files(tmp_path / "missing")
    not_a_trace = tmp_path / "x.pt.trace.json"
    not_a_trace.write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="not a Chrome trace"):
        lesson10.trace_events(not_a_trace)


def test_timeline_and_roofline_plots():
    events = [{"name": "forward", "ts": 1000.0, "dur": 500.0}, {"name": "backward", "ts": 1500.0, "dur": 1000.0},
              {"name": "forward", "ts": 3000.0, "dur": 500.0}]
    ax = lesson10.plot_timeline(events, ["forward", "backward"])
    assert len(ax.collections) == 2  # one row of bars per name
    assert [t.get_text() for t in ax.get_yticklabels()] == ["forward", "backward"]
    # the forward row has bars at 0 and 2 ms (µs in the trace, ms from the first range on the axis)
    corners = [tuple(path.vertices.min(axis=0)) for path in ax.collections[0].get_paths()]
    assert corners == [pytest.approx((0.0, -0.4)), pytest.approx((2.0, -0.4))]
    with pytest.raises(ValueError, match="none of"):
        lesson10.plot_timeline(events, ["optimizer"])

    ax = lesson10.plot_roofline(100e9, 10e9, {"add": (1 / 12, 0.8e9), "matmul": (170.0, 90e9)})
    roof = ax.lines[0].get_ydata()
    assert roof.max() == pytest.approx(100.0) and roof.min() < 1.0  # GFLOP/s: flat at the peak, sloped below
    assert "ridge 10 FLOP/byte" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="positive"):
        lesson10.plot_roofline(0, 1, {})
    matplotlib.pyplot.close("all")


def test_the_schedule_picture_colours_each_step_by_the_schedule_s_action():
    import matplotlib.pyplot as plt
    from torch.profiler import ProfilerAction

    actions = [schedule(wait=1, warmup=1, active=2, repeat=2)(step) for step in range(10)]  # the lesson's
    ax = lesson10.draw_schedule(actions)
    boxes = [p for p in ax.patches if p.get_width() < 1]
    assert len(boxes) == 10 and [b.get_x() for b in boxes] == list(range(10))
    colours = {a: matplotlib.colors.to_rgba(lesson10.SCHEDULE_ACTIONS[a][0]) for a in lesson10.SCHEDULE_ACTIONS}
    by_step = [next(a for a, c in colours.items() if c == b.get_facecolor()).name for b in boxes]
    assert by_step == ["NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"] * 2 + ["NONE", "NONE"]
    assert [t.get_text() for t in ax.texts] == ["trace 1: steps 2–3\n→ on_trace_ready",
                                                "trace 2: steps 6–7\n→ on_trace_ready"]
    assert ax.texts[0].xy[0] == pytest.approx(3.96)  # handed over at the prof.step() that ends step 3
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(s) for s in range(10)]
    assert [t.get_text().split(":")[0] for t in ax.get_legend().get_texts()] == [
        "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"]
    one = lesson10.draw_schedule([ProfilerAction.RECORD_AND_SAVE])  # active=1: a trace of one step
    assert [t.get_text() for t in one.texts] == ["trace 1: step 0\n→ on_trace_ready"]
    with pytest.raises(ValueError, match=r"\[sched\(step\) for step in range\(steps\)\]"):
        lesson10.draw_schedule([0, 1, 2])
    with pytest.raises(ValueError, match="no steps"):
        lesson10.draw_schedule([])
    plt.close("all")


def test_the_phases_picture_stacks_each_loop_s_phases():
    import matplotlib.pyplot as plt

    phases = {"slow loop": {"data": 9.0, "forward": 1.0, "loss": 3.0},
              "fixed loop": {"data": 0.5, "forward": 1.0, "loss": 0.25}}
    ax = lesson10.draw_phases(phases)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["slow loop", "fixed loop"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["data", "forward", "loss"]
    bars = [(p.get_x(), p.get_width()) for p in ax.patches]  # phase by phase, the slow loop's bar first
    assert bars == [(0.0, 9.0), (0.0, 0.5), (9.0, 1.0), (0.5, 1.0), (10.0, 3.0), (1.5, 0.25)]
    assert ax.get_xlabel() == "ms per step (profiled)"
    with pytest.raises(ValueError, match="same phases"):
        lesson10.draw_phases({"slow loop": {"data": 1.0}, "fixed loop": {"loss": 1.0}})
    with pytest.raises(ValueError, match="negative"):
        lesson10.draw_phases({"slow loop": {"data": -1.0}})
    with pytest.raises(ValueError, match="empty"):
        lesson10.draw_phases({})
    plt.close("all")


# ----------------------------------------------------------------------------- TensorBoard with the plugins

@pytest.mark.timeout(300)
def test_tensorboard_shows_the_lessons_pytorch_and_tensorflow_profiles(tmp_path):
    import keras
    import tensorflow as tf

    _profile_steps(tmp_path / "traces" / "cnn")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    tf.profiler.experimental.start(str(tmp_path / "tf_profile"))
    model.fit(tf.zeros((16, 4)), tf.zeros((16, 2)), epochs=1, verbose=0)
    tf.profiler.experimental.stop()

    server = tb.start_tensorboard(tmp_path, port=cu.free_port(), timeout=120)
    try:
        plugins = tb.get_json(server.url + "/data/plugins_listing")
        assert plugins["pytorch_profiler"]["enabled"] and plugins["profile"]["enabled"]
        deadline = time.monotonic() + 60
        while (runs := tb.get_json(server.url + "/data/plugin/pytorch_profiler/runs"))["loading"] or not runs["runs"]:
            assert time.monotonic() < deadline, runs
            time.sleep(0.5)
        assert runs["runs"] == ["traces/cnn"]
        (tf_run,) = tb.get_json(server.url + "/data/plugin/profile/runs")
        assert tf_run.startswith("tf_profile/")
        tools = tb.get_json(server.url + f"/data/plugin/profile/run_tools?run={tf_run}")
        assert {"overview_page", "trace_viewer@", "roofline_model"} <= set(tools)
    finally:
        tb.stop_tensorboard(server)
