"""The hardware facts behind the lessons' claims, for this machine and for made-up ones."""

import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch

from course_utils import hardware
from course_utils.hardware import AVX2_ONLY_ENV, CoreCapacity, CpuLoad, Hardware, core_capacity, cpu_load

AVX2_MACHINE = Hardware(isa="AVX2", bf16_flags=(), int8_flags=(), onednn_bf16=False, onednn_cap=None, fbgemm_cap=None,
                        tf_onednn=False, quantized_engine="x86", usable_cores=2, gpus=(), gpu_capability=None)
SAPPHIRE_RAPIDS = Hardware(isa="AVX512", bf16_flags=("avx512_bf16", "amx_bf16"), int8_flags=("avx512_vnni", "amx_int8"),
                           onednn_bf16=True, onednn_cap=None, fbgemm_cap=None, tf_onednn=True, quantized_engine="x86",
                           usable_cores=8, gpus=("Test GPU",), gpu_capability=(9, 0))


def test_this_machine_is_described_from_what_torch_reports():
    hw = hardware.detect()
    assert hw.isa == torch.backends.cpu.get_cpu_capability()
    assert hw.onednn_bf16 == torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert 1 <= hw.usable_cores <= os.cpu_count()
    assert hw.quantized_engine in torch.backends.quantized.supported_engines
    assert ("bf16 native" if hw.onednn_bf16 else "bf16 emulated") in hw.summary()
    assert hw.native_bf16.holds != hw.emulated_bf16.holds


def test_made_up_machines_read_as_their_facts():
    assert AVX2_MACHINE.summary() == ("CPU AVX2 · bf16 emulated (CPU kernels AVX2) · int8 engine x86 without int8 "
                                      "dot-product instructions · 2 usable cores · no CUDA GPU")
    assert SAPPHIRE_RAPIDS.summary() == ("CPU AVX512 · bf16 native (avx512_bf16, amx_bf16) · int8 engine x86 with "
                                         "avx512_vnni, amx_int8 · 8 usable cores · 1 CUDA GPU(s), Test GPU (compute "
                                         "capability 9.0)")
    assert AVX2_MACHINE.emulated_bf16 and not AVX2_MACHINE.native_bf16 and not AVX2_MACHINE.tf_native_bf16
    assert SAPPHIRE_RAPIDS.native_bf16 and SAPPHIRE_RAPIDS.tf_native_bf16
    assert AVX2_MACHINE.cores(2) and not AVX2_MACHINE.cores(3) and AVX2_MACHINE.x86_int8


def test_tensor_cores_follow_the_compute_capability():
    t4 = replace(SAPPHIRE_RAPIDS, gpus=("Tesla T4",), gpu_capability=(7, 5))
    pascal = replace(SAPPHIRE_RAPIDS, gpus=("Tesla P100",), gpu_capability=(6, 0))
    assert t4.fp16_tensor_cores.holds and SAPPHIRE_RAPIDS.fp16_tensor_cores.holds
    assert not pascal.fp16_tensor_cores.holds and not AVX2_MACHINE.fp16_tensor_cores.holds
    assert AVX2_MACHINE.fp16_tensor_cores.here == "no CUDA GPU" and "7.5" in t4.fp16_tensor_cores.here


def test_a_onednn_cap_is_named_and_tensorflow_follows_its_own_switch():
    capped = replace(SAPPHIRE_RAPIDS, onednn_bf16=False, onednn_cap="AVX2", tf_onednn=False)
    assert capped.emulated_bf16.here == "bf16 emulated (CPU kernels AVX512, oneDNN capped at AVX2)"
    assert not capped.tf_native_bf16
    assert capped.tf_emulated_bf16.here == "TensorFlow oneDNN off, CPU bf16 avx512_bf16, amx_bf16"


def test_the_int8_engine_can_be_chosen(monkeypatch):
    monkeypatch.setenv(hardware.ENGINE_ENV, "QNNPACK")  # the ARM engine, which x86 builds also have
    assert hardware.quantized_engine() == "qnnpack"
    monkeypatch.setenv(hardware.ENGINE_ENV, "tpu")
    with pytest.raises(ValueError, match="COURSE_QUANTIZED_ENGINE='tpu' is not an int8 engine of this PyTorch build"):
        hardware.quantized_engine()
    monkeypatch.delenv(hardware.ENGINE_ENV)
    assert hardware.quantized_engine() == next(e for e in hardware.QUANTIZED_ENGINES
                                               if e in torch.backends.quantized.supported_engines)


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="TensorFlow's Linux x86 default")
def test_tensorflow_uses_onednn_by_default_only_on_cpus_with_neural_network_features(monkeypatch):
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    assert not hardware._tf_onednn_enabled({"avx2", "fma"})  # an AVX2-only CPU: Eigen kernels
    assert hardware._tf_onednn_enabled({"avx2", "avx512f", "avx512_vnni"})
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    assert not hardware._tf_onednn_enabled({"avx512_bf16"})
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    assert hardware._tf_onednn_enabled({"avx2"})


def test_cores_must_be_positive():
    with pytest.raises(ValueError, match="positive number of cores"):
        AVX2_MACHINE.cores(0)


def _in_a_child(code: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> str:
    result = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, **(env or {})}, check=True)
    return result.stdout.strip()


def test_the_avx2_simulation_turns_native_bf16_off():
    """On any x86 CPU, AVX2_ONLY_ENV makes PyTorch behave as on an AVX2-only one (a no-op where it already is)."""
    if hardware.detect().quantized_engine not in ("x86", "fbgemm"):
        pytest.skip("the simulation caps x86 instruction sets")
    out = _in_a_child("from course_utils import hardware as h; d = h.detect(); print(d.onednn_bf16, d.isa)",
                      AVX2_ONLY_ENV)
    assert out == "False AVX2"


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is a Linux feature")
def test_usable_cores_follow_the_cpu_affinity():
    assert _in_a_child("from course_utils.hardware import usable_cores; print(usable_cores())",
                       prefix=("taskset", "-c", "0")) == "1"


BUSY = "import time\nt = time.time()\nwhile time.time() - t < {}: pass"


def test_cpu_load_counts_other_processes_but_not_our_own_children():
    with cpu_load() as own:
        subprocess.run([sys.executable, "-c", BUSY.format(1.0)], check=True)  # our child: our own work
    assert own.other_cores < 0.5, own
    # An orphan (its parent, the shell, exits at once) is another process: its work is other load.
    subprocess.run(["sh", "-c", f"{sys.executable} -c '{BUSY.format(2.5)}' >/dev/null 2>&1 &"], check=True)
    time.sleep(0.3)
    with cpu_load() as other:
        time.sleep(1.5)
    assert other.other_cores > 0.6, other
    spare = other.spare(other.usable_cores)
    assert not spare and "used by other processes" in spare.here
    assert not other.quiet and own.quiet


def test_the_load_is_known_only_after_the_block():
    with cpu_load() as load:
        with pytest.raises(RuntimeError, match="once the `with cpu_load\\(\\)` block has ended"):
            load.spare(1)
        with pytest.raises(RuntimeError, match="once the `with cpu_load\\(\\)` block has ended"):
            load.quiet  # noqa: B018
    assert load.spare(1).where == "1 core was free of other work during the measurement"


def test_the_slack_of_spare_cores():
    load = CpuLoad(usable_cores=2, seconds=1.0, other_cores=0.4)
    assert load.spare(2) and not load.spare(2, slack=0.25) and load.spare(1, slack=0)
    with pytest.raises(ValueError, match=r"slack must be in \[0, 1\)"):
        load.spare(1, slack=1)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is a Linux feature")
def test_two_threads_on_one_core_get_one_cores_worth():
    cores = float(_in_a_child("from course_utils.hardware import core_capacity; print(core_capacity(2).cores)",
                              prefix=("taskset", "-c", "0")))
    assert 0.6 < cores < 1.4, cores


def test_core_capacity_restores_the_thread_count_and_reads_as_a_condition():
    threads = torch.get_num_threads()
    capacity = core_capacity(1, size=64, calls=2, rounds=1)
    assert torch.get_num_threads() == threads and capacity.threads == 1 and capacity.cores > 0
    shared = CoreCapacity(threads=2, alone=(1.0, 2.0, 1.0), together=(1.6, 3.2, 0.5))
    assert shared.cores == 1.25 and not shared.at_least(1.7) and shared.at_least(1.2)
    assert shared.at_least(1.7).where == "2 threads did at least 1.7 cores' worth of arithmetic at once"
    assert "ran at 1.25 cores' worth" in shared.at_least(1.7).here and shared.at_least(1.7).machine_holds
    with pytest.raises(ValueError, match="threads must be a positive int"):
        core_capacity(0)
