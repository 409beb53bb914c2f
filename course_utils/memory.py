"""Counting the memory of tensors: the bytes they hold, what autograd saves for backward, the peak of a block.

Everything here counts tensor *storages*, each once however many views share it, on any device. The
allocator's caching and rounding are not seen (on a GPU, ``torch.cuda.max_memory_allocated`` sees them)::

    state = cu.tensor_bytes(model.parameters())
    with cu.saved_for_backward(exclude=[*model.parameters(), x]) as saved:
        loss = loss_fn(model(x), y)
    with cu.peak_memory() as peak:
        loss.backward()
    print(saved.bytes, peak.bytes)
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def _storages(tensors: Iterable[torch.Tensor], what: str) -> dict[int, int]:
    """``{storage id: bytes}`` of the distinct storages behind ``tensors``."""
    found: dict[int, int] = {}
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what} must be tensors, got {type(t).__name__}.")
        storage = t.untyped_storage()
        found[id(storage) if storage.data_ptr() == 0 else storage.data_ptr()] = storage.nbytes()
    return found


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes held by ``tensors``: the sum over their distinct storages (a view adds nothing to its base)."""
    return sum(_storages(tensors, "tensor_bytes' arguments").values())


class SavedTensors:
    """What autograd saved for backward inside a :func:`saved_for_backward` block."""

    def __init__(self) -> None:
        self._storages: dict[int, int] = {}

    @property
    def bytes(self) -> int:
        """Bytes of the distinct storages saved."""
        return sum(self._storages.values())

    @property
    def count(self) -> int:
        """How many distinct storages were saved."""
        return len(self._storages)


@contextmanager
def saved_for_backward(exclude: Iterable[torch.Tensor] = ()) -> Iterator[SavedTensors]:
    """Record the tensors that autograd saves for the backward pass of the operations run in the block.

    Args:
        exclude: tensors that exist anyway (the parameters, the input batch): their storages are not counted,
            nor those of their views.
    """
    excluded = set(_storages(exclude, "exclude"))
    saved = SavedTensors()

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved._storages.update((key, n) for key, n in _storages([t], "saved tensors").items() if key not in excluded)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield saved


class PeakMemory(TorchDispatchMode):
    """The bytes of tensor storages created in a :func:`peak_memory` block: at most (``bytes``), and still alive
    (``current``; frozen when the block ends).

    Storages that already existed, or that are resized in place (FSDP's all-gather buffers), are not seen.
    """

    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.bytes = 0  # the peak
        self._alive: set[int] = set()
        self._open = True

    def _free(self, key: int, nbytes: int) -> None:
        if self._open:
            self._alive.discard(key)
            self.current -= nbytes

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor) or t.is_meta:
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key in inputs or key in self._alive or storage.nbytes() == 0:
                continue  # a view, an in-place result or a storage already counted
            self._alive.add(key)
            self.current += storage.nbytes()
            weakref.finalize(storage, self._free, key, storage.nbytes())
        self.bytes = max(self.bytes, self.current)
        return out


@contextmanager
def peak_memory() -> Iterator[PeakMemory]:
    """Track the tensors created in the block: ``.bytes`` is the peak of their live bytes, ``.current`` what is
    left when the block ends. Works on any device (it counts storages, not the allocator's blocks)."""
    tracker = PeakMemory()
    try:
        with tracker:
            yield tracker
    finally:
        tracker._open = False
