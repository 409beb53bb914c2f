"""Mixed precision helpers: does this device run low precision fast, and how much memory does a step take.

The lesson's own idea (``torch.autocast``, ``torch.amp.GradScaler``) stays in the notebook; this module
only answers two plumbing questions::

    from course_utils.precision import fast_low_precision_dtype, peak_memory_bytes

    dtype, reason = fast_low_precision_dtype(env.device)   # torch.float16 on a tensor-core GPU, ...
    peak = peak_memory_bytes(train_step, env.device)       # bytes of tensors allocated at the peak
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# First CUDA compute capability with tensor cores (Volta, 7.0): fp16 matmuls run several times faster there.
TENSOR_CORE_CAPABILITY = (7, 0)


class LowPrecisionChoice(NamedTuple):
    """The autocast dtype that runs fast on a device (``None``: none does), and why."""

    dtype: torch.dtype | None
    reason: str


def cpu_has_fast_bf16() -> bool:
    """True when oneDNN reports native bf16 kernels for this CPU (AVX-512 BF16/AMX class, or Arm BF16)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def _cuda_capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def fast_low_precision_dtype(device: torch.device | str) -> LowPrecisionChoice:
    """Say which autocast dtype makes a training step faster on ``device``, with the hardware reason.

    * CUDA with tensor cores (compute capability >= 7.0): ``torch.float16`` (used with a GradScaler).
    * CUDA without tensor cores: ``None``; fp16 arithmetic there is no faster than fp32.
    * CPU: ``torch.bfloat16`` when oneDNN has native bf16 kernels for it, else ``None``: bf16 is
      then emulated by converting to fp32 and back, which is slower than plain fp32.
    * Other devices (MPS): ``None``; this course does not measure them.

    The answer is a rule of thumb from the hardware, not a measurement: the notebook measures.

    Raises:
        ValueError: if ``device`` is not a device string or ``torch.device``.
    """
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be a torch.device or a string such as 'cpu' or 'cuda', got {device!r}.") from exc
    if device.type == "cuda":
        major, minor = _cuda_capability(device)
        if (major, minor) >= TENSOR_CORE_CAPABILITY:
            return LowPrecisionChoice(torch.float16, f"CUDA compute capability {major}.{minor} has fp16 tensor cores")
        return LowPrecisionChoice(None, f"CUDA compute capability {major}.{minor} has no tensor cores (needs >= 7.0)")
    if device.type == "cpu":
        if cpu_has_fast_bf16():
            return LowPrecisionChoice(torch.bfloat16, "oneDNN reports native bf16 kernels on this CPU")
        return LowPrecisionChoice(None, "oneDNN reports no native bf16 kernels on this CPU (no AVX-512/AMX bf16 "
                                        "support): bf16 is emulated through fp32 and runs slower than fp32")
    return LowPrecisionChoice(None, f"mixed precision speed on {device.type!r} is not covered by this course")


class _LiveTensorBytes(TorchDispatchMode):
    """Counts the bytes of every tensor storage created by an op while active, until it is freed."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._tracked: set[int] = set()

    def _free(self, key: int, nbytes: int) -> None:
        self._tracked.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                  if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key in inputs or key in self._tracked or storage.nbytes() == 0:
                continue  # a view, an in-place result or an already counted storage
            self._tracked.add(key)
            self.live += storage.nbytes()
            weakref.finalize(storage, self._free, key, storage.nbytes())
        self.peak = max(self.peak, self.live)
        return out


def peak_memory_bytes(fn: Callable[[], Any], device: torch.device | str = "cpu") -> int:
    """Peak bytes of tensor memory that ``fn()`` allocates on top of what already existed.

    On CUDA this is the caching allocator's own count (``torch.cuda.max_memory_allocated`` minus the
    memory allocated before the call). On other devices every tensor created by an op, forward and
    backward, is counted from its creation until it is freed, and the peak of that sum is returned:
    the same quantity, without the allocator's rounding. Neither counts memory that is not a tensor.

    Raises:
        TypeError: if ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable taking no arguments, got {type(fn).__name__}; wrap it in a lambda.")
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    tracker = _LiveTensorBytes()
    with tracker:
        fn()
    return tracker.peak


def format_bytes(n: float) -> str:
    """Format a byte count with a binary unit (B, KiB, MiB, GiB), 3 significant digits."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
