"""Lesson 03 (multiprocessing and the DataLoader): how long idle threads spin, the drawing of a DataLoader's data
path, and the exercise checks."""

from __future__ import annotations

import math
import statistics
import time
from typing import TYPE_CHECKING

from course_utils.checks import NO_ANSWER, CheckResult, check_numbers, not_yet, worked_solution

if TYPE_CHECKING:
    from matplotlib.axes import Axes

START_METHODS = ("fork", "spawn", "forkserver")


def idle_spin_seconds(*, listen: float = 0.05, repeats: int = 7) -> float:
    """How long each of PyTorch's idle worker threads keeps a core busy after a parallel operation (median of
    ``repeats``).

    Each repeat runs one operation that PyTorch splits over its threads (``aminmax`` of 16 MiB), sleeps ``listen``
    seconds and reads the CPU time this process used meanwhile: with the main thread asleep, that is the time the
    other threads spent spinning before they slept (GNU OpenMP spins ``GOMP_SPINCOUNT`` times, a time that depends
    on the CPU; ``OMP_WAIT_POLICY=passive`` makes them sleep at once), divided by their number, so that it reads
    as a duration on any number of cores. A spin longer than ``listen`` reads as ``listen``. 0 where PyTorch runs
    one thread.
    """
    import torch

    if listen <= 0 or repeats < 1:
        raise ValueError(f"listen must be positive seconds and repeats at least 1, got {listen!r} and {repeats!r}.")
    workers = torch.get_num_threads() - 1  # the main thread computes too, then sleeps here
    if workers < 1:
        return 0.0
    x = torch.ones(4096, 1024)
    spins = []
    for _ in range(repeats + 1):  # the first wakes the thread pool, and is not counted
        torch.aminmax(x)
        start = time.process_time()
        time.sleep(listen)
        spins.append((time.process_time() - start) / workers)
    return statistics.median(spins[1:])


def check_ideal_batch_time(answer: float | None, *, latency_ms: float = 5.0, batch_size: int = 8,
                           workers: int = 4, solution: bool = False) -> CheckResult:
    """Exercise 1: the ideal time per batch (ms) when each item waits ``latency_ms``, batches hold
    ``batch_size`` items and ``workers`` DataLoader workers each build whole batches."""
    serial = latency_ms * batch_size
    expected = serial / workers
    return check_numbers(
        answer, [expected], names=["ideal time per batch (ms)"], rtol=1e-3, solution=solution,
        hints=[f"start from the time t0 that one process needs for a whole batch, every one of its {batch_size} "
               f"items waiting in turn; then section 7 says what {workers} workers, each building whole batches "
               f"at the same time, do to t0"],
        why=[f"one process needs t0 = {batch_size} × {latency_ms:g} ms = {serial:g} ms per batch; {workers} "
             f"workers waiting at the same time deliver a batch every t0 / {workers}, so the ideal time per batch "
             f"is {expected:g} ms"],
    )


def check_weighted_draw(answer: float | None, *, counts: tuple[int, int] = (900, 100),
                        solution: bool = False) -> CheckResult:
    """Exercise 2: the probability that one draw of ``WeightedRandomSampler`` is from the minority class
    when every sample of class ``c`` has weight ``1 / sqrt(count_c)``."""
    mass = [n / math.sqrt(n) for n in counts]  # total weight of each class: n_c samples × 1/sqrt(n_c)
    expected = mass[1] / sum(mass)
    return check_numbers(
        answer, [expected], names=["P(minority class)"], rtol=1e-3, solution=solution,
        hints=["a WeightedRandomSampler draws each class in proportion to the total weight of its samples "
               "(section 6): add up the weights of each class's samples, not just one sample's weight. With "
               "1/√n_c, unlike section 6's 1/n_c, the classes do not come out balanced"],
        why=[f"a class's share is (its count × its weight) / total: sqrt({counts[1]}) / (sqrt({counts[0]}) + "
             f"sqrt({counts[1]})) = {mass[1]:g} / {sum(mass):g}, so P(minority class) = {expected:g}"],
    )


def check_start_method(answer: str | None, *, solution: bool = False) -> CheckResult:
    """Exercise 3: a start method that is safe in a parent that has already initialised CUDA."""
    if solution:
        return worked_solution(
            "\"spawn\" or \"forkserver\". A forked child inherits the parent's CUDA context, which cannot be used "
            "after fork (\"Cannot re-initialize CUDA in forked subprocess\"), so \"fork\" is out. \"spawn\" starts "
            "each child from a fresh interpreter, and \"forkserver\" forks it from a clean server process that "
            "never touched CUDA: either way the child initialises CUDA itself (section 2).")
    if answer is None:
        return NO_ANSWER
    name = answer.strip().lower() if isinstance(answer, str) else answer
    if name not in START_METHODS:
        return CheckResult(False, f"{answer!r} is not a start method: choose one of {', '.join(START_METHODS)}.")
    if name == "fork":
        return not_yet("fork copies the parent as it stands, its CUDA state included: section 2's table says "
                       "when fork is safe, and this parent breaks one of those conditions.")
    return CheckResult(True, f"{name} starts each child from a fresh interpreter"
                       + (" (forked from a clean server process that never touched CUDA)." if name == "forkserver"
                          else ".") + " The child initialises CUDA itself.")


# ---------------------------------------- the DataLoader's architecture

_MAIN, _QUEUE, _WORKER, _PIN = "#dbe9f6", "#fdf0d5", "#e2f0d9", "#f2f2f2"


def draw_dataloader(ax: Axes, workers: int = 2) -> list[str]:
    """Draw the data path of a ``DataLoader`` with ``workers`` worker processes, as torch 2.x runs it (read from
    ``torch/utils/data/dataloader.py``, ``_MultiProcessingDataLoaderIter``), top to bottom.

    The main thread takes each batch's indices from the sampler and puts them straight into the ``index_queue`` of
    one worker, in turn (each queue's feeder thread only writes what was put into the pipe); every worker loads
    and collates its batches and puts them into the one ``worker_result_queue``; the main thread reads that queue
    and returns the batches in order. With ``pin_memory=True`` and an accelerator, a pin-memory thread sits between
    that queue and the main thread (dashed). No thread dispatches batches to the workers.

    Returns:
        the labels of the boxes, top to bottom and left to right (for tests and for a reader of the figure).

    Raises:
        ValueError: if ``workers`` is not between 1 and 4 (the figure has room for four).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 4:
        raise ValueError(f"workers must be an int from 1 to 4 (the figure has room for four), got {workers!r}.")
    labels: list[str] = []
    half = {"sampler": 0.045, "index": 0.045, "worker": 0.065, "result": 0.03, "pin": 0.065, "out": 0.03}
    rows = {"sampler": 0.92, "index": 0.71, "worker": 0.5, "result": 0.31, "pin": 0.16, "out": 0.02}

    def box(x: float, row: str, text: str, color: str, dashed: bool = False) -> None:
        ax.text(x, rows[row], text, ha="center", va="center", fontsize=8.5,
                bbox={"boxstyle": "round,pad=0.35", "facecolor": color, "edgecolor": "0.4",
                      "linestyle": "--" if dashed else "-"})
        labels.append(text)

    def arrow(x0: float, row0: str, x1: float, row1: str, dashed: bool = False) -> None:
        """From the bottom edge of one box to the top edge of a lower one."""
        ax.annotate("", xy=(x1, rows[row1] + half[row1] + 0.015), xytext=(x0, rows[row0] - half[row0] - 0.015),
                    arrowprops={"arrowstyle": "->", "color": "0.3", "linestyle": "--" if dashed else "-"})

    xs = [0.2 + 0.75 * (k + 0.5) / workers for k in range(workers)]
    box(0.575, "sampler", f"main thread: sampler -> indices of batch i,\nput into index_queue (i mod {workers})", _MAIN)
    for k, x in enumerate(xs):
        arrow(0.575, "sampler", x, "index")
        box(x, "index", f"index_queue {k}\n(+ its feeder thread)", _QUEUE)
        arrow(x, "index", x, "worker")
        box(x, "worker", f"worker {k} (process):\ndataset[j] for j\nin the batch, collate_fn", _WORKER)
        arrow(x, "worker", 0.575, "result")
    box(0.575, "result", "worker_result_queue (one, shared)", _QUEUE)
    arrow(0.575, "result", 0.575, "out")
    box(0.86, "pin", "pin-memory thread\n(pin_memory=True,\nwith an accelerator)", _PIN, dashed=True)
    arrow(0.575, "result", 0.86, "pin", dashed=True)
    arrow(0.86, "pin", 0.575, "out", dashed=True)
    box(0.575, "out", "main thread: next(iterator) -> the batches in order", _MAIN)
    for row, text in (("sampler", "main\nprocess"), ("worker", "worker\nprocesses"), ("out", "main\nprocess")):
        ax.text(0.0, rows[row], text, ha="left", va="center", fontsize=9, style="italic", color="0.35")
    ax.set(xlim=(0, 1), ylim=(-0.05, 1.0), title=f"DataLoader(num_workers={workers}): the data path")
    ax.axis("off")
    return labels
