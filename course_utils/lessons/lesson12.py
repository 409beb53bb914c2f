"""Lesson 12 (memory and sharded training): the exercise checks."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from course_utils.checks import CheckResult, check_numbers


def check_zero_memory(answer: Sequence[float] | None, *, parameters: float = 1.5e9, ranks: int = 8,
                      optimizer_bytes: int = 12) -> CheckResult:
    """Exercise 1: GB (10**9 bytes) per rank for (DDP, ZeRO-1, ZeRO-2, ZeRO-3) in mixed-precision Adam training:
    2 bytes of fp16 weights and 2 of fp16 gradients per parameter, ``optimizer_bytes`` of fp32 state (K)."""
    p, n, k = parameters / 1e9, ranks, optimizer_bytes
    expected = [(2 + 2 + k) * p, (2 + 2) * p + k * p / n, 2 * p + (2 + k) * p / n, (2 + 2 + k) * p / n]
    return check_numbers(answer, expected, names=["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"], why=[
        f"every rank holds everything: (2 + 2 + {k}) B × {p:g} G = {expected[0]:g} GB",
        f"the optimizer state is split: (2 + 2) × {p:g} + {k} × {p:g} / {n} = {expected[1]:g} GB",
        f"the gradients too: 2 × {p:g} + (2 + {k}) × {p:g} / {n} = {expected[2]:g} GB",
        f"and the weights: (2 + 2 + {k}) × {p:g} / {n} = {expected[3]:g} GB"], rtol=1e-2)


def check_accumulation(answer: Sequence[int] | None, *, global_batch: int = 512, micro_batch: int = 16,
                       ranks: int = 4) -> CheckResult:
    """Exercise 2: (micro-steps per optimizer step, all-reduce rounds per optimizer step without ``no_sync``, with
    ``no_sync`` on all micro-steps but the last)."""
    if global_batch % (micro_batch * ranks):
        raise ValueError("the global batch must be a multiple of micro_batch × ranks.")
    k = global_batch // (micro_batch * ranks)
    return check_numbers(answer, [k, k, 1], names=["micro-steps", "rounds without no_sync", "rounds with no_sync"],
                         why=[f"each micro-step consumes {micro_batch} × {ranks} = {micro_batch * ranks} samples: "
                              f"{global_batch} / {micro_batch * ranks} = {k}",
                              "DDP all-reduces all the gradients (in buckets) in every backward pass",
                              "under no_sync the gradients only accumulate locally: one all-reduce, in the last "
                              "backward pass"])


def shard_rows(rows: int, ranks: int) -> list[int]:
    """Rows of a dim-0 ``Shard`` (FSDP2's placement) on each rank: ``torch.chunk``'s split, ranks past the last
    chunk holding none."""
    if rows < 1 or ranks < 1:
        raise ValueError(f"rows and ranks must be positive, got {rows} and {ranks}.")
    chunks = [len(c) for c in torch.chunk(torch.empty(rows), ranks)]
    return chunks + [0] * (ranks - len(chunks))


def check_shard_rows(answer: Sequence[int] | None, *, rows: int = 300, ranks: int = 8) -> CheckResult:
    """Exercise 3: (rows on rank 0, rows on the last rank) of a weight with ``rows`` rows under ``fully_shard``."""
    split = shard_rows(rows, ranks)
    size = math.ceil(rows / ranks)
    return check_numbers(answer, [split[0], split[-1]], names=["rank 0", f"rank {ranks - 1}"], why=[
        f"dim 0 is cut into chunks of ceil({rows} / {ranks}) = {size} rows, as torch.chunk does",
        f"the last rank gets what is left: {rows} - {ranks - 1} × {size} = {split[-1]} "
        f"(FSDP pads it to {size} rows for the collectives)" if split[-1] else
        f"{rows} rows make only {len([s for s in split if s])} chunks of {size}: the last rank holds none"])
