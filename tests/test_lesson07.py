"""Lesson 07 (quantization): the exercise checks and the helpers of course_utils.models."""

import warnings

import pytest
import torch
from torch import nn

from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.lessons import lesson07
from course_utils.lessons.lesson07 import changed_module_types, type_name
from course_utils.models import layer_costs, serialized_size

# --- exercise checks ---------------------------------------------------------------------------

CHECKS = [lesson07.check_qparams, lesson07.check_int8_bytes, lesson07.check_dynamic_converted]


@pytest.mark.parametrize("check", CHECKS)
def test_no_answer_asks_for_one(check):
    assert check(None) is NO_ANSWER


@pytest.mark.parametrize("check", CHECKS)
def test_solution_is_shown_only_when_asked(check):
    shown = check(None, solution=True)
    assert not shown and shown.is_solution and repr(shown).startswith("📖 Solution: ")


def test_qparams_right_and_wrong():
    lo, hi = lesson07.RANGE
    assert lesson07.check_qparams((2 / 255, 64)) and lesson07.check_qparams(((hi - lo) / 255, 64))
    verdict = lesson07.check_qparams((2 / 255, 63))
    assert not verdict and "zero_point: you have 63; hint: section 2's z" in repr(verdict)
    assert "scale:" not in repr(verdict) and "round(-0.5" not in repr(verdict) and ASK_FOR_SOLUTION in repr(verdict)
    verdict = lesson07.check_qparams((1 / 255, 64))
    assert "mind the sign of x_min" in repr(verdict) and "(x_max - x_min)" not in repr(verdict)
    shown = repr(lesson07.check_qparams((2 / 255, 63), solution=True))
    assert "(x_max - x_min) / (q_max - q_min)" in shown and "0 - round(-0.5 / 0.00784314) = 64" in shown


def test_int8_bytes_counts_the_qparams():
    assert lesson07.check_int8_bytes((512 * 256 * 4, 512 * 256 + 256 * 8 + 256 * 8))
    verdict = lesson07.check_int8_bytes((512 * 256 * 4, 512 * 256))  # forgot scales and zero points
    assert not verdict and "a scale and a zero point per output row" in repr(verdict)
    assert "fp32 bytes" not in repr(verdict) and "256 scales × 8 bytes" not in repr(verdict)
    assert "256 scales × 8 bytes" in repr(lesson07.check_int8_bytes((512 * 256 * 4, 512 * 256), solution=True))


def test_dynamic_converted_explains_the_convolutions():
    assert lesson07.check_dynamic_converted(2)
    verdict = lesson07.check_dynamic_converted(4)
    assert not verdict and "section 3 (ResNet-18)" in repr(verdict)
    assert "Conv2d layers are not in quantize_dynamic's default mapping" not in repr(verdict)
    shown = lesson07.check_dynamic_converted(None, solution=True)
    assert "Conv2d layers are not in quantize_dynamic's default mapping" in repr(shown)
    assert repr(shown).endswith(": 2 modules.")


def test_checks_do_not_leak_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lesson07.check_qparams((2 / 255, 64))
        lesson07.check_int8_bytes((1, 2))
        lesson07.check_dynamic_converted(2)
    assert not [w for w in caught if "deprecated" in str(w.message)]


# --- course_utils.models -----------------------------------------------------------------------

def test_serialized_size_depends_on_shapes_not_values():
    torch.manual_seed(0)
    a, b = nn.Linear(64, 32), nn.Linear(64, 32)
    nn.init.constant_(b.weight, 3.0)
    assert serialized_size(a) == serialized_size(b) > 64 * 32 * 4
    assert serialized_size(nn.Linear(128, 32)) - serialized_size(a) == 64 * 32 * 4
    with pytest.raises(TypeError, match="nn.Module"):
        serialized_size(torch.zeros(3))


def test_changed_module_types_lists_only_the_swapped_modules():
    before = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    after = nn.Sequential(nn.Linear(4, 4), nn.Identity(), nn.Linear(4, 2))
    assert changed_module_types(before, after) == {"1": ("nn.ReLU", "nn.Identity")}
    assert changed_module_types(before, before) == {}
    with pytest.raises(TypeError):
        changed_module_types(before, "not a module")


def test_serialized_size_of_a_quantized_model_is_a_quarter_plus_qparams():
    import torch.ao.quantization as tq

    model = nn.Sequential(nn.Linear(256, 256))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the eager API's deprecation notices
        quantized = tq.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    assert changed_module_types(model, quantized) == {"0": ("nn.Linear", "ao.nn.quantized.dynamic.Linear")}
    assert 0.25 < serialized_size(quantized) / serialized_size(model) < 0.3


def test_type_name_is_short_and_unambiguous():
    class Local(nn.Module):
        pass

    assert type_name(nn.Conv2d) == "nn.Conv2d" and type_name(Local) == Local.__qualname__
    assert type_name(torch.ao.nn.intrinsic.quantized.ConvReLU2d) == "ao.nn.intrinsic.quantized.ConvReLU2d"


def test_layer_costs_counts_weights_and_multiply_adds():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
    model.train()
    costs = layer_costs(model, torch.zeros(5, 1, 6, 6))
    assert costs == {"0": (2 * 9, 2 * 4 * 4 * 9), "2": (32 * 3, 32 * 3)} and model.training
    with pytest.raises(ValueError, match="no Conv2d or Linear"):
        layer_costs(nn.ReLU(), torch.zeros(1))
    with pytest.raises(TypeError):
        layer_costs(model, [1, 2])
