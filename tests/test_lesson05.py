"""Lesson 05: the exercise checks, and the Slurm batch script shipped beside the notebook."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import REPO
from course_utils.lessons import lesson05

NOTEBOOK = REPO / "notebooks" / "05_distributed_pytorch.ipynb"
SBATCH = REPO / "notebooks" / "05_slurm_ddp.sbatch"


@pytest.mark.parametrize("check, right, wrong", [
    (lesson05.check_bubble_fraction, 3 / 15, 3 / 12),                                # (p-1)/(m+p-1), not (p-1)/m
    (lesson05.check_ring_allreduce_megabytes, 2 * 7 / 8 * 102.4, 102.4),             # 2(N-1)/N of 102.4 MB
    (lesson05.check_ddp_bookkeeping, (8, 256, 7500, 235), (8, 256, 7500, 234)),      # ceil(7500/32) = 235
])
def test_exercise_checks_right_wrong_and_none(check, right, wrong):
    assert check(right).correct
    verdict = check(wrong)
    assert not verdict.correct and "but" in verdict.message
    assert not check(None).correct and "no answer" in repr(check(None))


def test_exercise_checks_explain_malformed_answers():
    assert "expected 4 number(s)" in lesson05.check_ddp_bookkeeping((8, 256)).message
    assert not lesson05.check_bubble_fraction("a fifth").correct


def test_exercise_expectations_follow_their_parameters():
    assert lesson05.check_bubble_fraction(1 / 2, stages=2, microbatches=1).correct
    assert lesson05.check_ring_allreduce_megabytes(4.0, parameters=1_000_000, workers=2).correct
    assert lesson05.check_ddp_bookkeeping((2, 128, 5, 1), nodes=1, gpus_per_node=2, batch_per_process=64,
                                          dataset_size=9).correct  # the sampler pads 9 samples to 2 x 5


def sbatch_directives(text: str) -> dict[str, str]:
    """`#SBATCH --key=value` lines (before the first command, as Slurm reads them) as {key: value}."""
    directives = {}
    for line in text.splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if match := re.match(r"#SBATCH\s+--([\w-]+)(?:[= ](\S+))?", line):
            directives[match[1]] = match[2] or ""
    return directives


def torchrun_line(text: str) -> list[str]:
    """The `srun torchrun ...` command, with its backslash continuations joined, as a list of words."""
    joined = re.sub(r"\\\n\s*", " ", text)
    (line,) = [line for line in joined.splitlines() if line.strip().startswith("srun ")]
    return shlex.split(line)


def test_slurm_script_requests_nodes_and_one_task_per_node():
    text = SBATCH.read_text()
    assert text.startswith("#!/bin/bash\n")
    directives = sbatch_directives(text)
    assert int(directives["nodes"]) >= 2
    assert directives["ntasks-per-node"] == "1", "one torchrun agent per node; it starts the workers"
    assert {"job-name", "gpus-per-node", "time", "output"} <= set(directives)
    assert "set -euo pipefail" in text


def test_slurm_script_launches_the_notebook_script_with_torchrun_across_nodes():
    text = SBATCH.read_text()
    words = torchrun_line(text)
    assert words[:2] == ["srun", "torchrun"]
    options = dict(w.split("=", 1) for w in words if w.startswith("--") and "=" in w)
    assert options["--nnodes"] == "$SLURM_NNODES"
    assert options["--rdzv_backend"] == "c10d" and options["--rdzv_id"] == "$SLURM_JOB_ID"
    head_var = options["--rdzv_endpoint"].split(":")[0].strip("${}")
    assert re.search(rf'^{head_var}=\$\(scontrol show hostnames "\$SLURM_JOB_NODELIST" \| head -n 1\)$', text,
                     re.MULTILINE), "the rendezvous host is the first node of the allocation"
    script = next(w for w in words if w.endswith(".py"))
    assert script == "scratch/05/ddp_train.py"
    assert f"%%writefile {script}" in NOTEBOOK.read_text(), "the same training script the notebook writes"
    for option in ("--train-samples", "--epochs", "--out"):
        assert option in words[words.index(script):], f"{option} is a required argument of the script"
