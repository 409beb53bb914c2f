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


def test_float_fields_come_from_finfo():
    # eps = 2^-M: fp32 2^-23, bf16 2^-7, e4m3 2^-3; exponent = bits - 1 - M
    assert lesson09.float_fields(torch.float32)[:3] == (32, 8, 23)
    assert lesson09.float_fields(torch.bfloat16)[:3] == (16, 8, 7)
    assert lesson09.float_fields(torch.float16)[:4] == (16, 5, 10, 65504.0)
    assert lesson09.float_fields(torch.float8_e4m3fn)[:4] == (8, 4, 3, 448.0)
    for bad in (torch.int32, "float16"):
        with pytest.raises(ValueError, match="floating-point torch.dtype"):
            lesson09.float_fields(bad)


def test_the_formats_picture_draws_each_bit_coloured_by_field():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson09.draw_float_formats([torch.float32, torch.float16, torch.bfloat16, torch.float8_e5m2], ax)
    assert len(ax.patches) == 32 + 16 + 16 + 8  # a box per bit
    assert [p.get_facecolor() for p in ax.patches[:2]] == [plt.matplotlib.colors.to_rgba(c)
                                                          for c in ("tab:red", "tab:blue")]
    texts = [t.get_text() for t in ax.texts]
    # per row: exponent and mantissa widths, then max, smallest normal, eps; the headers last
    assert texts[:5] == ["8", "23", "3.4e38", "1.18e-38", "$2^{-23}$"]
    assert texts[5:10] == ["5", "10", "65504", "6.1e-5", "$2^{-10}$"]
    assert texts[10:15] == ["8", "7", "3.39e38", "1.18e-38", "$2^{-7}$"]
    assert texts[15:] == ["5", "2", "57344", "6.1e-5", "$2^{-2}$", "max", "min normal", "eps"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["float32", "float16", "bfloat16", "float8_e5m2"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["sign", "exponent: range", "mantissa: precision"]
    with pytest.raises(ValueError, match="dtypes is empty"):
        lesson09.draw_float_formats([], ax)
    with pytest.raises(ValueError, match="floating-point"):
        lesson09.draw_float_formats([torch.int8], ax)
    plt.close(fig)


def test_the_lost_gradients_picture_shades_the_scales_that_lose_fewest():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lesson09.draw_gradients_lost([0, 8, 16], [(0.3, 0.0), (0.1, 0.05), (0.0, 0.2)], ax)
    zero, inf, total = ax.lines
    assert list(total.get_ydata()) == pytest.approx([0.3, 0.15, 0.2])  # the sums: 2^8 loses fewest
    assert [t.get_text() for t in ax.texts] == ["fewest lost: S = $2^{8}$"]
    assert len(ax.patches) == 1  # the shaded scales
    fig2, ax2 = plt.subplots()  # a flat minimum, as fp16 has from 2^6 to 2^15: a range, not the noise's pick
    lesson09.draw_gradients_lost([0, 4, 8, 12], [(0.3, 0.0), (0.18, 0.0), (0.1, 0.079), (0.0, 0.25)], ax2)
    assert [t.get_text() for t in ax2.texts] == ["fewest lost: S = $2^{4}$ to $2^{8}$"]
    with pytest.raises(ValueError, match="increasing order"):
        lesson09.draw_gradients_lost([8, 0], [(0.1, 0.0), (0.3, 0.0)], ax2)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["flushed to 0", "overflow to inf", "lost in all"]
    with pytest.raises(ValueError, match="one \\(zero, inf\\) pair per scale"):
        lesson09.draw_gradients_lost([0, 8], [(0.3, 0.0)], ax)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        lesson09.draw_gradients_lost([0], [(30.0, 0.0)], ax)
    plt.close("all")


def test_the_loss_scale_picture_counts_clean_steps_and_marks_skips():
    import matplotlib.pyplot as plt

    # the notebook's run: init 16, growth_interval 3, inf at steps 4 and 5
    scales = [16, 16, 16, 32, 32, 16, 8, 8, 8, 16]
    skipped = [False] * 4 + [True, True] + [False] * 4
    fig, ax = plt.subplots()
    lesson09.draw_loss_scale(scales, skipped, ax, growth_interval=3)
    texts = [t.get_text() for t in ax.texts]
    # a number per clean step (its place in the run), "skip" per inf, and ×2 / ×½ where the scale changed
    assert texts == ["1", "2", "3", "1", "×2", "skip", "skip", "×½", "1", "×½", "2", "3", "1", "×2"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["8", "16", "32"]
    assert ax.get_yscale() == "log" and "×2 after 3 clean steps" in ax.get_title()
    with pytest.raises(ValueError, match="one skipped flag per step"):
        lesson09.draw_loss_scale(scales, skipped[:-1], ax, growth_interval=3)
    with pytest.raises(ValueError, match="growth_interval at least 1"):
        lesson09.draw_loss_scale(scales, skipped, ax, growth_interval=0)
    plt.close(fig)
