"""Lesson 05: the collectives and the ring all-reduce, the exercise checks, and the Slurm batch script."""

from __future__ import annotations

import re
import shlex

import numpy as np
import pytest

from conftest import REPO, exercise_script
from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.lessons import lesson05

NOTEBOOK = REPO / "notebooks" / "05_distributed_pytorch.ipynb"
SBATCH = REPO / "notebooks" / "05_slurm_ddp.sbatch"


@pytest.mark.parametrize("check, right, wrong, hint, derivation", [
    # (p-1)/(m+p-1), not (p-1)/m
    (lesson05.check_bubble_fraction, 3 / 15, 3 / 12, "section 5 derives the bubble", "3/15 = 0.2"),
    # 2(N-1)/N of 102.4 MB
    (lesson05.check_ring_allreduce_megabytes, 2 * 7 / 8 * 102.4, 102.4, "the all-gather that follows",
     "2·(N - 1)/N · 102.4 MB = 179.2 MB"),
    # ceil(7500/32) = 235
    (lesson05.check_ddp_bookkeeping, (8, 256, 7500, 235), (8, 256, 7500, 234), "the last, smaller batch",
     "ceil(7500 / 32) = 235"),
])
def test_exercise_checks_hint_at_a_miss_and_show_the_solution_when_asked(check, right, wrong, hint, derivation):
    assert check(right).correct
    verdict = check(wrong)
    assert not verdict.correct and not verdict.is_solution
    assert hint in verdict.message and verdict.message.endswith(ASK_FOR_SOLUTION)
    assert derivation not in repr(verdict)  # the miss gets a hint, never the worked solution
    assert check(None) is NO_ANSWER and "no answer" in repr(check(None))
    for answer in (None, wrong, right):
        shown = check(answer, solution=True)
        assert shown.is_solution and not shown.correct
        assert repr(shown).startswith("📖 Solution: ") and derivation in repr(shown)


def test_exercise_checks_hint_only_the_wrong_items():
    verdict = lesson05.check_ddp_bookkeeping((4, 256, 7500, 235))
    assert verdict.message.startswith("world size: you have 4; hint: DDP runs one process per GPU (section 6)")
    assert "global batch" not in verdict.message and "2 × 4 = 8" not in verdict.message


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
    assert words[0] == "srun" and "torchrun" in words
    srun = dict(w.split("=", 1) for w in words[:words.index("torchrun")] if "=" in w)
    assert srun["--cpus-per-task"] == "$SLURM_CPUS_PER_TASK", "srun inherits no --cpus-per-task from sbatch (22.05+)"
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


INPUTS = [[(r + 1) * (c + 1) for c in range(4)] for r in range(4)]  # the lesson's: rank r holds (r + 1)·[1, 2, 3, 4]


def test_collectives_leave_what_torch_distributed_documents():
    held = {name: [list(v) for v in lesson05.collective(name, INPUTS)] for name in lesson05.COLLECTIVES}
    assert held["broadcast"] == [[1, 2, 3, 4]] * 4
    assert held["reduce"][0] == [10, 20, 30, 40]
    assert np.isnan(held["reduce"][1:]).all()  # undefined off the root: gloo leaves partial sums there
    assert held["all_reduce"] == [[10, 20, 30, 40]] * 4
    assert held["reduce_scatter"] == [[10], [20], [30], [40]]
    assert held["all_gather"] == [sum(INPUTS, [])] * 4
    gathered = lesson05.collective("all_gather", lesson05.collective("reduce_scatter", INPUTS))
    assert [list(v) for v in gathered] == held["all_reduce"]  # all-reduce = reduce-scatter, then all-gather
    for bad, message in ((("gather", INPUTS), "unknown collective"), (("reduce", [[1, 2], [3]]), "same size"),
                         (("reduce_scatter", [[1, 2, 3]] * 2), "2 equal chunks")):
        with pytest.raises(ValueError, match=message):
            lesson05.collective(*bad)
    with pytest.raises(ValueError, match="root must be a rank"):
        lesson05.collective("broadcast", INPUTS, root=4)


@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_a_ring_all_reduce_sums_and_each_rank_sends_2_n_minus_1_over_n(world):
    inputs = np.random.default_rng(world).normal(size=(world, 3 * world))
    trace = lesson05.ring_all_reduce(inputs)
    for out in trace.outputs:
        np.testing.assert_allclose(out, inputs.sum(axis=0))
    assert trace.sent_elements == [2 * (world - 1) * 3] * world  # 2(N − 1) chunks of 3 elements: 2(N − 1)/N of 3N
    assert len(trace.sends) == 2 * (world - 1) and trace.contributions[-1] == [[world] * world] * world
    after_reduce_scatter = trace.contributions[world - 1]
    assert all(after_reduce_scatter[r][(r + 1) % world] == world for r in range(world))  # one whole sum per rank


def test_a_ring_needs_two_ranks_and_one_chunk_each():
    with pytest.raises(ValueError, match="a ring needs 2 or more ranks"):
        lesson05.ring_all_reduce([[1.0, 2.0]])
    with pytest.raises(ValueError, match="multiple of 2"):
        lesson05.ring_all_reduce([[1.0, 2.0, 3.0]] * 2)


def test_the_pictures_draw(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 5)
    lesson05.draw_collectives(INPUTS, axes)
    assert axes[1, 4].texts[0].get_text() == "10" and axes[0, 0].get_title() == "broadcast: before"
    fig2, ax = plt.subplots()
    lesson05.draw_ring_all_reduce(lesson05.ring_all_reduce(INPUTS), ax)
    assert [t.get_text() for t in ax.get_yticklabels()][-1] == "after all-gather 3"
    plt.close("all")


def ddp_starter(folder, *edits):
    """Exercise 5's DDP starter, from the notebook, with (old, new) edits applied."""
    return exercise_script(folder, "05_distributed_pytorch.ipynb", "c59-ddp-code", *edits)


DDP_EDITS = [
    ("from torch.utils.data import DataLoader, TensorDataset",
     "from torch.utils.data import DataLoader, DistributedSampler, TensorDataset"),
    ("    args = parser.parse_args()\n", "    args = parser.parse_args()\n    dist.init_process_group(\"gloo\")\n"),
    ("nn.Linear(64, 10))\n", "nn.Linear(64, 10))\n    model = nn.parallel.DistributedDataParallel(model)\n"),
    ("    report(args.out, model, seen, steps)\n",
     "    report(args.out, model, seen, steps)\n    dist.destroy_process_group()\n"),
]
SAMPLER_EDIT = ("loader = DataLoader(dataset, batch_size=64, shuffle=True)",
                "loader = DataLoader(dataset, batch_size=64 // dist.get_world_size(),\n"
                "                        sampler=DistributedSampler(dataset))")


def test_my_ddp_check_passes_a_ddp_script_with_the_global_batch_kept(tmp_path):
    verdict = lesson05.check_my_ddp(ddp_starter(tmp_path, *DDP_EDITS, SAMPLER_EDIT))
    assert verdict.correct, repr(verdict)  # a str: pytest shows it whole
    assert "each trained on 1024 of the 2048 examples (disjoint), 32 steps of 32 examples each" in repr(verdict)


def test_my_ddp_check_hints_at_the_sampler_when_every_process_sees_everything(tmp_path):
    verdict = lesson05.check_my_ddp(ddp_starter(tmp_path, *DDP_EDITS))
    assert not verdict.correct and "trained on 2048 of the same examples" in repr(verdict)
    assert "DistributedSampler" not in repr(verdict) and ASK_FOR_SOLUTION in repr(verdict)  # a hint, not the answer


def test_my_ddp_check_hints_at_a_report_after_the_group_is_destroyed(tmp_path):
    report_last = [(old, new) if "report(" not in old else
                   (old, "    dist.destroy_process_group()\n    report(args.out, model, seen, steps)\n")
                   for old, new in DDP_EDITS]
    verdict = lesson05.check_my_ddp(ddp_starter(tmp_path, *report_last, SAMPLER_EDIT))
    assert not verdict.correct and "ran after `dist.destroy_process_group()`" in repr(verdict)


def test_my_ddp_check_solution_and_missing_script(tmp_path):
    assert "64 // dist.get_world_size()" in repr(lesson05.check_my_ddp(tmp_path / "x.py", solution=True))
    with pytest.raises(FileNotFoundError, match="%%writefile"):
        lesson05.check_my_ddp(tmp_path / "missing.py")


BUCKETS = {"ready": {"2.bias": 1.0, "2.weight": 1.2, "1.0.bias": 4.0, "1.0.weight": 4.1, "0.0.bias": 8.0,
                     "0.0.weight": 8.2},
           "buckets": [{"index": 0, "start": 1.3, "end": 5.0, "parameters": ["2.bias", "2.weight"]},
                       {"index": 1, "start": 4.2, "end": 6.0, "parameters": ["1.0.bias", "1.0.weight"]},
                       {"index": 2, "start": 8.3, "end": 9.0, "parameters": ["0.0.bias", "0.0.weight"]}],
           "backward_ms": 9.5}


def test_the_bucket_timeline_counts_what_overlapped_the_backward_pass():
    import matplotlib.pyplot as plt

    timeline = lesson05.BucketTimeline.from_record(BUCKETS)
    assert timeline.last_gradient_ms == 8.2
    assert timeline.started_during_backward() == 2  # buckets 0 and 1 began before 8.2 ms; bucket 2 at 8.3
    hidden, total = timeline.overlapped_ms()
    # union of [1.3, 5.0] and [4.2, 6.0] = 4.7 ms, all before 8.2; plus [8.3, 9.0] = 0.7 ms, after
    assert hidden == pytest.approx(4.7) and total == pytest.approx(5.4)
    fig, ax = plt.subplots()
    lesson05.draw_bucket_timeline(timeline, ax)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["gradients\nready", "bucket 0", "bucket 1", "bucket 2"]
    assert len(ax.patches) == 3 and "layers 2" in [t.get_text() for t in ax.texts]
    plt.close(fig)


def test_the_data_parallel_picture_labels_each_step_with_the_run_s_shapes():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson05.draw_data_parallel((8, 4), [(4, 4), (4, 4)], [(4, 3), (4, 3)], (8, 3), ax)
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if t in lesson05.DATA_PARALLEL_STEPS] == list(lesson05.DATA_PARALLEL_STEPS)
    assert "batch\n(8, 4)\non device 0" in texts and "output\n(8, 3)\non device 0" in texts
    assert "chunk (4, 4)\ndevice 1" in texts and "thread 1: replica 1\n(chunk) → (4, 3)" in texts
    assert len(ax.patches) == 2 + 3 * 2 and any("reduce-add" in t for t in texts)  # batch, output; 3 boxes a device
    with pytest.raises(ValueError, match="one output per chunk"):
        lesson05.draw_data_parallel((8, 4), [(4, 4), (4, 4)], [(8, 3)], (8, 3), ax)
    plt.close(fig)


def test_the_ranks_picture_shows_what_each_rank_holds():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson05.draw_rank_tensors(INPUTS, ax, title="before")
    assert [t.get_text() for t in ax.texts][-4:] == ["4", "8", "12", "16"]  # rank 3 holds 4·[1, 2, 3, 4]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert ax.get_title() == "before" and len(ax.patches) == 16
    plt.close(fig)


# whoami.py's records of 2 nodes x 2 workers: rank = group rank x 2 + local rank; the agents are pids 100 and 200
LAUNCH = [{"RANK": 2 * g + k, "LOCAL_RANK": k, "GROUP_RANK": g, "WORLD_SIZE": 4, "LOCAL_WORLD_SIZE": 2,
           "pid": 100 * (g + 1) + k + 1, "parent_pid": 100 * (g + 1)} for g in range(2) for k in range(2)]


def test_the_launch_picture_puts_each_worker_under_its_node_s_agent():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson05.draw_launch(LAUNCH[::-1], ax)  # any order: drawn node by node
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if t.startswith("node")] == ["node 0 (GROUP_RANK = 0)", "node 1 (GROUP_RANK = 1)"]
    assert [t for t in texts if t.startswith("torchrun")] == ["torchrun agent\npid 100", "torchrun agent\npid 200"]
    assert "worker pid 202\nRANK = 3\nLOCAL_RANK = 1" in texts and texts.count("LOCAL_WORLD_SIZE = 2") == 2
    assert "rendezvous" in texts and ax.get_title().startswith("WORLD_SIZE = 4")
    assert len(ax.patches) == 2 * (1 + 1 + 2)  # a node: its box, its agent, 2 workers
    plt.close(fig)


@pytest.mark.parametrize("identities, problem", [
    (LAUNCH[:3], "WORLD_SIZE"),  # a worker missing
    ([{**LAUNCH[0], "parent_pid": 999}, *LAUNCH[1:]], "one agent"),  # node 0's workers from two parents
    ([{k: v for k, v in LAUNCH[0].items() if k != "pid"}, *LAUNCH[1:]], "each with"),
])
def test_the_launch_picture_refuses_records_of_no_launch(identities, problem):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match=problem):
        lesson05.draw_launch(identities, ax)
    plt.close(fig)


# pipeline.py's records of two ranks: rank 1 is the slower at m = 1 and 8, rank 0 at m = 2 and 4
PIPELINE_RANKS = [{"seconds_per_step": {"1": 0.30, "2": 0.36, "4": 0.25, "8": 0.10}},
                  {"seconds_per_step": {"1": 0.40, "2": 0.20, "4": 0.20, "8": 0.25}}]


def test_pipeline_times_take_the_slower_rank_and_compare_with_the_bubble_only_ideal():
    times = lesson05.PipelineTimes.from_ranks(PIPELINE_RANKS)
    assert times.seconds == {1: 0.40, 2: 0.36, 4: 0.25, 8: 0.25}
    assert times.ratio(8) == pytest.approx(0.625)  # 0.25 / 0.40
    assert times.ideal(8) == pytest.approx(9 / 16)  # (8 + 2 - 1) / (8 * 2)
    assert lesson05.PipelineTimes({1: 1.0}, stages=4).ideal(12) == pytest.approx(15 / 48)  # (12 + 3) / (12 * 4)
    rows = times.table().splitlines()
    assert len(rows) == 5 and rows[-1].split("|")[1:] == ["   250 ms ", "  0.62 ", "               0.56"]
    assert "0.90 at m = 2" in times.alt() and "to 0.56 at m = 8" in times.alt()  # 0.36 / 0.40
    with_share = times.table({"share": {1: "80%", 2: "7%", 4: "50%", 8: "41%"}}).splitlines()
    assert with_share[0].endswith("| share") and with_share[2].endswith("|    7%")  # right-aligned under its name


def test_pipeline_times_refuse_ranks_that_timed_different_micro_batch_counts():
    with pytest.raises(ValueError, match="same micro-batch counts"):
        lesson05.PipelineTimes.from_ranks([PIPELINE_RANKS[0], {"seconds_per_step": {"1": 0.4, "2": 0.2}}])


def test_the_pipeline_picture_draws_the_measured_points_against_the_ideal_curve():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson05.draw_pipeline_ratios(lesson05.PipelineTimes.from_ranks(PIPELINE_RANKS), ax)
    ideal, measured = ax.lines
    assert list(measured.get_ydata()) == pytest.approx([1.0, 0.9, 0.625, 0.625])
    assert ideal.get_ydata()[0] == pytest.approx(1.0) and ideal.get_ydata()[-1] == pytest.approx(9 / 16)
    assert [t.get_text() for t in ax.texts] == ["1.00", "0.90", "0.62", "0.62"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8"]
    plt.close(fig)
