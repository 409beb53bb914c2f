"""Seed every random number generator a lesson may use."""

from __future__ import annotations

import os
import random
import sys

import numpy as np
import torch


def seed_everything(seed: int = 0) -> int:
    """Seed Python, NumPy, PyTorch (CPU and all GPUs) and, if already imported, TensorFlow.

    TensorFlow is seeded only when the lesson has imported it, so that lessons
    that do not use it do not pay its import time.

    Returns:
        The seed, so that a setup cell can print it.

    Raises:
        TypeError: if ``seed`` is not an integer.
        ValueError: if ``seed`` is outside ``[0, 2**32 - 1]`` (NumPy's range).
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}; pass e.g. seed=0.")
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32 - 1], got {seed}.")
    os.environ["PYTHONHASHSEED"] = str(seed)  # inherited by child processes
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    if "tensorflow" in sys.modules:
        sys.modules["tensorflow"].random.set_seed(seed)
    if "keras" in sys.modules:
        sys.modules["keras"].utils.set_random_seed(seed)
    return seed
