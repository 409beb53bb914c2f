"""The course's toolkit: profile, seeding, device, data, timing, claims, plots, progress, processes.

A lesson's setup cell calls :func:`setup`; everything else is imported by name::

    import course_utils as cu
    env = cu.setup(seed=0)

What serves one lesson only (its plumbing and its exercise checks) is in
``course_utils.lessons.lessonNN``; the registry of lessons is ``course_utils.lessons``; the
environment doctor (``python -m course_utils doctor``) is ``course_utils.doctor``. Neither is
imported here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Load torchvision (and, through it, torch._dynamo and triton) before any lesson imports
# TensorFlow: with torch 2.14.1 and TensorFlow 2.21 in one process, importing triton *after*
# TensorFlow segfaults. The setup cell imports course_utils first, which fixes the order.
import torchvision  # noqa: F401  (imported for the side effect above)

from course_utils import hardware
from course_utils.claims import ANYWHERE, ClaimError, Condition, expect
from course_utils.data import DataError, data_root, dataset_info, load_numpy, load_tensors, tf_dataset
from course_utils.device import best_device, device_name, environment_summary, gpu_count
from course_utils.hardware import Hardware, cpu_load
from course_utils.launch import free_port, free_ports, run_processes, scratch_dir, torchrun_command
from course_utils.models import layer_costs, serialized_size
from course_utils.plotting import plot_curves, set_figure_defaults, show_images
from course_utils.profile import Profile, get_profile
from course_utils.progress import keras_verbose, progress
from course_utils.seeding import seed_everything
from course_utils.timing import (
    format_bytes,
    format_seconds,
    measure,
    measure_interleaved,
    parallel_efficiency,
    speedup,
    stopwatch,
)
from course_utils.training import accuracy, train_classifier

__version__ = "0.1.0"


@dataclass(frozen=True)
class CourseEnv:
    """What a lesson's setup cell establishes."""

    profile: Profile
    device: torch.device
    seed: int
    hardware: Hardware


def setup(seed: int = 0, device: str | None = None) -> CourseEnv:
    """Select the run profile, seed everything, pick the device, set the figure defaults, and print
    a short summary: versions, threads, device and profile; the hardware facts that decide the
    lessons' measurements (bf16, int8, cores, GPU); and the data root.

    Args:
        seed: seed for every random number generator.
        device: force a device (``"cpu"``, ``"cuda"``, ...); default: the best available.
    """
    env = CourseEnv(profile=get_profile(), device=best_device(device), seed=seed_everything(seed),
                    hardware=hardware.detect())
    set_figure_defaults()
    print(f"{environment_summary(env.device)} · profile {env.profile.name} · seed {env.seed}")
    print(f"hardware: {env.hardware.summary()}")
    print(f"data root: {data_root()}")
    return env


__all__ = [
    "ANYWHERE", "ClaimError", "Condition", "CourseEnv", "DataError", "Hardware", "Profile",
    "accuracy", "best_device", "cpu_load", "data_root",
    "dataset_info", "device_name", "expect", "format_bytes", "format_seconds", "free_port",
    "free_ports", "get_profile", "gpu_count", "keras_verbose", "layer_costs", "load_numpy", "load_tensors",
    "measure", "measure_interleaved", "parallel_efficiency", "plot_curves", "progress", "run_processes", "scratch_dir",
    "seed_everything",
    "serialized_size", "setup", "show_images", "speedup", "stopwatch", "tf_dataset",
    "torchrun_command", "train_classifier",
]
