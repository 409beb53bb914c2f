import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from course_utils.seeding import seed_everything


def draw():
    return random.random(), np.random.rand(), torch.rand(1).item()


def test_same_seed_same_numbers():
    seed_everything(3)
    first = draw()
    seed_everything(3)
    assert draw() == first
    seed_everything(4)
    assert draw() != first


@pytest.mark.parametrize("bad, error", [(1.5, TypeError), ("0", TypeError), (True, TypeError),
                                        (-1, ValueError), (2**32, ValueError)])
def test_bad_seeds_are_rejected(bad, error):
    with pytest.raises(error, match="seed"):
        seed_everything(bad)


def test_tensorflow_is_seeded_when_imported():
    code = ("import course_utils, tensorflow as tf; from course_utils import seed_everything\n"
            "seed_everything(1); a = tf.random.uniform([3]).numpy()\n"
            "seed_everything(1); b = tf.random.uniform([3]).numpy()\n"
            "assert (a == b).all(), (a, b); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]
