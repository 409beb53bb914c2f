"""torch 2.14.1 + TensorFlow 2.21 in one process: triton segfaults if imported after TensorFlow.
course_utils imports torchvision (and so triton) first; this keeps that fix honest."""

import subprocess
import sys


def test_tensorflow_after_course_utils_then_dynamo_does_not_crash():
    code = "import course_utils, tensorflow, torch._dynamo, torchvision.ops; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr[-2000:])
