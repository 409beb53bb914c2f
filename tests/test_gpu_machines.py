"""The lessons' GPU decisions on machines we do not have: Colab's T4, a GPU without tensor cores, 2 to 8 GPUs with
and without peer-to-peer links (NVLink), a build without NCCL.

What decides a device, a backend, a replica count or a claim's condition is a function of the machine's facts
(``Hardware``, and the GPUs TensorFlow sees): ``cu.process_placement`` (lessons 05 and 12, in the notebooks and in
the scripts ``torchrun`` starts), ``lesson06.tf_replicas``, ``lesson09.fast_low_precision_dtype``, the facts'
conditions, ``device.default_device``. Each test below asks them what a lesson would run, claim and print on each
machine, against expectations written out per machine; the last ones check that the notebooks decide with these
functions and that the doctor's plan (the registry's branches) says the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

import pytest
import torch
from test_doctor import machine as report_of

from conftest import REPO, source
from course_utils import doctor
from course_utils.device import default_device
from course_utils.hardware import Hardware
from course_utils.lessons import LESSONS, lesson
from course_utils.lessons.lesson06 import REPLICAS, tf_replicas
from course_utils.lessons.lesson09 import fast_low_precision_dtype
from course_utils.placement import process_placement

CPU_ONLY = Hardware(isa="AVX2", bf16_flags=(), int8_flags=(), onednn_bf16=False, onednn_cap=None, fbgemm_cap=None,
                    tf_onednn=False, quantized_engine="x86", usable_cores=2, gpus=(), gpu_capability=None, nccl=True)


@dataclass(frozen=True)
class Machine:
    hardware: Hardware
    tf_gpus: int  # GPUs TensorFlow sees (0: a CPU build, as the course pins)

    @property
    def gpus(self) -> int:
        return len(self.hardware.gpus)


def gpus(name: str, count: int, capability: tuple[int, int], *, peer: bool | None = None, tf: int = 0,
         cores: int = 8, nccl: bool = True) -> Machine:
    return Machine(replace(CPU_ONLY, gpus=(name,) * count, gpu_capability=capability, usable_cores=cores, nccl=nccl,
                           gpu_peer_access=peer if count > 1 else None), tf)


MACHINES = {
    "laptop": Machine(CPU_ONLY, 0),
    "colab-t4": gpus("Tesla T4", 1, (7, 5), tf=1, cores=2),        # Colab's GPU runtime: TensorFlow's GPU build
    "p100": gpus("Tesla P100-PCIE-16GB", 1, (6, 0)),                # no tensor cores
    "2-a100-nvlink": gpus("NVIDIA A100-SXM4-80GB", 2, (8, 0), peer=True, tf=2),
    "2-l4-pcie": gpus("NVIDIA L4", 2, (8, 9), peer=False),           # no peer-to-peer: through host memory
    "3-a100": gpus("NVIDIA A100-SXM4-80GB", 3, (8, 0), peer=True, tf=3),
    "4-h100-nvlink": gpus("NVIDIA H100 80GB HBM3", 4, (9, 0), peer=True, tf=4),
    "8-h100-nvlink": gpus("NVIDIA H100 80GB HBM3", 8, (9, 0), peer=True, tf=8),
    "8-l40s-pcie": gpus("NVIDIA L40S", 8, (8, 9), peer=False, tf=8),
    "2-gpus-no-nccl": gpus("NVIDIA RTX A6000", 2, (8, 6), peer=True, nccl=False),  # a build without NCCL (Windows)
}


def lesson05(m: Machine) -> dict[str, object]:
    """What lesson 05 runs on ``m``: section 1's backend line, sections 6 and 8 (ddp_train.py with 1 and 2 stages,
    2 processes), the benchmark (bench.py, 2 processes), which weights it asserts bit-identical, and its claim."""
    hw = m.hardware
    section1 = process_placement(0, 2, gpus=m.gpus, nccl=hw.nccl)
    single = [process_placement(r, 2, gpus=m.gpus, nccl=hw.nccl) for r in range(2)]
    staged = [process_placement(r, 2, gpus=m.gpus, nccl=hw.nccl, stages=2) for r in range(2)]
    bench = process_placement(0, 2, gpus=m.gpus, nccl=hw.nccl)
    return {"section 1": section1.backend, "section 6": [p.devices[0] for p in single],
            "section 8": [p.devices for p in staged],
            # c37: the two-node run (gloo, GPUs hidden) equals section 6 bit for bit only if section 6 ran gloo too
            "two nodes == section 6": not single[0].on_gpus,
            "two stages == a gloo run": not staged[0].on_gpus,  # c43 compares with whichever run used gloo
            "DDP speed claim checked": not bench.on_gpus}


LESSON05 = {
    "laptop": ("gloo", ["cpu", "cpu"], [("cpu", "cpu")] * 2, True, True, True),
    "colab-t4": ("gloo", ["cpu", "cpu"], [("cpu", "cpu")] * 2, True, True, True),
    "p100": ("gloo", ["cpu", "cpu"], [("cpu", "cpu")] * 2, True, True, True),
    "2-a100-nvlink": ("nccl", ["cuda:0", "cuda:1"], [("cpu", "cpu")] * 2, False, True, False),
    "2-l4-pcie": ("nccl", ["cuda:0", "cuda:1"], [("cpu", "cpu")] * 2, False, True, False),
    "3-a100": ("nccl", ["cuda:0", "cuda:1"], [("cpu", "cpu")] * 2, False, True, False),
    "4-h100-nvlink": ("nccl", ["cuda:0", "cuda:1"], [("cuda:0", "cuda:1"), ("cuda:2", "cuda:3")], False, False, False),
    "8-h100-nvlink": ("nccl", ["cuda:0", "cuda:1"], [("cuda:0", "cuda:1"), ("cuda:2", "cuda:3")], False, False, False),
    "8-l40s-pcie": ("nccl", ["cuda:0", "cuda:1"], [("cuda:0", "cuda:1"), ("cuda:2", "cuda:3")], False, False, False),
    "2-gpus-no-nccl": ("gloo", ["cpu", "cpu"], [("cpu", "cpu")] * 2, True, True, True),
}


@pytest.mark.parametrize("name", MACHINES)
def test_lesson05_backends_devices_comparisons_and_claim(name):
    assert tuple(lesson05(MACHINES[name]).values()) == LESSON05[name]


@pytest.mark.parametrize(("name", "why"), [
    ("laptop", "gloo between CPU processes (no CUDA GPU here)"),
    ("colab-t4", "gloo between CPU processes (2 processes with a GPU each need 2, this node has 1)"),
    ("3-a100", "nccl between GPUs (a GPU for each of 2 processes, of the 3 here)"),
    ("2-gpus-no-nccl", "gloo between CPU processes (this PyTorch build has no NCCL)"),
])
def test_lesson05_says_why_it_picked_its_backend(name, why):
    m = MACHINES[name]
    assert process_placement(0, 2, gpus=m.gpus, nccl=m.hardware.nccl).reason == why
    assert process_placement(1, 2, gpus=4, nccl=True, stages=2).reason == (
        "nccl between GPUs (2 GPUs for each of 2 processes, of the 4 here)")
    assert process_placement(0, 2, gpus=3, nccl=True, stages=2).reason == (
        "gloo between CPU processes (2 processes with 2 GPUs each need 4, this node has 3)")


def test_the_link_between_gpus_is_said_where_collectives_cross_it():
    assert MACHINES["2-a100-nvlink"].hardware.gpu_link_text == (
        "NCCL, peer-to-peer between all GPUs (NVLink or PCIe P2P)")
    assert MACHINES["8-l40s-pcie"].hardware.gpu_link_text == (
        "NCCL, no peer-to-peer between some GPUs (their traffic goes through host memory)")
    assert MACHINES["colab-t4"].hardware.gpu_link_text == "one GPU: no GPU-to-GPU traffic"
    assert MACHINES["laptop"].hardware.gpu_text == "no CUDA GPU"  # what every lesson's setup cell prints here
    assert MACHINES["2-l4-pcie"].hardware.gpu_text == (
        "2 CUDA GPU(s), NVIDIA L4 (compute capability 8.9), NCCL, no peer-to-peer between some GPUs (their traffic "
        "goes through host memory)")


@pytest.mark.parametrize(("name", "device_type", "hidden", "all_reduce"), [
    ("laptop", "CPU", False, "RING"), ("colab-t4", "CPU", True, "RING"), ("p100", "CPU", False, "RING"),
    ("2-a100-nvlink", "GPU", False, "NCCL"), ("3-a100", "GPU", False, "NCCL"),
    ("8-h100-nvlink", "GPU", False, "NCCL"),
])
def test_lesson06_replicas(name, device_type, hidden, all_reduce):
    m = MACHINES[name]
    replicas = tf_replicas(m.tf_gpus)
    assert (replicas.device_type, replicas.hide_gpus, replicas.all_reduce) == (device_type, hidden, all_reduce)
    assert replicas.nccl_kernel == (device_type == "GPU")  # the NcclAllReduce attempt succeeds on GPUs only
    assert replicas.logical_cpus == (REPLICAS if device_type == "CPU" else 0)  # 2 replicas everywhere: w = -6 after 2
    # c14: "two logical CPU replicas are slower than one device" is checked on a CPU of at most 2 cores only
    small_cpu = replicas.on_cpu and m.hardware.usable_cores <= 2
    assert small_cpu == (name in ("laptop", "colab-t4"))


def test_lesson06_says_where_the_replicas_are():
    assert tf_replicas(1).note == ("one GPU hidden from TensorFlow, so that every comparison is CPU against CPU: 2 "
                                   "logical devices of the CPU stand in for 2 GPUs")
    assert tf_replicas(0).note == "no GPU visible to TensorFlow: 2 logical devices of the CPU stand in for 2 GPUs"
    assert tf_replicas(3).note == "3 GPUs visible to TensorFlow: the replicas are GPU:0 and GPU:1; GPU:2 stays idle"
    assert tf_replicas(8).note.endswith("; GPU:2 to GPU:7 stay idle") and tf_replicas(2).note.endswith("GPU:1")
    with pytest.raises(ValueError, match="number of GPUs"):
        tf_replicas(-1)


@pytest.mark.parametrize(("name", "dtype", "tensor_core_claim"), [
    ("laptop", None, False), ("colab-t4", torch.float16, True), ("p100", None, False),
    ("2-a100-nvlink", torch.float16, True), ("8-h100-nvlink", torch.float16, True),
])
def test_lesson09_precision(name, dtype, tensor_core_claim):
    hw = MACHINES[name].hardware
    device = default_device(len(hw.gpus), mps=False)
    choice = fast_low_precision_dtype(device, hw)
    assert choice.dtype is dtype
    assert hw.fp16_tensor_cores.holds is tensor_core_claim  # c25's "4096x4096 fp16 over 2x faster" is checked
    # c29: fp16 + GradScaler trains on every CUDA GPU, for all epochs where fp16 is fast, else for one
    assert (device == "cuda") == bool(hw.gpus)
    if device == "cuda":
        assert re.fullmatch(rf"CUDA compute capability {hw.gpu_capability[0]}\.{hw.gpu_capability[1]} has "
                            r"(fp16 tensor cores|no tensor cores \(needs >= 7\.0\))", choice.reason)


def test_lesson09_refuses_a_gpu_the_machine_lacks():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        fast_low_precision_dtype("cuda", MACHINES["laptop"].hardware)


@pytest.mark.parametrize(("name", "ranks", "backend"), [
    ("laptop", 2, "gloo"), ("colab-t4", 2, "gloo"), ("2-a100-nvlink", 2, "nccl"), ("3-a100", 3, "nccl"),
    ("8-h100-nvlink", 8, "nccl"), ("2-gpus-no-nccl", 2, "gloo"),
])
def test_lesson12_fsdp_features_run_one_process_per_gpu(name, ranks, backend):
    m = MACHINES[name]
    started = max(2, m.gpus)  # 306d30fc: one process per GPU, at least 2
    placements = [process_placement(r, started, gpus=m.gpus, nccl=m.hardware.nccl) for r in range(started)]
    assert started == ranks and {p.backend for p in placements} == {backend}
    assert len({p.devices for p in placements}) == (ranks if backend == "nccl" else 1)  # NCCL: a GPU per rank


def test_placement_refuses_bad_counts():
    with pytest.raises(ValueError, match="local_rank must be in"):
        process_placement(2, 2, gpus=4, nccl=True)
    with pytest.raises(ValueError, match="stages must be an int of at least 1"):
        process_placement(0, 2, gpus=4, nccl=True, stages=0)
    with pytest.raises(ValueError, match="gpus must be"):
        process_placement(0, 2, gpus=-1, nccl=True)


# ---------------------------------------------------------------------------------------------------------
# The notebooks decide with these functions, and the doctor says what they decide
# ---------------------------------------------------------------------------------------------------------

DECIDED_BY = {  # (lesson, cell id): the call that makes the cell's decision
    ("05", "c04"): "cu.process_placement(", ("05", "c27"): "cu.process_placement(",
    ("05", "c45"): "cu.process_placement(",
    ("12", "370dd649"): "cu.process_placement(", ("12", "306d30fc"): "cu.process_placement(",
    ("06", "c04"): "lesson06.tf_replicas(", ("09", "c21"): "lesson09.fast_low_precision_dtype(",
}
HAND_MADE_DECISION = re.compile(r"is_nccl_available\(\)\s+and|device_count\(\)\s*>=|len\(gpus\)\s*[<>=]")


def test_the_notebooks_decide_with_the_tested_functions():
    for (number, cell_id), call in DECIDED_BY.items():
        nb = json.loads((REPO / "notebooks" / lesson(number).notebook).read_text())
        cells = {c.get("id"): source(c) for c in nb["cells"] if c["cell_type"] == "code"}
        assert call in cells[cell_id], (number, cell_id)
        made_by_hand = [i for i, text in cells.items() if HAND_MADE_DECISION.search(text)]
        assert not made_by_hand, f"lesson {number} decides a backend or replica count by hand in {made_by_hand}"


@pytest.mark.parametrize("name", MACHINES)
def test_the_doctor_plans_what_the_lessons_decide(name):
    m = MACHINES[name]
    report = replace(report_of(), hardware=m.hardware, gpu_memory=(16 * 2**30,) * m.gpus,
                     tf_gpus=tuple(f"/physical_device:GPU:{i}" for i in range(m.tf_gpus)))
    plan = doctor.lesson_plan(report)
    decided = lesson05(m)

    def says(number: str, needs: str, holds: bool) -> bool:
        branch = next(b for b in lesson(number).branches if b.needs == needs)
        return (branch.then if holds else branch.otherwise) in plan[number]

    assert says("05", "nccl_2_gpus", decided["section 1"] == "nccl")
    assert says("05", "nccl_4_gpus", decided["section 8"][0][0] != "cpu")
    assert says("06", "tf_2_gpus", not tf_replicas(m.tf_gpus).on_cpu)
    device = default_device(m.gpus, mps=False)
    assert says("09", "cuda", device == "cuda")
    assert says("09", "tensor_cores", fast_low_precision_dtype(device, m.hardware).dtype is torch.float16)
    assert says("12", "nccl_2_gpus", process_placement(0, max(2, m.gpus), gpus=m.gpus, nccl=m.hardware.nccl).on_gpus)
    for entry in LESSONS:  # every single-GPU branch follows the lesson's device
        assert all(says(entry.number, "cuda", device == "cuda") for b in entry.branches if b.needs == "cuda")
    where = "the CPU" if device == "cpu" else f"cuda:0 ({m.hardware.gpus[0]})"
    assert all(line.startswith(f"{lesson(number).title}, on {where}") for number, line in plan.items())


DEVICE_WORDS = re.compile(r"\b(RING|NCCL|NcclAllReduce|logical|hidden)\b")


def test_lesson06_compares_the_same_text_with_gpu_replicas():
    """nbval on a multi-GPU TensorFlow: the compared cells of lesson 06 differ from the CPU's only in device names,
    which tests/nbval_sanitize.cfg maps to DEVICE:n; what else depends on the replicas is in cells not compared."""
    from configparser import ConfigParser

    config = ConfigParser()
    config.read(REPO / "tests" / "nbval_sanitize.cfg")
    rule = config["tensorflow_replica_devices"]
    sanitize = lambda text: re.sub(rule["regex"], rule["replace"], text)  # noqa: E731
    nb = json.loads((REPO / "notebooks" / lesson("06").notebook).read_text())
    compared = [c for c in nb["cells"] if c["cell_type"] == "code"
                and "nbval-ignore-output" not in c["metadata"].get("tags", [])]
    texts = ["".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
             for c in compared for o in c.get("outputs", [])]
    assert any("CPU:1" in t for t in texts)  # the replicas' names are compared ...
    for text in texts:
        assert sanitize(text) == sanitize(text.replace("CPU:", "GPU:"))  # ... as the same text on GPU replicas
        assert not DEVICE_WORDS.search(text), text  # the all-reduce implementation and the CPU split are not
