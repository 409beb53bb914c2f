"""torch 2.14.1 + TensorFlow 2.21 in one process: triton segfaults if imported after TensorFlow.
course_utils imports torchvision (and so triton) first; this keeps that fix honest."""

import os
import subprocess
import sys


def test_tensorflow_after_course_utils_then_dynamo_does_not_crash():
    code = "import course_utils, tensorflow, torch._dynamo, torchvision.ops; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr[-2000:])


def test_a_torchrun_worker_does_not_load_torchvision():
    """The lessons' torchrun scripts never import TensorFlow: their workers skip the seconds of torchvision's import."""
    code = "import sys, course_utils; print('torchvision' in sys.modules, 'torch._dynamo' in sys.modules)"
    for env, loaded in (({}, "True True"), ({"TORCHELASTIC_RUN_ID": "none"}, "False False")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                             env={**os.environ, **env})
        assert out.returncode == 0 and out.stdout.strip() == loaded, (env, out.stdout, out.stderr[-2000:])
