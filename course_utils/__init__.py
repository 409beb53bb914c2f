"""Plumbing for the Accelerated Deep Learning notebooks: profile, seeding, device, data, timing, plots.

A lesson's setup cell calls :func:`setup`; everything else is imported by name::

    import course_utils as cu
    env = cu.setup(seed=0)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

# Load torchvision (and, through it, torch._dynamo and triton) before any lesson imports
# TensorFlow: with torch 2.14.1 and TensorFlow 2.21 in one process, importing triton *after*
# TensorFlow segfaults. The setup cell imports course_utils first, which fixes the order.
import torchvision  # noqa: F401  (imported for the side effect above)

from course_utils import hardware
from course_utils.checks import CheckResult
from course_utils.claims import ANYWHERE, ClaimError, Condition, expect
from course_utils.data import (
    DataError,
    data_root,
    dataset_info,
    ensure_dataset,
    load_numpy,
    load_tensors,
    tf_dataset,
    torchvision_dataset,
)
from course_utils.device import best_device, device_name, environment_summary, gpu_count
from course_utils.hardware import Hardware, cpu_load
from course_utils.launch import (
    ProcessResult,
    free_port,
    free_ports,
    run_processes,
    scratch_dir,
    tf_config,
    torchrun_command,
)
from course_utils.plotting import autograd_graph_edges, draw_autograd_graph, plot_curves, show_images
from course_utils.profile import Profile, get_profile
from course_utils.seeding import seed_everything
from course_utils.timing import (
    Timing,
    amdahl_speedup,
    format_seconds,
    measure,
    measure_interleaved,
    parallel_efficiency,
    speedup,
    stopwatch,
    synchronize,
)
from course_utils.training import accuracy, train_classifier

__version__ = "0.1.0"


@dataclass(frozen=True)
class CourseEnv:
    """What a lesson's setup cell establishes."""

    profile: Profile
    device: torch.device
    data_root: Path
    seed: int
    hardware: Hardware


def setup(seed: int = 0, device: str | None = None) -> CourseEnv:
    """Select the run profile, seed everything, pick the device, resolve the data root, and
    print a short summary of the environment (versions, threads, device, profile) and of the
    hardware facts that decide the lessons' measurements (bf16, int8, cores, GPU).

    Args:
        seed: seed for every random number generator.
        device: force a device (``"cpu"``, ``"cuda"``, ...); default: the best available.
    """
    env = CourseEnv(profile=get_profile(), device=best_device(device), data_root=data_root(),
                    seed=seed_everything(seed), hardware=hardware.detect())
    print(f"{environment_summary(env.device)} · profile {env.profile.name} · seed {env.seed}")
    print(f"hardware: {env.hardware.summary()}")
    print(f"data root: {env.data_root}")
    return env


__all__ = [
    "ANYWHERE", "CheckResult", "ClaimError", "Condition", "CourseEnv", "DataError", "Hardware", "ProcessResult",
    "Profile", "Timing", "accuracy", "amdahl_speedup", "cpu_load", "expect",
    "autograd_graph_edges", "best_device", "data_root", "dataset_info", "device_name", "draw_autograd_graph",
    "ensure_dataset", "environment_summary", "format_seconds", "free_port", "free_ports", "get_profile",
    "gpu_count", "load_numpy", "load_tensors", "measure", "measure_interleaved", "parallel_efficiency",
    "plot_curves", "run_processes",
    "scratch_dir", "seed_everything", "setup", "show_images", "speedup", "stopwatch", "synchronize", "tf_config",
    "tf_dataset", "torchrun_command", "torchvision_dataset", "train_classifier",
]
