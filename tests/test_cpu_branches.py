"""The lessons that branch on the CPU run again as on other CPUs, so that CI covers both branches.

nbval runs every lesson on the CPU that CI happens to get. Lessons 07 (int8 kernels) and 09 (bf16)
decide what they expect from that CPU, so they also run here, outputs not compared, failing on any
exception: with ``AVX2_ONLY_ENV`` as on a CPU without AVX-512 (bf16 emulated), and lesson 07 with the
ARM engine, qnnpack. On a CPU that has no AVX-512 the normal run already is the AVX2 branch, and the
native-bf16 branch is covered where CI gets a CPU with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from course_utils.hardware import AVX2_ONLY_ENV, ENGINE_ENV, cpu_flags


def execute(notebook: str, env: dict[str, str], out: Path) -> str:
    """Run a lesson top to bottom in the quick profile with ``env`` added; return its setup cell's output."""
    result = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--output-dir", str(out),
         "--ExecutePreprocessor.timeout=900", str(REPO / "notebooks" / notebook)],
        env={**os.environ, "COURSE_PROFILE": "quick", **env}, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    cells = json.loads((out / notebook).read_text())["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    setup = next(c for c in cells if c["cell_type"] == "code" and "cu.setup(" in "".join(c["source"]))
    return "".join("".join(o.get("text", "")) for o in setup["outputs"])


@pytest.mark.parametrize("notebook", ["07_quantization.ipynb", "09_mixed_precision.ipynb"])
def test_lesson_runs_as_on_a_cpu_with_avx2_only(notebook, tmp_path, real_data_root):
    if not {"avx512f", "avx512_bf16", "amx_bf16"} & (cpu_flags() or set()):
        pytest.skip("this CPU has no AVX-512: the nbval run of this lesson already is its AVX2 branch")
    setup = execute(notebook, AVX2_ONLY_ENV, tmp_path)
    assert "hardware: CPU AVX2 · bf16 emulated" in setup


def test_quantization_runs_on_the_arm_engine(tmp_path, real_data_root):
    setup = execute("07_quantization.ipynb", {ENGINE_ENV: "qnnpack"}, tmp_path)
    assert "int8 engine qnnpack" in setup
