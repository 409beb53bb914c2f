"""Lesson 06 (tf.distribute): one MirroredStrategy step traced and drawn, an in-process TensorFlow cluster and
TF_CONFIG on 127.0.0.1, TPU detection.

TensorFlow's parameter-server tutorial starts every task of the cluster as a ``tf.distribute.Server``
inside the notebook's own process; the notebook then plays the chief (the coordinator). On a
small machine one setting matters: each worker server must have at least ``num_workers + 1``
inter-op threads. With fewer (the default is one per core, so 2 on a 2-core machine) the
first ``ClusterCoordinator.join()`` of a 2-worker cluster never returns.

TensorFlow is imported inside the functions, so that importing ``course_utils`` stays cheap.

The exercise checks of the lesson follow its plumbing.
"""

from __future__ import annotations

import glob
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.axes import Axes

from course_utils.checks import NO_ANSWER, CheckResult, check_numbers
from course_utils.launch import LOCALHOST, free_ports

# ---------------------------------------- where the replicas run

REPLICAS = 2  # the lesson's MirroredStrategy and CentralStorageStrategy run 2 replicas on every machine


@dataclass(frozen=True)
class TfReplicas:
    """Where the lesson's 2 replicas run, decided from the number of GPUs TensorFlow sees."""

    device_type: str  # "GPU": 2 physical GPUs; "CPU": 2 logical devices of the CPU
    hide_gpus: bool  # one GPU: hidden, so that the one-device baselines run on the CPU like the replicas
    logical_cpus: int  # the CPU is split into this many logical devices (0: not split)
    all_reduce: str  # the implementation MirroredStrategy's default CollectiveAllReduce picks: "NCCL" or "RING"
    nccl_kernel: bool  # NcclAllReduce can run: it has GPU kernels only
    note: str

    @property
    def on_cpu(self) -> bool:
        return self.device_type == "CPU"


def tf_replicas(tf_gpus: int) -> TfReplicas:
    """The lesson's replica placement for a TensorFlow that sees ``tf_gpus`` GPUs (``tf.config.list_physical_devices``).

    Two or more GPUs: the first two are the replicas, all-reduced with NCCL. Fewer: two logical CPU devices
    stand in, with RING all-reduces; a single GPU (Colab's) is hidden, or TensorFlow would place the
    one-device baselines on it and compare a GPU with CPU replicas.

    Raises:
        ValueError: for a negative or non-integer count.
    """
    if isinstance(tf_gpus, bool) or not isinstance(tf_gpus, int) or tf_gpus < 0:
        raise ValueError(f"tf_gpus must be a number of GPUs (an int >= 0), got {tf_gpus!r}.")
    if tf_gpus >= REPLICAS:
        rest = ("" if tf_gpus == REPLICAS else "; GPU:2 stays idle" if tf_gpus == REPLICAS + 1 else
                f"; GPU:2 to GPU:{tf_gpus - 1} stay idle")
        return TfReplicas("GPU", False, 0, "NCCL", True,
                          f"{tf_gpus} GPUs visible to TensorFlow: the replicas are GPU:0 and GPU:1{rest}")
    hidden = tf_gpus == 1
    note = ("one GPU hidden from TensorFlow, so that every comparison is CPU against CPU: " if hidden else
            "no GPU visible to TensorFlow: ") + f"{REPLICAS} logical devices of the CPU stand in for {REPLICAS} GPUs"
    return TfReplicas("CPU", hidden, REPLICAS, "RING", False, note)


# ---------------------------------------- one MirroredStrategy step, traced and drawn

@dataclass(frozen=True)
class MirroredStep:
    """What each replica computed in one synchronous step, and what the all-reduce gave back."""

    global_batch: int
    devices: tuple[str, ...]
    examples: tuple[int, ...]          # each replica's slice of the global batch
    loss_shares: tuple[float, ...]     # its examples' losses summed and divided by the *global* batch
    gradient_norms: tuple[float, ...]  # ‖g_r‖, the gradient of its share
    summed_norm: float                 # ‖Σ g_r‖, what every replica holds after the all-reduce
    replicas_differ: float             # max |Σ g_r on replica r − on replica 0|: 0 after an all-reduce
    one_device_gap: float              # max |Σ g_r − g| for g, one device's gradient of the whole batch's mean loss

    @property
    def mean_loss(self) -> float:
        return sum(self.loss_shares)


def trace_mirrored_step(strategy: Any, model: Any, loss_fn: Any, x: Any, y: Any, global_batch: int) -> MirroredStep:
    """Run one step's forward and backward on the first ``global_batch`` examples under ``strategy`` (no update).

    ``model`` was built in ``strategy.scope()``; ``loss_fn`` returns per-example losses (``reduction="none"``).
    """
    import tensorflow as tf

    batch = tf.data.Dataset.from_tensor_slices((x[:global_batch], y[:global_batch])).batch(global_batch)
    x_dist, y_dist = next(iter(strategy.experimental_distribute_dataset(batch)))

    def flat(grads: Sequence[Any]) -> Any:
        return tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)

    @tf.function
    def step(xs: Any, ys: Any) -> Any:
        def replica_fn(xr: Any, yr: Any) -> Any:
            with tf.GradientTape() as tape:
                losses = loss_fn(yr, model(xr, training=False))
                share = tf.nn.compute_average_loss(losses, global_batch_size=global_batch)
            grad = flat(tape.gradient(share, model.trainable_variables))
            summed = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grad)
            return tf.shape(xr)[0], share, grad, summed
        return strategy.run(replica_fn, args=(xs, ys))

    sizes, shares, grads, summed = (strategy.experimental_local_results(v) for v in step(x_dist, y_dist))
    with tf.GradientTape() as tape:
        mean_loss = tf.reduce_mean(loss_fn(y[:global_batch], model(x[:global_batch], training=False)))
    whole = flat(tape.gradient(mean_loss, model.trainable_variables))
    return MirroredStep(
        global_batch=global_batch,
        devices=tuple(d.split("/")[-1].replace("device:", "") for d in strategy.extended.worker_devices),
        examples=tuple(int(n) for n in sizes), loss_shares=tuple(float(v) for v in shares),
        gradient_norms=tuple(float(tf.norm(g)) for g in grads), summed_norm=float(tf.norm(summed[0])),
        replicas_differ=max(float(tf.reduce_max(tf.abs(s - summed[0]))) for s in summed),
        one_device_gap=float(tf.reduce_max(tf.abs(summed[0] - whole))))


_DATA, _REPLICA, _REDUCE = "#fdf0d5", "#dbe9f6", "#e2f0d9"


def draw_mirrored_step(step: MirroredStep, ax: Axes) -> None:
    """One synchronous step top to bottom: the global batch, each replica's share, the all-reduce, the same update."""
    replicas = len(step.devices)
    xs = [(k + 0.5) / replicas for k in range(replicas)]

    def box(x: float, y: float, text: str, color: str) -> Any:
        return ax.text(x, y, text, ha="center", va="center", fontsize=8.5,
                       bbox={"boxstyle": "round,pad=0.4", "facecolor": color, "edgecolor": "0.4"})

    def arrow(upper: Any, lower: Any) -> None:
        """From the bottom of one box to the top of a lower one, clipped at the boxes' edges."""
        ax.annotate("", xy=(0.5, 1), xycoords=lower, xytext=(0.5, 0), textcoords=upper,
                    arrowprops={"arrowstyle": "->", "color": "0.3", "shrinkA": 4, "shrinkB": 4})

    batch = box(0.5, 0.93, f"global batch: {step.global_batch} examples, split {replicas} ways", _DATA)
    shares = [box(x, 0.63, f"{step.devices[k]}: {step.examples[k]} examples\nloss share {step.loss_shares[k]:.4f}\n"
                           f"(its losses ÷ {step.global_batch})\n‖g{k}‖ = {step.gradient_norms[k]:.4f}", _REPLICA)
              for k, x in enumerate(xs)]
    reduce = box(0.5, 0.31, f"all-reduce (SUM) of the gradients: ‖Σ g‖ = {step.summed_norm:.4f}\n"
                            f"Σ loss shares = {step.mean_loss:.4f}, the mean loss of the {step.global_batch}", _REDUCE)
    updates = [box(x, 0.05, f"{step.devices[k]}: the same Σ g,\nthe same update", _REPLICA) for k, x in enumerate(xs)]
    for share, update in zip(shares, updates):
        arrow(batch, share)
        arrow(share, reduce)
        arrow(reduce, update)
    ax.set(xlim=(0, 1), ylim=(-0.04, 1.0), title="one MirroredStrategy step")
    ax.axis("off")


def worker_inter_op_threads(num_workers: int, cpu_count: int | None = None) -> int:
    """Inter-op threads to give each in-process worker server: at least ``num_workers + 1``.

    Never fewer than the number of cores either (TensorFlow's default), so that a big machine
    keeps its parallelism.

    Args:
        num_workers: workers in the cluster.
        cpu_count: cores to assume (default: ``os.cpu_count()``).
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be a positive int, got {num_workers!r}.")
    cores = (os.cpu_count() or 1) if cpu_count is None else cpu_count
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cpu_count must be a positive int, got {cpu_count!r}.")
    return max(num_workers + 1, cores)


@dataclass(frozen=True)
class InProcessCluster:
    """What :func:`start_in_process_cluster` started.

    Attributes:
        spec: job name to task addresses (``{"chief": [...], "worker": [...], "ps": [...]}``).
        resolver: the ``SimpleClusterResolver`` that ``ParameterServerStrategy`` takes; it names
            this process as the chief.
        servers: the worker and parameter-server ``tf.distribute.Server`` objects (keep a reference:
            they serve for as long as the process lives).
        worker_threads: the inter-op threads each worker server got.
    """

    spec: dict[str, list[str]]
    resolver: Any
    servers: tuple[Any, ...]
    worker_threads: int


def start_in_process_cluster(num_workers: int = 2, num_ps: int = 1, *,
                             worker_threads: int | None = None) -> InProcessCluster:
    """Start ``num_workers`` worker and ``num_ps`` parameter-server tasks in this process.

    The cluster also names a ``chief`` task: this process, which becomes the coordinator when it
    creates ``tf.distribute.ParameterServerStrategy(cluster.resolver)``. All tasks listen on free
    ports of 127.0.0.1.

    Args:
        worker_threads: inter-op threads per worker server (default: :func:`worker_inter_op_threads`).

    Raises:
        ValueError: for non-positive counts, or ``worker_threads < num_workers + 1`` (that cluster
            deadlocks at the first ``join()``).
    """
    import tensorflow as tf

    if isinstance(num_ps, bool) or not isinstance(num_ps, int) or num_ps < 1:
        raise ValueError(f"num_ps must be a positive int, got {num_ps!r}.")
    needed = worker_inter_op_threads(num_workers, cpu_count=1)
    threads = worker_inter_op_threads(num_workers) if worker_threads is None else worker_threads
    if threads < needed:
        raise ValueError(f"worker_threads={threads} is too few for {num_workers} workers: an in-process worker "
                         f"server needs at least num_workers + 1 = {needed} inter-op threads, or the first "
                         f"ClusterCoordinator.join() never returns.")
    ports = free_ports(1 + num_workers + num_ps)
    spec = cluster_spec({"chief": ports[:1], "worker": ports[1:1 + num_workers], "ps": ports[1 + num_workers:]})
    tf_spec = tf.train.ClusterSpec(spec)
    worker_config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=threads)
    servers = [tf.distribute.Server(tf_spec, job_name="worker", task_index=i, config=worker_config,
                                    protocol="grpc") for i in range(num_workers)]
    servers += [tf.distribute.Server(tf_spec, job_name="ps", task_index=i, protocol="grpc") for i in range(num_ps)]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(tf_spec, task_type="chief", task_id=0,
                                                                    rpc_layer="grpc")
    return InProcessCluster(spec=spec, resolver=resolver, servers=tuple(servers), worker_threads=threads)


def find_tpu(environ: dict[str, str] | None = None, device_glob: str = "/dev/accel*") -> str | None:
    """The ``tpu`` argument for ``TPUClusterResolver`` if this machine has a TPU, else ``None``.

    Looks, without touching the network, at ``COLAB_TPU_ADDR`` (a Colab TPU-node runtime:
    ``"grpc://<address>"``), then ``TPU_NAME`` (a Cloud TPU), then TPU device files (a TPU VM:
    ``"local"``).

    Args:
        environ: the environment to read (default: ``os.environ``).
        device_glob: where TPU VMs expose their chips.
    """
    env = os.environ if environ is None else environ
    if env.get("COLAB_TPU_ADDR"):
        return f"grpc://{env['COLAB_TPU_ADDR']}"
    if env.get("TPU_NAME"):
        return env["TPU_NAME"]
    return "local" if glob.glob(device_glob) else None


__all__ = ["InProcessCluster", "find_tpu", "start_in_process_cluster", "worker_inter_op_threads"]


def cluster_spec(ports: Mapping[str, Sequence[int]]) -> dict[str, list[str]]:
    """A TensorFlow cluster dictionary (job name to ``host:port`` addresses) for tasks on 127.0.0.1.

    Args:
        ports: job name (``"chief"``, ``"worker"``, ``"ps"``, ...) to the ports of its tasks,
            e.g. ``{"worker": free_ports(2)}``.
    """
    if not ports or any(isinstance(p, (str, bytes)) or not p for p in ports.values()):
        raise ValueError(f"give each job a non-empty list of ports, got {ports!r}.")
    return {job: [f"{LOCALHOST}:{port}" for port in job_ports] for job, job_ports in ports.items()}


def tf_config(cluster: Mapping[str, Sequence[int]], task_type: str, task_index: int) -> str:
    """The ``TF_CONFIG`` JSON for one task of a TensorFlow cluster whose tasks listen on 127.0.0.1.

    Args:
        cluster: job name to the ports of its tasks, as for :func:`cluster_spec`.
    """
    if task_type not in cluster:
        raise ValueError(f"task_type {task_type!r} is not a job of the cluster {sorted(cluster)}.")
    if not 0 <= task_index < len(cluster[task_type]):
        raise ValueError(f"task_index {task_index} is out of range for {len(cluster[task_type])} {task_type} task(s).")
    return json.dumps({"cluster": cluster_spec(cluster), "task": {"type": task_type, "index": task_index}})


# ---------------------------------------- exercise checks

def check_global_batch(answer: Sequence[float] | None, *, per_replica_batch: int = 32, workers: int = 2,
                       gpus_per_worker: int = 4, examples: int = 60_000, solution: bool = False) -> CheckResult:
    """Exercise 1: ``(global batch, steps per epoch)`` for a MultiWorkerMirroredStrategy job of
    ``workers`` machines with ``gpus_per_worker`` GPUs each, ``per_replica_batch`` examples per
    replica, over ``examples`` training examples (the last, smaller batch counts as a step).
    ``solution=True`` shows the worked solution instead of checking the answer."""
    replicas = workers * gpus_per_worker
    global_batch = per_replica_batch * replicas
    steps = math.ceil(examples / global_batch)
    return check_numbers(
        answer, [global_batch, steps], names=["global batch", "steps per epoch"], solution=solution,
        hints=["section 2 relates the global batch to the per-replica batch; there is one replica per GPU, on every "
               "machine of the job",
               "one step consumes one global batch, not one replica's slice; the last, partial batch is a step too"],
        why=[f"global batch: one replica per GPU, {workers}·{gpus_per_worker} = {replicas} replicas in sync, each "
             f"taking {per_replica_batch} examples, so one step consumes {per_replica_batch}·{replicas} = "
             f"{global_batch}",
             f"steps per epoch: ceil({examples}/{global_batch}) = {steps} (the last batch is partial)"],
    )


def check_two_head_parameters(answer: int | None, *, solution: bool = False) -> CheckResult:
    """Exercise 2: trainable parameters of the lesson's two-head model (28×28 → Flatten → Dense 120
    ReLU → Dense 10 softmax and Dense 1 sigmoid), counted by building it with Keras.
    ``solution=True`` shows the worked solution instead of checking the answer."""
    if answer is None and not solution:
        return NO_ANSWER  # without building the model: importing Keras takes seconds
    import keras

    inputs = keras.Input(shape=(28, 28))
    hidden = keras.layers.Dense(120, activation="relu")(keras.layers.Flatten()(inputs))
    model = keras.Model(inputs, [keras.layers.Dense(10, activation="softmax")(hidden),
                                 keras.layers.Dense(1, activation="sigmoid")(hidden)])
    expected = model.count_params()
    return check_numbers(
        answer, [expected], names=["parameters"], solution=solution,
        hints=["count every Dense layer of section 4's model apart, the hidden layer and both heads: a weight "
               "matrix and a bias vector each (Flatten has none); the usual slips are the biases and the second head"],
        why=[f"each Dense(n_in → n_out) holds n_in·n_out weights plus n_out biases, and both heads read the "
             f"same 120 features: 784·120+120 + 120·10+10 + 120·1+1 = {expected} parameters"],
    )


def check_sync_vs_async(answer: Sequence[float] | None, *, step_seconds: Sequence[float] = (0.01, 0.04),
                        wall_seconds: float = 1.0, solution: bool = False) -> CheckResult:
    """Exercise 3: batches processed in ``wall_seconds`` by workers whose steps take ``step_seconds``,
    ``(synchronous, asynchronous)``. Synchronous: every round waits for the slowest worker, then
    each worker has done one batch. Asynchronous: each worker runs at its own pace.
    ``solution=True`` shows the worked solution instead of checking the answer."""
    if not step_seconds or any(t <= 0 for t in step_seconds) or wall_seconds <= 0:
        raise ValueError(f"need positive step times and wall time, got {step_seconds!r}, {wall_seconds!r}.")
    rounds = math.floor(wall_seconds / max(step_seconds) + 1e-9)
    sync = rounds * len(step_seconds)
    per_worker = [math.floor(wall_seconds / t + 1e-9) for t in step_seconds]
    asynchronous = sum(per_worker)
    return check_numbers(
        answer, [sync, asynchronous], names=["synchronous batches", "asynchronous batches"], solution=solution,
        hints=["like section 7's lockstep rounds, a synchronous round ends only when the slower worker has finished "
               "its step: count the rounds that fit in the time, and the batches one round processes",
               "asynchronously no worker waits for the other (section 7): count each worker's batches at its own "
               "pace, then add them"],
        why=[f"synchronous batches: every round lasts as long as the slowest step ({max(step_seconds):g} s), "
             f"{rounds} rounds × {len(step_seconds)} workers = {sync}",
             f"asynchronous batches: each worker does wall/step batches, "
             f"{' + '.join(map(str, per_worker))} = {asynchronous}"],
    )


def check_central_storage_memory(answer: Sequence[float] | None, *, parameters: int, slots_per_weight: int,
                                 bytes_per_value: int = 4, gpus: int = 8, solution: bool = False) -> CheckResult:
    """Exercise 4: ``(GB per GPU with MirroredStrategy, GB per GPU with CentralStorageStrategy)`` during a
    training step of a model of ``parameters`` values of ``bytes_per_value`` bytes, whose optimizer keeps
    ``slots_per_weight`` slot variables per weight (Adam: 2), on ``gpus`` GPUs; activations left out.

    MirroredStrategy keeps on every GPU the weights and the slots, and every GPU makes full-size gradients.
    CentralStorageStrategy keeps weights and slots once, on the host; every GPU still receives the weights
    it computes with and makes full-size gradients (the compute is replicated), so it saves the slots and
    the stored copy, not a factor of ``gpus``. GB are 10**9 bytes. ``solution=True`` shows the worked solution
    instead of checking the answer.
    """
    for name, value in (("parameters", parameters), ("slots_per_weight", slots_per_weight),
                        ("bytes_per_value", bytes_per_value), ("gpus", gpus)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "slots_per_weight" else 1):
            raise ValueError(f"{name} must be a {'non-negative' if name == 'slots_per_weight' else 'positive'} int, "
                             f"got {value!r}.")
    weights = parameters * bytes_per_value / 1e9
    mirrored = weights * (2 + slots_per_weight)
    central = 2 * weights
    return check_numbers(
        answer, [mirrored, central], names=["GB per GPU, MirroredStrategy", "GB per GPU, CentralStorageStrategy"],
        solution=solution,
        hints=["start from the bytes of the weights (parameters × bytes per value); under MirroredStrategy "
               "(section 3) each GPU keeps its own copy of everything a step needs: what does Adam store per weight, "
               "and what does the backward pass make? The gradients are the usual slip",
               "section 3 and its correction of the lecture say what leaves the GPUs under CentralStorageStrategy and "
               "what stays: does a GPU still need the weights to compute with, and does it still make gradients? "
               "Nothing is divided by the number of GPUs"],
        why=[f"MirroredStrategy: every GPU holds the weights ({weights:g} GB), the optimizer's {slots_per_weight} "
             f"slots per weight ({slots_per_weight * weights:g} GB) and full-size gradients ({weights:g} GB): "
             f"{mirrored:g} GB",
             f"CentralStorageStrategy: weights and slots are stored once, on the host "
             f"({(1 + slots_per_weight) * weights:g} GB there), and each step the host link carries "
             f"{gpus}·2·{weights:g} = {gpus * central:g} GB, but every GPU still receives the weights it computes "
             f"with ({weights:g} GB) and makes full-size gradients ({weights:g} GB), not 1/{gpus} of anything: "
             f"{central:g} GB"],
    )
