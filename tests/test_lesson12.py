"""Lesson 12: the exercise checks (ZeRO memory, accumulation and all-reduces, FSDP's shard rows)."""

from __future__ import annotations

import pytest
import torch

from course_utils.checks import NO_ANSWER
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
    assert not verdict and "ZeRO-3" in repr(verdict) and "/ 8" in repr(verdict)


def test_accumulation():
    assert lesson12.check_accumulation([8, 8, 1])
    assert not lesson12.check_accumulation([8, 8, 8])
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
    assert "holds none" in repr(lesson12.check_shard_rows([2, 2], rows=10, ranks=8))
    with pytest.raises(ValueError):
        lesson12.shard_rows(0, 2)


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
