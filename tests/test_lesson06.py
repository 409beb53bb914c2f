"""Lesson 06: the exercise checks and the in-process TensorFlow cluster helper."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.lessons import lesson06


def test_global_batch_check():
    assert lesson06.check_global_batch((256, 235))
    wrong = lesson06.check_global_batch((64, 938))
    assert not wrong and "section 2 relates the global batch" in wrong.message and "partial batch" in wrong.message
    assert "8 replicas" not in wrong.message and wrong.message.endswith(ASK_FOR_SOLUTION)
    assert lesson06.check_global_batch(None) is NO_ANSWER
    for answer in (None, (64, 938), (256, 235)):
        shown = lesson06.check_global_batch(answer, solution=True)
        assert shown.is_solution and not shown and "8 replicas" in shown.message
        assert shown.message.endswith("ceil(60000/256) = 235 (the last batch is partial).")
    assert lesson06.check_global_batch((64, 47), workers=1, gpus_per_worker=2, examples=3000)


def test_two_head_parameter_check():
    assert lesson06.check_two_head_parameters(95_531)
    wrong = lesson06.check_two_head_parameters(95_410)  # the second head left out
    assert not wrong and "the second head" in wrong.message and "784·120+120" not in wrong.message
    assert lesson06.check_two_head_parameters(None) is NO_ANSWER
    shown = lesson06.check_two_head_parameters(None, solution=True)
    assert shown.is_solution and "784·120+120 + 120·10+10 + 120·1+1 = 95531" in repr(shown)


def test_sync_vs_async_check():
    assert lesson06.check_sync_vs_async((50, 125))
    wrong = lesson06.check_sync_vs_async((50, 50))
    assert not wrong and wrong.message.startswith("asynchronous batches: you have 50; hint: asynchronously no worker")
    assert "100 + 25 = 125" not in wrong.message and "lockstep" not in wrong.message  # only the wrong item
    assert lesson06.check_sync_vs_async(None) is NO_ANSWER
    assert "100 + 25 = 125" in lesson06.check_sync_vs_async((50, 50), solution=True).message
    assert lesson06.check_sync_vs_async((4, 4), step_seconds=(0.5, 0.5))
    with pytest.raises(ValueError):
        lesson06.check_sync_vs_async((1, 1), step_seconds=(0.0, 1.0))


def test_worker_threads_rule():
    assert lesson06.worker_inter_op_threads(2, cpu_count=2) == 3
    assert lesson06.worker_inter_op_threads(2, cpu_count=16) == 16
    assert lesson06.worker_inter_op_threads(4, cpu_count=1) == 5
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError):
            lesson06.worker_inter_op_threads(bad)
    with pytest.raises(ValueError):
        lesson06.worker_inter_op_threads(2, cpu_count=0)


def test_cluster_validation():
    with pytest.raises(ValueError, match="never returns"):
        lesson06.start_in_process_cluster(num_workers=2, worker_threads=2)
    with pytest.raises(ValueError):
        lesson06.start_in_process_cluster(num_ps=0)


def test_find_tpu_reads_environment_and_devices(tmp_path):
    nothing = str(tmp_path / "accel*")
    assert lesson06.find_tpu({}, device_glob=nothing) is None
    assert lesson06.find_tpu({"COLAB_TPU_ADDR": "10.0.0.2:8470"}, device_glob=nothing) == "grpc://10.0.0.2:8470"
    assert lesson06.find_tpu({"TPU_NAME": "my-tpu"}, device_glob=nothing) == "my-tpu"
    (tmp_path / "accel0").touch()
    assert lesson06.find_tpu({}, device_glob=nothing) == "local"


def test_tf_config_names_the_cluster_and_this_task():
    config = json.loads(lesson06.tf_config({"chief": [2222], "worker": [2223, 2224], "ps": [2225]}, "worker", 1))
    assert config == {"cluster": {"chief": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"],
                                  "ps": ["127.0.0.1:2225"]},
                      "task": {"type": "worker", "index": 1}}
    with pytest.raises(ValueError):
        lesson06.tf_config({"worker": [2223]}, "ps", 0)  # no such job
    with pytest.raises(ValueError):
        lesson06.tf_config({"worker": [2223]}, "worker", 1)  # one worker: index 0 only
    with pytest.raises(ValueError):
        lesson06.cluster_spec({"worker": []})


PS_SCRIPT = """
import os

import course_utils
import tensorflow as tf
from course_utils.lessons import lesson06
cluster = lesson06.start_in_process_cluster(num_workers=2, num_ps=1)
strategy = tf.distribute.ParameterServerStrategy(cluster.resolver)
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
with strategy.scope():
    v = tf.Variable(0.0)
@tf.function
def step():
    v.assign_add(1.0)
    return tf.distribute.coordinator.experimental_get_current_worker_index()
remote = [coordinator.schedule(step) for _ in range(8)]
coordinator.join()
print(sorted({int(r.fetch()) for r in remote}) <= [0, 1], float(v.read_value()), v.device.split("/device")[0],
      flush=True)
os._exit(0)  # no teardown of the in-process servers; CI saw one crash (-11) somewhere: faulthandler will say where
"""


def test_in_process_cluster_trains_without_deadlock():
    out = subprocess.run([sys.executable, "-X", "faulthandler", "-c", PS_SCRIPT], capture_output=True, text=True,
                         timeout=240, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, f"exit code {out.returncode}; printed {out.stdout!r}; {out.stderr[-3000:]}"
    assert out.stdout.split() == ["True", "8.0", "/job:ps/replica:0/task:0"]


def test_central_storage_memory_check():
    # 250 M float32 values = 1 GB of weights. Adam (2 slots): mirrored 1 + 2 + 1 (gradients) = 4 GB per GPU;
    # central: a copy of the weights to compute with + full-size gradients = 2 GB per GPU.
    assert lesson06.check_central_storage_memory((4, 2), parameters=250_000_000, slots_per_weight=2)
    wrong = lesson06.check_central_storage_memory((4, 0.5), parameters=250_000_000, slots_per_weight=2)
    assert not wrong and "Nothing is divided by the number of GPUs" in wrong.message
    assert "not 1/8" not in wrong.message and "8·2·1 = 16 GB" not in wrong.message
    shown = lesson06.check_central_storage_memory(None, parameters=250_000_000, slots_per_weight=2, solution=True)
    assert shown.is_solution and "not 1/8" in shown.message and "8·2·1 = 16 GB" in shown.message
    assert shown.message.endswith("2 GB.")
    # the premise of the old exercise (central storage divides the GPU memory by 8) is what the check rejects
    assert not lesson06.check_central_storage_memory((4, 0.375), parameters=250_000_000, slots_per_weight=2)
    # plain SGD (no slots): 1 + 1 = 2 GB either way
    assert lesson06.check_central_storage_memory((2, 2), parameters=250_000_000, slots_per_weight=0)
    assert not lesson06.check_central_storage_memory(None, parameters=250_000_000, slots_per_weight=2)
    for bad in ({"parameters": 0, "slots_per_weight": 2}, {"parameters": 10, "slots_per_weight": -1},
                {"parameters": 10, "slots_per_weight": True}):
        with pytest.raises(ValueError):
            lesson06.check_central_storage_memory((1, 1), **bad)


MIRRORED_STEP_SCRIPT = """
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import course_utils
import tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from course_utils.lessons import lesson06
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
keras.utils.set_random_seed(0)
with strategy.scope():
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="relu"), keras.layers.Dense(3)])
x = np.random.default_rng(0).normal(size=(40, 6)).astype("float32")
y = (np.arange(40) % 3).astype("int64")
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
step = lesson06.trace_mirrored_step(strategy, model, loss_fn, x, y, global_batch=16)
mean = float(tf.reduce_mean(loss_fn(y[:16], model(x[:16]))))
fig, ax = plt.subplots()
lesson06.draw_mirrored_step(step, ax)
print(step.devices, step.examples, step.replicas_differ, step.one_device_gap < 1e-6, abs(step.mean_loss - mean) < 1e-6,
      len(ax.texts), flush=True)
"""


def test_a_mirrored_step_sums_shares_of_the_global_batch():
    """Two logical CPU replicas: 8 examples each, shares that add up to the batch's mean loss, and an all-reduced
    gradient that every replica holds alike and that equals one device's gradient of the whole batch."""
    out = subprocess.run([sys.executable, "-c", MIRRORED_STEP_SCRIPT], capture_output=True, text=True, timeout=240,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, f"exit code {out.returncode}; {out.stderr[-3000:]}"
    assert out.stdout.split("\n")[-2] == "('CPU:0', 'CPU:1') (8, 8) 0.0 True True 12"  # 6 boxes, 6 arrows
