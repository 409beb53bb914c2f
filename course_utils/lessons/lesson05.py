"""Lesson 05 (distributed PyTorch): the exercise checks."""

from __future__ import annotations

import math
from collections.abc import Sequence

from course_utils.checks import CheckResult, check_numbers


def check_bubble_fraction(answer: float | None, *, stages: int = 4, microbatches: int = 12) -> CheckResult:
    """Exercise 1: the idle fraction of a GPipe schedule with ``stages`` stages and ``microbatches`` micro-batches."""
    p, m = stages, microbatches
    expected = (p - 1) / (m + p - 1)
    return check_numbers(
        answer, [expected], names=["bubble fraction"],
        why=[f"each stage is busy for m = {m} of the m + p - 1 = {m + p - 1} time slots, so it idles "
             f"(p - 1)/(m + p - 1) = {p - 1}/{m + p - 1} = {expected:.4g} of the time"],
        rtol=1e-3,
    )


def check_ring_allreduce_megabytes(answer: float | None, *, parameters: int = 25_600_000, workers: int = 8,
                                   bytes_per_value: int = 4) -> CheckResult:
    """Exercise 2: megabytes (10**6 bytes) that each worker sends in one ring all-reduce of all the gradients."""
    size = parameters * bytes_per_value
    expected = 2 * (workers - 1) / workers * size / 1e6
    return check_numbers(
        answer, [expected], names=["MB sent per worker"],
        why=[f"the gradients take {parameters:,} × {bytes_per_value} B = {size / 1e6:g} MB; a ring all-reduce is a "
             f"reduce-scatter then an all-gather, each sending (N - 1)/N of the data, so "
             f"2·(N - 1)/N · {size / 1e6:g} MB = {expected:g} MB with N = {workers}"],
        rtol=1e-3,
    )


def check_ddp_bookkeeping(answer: Sequence[float] | None, *, nodes: int = 2, gpus_per_node: int = 4,
                          batch_per_process: int = 32, dataset_size: int = 60_000) -> CheckResult:
    """Exercise 3: (world size, global batch, samples per rank per epoch, optimizer steps per epoch).

    One process per GPU, ``DistributedSampler`` (which pads the dataset to a multiple of the world
    size) and a ``DataLoader`` that keeps the last, smaller batch.
    """
    world = nodes * gpus_per_node
    global_batch = world * batch_per_process
    per_rank = math.ceil(dataset_size / world)
    steps = math.ceil(per_rank / batch_per_process)
    return check_numbers(
        answer, [world, global_batch, per_rank, steps],
        names=["world size", "global batch", "samples per rank", "steps per epoch"],
        why=[f"one process per GPU: {nodes} × {gpus_per_node} = {world}",
             f"each step consumes one batch on every rank: {world} × {batch_per_process} = {global_batch}",
             f"DistributedSampler gives each rank ceil({dataset_size} / {world}) = {per_rank}",
             f"each rank iterates over its own share: ceil({per_rank} / {batch_per_process}) = {steps}"],
    )
