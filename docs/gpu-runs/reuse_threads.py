"""Lesson 03's producer/consumer pipeline outside the notebook, with the threads of each side as parameters.

Run on the H100 machine of 2026-11-26 (2026-11-26-nvidia-h100.md): ``python reuse_threads.py``. Prints, per case,
the milliseconds per 16 MiB batch with new tensors and with reused shared buffers (median of 3 runs).
"""

import os
import statistics
import time

import torch
import torch.multiprocessing as tmp

SHAPE = (4096, 1024)


def producer(free, full, done, n_batches, shape, buffers=None, threads=None, timeout=60.0):
    """Lesson 03's producer, on ``threads`` threads (None: PyTorch's default); it first reports its count."""
    if threads:
        torch.set_num_threads(threads)
    full.put(("threads", torch.get_num_threads()))
    for i in range(n_batches):
        if buffers is None:
            full.put(torch.full(shape, float(i)))
        else:
            index = free.get(timeout=timeout)
            buffers[index].fill_(float(i))
            full.put(index)
    full.put(None)
    done.wait(timeout)


def consume(ctx, reuse, n, child_threads=None, n_buffers=3):
    """Seconds per batch from the first batch on, and the child's thread count; checks the batches' means."""
    free, full, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    buffers = [torch.empty(SHAPE).share_memory_() for _ in range(n_buffers)] if reuse else None
    child = ctx.Process(target=producer, args=(free, full, done, n, SHAPE, buffers, child_threads))
    child.start()
    _, child_count = full.get(timeout=60)
    for index in range(n_buffers if reuse else 0):
        free.put(index)
    means = []
    item = full.get(timeout=60)
    start = time.perf_counter()
    while item is not None:
        batch = buffers[item] if reuse else item
        means.append(batch.mean().item())
        if reuse:
            free.put(item)
        item = full.get(timeout=60)
    seconds = time.perf_counter() - start
    done.set()
    child.join(30)
    assert means == [float(i) for i in range(n)], "a float32 mean differs from the batch's value"
    return seconds / n, child_count


def case(ctx, name, n, child_threads=None, parent_threads=None):
    before = torch.get_num_threads()
    if parent_threads:
        torch.set_num_threads(parent_threads)
    per_batch = {}
    for reuse in (False, True):
        runs = [consume(ctx, reuse, n, child_threads) for _ in range(3)]
        per_batch[reuse] = statistics.median(seconds for seconds, _ in runs)
        child_count = runs[0][1]
    torch.set_num_threads(before)
    print(f"{name:<34} n={n:<3} parent threads {parent_threads or before:>2} child {child_count:>2}: "
          f"new {1e3 * per_batch[False]:6.2f} ms  reuse {1e3 * per_batch[True]:6.2f} ms  "
          f"gain {per_batch[False] / per_batch[True]:.2f}x", flush=True)


if __name__ == "__main__":
    context = tmp.get_context("forkserver")
    context.set_forkserver_preload(["torch"])
    print("cores", os.cpu_count(), "torch threads", torch.get_num_threads(), torch.__version__, flush=True)
    consume(context, True, 3)  # starts the fork server
    for _ in range(2):
        case(context, "as in the lesson", 12)
        case(context, "as in the lesson, 50 batches", 50)
        case(context, "child 1 thread", 12, child_threads=1)
        case(context, "both 1 thread", 12, child_threads=1, parent_threads=1)
        case(context, "child 1, parent cores-1", 12, child_threads=1, parent_threads=max(1, (os.cpu_count() or 2) - 1))
        case(context, "parent 1 only", 12, parent_threads=1)
