"""Lesson 09: the mixed precision helpers and the exercise checks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils import precision
from course_utils.checks import NO_ANSWER
from course_utils.exercises import lesson09
from course_utils.precision import fast_low_precision_dtype, format_bytes, peak_memory_bytes


def test_cpu_without_native_bf16_gets_no_dtype(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: False)
    dtype, reason = fast_low_precision_dtype("cpu")
    assert dtype is None and "no native bf16" in reason


def test_cpu_with_native_bf16_gets_bfloat16(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: True)
    assert fast_low_precision_dtype(torch.device("cpu")).dtype is torch.bfloat16


@pytest.mark.parametrize(("capability", "dtype"), [((9, 0), torch.float16), ((7, 0), torch.float16), ((6, 1), None)])
def test_cuda_needs_tensor_cores(monkeypatch, capability, dtype):
    monkeypatch.setattr(precision, "_cuda_capability", lambda device: capability)
    choice = fast_low_precision_dtype("cuda")
    assert choice.dtype is dtype and f"{capability[0]}.{capability[1]}" in choice.reason


def test_other_devices_and_bad_input():
    assert fast_low_precision_dtype("mps").dtype is None
    with pytest.raises(ValueError, match="device must be"):
        fast_low_precision_dtype("not-a-device")


def test_the_real_cpu_answer_matches_onednn():
    dtype, reason = fast_low_precision_dtype("cpu")
    assert (dtype is torch.bfloat16) == bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()) and reason


def test_peak_counts_live_tensors_only():
    def fn():
        a = torch.ones(1000)      # 4000 bytes
        b = a * 2                 # 8000 bytes live: the peak
        del a
        return b * 2              # a was freed: 8000 again, not 12000

    assert peak_memory_bytes(fn) == 8000


def test_peak_ignores_views_and_in_place_ops():
    x = torch.zeros(100, dtype=torch.float64)

    def fn():
        x.add_(1)
        return x.view(10, 10)[0]

    assert peak_memory_bytes(fn) == 0
    assert peak_memory_bytes(lambda: torch.empty(10, dtype=torch.float16)) == 20


def test_peak_of_a_training_step_includes_gradients():
    model = nn.Linear(100, 10)
    x = torch.randn(8, 100)

    def step():
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert peak_memory_bytes(step) >= param_bytes


def test_peak_validates_fn():
    with pytest.raises(TypeError, match="callable"):
        peak_memory_bytes(42)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 2**20) == "3 MiB"
    assert format_bytes(1.5 * 2**30) == "1.5 GiB"


def test_loss_scale_check():
    expected = lesson09.smallest_fp16_loss_scale()
    assert torch.tensor(lesson09.TINY_GRADIENT * expected, dtype=torch.float16).item() != 0
    assert torch.tensor(lesson09.TINY_GRADIENT * expected / 2, dtype=torch.float16).item() == 0
    assert lesson09.check_loss_scale(None) is NO_ANSWER
    assert lesson09.check_loss_scale(expected)
    verdict = lesson09.check_loss_scale(expected / 2)
    assert not verdict and "half of that" in repr(verdict)
    with pytest.raises(ValueError):
        lesson09.smallest_fp16_loss_scale(2.0)


def test_scaler_schedule_check():
    scale, skipped = lesson09.scaler_schedule()
    assert skipped == len(lesson09.SCALER_INF_STEPS)
    assert lesson09.scaler_schedule(inf_steps=()) == (lesson09.SCALER_INIT * 2 ** (lesson09.SCALER_STEPS // 2), 0)
    assert lesson09.check_scaler_schedule(None) is NO_ANSWER
    assert lesson09.check_scaler_schedule((scale, skipped))
    verdict = lesson09.check_scaler_schedule((lesson09.SCALER_INIT, skipped))
    assert not verdict and "halves the scale" in repr(verdict)
    assert not lesson09.check_scaler_schedule((scale, 0))
