"""The lessons that branch on the CPU run again as on other CPUs, so that CI covers both branches.

nbval runs every lesson on the CPU that CI happens to get. Lessons 07 (int8 kernels) and 09 (bf16)
decide what they expect from that CPU, so they also run here, outputs not compared, failing on any
exception: with ``AVX2_ONLY_ENV`` as on a CPU without AVX-512 (bf16 emulated), and lesson 07 with the
ARM engine, qnnpack. On a CPU that has no AVX-512 the normal run already is the AVX2 branch, and the
native-bf16 branch is covered where CI gets a CPU with it.

The runs start together and share the cores: their timing claims then report "not checked" (another
process used the CPU), which these runs do not compare; what they test is that every branch runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO
from course_utils.hardware import AVX2_ONLY_ENV, ENGINE_ENV, cpu_flags

HAS_AVX512 = bool({"avx512f", "avx512_bf16", "amx_bf16"} & (cpu_flags() or set()))
RERUNS = {  # name: (lesson, environment added)
    "07 as on AVX2": ("07_quantization.ipynb", AVX2_ONLY_ENV),
    "09 as on AVX2": ("09_mixed_precision.ipynb", AVX2_ONLY_ENV),
    "07 on qnnpack": ("07_quantization.ipynb", {ENGINE_ENV: "qnnpack"}),
}
AVX2_RERUNS = ("07 as on AVX2", "09 as on AVX2")


@pytest.fixture(scope="module")
def reruns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[subprocess.Popen[bytes], Path]]]:
    """Every rerun this CPU needs, started at once in the quick profile: name -> (its process, its output folder)."""
    root = os.environ.get("COURSE_DATA_DIR")
    if not root or not (Path(root) / "MNIST" / "raw").is_dir():
        pytest.skip("COURSE_DATA_DIR does not point at a folder with the real MNIST; set it to run these tests.")
    started = {}
    for name, (notebook, env) in RERUNS.items():
        if name in AVX2_RERUNS and not HAS_AVX512:
            continue
        out = tmp_path_factory.mktemp(name.replace(" ", "-"))
        with open(out / "stderr.txt", "w") as stderr:  # a file, not a pipe: no run waits for its reader
            started[name] = (subprocess.Popen(
                [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--output-dir",
                 str(out), "--ExecutePreprocessor.timeout=900", str(REPO / "notebooks" / notebook)],
                env={**os.environ, "COURSE_PROFILE": "quick", **env}, stdout=subprocess.DEVNULL, stderr=stderr), out)
    yield started
    for process, _ in started.values():
        process.kill()
        process.wait()


def setup_output(reruns: dict[str, tuple[subprocess.Popen[bytes], Path]], name: str) -> str:
    """Wait for the rerun ``name``; fail on any error; return its setup cell's output."""
    process, out = reruns[name]
    assert process.wait(timeout=1200) == 0, (out / "stderr.txt").read_text()[-3000:]
    cells = json.loads((out / RERUNS[name][0]).read_text())["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    setup = next(c for c in cells if c["cell_type"] == "code" and "cu.setup(" in "".join(c["source"]))
    return "".join("".join(o.get("text", "")) for o in setup["outputs"])


@pytest.mark.parametrize("name", AVX2_RERUNS)
def test_lesson_runs_as_on_a_cpu_with_avx2_only(name, reruns):
    if not HAS_AVX512:
        pytest.skip("this CPU has no AVX-512: the nbval run of this lesson already is its AVX2 branch")
    assert "hardware: CPU AVX2 · bf16 emulated" in setup_output(reruns, name)


def test_quantization_runs_on_the_arm_engine(reruns):
    assert "int8 engine qnnpack" in setup_output(reruns, "07 on qnnpack")
