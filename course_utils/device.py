"""Choosing a compute device and describing the environment in one line."""

from __future__ import annotations

import platform
import re
from importlib import metadata

import torch

_DEVICE_PATTERN = re.compile(r"^(cpu|mps|cuda)(:\d+)?$")


def gpu_count() -> int:
    """Number of CUDA GPUs PyTorch can use."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def default_device(gpus: int, mps: bool) -> str:
    """The device a lesson runs on unless told otherwise, from the machine's facts: CUDA, then Apple MPS, then CPU."""
    return "cuda" if gpus else "mps" if mps else "cpu"


def best_device(prefer: str | None = None) -> torch.device:
    """Return the best available device, or check and return the one asked for.

    With ``prefer=None`` the order is CUDA, then Apple MPS, then CPU.

    Args:
        prefer: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``.

    Raises:
        ValueError: if ``prefer`` is not a device string of that form.
        RuntimeError: if the requested device is not present on this machine.
    """
    if prefer is None:
        return torch.device(default_device(gpu_count(), mps_available()))
    if not isinstance(prefer, str) or not _DEVICE_PATTERN.match(prefer.strip().lower()):
        raise ValueError(f"Unknown device {prefer!r}: use 'cpu', 'cuda', 'cuda:N' (N a GPU index) or 'mps'.")
    name = prefer.strip().lower()
    kind, _, index = name.partition(":")
    if kind == "cuda":
        n = gpu_count()
        if n == 0:
            raise RuntimeError(f"Device {prefer!r} requested but PyTorch sees no CUDA GPU; use 'cpu' or best_device().")
        if index and int(index) >= n:
            raise RuntimeError(f"Device {prefer!r} requested but only {n} GPU(s) exist (cuda:0..cuda:{n - 1}).")
    if kind == "mps" and not mps_available():
        raise RuntimeError("Device 'mps' requested but Apple MPS is not available here; use 'cpu' or best_device().")
    return torch.device(name)


def device_name(device: torch.device | str) -> str:
    """Human-readable hardware name: the GPU model for CUDA, the processor otherwise."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple GPU (MPS)"
    return _cpu_model() or platform.processor() or platform.machine() or "CPU"


def _cpu_model() -> str | None:
    """The processor's model name on Linux (``/proc/cpuinfo``), else ``None``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def package_version(name: str) -> str | None:
    """Installed version of a distribution, without importing it (``None`` if absent)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def environment_summary(device: torch.device | str | None = None) -> str:
    """One line with Python, PyTorch and TensorFlow versions, CPU threads and the device."""
    device = torch.device(device) if device is not None else best_device()
    tf = package_version("tensorflow-cpu") or package_version("tensorflow")
    parts = [
        f"python {platform.python_version()}",
        f"torch {torch.__version__}",
        f"tensorflow {tf}" if tf else "tensorflow (not installed)",
        f"{torch.get_num_threads()} CPU threads",
        f"device {device} ({device_name(device)})",
    ]
    if gpu_count() > 1:
        parts.append(f"{gpu_count()} GPUs")
    return " · ".join(parts)
