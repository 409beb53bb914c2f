"""Lesson 12: the exercise checks (ZeRO memory, accumulation and all-reduces, FSDP's shard rows, a plan, an FSDP2
script launched for real) and the pictures."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from conftest import exercise_script
from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.lessons import lesson12


def test_no_answer_is_not_an_error():
    assert lesson12.check_zero_memory(None) is NO_ANSWER
    assert lesson12.check_accumulation(None) is NO_ANSWER
    assert lesson12.check_shard_rows(None) is NO_ANSWER


def test_zero_memory_matches_the_paper_and_the_exercise():
    # ZeRO, figure 1: 7.5 B parameters on 64 GPUs, K = 12.
    assert lesson12.check_zero_memory([120, 31.4, 16.6, 1.88], parameters=7.5e9, ranks=64)
    assert lesson12.check_zero_memory([24, 8.25, 5.625, 3])  # 1.5 B on 8 GPUs
    verdict = lesson12.check_zero_memory([24, 8.25, 5.625, 24])
    assert not verdict and "ZeRO-3: you have 24; hint: ZeRO-3 splits the weights too" in repr(verdict)
    assert "ZeRO-1" not in repr(verdict) and "/ 8" not in repr(verdict)  # only the wrong item; no derivation
    assert repr(verdict).endswith(ASK_FOR_SOLUTION)
    for answer in (None, [24, 8.25, 5.625, 24], [24, 8.25, 5.625, 3]):
        shown = lesson12.check_zero_memory(answer, solution=True)
        assert shown.is_solution and "ZeRO-3: and the weights: (2 + 2 + 12) × 1.5 / 8 = 3 GB" in repr(shown)


def test_accumulation():
    assert lesson12.check_accumulation([8, 8, 1])
    verdict = lesson12.check_accumulation([8, 8, 8])
    assert not verdict and "no_sync is on for every micro-step but the last" in repr(verdict)
    assert "micro-steps: you have" not in repr(verdict) and "accumulate locally" not in repr(verdict)
    shown = lesson12.check_accumulation(None, solution=True)
    assert shown.is_solution and "512 / 64 = 8" in repr(shown) and "all-reduces their sum: 1" in repr(shown)
    assert lesson12.check_accumulation([2, 2, 1], global_batch=64, micro_batch=16, ranks=2)
    with pytest.raises(ValueError, match="multiple"):
        lesson12.check_accumulation([1, 1, 1], global_batch=100, micro_batch=16, ranks=4)


def test_shard_rows_follow_torch_chunk():
    assert lesson12.shard_rows(300, 8) == [38] * 7 + [34]
    assert lesson12.shard_rows(1024, 2) == [512, 512]
    assert lesson12.shard_rows(10, 8) == [2, 2, 2, 2, 2, 0, 0, 0]  # 5 chunks of 2: the last ranks hold none
    assert lesson12.check_shard_rows([38, 34])
    verdict = lesson12.check_shard_rows([2, 0], rows=10, ranks=8)
    assert verdict and not lesson12.check_shard_rows([2, 2], rows=10, ranks=8)
    verdict = lesson12.check_shard_rows([2, 2], rows=10, ranks=8)
    assert "what is left for rank 7?" in repr(verdict) and "holds none" not in repr(verdict)
    assert "holds none" in repr(lesson12.check_shard_rows([2, 2], rows=10, ranks=8, solution=True))
    verdict = lesson12.check_shard_rows([37, 34])
    assert "how large does torch.chunk make its chunks" in repr(verdict) and "ceil(" not in repr(verdict)
    shown = lesson12.check_shard_rows(None, solution=True)
    assert shown.is_solution and "ceil(300 / 8) = 38" in repr(shown) and "300 - 7 × 38 = 34 rows" in repr(shown)
    with pytest.raises(ValueError):
        lesson12.shard_rows(0, 2)


def test_reshard_files_are_the_saved_shards_a_rank_overlaps():
    assert lesson12.check_reshard_files([1, 2])  # rows 334-667 of 1000 lie in files 1 (250-499) and 2 (500-749)
    assert lesson12.check_reshard_files([0, 1], rank=0) and lesson12.check_reshard_files([2, 3], rank=2)
    assert lesson12.check_reshard_files([0, 0], rows=1024, saved_ranks=2, loading_ranks=3, rank=0)
    verdict = lesson12.check_reshard_files([1, 3])
    assert not verdict and "last file: you have 3" in repr(verdict) and "334" not in repr(verdict)
    assert lesson12.check_reshard_files(None) is NO_ANSWER
    shown = lesson12.check_reshard_files(None, solution=True)
    assert shown.is_solution and "rank 1 of 3 needs rows 334–667" in repr(shown) and "reads 2 file(s)" in repr(shown)
    with pytest.raises(ValueError, match="rank must be in 0..2"):
        lesson12.check_reshard_files([1, 2], rank=3)


def test_allocated_peak_sees_the_allocations_of_a_block():
    def two_temporaries():
        a = torch.empty(1024, dtype=torch.float32)  # 4,096 B
        b = torch.empty(2048, dtype=torch.float32)  # 8,192 B, both alive at once: 12,288 B
        del a, b
        torch.empty(256, dtype=torch.float32)       # 1,024 B once they are freed

    assert lesson12.allocated_peak(two_temporaries) == 12_288
    assert lesson12.allocated_peak(lambda: None) == 0


def test_memory_timeline_sorts_a_step_by_kind():
    from torch import nn
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = nn.Linear(256, 128)                      # 256 * 128 + 128 = 32,896 parameters: 131,584 B
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 256)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        model(x).square().mean().backward()
        optimizer.step()
    ms, by_kind = lesson12.memory_timeline(prof)
    assert list(by_kind) == list(lesson12.TIMELINE_CATEGORIES)
    assert len(ms) == len(by_kind["gradients"]) and ms[0] == 0 and (ms[1:] >= ms[:-1]).all()
    assert by_kind["parameters"].max() == 131_584 and by_kind["gradients"].max() == 131_584


def test_count_ops_counts_what_runs():
    x = torch.ones(4, requires_grad=True)
    with lesson12.count_ops() as ops:
        (x * 2).relu().sum().backward()
    assert ops["mul"] >= 1 and ops["relu"] == 1 and ops["sum"] == 1 and ops["threshold_backward"] == 1


def test_zero_stages_divide_what_they_shard():
    held = [lesson12.zero_bytes_per_parameter(stage, 4) for stage in range(4)]
    assert [sum(h.values()) for h in held] == [16, 7, 5.5, 4]  # (2 + 2 + K), then K, K + 2, K + 4 split by 4
    assert held[2] == {"parameters": 2, "gradients": 0.5, "optimizer state": 3}
    with pytest.raises(ValueError, match="stage is 0"):
        lesson12.zero_bytes_per_parameter(4, 4)


@pytest.mark.parametrize(("reshard", "gathers"), [(True, 8), (None, 7), (False, 4)])
def test_the_fsdp_schedule_has_the_collectives_the_script_counts(reshard, gathers):
    schedule = lesson12.fsdp_schedule(3, reshard)
    counts = Counter(event for _, event in schedule)
    assert (counts["all-gather"], counts["reduce-scatter"]) == (gathers, 4)  # the lesson's 3 blocks + root, measured
    assert counts["forward"] == counts["backward"] == 4
    assert counts["free"] == gathers  # after a resharded forward, and after every backward (FSDP2's post-backward)
    for unit in ("block 1", "root"):  # a unit is gathered before it computes, and reduce-scattered after its backward
        events = [event for u, event in schedule if u == unit]
        assert events[0] == "all-gather" and events[-1] == "reduce-scatter"
    with pytest.raises(ValueError, match="at least 1"):
        lesson12.fsdp_schedule(0, True)


def test_accumulation_schedule_syncs_every_micro_batch_or_the_last():
    assert lesson12.accumulation_schedule(3, 2, no_sync=False) == ["F+B", "AR", "AR"] * 3
    assert lesson12.accumulation_schedule(3, 2, no_sync=True) == ["F+B", "F+B", "F+B", "AR", "AR"]
    with pytest.raises(ValueError, match="at least one micro-batch"):
        lesson12.accumulation_schedule(0, 2, no_sync=True)


def test_a_resharded_load_reads_the_files_that_hold_its_rows():
    assert lesson12.shard_spans(1024, 3) == [(0, 342), (342, 684), (684, 1024)]
    assert lesson12.files_read(1024, 2, 3) == [[0], [0, 1], [1]]
    assert lesson12.files_read(1024, 2, 1) == [[0, 1]] and lesson12.files_read(10, 4, 2) == [[0, 1], [1, 2, 3]]


def test_the_pictures_draw():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson12.draw_zero_stages(ax)
    assert [t.get_text() for t in ax.texts] == [f"{b:g} B on each rank" for b in (16, 7, 5.5, 4)]
    fig, ax = plt.subplots()
    lesson12.draw_fsdp_schedule(lesson12.fsdp_schedule(3, True), ax, "ZeRO-3")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["block 1", "block 2", "block 3", "root"]
    assert sum(t.get_text() == "AG" for t in ax.texts) == 8
    fig, ax = plt.subplots()
    lesson12.draw_fsdp_schedule(lesson12.fsdp_schedule(1, False), ax, "ZeRO-2", root_label="root: the head")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["block 1", "root: the head"]
    lesson12.fsdp_schedule_legend(ax)
    assert [t.get_text()[:3] for t in ax.get_legend().get_texts()] == ["AG:", "F: ", "B: ", "fre", "RS:"]
    fig, ax = plt.subplots()
    lesson12.draw_resharding(ax, 1024, 2, 3)
    assert [t.get_text().split("\n")[0] for t in ax.texts] == ["__0_0.distcp", "__1_0.distcp", "saved by 2 ranks",
                                                               "rank 0", "rank 1", "rank 2", "loaded by 3 ranks"]
    fig, ax = plt.subplots()
    lesson12.draw_accumulation(ax, micro_batches=4, buckets=2)
    labels = [t.get_text() for t in ax.texts]
    assert labels.count("AR") == 8 + 2 and [x for x in labels if x != "AR"] == [f"F+B {i}" for i in (1, 2, 3, 4)] * 2
    fig, ax = plt.subplots()
    lesson12.draw_recomputation({"none": [1, 1, 1], "every block": [2, 2, 2]}, ax, {"every block": [0, 1, 2]})
    assert [t.get_text() for t in ax.texts] == ["1"] * 3 + ["2"] * 3
    assert [len(c.get_offsets()) for c in ax.collections] == [0, 3]  # a triangle on each kept input
    with pytest.raises(ValueError, match="keeps the input of a block it recomputes"):
        lesson12.draw_recomputation({"none": [1, 1]}, ax, {"none": [0]})
    with pytest.raises(ValueError, match="ran 3 times"):
        lesson12.draw_recomputation({"none": [1, 3]}, ax)
    with pytest.raises(ValueError, match="differ in length"):
        lesson12.draw_recomputation({"none": [1, 1], "every block": [2]}, ax)
    plt.close("all")


def test_memory_plan_check_weighs_fit_and_extra_work():
    plans = lesson12.memory_plans()
    assert plans[0, False][0] == pytest.approx(152) and plans[2, False] == (pytest.approx(66.25), [])
    assert lesson12.check_memory_plan((2, False)).correct  # 66.25 GB of the 72 kept for the counts
    assert "does not fit in 72 GB (80 GB less 10%)" in repr(lesson12.check_memory_plan((1, False)))  # 78.5 GB
    assert all(lesson12.check_memory_plan((stage, False), headroom=0).correct for stage in (1, 2))  # both fit 80 GB
    with pytest.raises(ValueError, match="headroom"):
        lesson12.check_memory_plan((2, False), headroom=1)
    for wrong, says in [((1, False), "does not fit"), ((3, False), "half again"), ((1, True), "second forward")]:
        verdict = repr(lesson12.check_memory_plan(wrong))
        assert says in verdict and ASK_FOR_SOLUTION in verdict and "ZeRO-2" not in verdict
    assert lesson12.check_memory_plan(None) == NO_ANSWER
    assert "not (2, 'yes')" in repr(lesson12.check_memory_plan((2, "yes")))
    assert "the plan to take is ZeRO-2" in repr(lesson12.check_memory_plan(None, solution=True))


def test_one_colour_per_kind_of_memory():
    assert len(set(lesson12.MEMORY_COLORS.values())) == len(lesson12.MEMORY_COLORS)
    assert set(lesson12.TIMELINE_CATEGORIES) == set(lesson12.MEMORY_COLORS)  # every kind the profiler reports
    with pytest.raises(KeyError, match="no colour for 'biases'"):
        lesson12.memory_color("biases")


def test_the_timeline_peak_and_its_picture():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = np.array([0.0, 1.0, 2.0])
    by_kind = {"parameters": np.array([8, 8, 8]), "activations": np.array([0, 4096, 0]),
               "gradients": np.array([0, 0, 8]), "unknown": np.array([0, 0, 0])}
    assert lesson12.timeline_peak(by_kind) == {"parameters": 8, "activations": 4096}
    fig, ax = plt.subplots()
    lesson12.draw_memory_timeline(ms, by_kind, ax, min_bytes=8)
    assert [c.get_label() for c in ax.collections] == ["parameters", "activations", "gradients"]  # not "unknown"
    assert ax.lines[0].get_xdata()[0] == 1.0                                                       # the peak, dotted
    plt.close("all")


@pytest.mark.parametrize("units, gather, compute", [(4, 1.0, 1.0), (3, 1.0, 2.0), (5, 2.0, 1.0), (1, 1.0, 1.0)])
def test_prefetching_overlaps_each_all_gather_with_the_previous_forward(units, gather, compute):
    plain = lesson12.prefetch_timeline(units, gather, compute, prefetch=False)
    ahead = lesson12.prefetch_timeline(units, gather, compute, prefetch=True)
    assert max(end for *_, end in plain) == units * (gather + compute)              # strictly in turn
    assert max(end for *_, end in ahead) == gather + compute + (units - 1) * max(gather, compute)  # the shorter hidden
    for timeline in (plain, ahead):
        forwards = sorted((start, end, unit) for stream, unit, start, end in timeline if stream == "compute")
        gathers = {unit: end for stream, unit, _, end in timeline if stream == "communication"}
        assert [u for *_, u in forwards] == list(range(units))                      # the units in order
        assert all(start >= gathers[unit] for start, _, unit in forwards)            # each after its own all-gather
    assert lesson12.units_gathered_at_once(plain) == 1
    assert lesson12.units_gathered_at_once(ahead) == min(2, units)                   # the price: memory


def test_prefetch_timeline_refuses_what_has_no_schedule():
    with pytest.raises(ValueError, match="at least one unit"):
        lesson12.prefetch_timeline(0, 1.0, 1.0, prefetch=True)
    with pytest.raises(ValueError, match="positive durations"):
        lesson12.prefetch_timeline(2, 0.0, 1.0, prefetch=False)


def test_draw_prefetch_draws_both_schedules():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson12.draw_prefetch(ax, units=4, gather=1.0, compute=1.0)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["no prefetch: communication", "no prefetch: compute", "prefetch: communication",
                      "prefetch: compute"]
    assert {t.get_text() for t in ax.texts} >= {"AG 1", "F 4", "done at 8", "done at 5"}
    plt.close(fig)


def fsdp_starter(folder, *edits):
    """Exercise 5's FSDP2 starter (a DDP script), from the notebook, with (old, new) edits applied."""
    return exercise_script(folder, "12_memory_sharding.ipynb", "c12-ex5-code", *edits)


SHARD = ("    model = DDP(model)\n",
         "    for block in (model[1], model[2]):\n        fully_shard(block)\n    fully_shard(model)\n")
IMPORT = ("from torch.distributed.fsdp import FSDPModule", "from torch.distributed.fsdp import FSDPModule, fully_shard")
OPTIMIZER_FIRST = "    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n"


def test_my_fsdp_check_passes_fsdp2_with_the_optimizer_built_after_sharding(tmp_path, real_data_root):
    moved = (OPTIMIZER_FIRST + SHARD[0], SHARD[1] + OPTIMIZER_FIRST)
    verdict = lesson12.check_my_fsdp(fsdp_starter(tmp_path, IMPORT, moved))
    assert verdict.correct, repr(verdict)  # a str: pytest shows it whole
    assert "6 parameters sharded in 3 units" in repr(verdict) and "holds 134,661 of the 269,322" in repr(verdict)


def test_my_fsdp_check_hints_when_the_optimizer_holds_the_unsharded_parameters(tmp_path, real_data_root):
    verdict = lesson12.check_my_fsdp(fsdp_starter(tmp_path, IMPORT, SHARD))
    assert not verdict.correct and "did not learn" in repr(verdict) and "fully_shard` do to" in repr(verdict)
    assert "after" not in repr(verdict)  # a hint, not the answer
    assert "*after* `fully_shard`" in repr(lesson12.check_my_fsdp(tmp_path / "x.py", solution=True))
    with pytest.raises(FileNotFoundError, match="%%writefile"):
        lesson12.check_my_fsdp(tmp_path / "missing.py")
