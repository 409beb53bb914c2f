import pytest
import torch

from course_utils.device import best_device, device_name, environment_summary, gpu_count


def test_best_device_is_usable():
    device = best_device()
    assert torch.ones(1, device=device).device.type == device.type


def test_cpu_is_always_available():
    assert best_device("cpu") == torch.device("cpu")
    assert best_device(" CPU ") == torch.device("cpu")


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "tpu", "", 3])
def test_malformed_device_strings_are_rejected(bad):
    with pytest.raises(ValueError, match="Unknown device"):
        best_device(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_missing_gpu_is_explained():
    assert gpu_count() == 0
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        best_device("cuda")


def test_summary_names_versions_and_device():
    line = environment_summary("cpu")
    assert f"torch {torch.__version__}" in line and "device cpu" in line and "CPU threads" in line
    assert device_name("cpu")
