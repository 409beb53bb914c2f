"""Code that the child processes of lesson 03 (multiprocessing and the DataLoader) must import.

A child started with ``spawn`` or ``forkserver`` receives the function it runs, and a DataLoader
worker receives its Dataset, *by name* (``module.qualname``) through pickle: a function or class
defined in a notebook cell lives in ``__main__``, which such a child does not have. Everything a
child needs therefore lives here, in an importable module:

- the demo workloads: :func:`cpu_bound` (holds the GIL) and :func:`io_bound` (releases it);
- :func:`started`, which starts processes and always joins (or kills) them;
- the torch.multiprocessing demos: :func:`add_one_worker` and :func:`producer` (fresh or reused buffers);
- the Datasets: :class:`PngDataset` (images stored as files), :class:`RemoteDataset` (a latency
  standing for network storage, then the real decode), :class:`NoisyDataset` (per-sample randomness);
- the DataLoader hooks :func:`seed_worker` and :func:`dict_collate`;
- :func:`write_png_images`, :func:`drop_page_cache` and :func:`resident_fraction` for the disk section.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset, get_worker_info

# ----------------------------------------------------------------------------- workloads


def cpu_bound(n: int) -> int:
    """Pure-Python arithmetic that holds the GIL all along: the sum of ``i * i % 7`` for ``i < n``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}.")
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def cpu_bound_timed(n: int) -> tuple[int, float]:
    """:func:`cpu_bound` and the CPU seconds the calling thread spent on it (``time.thread_time``):
    summed over tasks and divided by the wall time, it says how many cores the tasks really got."""
    start = time.thread_time()
    result = cpu_bound(n)
    return result, time.thread_time() - start


def io_bound(seconds: float) -> float:
    """Wait ``seconds`` as a blocking read would (``time.sleep`` releases the GIL); return the wait."""
    if seconds < 0:
        raise ValueError(f"seconds must be >= 0, got {seconds}.")
    time.sleep(seconds)
    return seconds


def noop() -> None:
    """Do nothing: the target of a process whose start-up cost alone is timed."""


# ----------------------------------------------------------------------------- processes


@contextmanager
def started(*processes: BaseProcess, timeout: float = 60.0) -> Iterator[tuple[BaseProcess, ...]]:
    """Start processes and, on leaving the block, join them; stragglers are terminated, then killed.

    Raises:
        ValueError: if no process or a non-positive timeout is given.
        RuntimeError: if a process exited with a non-zero code (when the block itself succeeded).
    """
    if not processes:
        raise ValueError("pass at least one process (e.g. ctx.Process(target=...)).")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive seconds, got {timeout}.")
    for p in processes:
        p.start()
    try:
        yield processes
    finally:
        deadline = time.monotonic() + timeout
        for p in processes:
            p.join(max(deadline - time.monotonic(), 0.01))
        for p in processes:
            if p.is_alive():
                p.terminate()
                p.join(3)
            if p.is_alive():
                p.kill()
                p.join(3)
    failed = [(p.name, p.exitcode) for p in processes if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"child processes did not exit cleanly (name, exit code): {failed}.")


def add_one_worker(inbox: Any, outbox: Any) -> None:
    """Receive tensors from ``inbox`` until ``None``; add 1 to each *in place* and reply with
    ``(is_shared() as seen by this child, the pid of this child)``."""
    while (t := inbox.get()) is not None:
        t.add_(1)
        outbox.put((t.is_shared(), os.getpid()))


def producer(free: Any, full: Any, done: Any, n_batches: int, shape: Sequence[int],
             buffers: Sequence[torch.Tensor] | None = None, timeout: float = 60.0) -> None:
    """Make ``n_batches`` batches (batch ``i`` holds the value ``i``) for a consumer, then put ``None``
    on ``full`` and wait (at most ``timeout`` s) until the consumer sets the event ``done``.

    Without ``buffers`` every batch is a new tensor put on ``full``: the queue first copies it into
    a new shared-memory segment. With ``buffers`` (tensors in shared memory, which the consumer
    holds too) the producer takes the index of a free buffer from ``free``, fills that buffer in
    place and puts only the index on ``full``; the consumer puts the index back on ``free`` when done.

    The final wait matters: with the ``file_descriptor`` sharing strategy (Linux's default) the
    receiver fetches each tensor's file descriptor from the sending process, which must still be alive.
    """
    if n_batches < 0:
        raise ValueError(f"n_batches must be >= 0, got {n_batches}.")
    for i in range(n_batches):
        if buffers is None:
            full.put(torch.full(tuple(shape), float(i)))
        else:
            index = free.get(timeout=timeout)
            buffers[index].fill_(float(i))
            full.put(index)
    full.put(None)
    done.wait(timeout)


# ----------------------------------------------------------------------------- datasets


def write_png_images(images: np.ndarray, labels: np.ndarray, folder: Path | str) -> list[Path]:
    """Write ``images`` (N, H, W) uint8 as PNG files ``folder/<label>/<index:05d>.png`` (the layout
    of ``torchvision.datasets.ImageFolder``); return the paths in index order."""
    images, labels = np.asarray(images), np.asarray(labels)
    if images.ndim != 3 or images.dtype != np.uint8 or len(images) != len(labels):
        raise ValueError(f"need uint8 images (N, H, W) and N labels, got {images.shape} {images.dtype} "
                         f"and {labels.shape}.")
    folder = Path(folder)
    paths = []
    for i, (image, label) in enumerate(zip(images, labels)):
        path = folder / str(int(label)) / f"{i:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image, mode="L").save(path)
        paths.append(path)
    return paths


class PngDataset(Dataset[tuple[Any, int]]):
    """Images stored as ``root/<label>/<name>.png``, decoded from disk on every access.

    Args:
        root: the folder written by :func:`write_png_images`.
        transform: applied to the decoded ``PIL.Image`` (e.g. a torchvision transform).
    """

    def __init__(self, root: Path | str, transform: Callable[[Image.Image], Any] | None = None) -> None:
        root = Path(root)
        self.samples = sorted(((p, int(p.parent.name)) for p in root.glob("*/*.png")), key=lambda s: s[0].name)
        if not self.samples:
            raise ValueError(f"no PNG file under {root}/<label>/: write some with write_png_images first.")
        self.transform = transform

    @property
    def targets(self) -> list[int]:
        """The label of every sample, in index order (read from the folder names, no decoding)."""
        return [label for _, label in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        path, label = self.samples[index]
        with Image.open(path) as image:
            image.load()  # decode now, inside __getitem__ (PIL is lazy)
            return (self.transform(image) if self.transform else image), label


class RemoteDataset(Dataset[Any]):
    """Wraps a dataset and waits ``latency_s`` before each item: a ``time.sleep`` standing for
    fetching the file from network storage, followed by the real read and decode of ``base``."""

    def __init__(self, base: Dataset[Any], latency_s: float) -> None:
        if latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, got {latency_s}.")
        self.base, self.latency_s = base, latency_s

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Any:
        time.sleep(self.latency_s)
        return self.base[index]


class NoisyDataset(Dataset[tuple[int, float]]):
    """``n`` samples, each a random "augmentation" drawn from a generator held by the dataset.

    Every DataLoader worker gets its own *copy* of the dataset, generator included: unless a
    ``worker_init_fn`` reseeds it, all workers draw the same numbers. Items are
    ``(id of the worker that made it (-1: main process), the draw)``.
    """

    def __init__(self, n: int, seed: int = 0) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}.")
        self.n, self.rng = n, np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[int, float]:
        info = get_worker_info()
        return (info.id if info else -1), float(self.rng.random())


def seed_worker(worker_id: int) -> None:
    """``worker_init_fn`` that seeds each DataLoader worker from ``torch.initial_seed()``.

    In a worker, ``torch.initial_seed()`` is ``base_seed + worker_id`` (the base seed is drawn from
    the loader's generator at each epoch), so the seeds differ between workers and epochs and are
    reproducible. PyTorch already seeds ``random``, ``torch`` and NumPy's global state this way;
    this also reseeds generators that the dataset holds, such as :attr:`NoisyDataset.rng`.
    """
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    info = get_worker_info()
    if info is not None and hasattr(info.dataset, "rng"):
        info.dataset.rng = np.random.default_rng(seed)


def dict_collate(batch: Sequence[tuple[torch.Tensor, int]]) -> dict[str, torch.Tensor]:
    """``collate_fn`` that stacks ``(image, label)`` samples into ``{"image": (B, ...), "label": (B,)}``."""
    if not batch:
        raise ValueError("cannot collate an empty batch.")
    images, labels = zip(*batch)
    return {"image": torch.stack(images), "label": torch.tensor(labels)}


# ----------------------------------------------------------------------------- disk


def drop_page_cache(path: Path | str) -> bool:
    """Ask the kernel to evict ``path``'s pages from the page cache (``POSIX_FADV_DONTNEED``).

    Returns ``False`` where the call does not exist (macOS, Windows). Linux may keep pages that
    are dirty or mapped; check the effect with :func:`resident_fraction`.
    """
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages cannot be dropped: write them out first
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def resident_fraction(path: Path | str) -> float | None:
    """Fraction of ``path``'s pages that are in the page cache, from ``mincore(2)`` (Linux, via
    ctypes); ``None`` where that cannot be asked (another OS, no libc, an empty file)."""
    size = os.path.getsize(path)
    libc_name = ctypes.util.find_library("c")
    if size == 0 or not libc_name or not hasattr(mmap, "MAP_SHARED"):
        return None
    libc = ctypes.CDLL(libc_name, use_errno=True)
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mm:
        anchor = ctypes.c_char.from_buffer(mm)  # an address inside the mapping; touches no page
        vec = (ctypes.c_ubyte * pages)()
        ok = libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(size), vec) == 0
        del anchor  # release the buffer export before the mapping closes
    return sum(v & 1 for v in vec) / pages if ok else None
