"""Exercise checks for lesson 06 (tf.distribute and the Keras functional API). Expected values are computed here."""

from __future__ import annotations

import math
from collections.abc import Sequence

from course_utils.checks import NO_ANSWER, CheckResult, check_numbers


def check_global_batch(answer: Sequence[float] | None, *, per_replica_batch: int = 32, workers: int = 2,
                       gpus_per_worker: int = 4, examples: int = 60_000) -> CheckResult:
    """Exercise 1: ``(global batch, steps per epoch)`` for a MultiWorkerMirroredStrategy job of
    ``workers`` machines with ``gpus_per_worker`` GPUs each, ``per_replica_batch`` examples per
    replica, over ``examples`` training examples (the last, smaller batch counts as a step)."""
    replicas = workers * gpus_per_worker
    global_batch = per_replica_batch * replicas
    steps = math.ceil(examples / global_batch)
    return check_numbers(
        answer, [global_batch, steps], names=["global batch", "steps per epoch"],
        why=[f"one replica per GPU: {workers}·{gpus_per_worker} = {replicas} replicas in sync, each taking "
             f"{per_replica_batch} examples, so one step consumes {per_replica_batch}·{replicas} = {global_batch}",
             f"an epoch is ceil({examples}/{global_batch}) = {steps} steps (the last batch is partial)"],
    )


def check_two_head_parameters(answer: int | None) -> CheckResult:
    """Exercise 2: trainable parameters of the lesson's two-head model (28×28 → Flatten → Dense 120
    ReLU → Dense 10 softmax and Dense 1 sigmoid), counted by building it with Keras."""
    if answer is None:
        return NO_ANSWER
    import keras

    inputs = keras.Input(shape=(28, 28))
    hidden = keras.layers.Dense(120, activation="relu")(keras.layers.Flatten()(inputs))
    model = keras.Model(inputs, [keras.layers.Dense(10, activation="softmax")(hidden),
                                 keras.layers.Dense(1, activation="sigmoid")(hidden)])
    expected = model.count_params()
    return check_numbers(
        answer, [expected], names=["parameters"],
        why=[f"each Dense(n_in → n_out) holds n_in·n_out weights plus n_out biases, and both heads read the "
             f"same 120 features: 784·120+120 + 120·10+10 + 120·1+1 = {expected}"],
    )


def check_sync_vs_async(answer: Sequence[float] | None, *, step_seconds: Sequence[float] = (0.01, 0.04),
                        wall_seconds: float = 1.0) -> CheckResult:
    """Exercise 3: batches processed in ``wall_seconds`` by workers whose steps take ``step_seconds``,
    ``(synchronous, asynchronous)``. Synchronous: every round waits for the slowest worker, then
    each worker has done one batch. Asynchronous: each worker runs at its own pace."""
    if not step_seconds or any(t <= 0 for t in step_seconds) or wall_seconds <= 0:
        raise ValueError(f"need positive step times and wall time, got {step_seconds!r}, {wall_seconds!r}.")
    rounds = math.floor(wall_seconds / max(step_seconds) + 1e-9)
    sync = rounds * len(step_seconds)
    per_worker = [math.floor(wall_seconds / t + 1e-9) for t in step_seconds]
    asynchronous = sum(per_worker)
    return check_numbers(
        answer, [sync, asynchronous], names=["synchronous batches", "asynchronous batches"],
        why=[f"synchronous rounds last as long as the slowest step ({max(step_seconds):g} s): "
             f"{rounds} rounds × {len(step_seconds)} workers = {sync}",
             f"asynchronously each worker does wall/step batches: {' + '.join(map(str, per_worker))} = {asynchronous}"],
    )
