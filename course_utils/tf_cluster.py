"""An in-process TensorFlow cluster (chief, workers, parameter servers) on 127.0.0.1 for lesson 06.

TensorFlow's parameter-server tutorial starts every task of the cluster as a ``tf.distribute.Server``
inside the notebook's own process; the notebook then plays the chief (the coordinator). On a
small machine one setting matters: each worker server must have at least ``num_workers + 1``
inter-op threads. With fewer (the default is one per core, so 2 on a 2-core machine) the
first ``ClusterCoordinator.join()`` of a 2-worker cluster never returns.

TensorFlow is imported inside the functions, so that importing ``course_utils`` stays cheap.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Any

from course_utils.launch import cluster_spec, free_ports


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
