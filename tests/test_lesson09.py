"""Lesson 09: the mixed precision helpers and the exercise checks."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.hardware import detect
from course_utils.lessons import lesson09
from course_utils.lessons.lesson09 import fast_low_precision_dtype, peak_memory_bytes


def test_cpu_without_native_bf16_gets_no_dtype():
    dtype, reason = fast_low_precision_dtype("cpu", replace(detect(), onednn_bf16=False))
    assert dtype is None and "no native bf16" in reason


def test_cpu_with_native_bf16_gets_bfloat16():
    assert fast_low_precision_dtype(torch.device("cpu"), replace(detect(), onednn_bf16=True)).dtype is torch.bfloat16


@pytest.mark.parametrize(("capability", "dtype"), [((9, 0), torch.float16), ((7, 0), torch.float16), ((6, 1), None)])
def test_cuda_needs_tensor_cores(capability, dtype):
    choice = fast_low_precision_dtype("cuda", replace(detect(), gpus=("Test GPU",), gpu_capability=capability))
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


def test_loss_scale_check():
    # fp16's smallest subnormal is 2^-24 ≈ 5.96e-8: 1e-9·32 = 3.2e-8 rounds up to it, 1e-9·16 = 1.6e-8 to zero.
    assert lesson09.smallest_fp16_loss_scale(1e-9) == 32
    assert lesson09.smallest_fp16_loss_scale(2**-24) == 1
    assert lesson09.check_loss_scale(None, gradient=1e-9) is NO_ANSWER
    assert lesson09.check_loss_scale(32, gradient=1e-9)
    verdict = lesson09.check_loss_scale(16, gradient=1e-9)
    assert not verdict and "the threshold is not the subnormal itself" in repr(verdict)
    assert "half of that" not in repr(verdict) and "S = 32" not in repr(verdict) and ASK_FOR_SOLUTION in repr(verdict)
    for answer in (None, 16, 32):
        shown = lesson09.check_loss_scale(answer, gradient=1e-9, solution=True)
        assert not shown and shown.is_solution and "half of that" in repr(shown)
        assert repr(shown).endswith("first does so at S = 32.")
    with pytest.raises(ValueError):
        lesson09.smallest_fp16_loss_scale(2.0)


SCHEDULE = {"init_scale": 1024, "growth_interval": 2, "steps": 10}


def test_scaler_schedule_check():
    # 0,1 finite: 2048; 2,3 inf: 1024, 512; 4,5: 1024; 6,7: 2048; 8,9: 4096. Only the two inf steps are skipped.
    assert lesson09.scaler_schedule(**SCHEDULE, inf_steps=(2, 3)) == (4096, 2)
    assert lesson09.scaler_schedule(**SCHEDULE, inf_steps=()) == (1024 * 2**5, 0)
    assert lesson09.scaler_schedule(**SCHEDULE, inf_steps=(9,)) == (8192, 1)  # 4 doublings by step 7, halved at 9
    assert lesson09.check_scaler_schedule(None, **SCHEDULE, inf_steps=(2, 3)) is NO_ANSWER
    assert lesson09.check_scaler_schedule((4096, 2), **SCHEDULE, inf_steps=(2, 3))
    verdict = lesson09.check_scaler_schedule((1024, 2), **SCHEDULE, inf_steps=(2, 3))
    assert not verdict and "final scale: you have 1024; hint: follow the scale step by step" in repr(verdict)
    assert "skipped steps" not in repr(verdict) and "halves the scale" not in repr(verdict)
    verdict = lesson09.check_scaler_schedule((4096, 0), **SCHEDULE, inf_steps=(2, 3))
    assert not verdict and "which steps scaler.step(optimizer) skips" in repr(verdict)
    shown = lesson09.check_scaler_schedule(None, **SCHEDULE, inf_steps=(2, 3), solution=True)
    assert shown.is_solution and "halves the scale" in repr(shown)
    assert "it is 1024, 2048, 1024, 512, 512, 1024, 1024, 2048, 2048, 4096, so it ends at 4096" in repr(shown)
    assert repr(shown).endswith("the others update the weight: 2.")
