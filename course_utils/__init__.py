"""The course's toolkit: profile, seeding, device, data, timing, memory, claims, plots, progress, processes, live
TensorBoard.

A lesson's setup cell calls :func:`setup`; everything else is imported by name::

    import course_utils as cu
    env = cu.setup("02", seed=0)

What serves one lesson only (its plumbing and its exercise checks) is in
``course_utils.lessons.lessonNN``; the registry of lessons is ``course_utils.lessons``; the
environment doctor (``python -m course_utils doctor``) is ``course_utils.doctor``. Neither is
imported here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

# TensorFlow takes nearly all the memory of every visible GPU when it starts, for the kernel's lifetime, unless
# memory growth is on: a lesson that imports it after this package (every lesson does) then leaves the GPUs to
# torch, torchrun's processes and other users. Set before TensorFlow starts; an explicit choice is kept.
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")

# Load torchvision (and, through it, torch._dynamo and triton) before any lesson imports
# TensorFlow: with torch 2.14.1 and TensorFlow 2.21 in one process, importing triton *after*
# TensorFlow segfaults. The setup cell imports course_utils first, which fixes the order. The workers
# that torchrun starts (TORCHELASTIC_RUN_ID set) run the lessons' scripts, which never import
# TensorFlow: they skip it, about 2 s less in each process of every launch.
if "TORCHELASTIC_RUN_ID" not in os.environ:
    import torchvision  # noqa: F401  (imported for the side effect above)

from course_utils import hardware, lessons, versions
from course_utils.checks import reveal
from course_utils.claims import ANYWHERE, ClaimError, Condition, expect
from course_utils.data import DataError, data_root, dataset_info, load_numpy, load_tensors, tf_dataset
from course_utils.device import best_device, device_name, environment_summary, gpu_count
from course_utils.diffs import ScriptDiff, script_diff
from course_utils.hardware import CoreCapacity, Hardware, core_capacity, cpu_load
from course_utils.launch import free_port, free_ports, read_rank_results, run_processes, scratch_dir, torchrun_command
from course_utils.live_view import automated_driver, live_view_allowed, live_view_host
from course_utils.memory import peak_memory, saved_for_backward, tensor_bytes
from course_utils.models import layer_costs, serialized_size
from course_utils.placement import Placement, process_placement
from course_utils.plotting import plot_curves, set_figure_defaults, show, show_images
from course_utils.profile import PROFILE_ENV, Profile, get_profile
from course_utils.progress import keras_verbose, progress
from course_utils.recipes import recipe, show_script
from course_utils.seeding import seed_everything
from course_utils.timing import (
    format_bytes,
    format_seconds,
    measure,
    measure_interleaved,
    page_faults,
    parallel_efficiency,
    ratio_by_round,
    rotations,
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


def setup(lesson: str | None = None, *, seed: int = 0, device: str | None = None,
          profile: str | None = None) -> CourseEnv:
    """Select the run profile, seed everything, pick the device, set the figure defaults, and print
    a short summary: versions, threads, device and profile; for a person, how long the lesson took on the
    reference machine; the hardware facts that decide the lessons' measurements (bf16, int8, cores, GPU); the
    data root; and a warning when torch, TensorFlow or Keras differ from the versions of the stored outputs.

    Args:
        lesson: the lesson's number (``"02"``), for its reference times in the registry of lessons.
        seed: seed for every random number generator.
        device: force a device (``"cpu"``, ``"cuda"``, ...); default: the best available.
        profile: ``"quick"`` or ``"full"``; it sets ``$COURSE_PROFILE`` for this kernel and the processes it
            starts (the way to choose in Colab). Default: ``$COURSE_PROFILE``, else quick under CI, else full.

    Raises:
        ValueError: for an unknown profile, device or lesson number.
    """
    if profile is not None:
        os.environ[PROFILE_ENV] = get_profile(profile).name
    env = CourseEnv(profile=get_profile(), device=best_device(device), seed=seed_everything(seed),
                    hardware=hardware.detect())
    chosen = _profile_line(env.profile, lesson, chosen=profile is not None)
    set_figure_defaults()
    print(f"{environment_summary(env.device)} · seed {env.seed}")
    print(chosen)
    print(f"hardware: {env.hardware.summary()}")
    print(f"data root: {data_root()}")
    if warning := versions.drift_warning():
        print(warning)
    return env


def _profile_line(profile: Profile, lesson: str | None, *, chosen: bool) -> str:
    """Which profile runs and why, and, for a person, how long the lesson took in each profile on the reference
    machine. A run by an automated driver (``make execute``, ``make full``, nbval) prints no times: its output is
    the stored copy, and the time it would print is that of the run before it, not its own (the published copy's
    banner and the README quote the record of run times)."""
    raw = os.environ.get(PROFILE_ENV, "").strip()
    why = ("chosen in setup()" if chosen else f"${PROFILE_ENV}={raw}" if raw else
           "the default under CI" if os.environ.get("CI") else "the default; setup(profile='quick') runs faster")
    line = f"profile {profile.name} ({why})"
    times = lessons.reference_times(lesson, profile.name) if lesson is not None else None  # also checks the number
    return f"{line}: {times}" if times and not automated_driver() else line


__all__ = [
    "ANYWHERE", "ClaimError", "Condition", "CoreCapacity", "CourseEnv", "DataError", "Hardware", "Placement",
    "Profile", "ScriptDiff",
    "accuracy", "best_device", "core_capacity", "cpu_load", "data_root",
    "dataset_info", "device_name", "expect", "format_bytes", "format_seconds", "free_port",
    "free_ports", "get_profile", "gpu_count", "keras_verbose", "layer_costs", "live_view_allowed", "live_view_host",
    "load_numpy", "load_tensors",
    "measure", "measure_interleaved", "page_faults", "parallel_efficiency", "peak_memory", "plot_curves",
    "process_placement", "progress",
    "ratio_by_round", "read_rank_results", "recipe", "reveal", "rotations", "run_processes",
    "saved_for_backward", "scratch_dir", "script_diff", "seed_everything",
    "serialized_size", "setup", "show", "show_images", "show_script", "speedup", "stopwatch", "tensor_bytes",
    "tf_dataset", "torchrun_command", "train_classifier",
]
