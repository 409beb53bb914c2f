"""The environment doctor: the registry against the notebooks, plans and problems of made-up machines, real facts."""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from conftest import NOTEBOOKS, REPO, source
from course_utils import __main__ as cli
from course_utils import doctor, versions
from course_utils.device import gpu_count, package_version
from course_utils.hardware import Hardware
from course_utils.launch import free_port
from course_utils.lessons import LESSONS, REQUIREMENTS, Branch, lesson

EVERY = [path.name[:2] for path in NOTEBOOKS]  # every lesson, from notebooks/: a new lesson changes no test here
AVX2_CPU = Hardware(isa="AVX2", bf16_flags=(), int8_flags=(), onednn_bf16=False, onednn_cap=None, fbgemm_cap=None,
                    tf_onednn=False, quantized_engine="x86", usable_cores=2, gpus=(), gpu_capability=None, nccl=True)
MIRRORS = {"mnist": ("mnist.example:443",), "fashion_mnist": ("fashion.example:80",)}


def machine(gpus: int = 0, *, capability: tuple[int, int] = (8, 0), tf_gpus: int | None = None,
            **changes: object) -> doctor.Report:
    """A made-up machine: a 2-core AVX2 CPU (bf16 emulated, int8 on x86) and ``gpus`` identical CUDA GPUs with
    NCCL (TensorFlow sees ``tf_gpus``, default as many); the pinned versions, both datasets verified, quick
    profile, network not checked; ``changes`` replace fields of the report."""
    report = doctor.Report(
        os="Linux test", python="3.11.0", cpu_model="Test CPU", logical_cores=2, torch_threads=2, ram_bytes=8 * 2**30,
        hardware=replace(AVX2_CPU, gpus=("Test GPU",) * gpus, gpu_capability=capability if gpus else None),
        engine_error=None, gpu_memory=(16 * 2**30,) * gpus, torch_cuda="13.0" if gpus else None, mps=False,
        tf_gpus=tuple(f"/physical_device:GPU:{i}" for i in range(gpus if tf_gpus is None else tf_gpus)),
        tf_error=None, gloo=True, cxx_compiler="g++", tpu=None, requirements="/repo/requirements.txt",
        packages=tuple(doctor.Package(name, name, "1.0", "1.0", True) for name in doctor.PACKAGES),
        data_root="/data", data_source="from $COURSE_DATA_DIR", data_error=None,
        datasets=tuple(doctor.DatasetStatus(name, folder, "verified", "test", MIRRORS[name])
                       for name, folder in (("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST"))),
        network=None, profile="quick", profile_source="$COURSE_PROFILE=quick", profile_error=None)
    return replace(report, **changes)  # type: ignore[arg-type]


def with_dataset(report: doctor.Report, name: str, status: str) -> doctor.Report:
    return replace(report, datasets=tuple(replace(d, status=status) if d.name == name else d for d in report.datasets))


def without(report: doctor.Report, package: str) -> doctor.Report:
    return replace(report, packages=tuple(replace(p, distribution=None, version=None, matches_pin=None)
                                          if p.name == package else p for p in report.packages))


def branch(number: str, needs: str) -> Branch:
    """The registry's branch of a lesson on a requirement."""
    return next(b for b in lesson(number).branches if b.needs == needs)


def blocked(report: doctor.Report) -> list[str]:
    return sorted(doctor.blocked_lessons(report))


# ---------------------------------------------------------------------------------------------------------
# The registry the doctor plans from, against the notebooks
# ---------------------------------------------------------------------------------------------------------

LOADS = re.compile(r'(?:load_tensors|load_numpy|tf_dataset|ensure_dataset)\(\s*"(\w+)"')
IMPORTS = {name: re.compile(rf"^\s*(import|from) {module}\b", re.M) for name, module in
           {"tensorflow": "tensorflow", "keras": "keras", "torchao": "torchao",
            "tensorboard": r"(tensorboard|torch\.utils\.tensorboard)"}.items()}


def test_each_notebook_s_datasets_and_packages_are_in_its_registry_entry(notebook: tuple[Path, dict]):
    path, nb = notebook
    entry = lesson(path.name[:2])  # a notebook missing from the registry fails here
    assert entry.notebook == path.name
    code = "\n".join(source(c) for c in nb["cells"] if c["cell_type"] == "code")
    assert set(LOADS.findall(code)) == set(entry.datasets)
    assert {name for name, pattern in IMPORTS.items() if pattern.search(code)} == set(entry.packages)


def test_every_registry_lesson_has_a_notebook_and_a_plan_line():
    assert sorted(e.notebook for e in LESSONS) == [p.name for p in NOTEBOOKS]
    assert list(doctor.lesson_plan(machine())) == [e.number for e in LESSONS] == EVERY
    assert set(doctor.HOLDS) == set(REQUIREMENTS)  # every requirement has its predicate
    assert set(doctor.PACKAGES) >= {p for e in LESSONS for p in e.packages}


# ---------------------------------------------------------------------------------------------------------
# Plans and problems of made-up machines
# ---------------------------------------------------------------------------------------------------------

def test_plans_take_each_branch_s_then_or_otherwise():
    cpu = doctor.lesson_plan(machine())
    assert cpu["07"] == f"Quantization, on the CPU; {branch('07', 'x86_int8').then}"
    assert cpu["09"].startswith("Mixed precision, on the CPU; ")
    assert branch("09", "native_bf16").otherwise in cpu["09"] and branch("09", "tensor_cores").otherwise in cpu["09"]
    assert branch("05", "nccl_2_gpus").otherwise in cpu["05"] and branch("05", "nccl_4_gpus").otherwise in cpu["05"]
    assert branch("01", "cuda").otherwise in cpu["01"] and branch("03", "two_cores").then in cpu["03"]
    assert branch("06", "tf_2_gpus").otherwise in cpu["06"] and branch("06", "tpu").otherwise in cpu["06"]
    native = machine(hardware=replace(AVX2_CPU, onednn_bf16=True, bf16_flags=("amx_bf16",), isa="AVX512"))
    assert branch("09", "native_bf16").then in doctor.lesson_plan(native)["09"]
    arm = machine(hardware=replace(AVX2_CPU, quantized_engine="qnnpack"))
    assert doctor.lesson_plan(arm)["07"] == ("Quantization, on the CPU; "
                                             "int8 on another engine: speedups reported, not checked")
    one_core = machine(hardware=replace(AVX2_CPU, usable_cores=1))
    assert branch("03", "two_cores").otherwise in doctor.lesson_plan(one_core)["03"]
    assert branch("06", "tpu").then in doctor.lesson_plan(machine(tpu="local"))["06"]

    two, four = doctor.lesson_plan(machine(2)), doctor.lesson_plan(machine(4))
    assert two["09"].startswith("Mixed precision, on cuda:0 (Test GPU); ")
    assert branch("05", "nccl_2_gpus").then in two["05"] and branch("05", "nccl_4_gpus").otherwise in two["05"]
    assert branch("05", "nccl_2_gpus").then in four["05"] and branch("05", "nccl_4_gpus").then in four["05"]
    assert branch("05", "nccl_2_gpus").otherwise in doctor.lesson_plan(
        machine(4, hardware=replace(AVX2_CPU, gpus=("Test GPU",) * 4, gpu_capability=(8, 0), nccl=False)))["05"]
    assert branch("06", "tf_2_gpus").then in two["06"] and branch("01", "cuda").then in two["01"]
    assert branch("06", "tf_2_gpus").otherwise in doctor.lesson_plan(machine(2, tf_gpus=0))["06"]
    assert branch("09", "tensor_cores").then in two["09"]
    assert branch("09", "tensor_cores").otherwise in doctor.lesson_plan(machine(1, capability=(6, 1)))["09"]
    assert branch("09", "tensor_cores").then in doctor.lesson_plan(machine(1, capability=(7, 0)))["09"]
    assert doctor.lesson_plan(machine(mps=True))["08"].startswith("Pruning, on mps (Apple's GPU)")
    assert blocked(machine()) == blocked(machine(4)) == [] and doctor.exit_status(machine()) == 0


def test_an_unknown_profile_or_data_root_blocks_every_lesson():
    report = machine(profile=None, profile_error="Unknown run profile 'fast'.", profile_source="$COURSE_PROFILE=fast")
    assert blocked(report) == EVERY and doctor.exit_status(report) == 1
    assert doctor.lesson_plan(report)["01"].startswith("CANNOT RUN (unknown run profile, see Problems). Once fixed: ")
    assert "UNKNOWN ($COURSE_PROFILE=fast): see Problems" in doctor.format_report(report)
    assert blocked(machine(data_root=None, data_error="not a folder")) == EVERY


def test_missing_or_broken_packages_block_the_lessons_that_import_them():
    assert blocked(without(machine(), "tensorflow")) == ["02", "04", "06", "09", "10", "11"]
    assert blocked(machine(tf_error="ImportError: broken")) == ["02", "04", "06", "09", "10", "11"]
    assert blocked(without(machine(), "torchao")) == ["07"]
    no_lab = without(machine(), "jupyterlab")  # reported, not a problem: Colab has none
    assert doctor.problems(no_lab) == [] and "jupyterlab   not installed" in doctor.format_report(no_lab)
    old = replace(machine(), packages=tuple(replace(p, version="0.9", matches_pin=False) if p.name == "torch" else p
                                            for p in machine().packages))
    (warning,) = doctor.problems(old)
    assert warning.lessons == () and "torch 0.9 (pinned 1.0)" in warning.summary
    assert "DIFFERS from the pin 1.0" in doctor.format_report(old) and doctor.exit_status(old) == 0
    (no_tf_gpu,) = doctor.problems(machine(2, tf_gpus=0))
    assert no_tf_gpu.lessons == () and "tensorflow[and-cuda]" in no_tf_gpu.fix


def test_data_blocks_when_corrupt_or_missing_without_a_download_host():
    assert blocked(with_dataset(machine(), "fashion_mnist", "corrupt")) == ["03", "04", "07", "08", "09", "10"]
    down = {"mnist.example:443": "unreachable (host name not resolved)", "fashion.example:80": "reachable",
            doctor.PYPI: "reachable"}
    report = with_dataset(machine(network=down), "mnist", "missing")
    assert blocked(report) == ["02", "05", "06", "12"] and doctor.exit_status(report) == 1
    (problem,) = doctor.problems(report)
    assert "MNIST is missing" in problem.summary and "COURSE_DATA_DIR" in problem.fix
    reachable = with_dataset(machine(network={**down, "mnist.example:443": "reachable"}), "mnist", "missing")
    assert blocked(reachable) == []
    assert doctor.lesson_plan(reachable)["02"].endswith(" [MNIST is downloaded into the data root first]")
    unchecked = with_dataset(machine(), "mnist", "incomplete")
    assert blocked(unchecked) == [] and "--offline" in doctor.problems(unchecked)[0].summary
    assert blocked(machine(network=down)) == []  # the data is there: the network does not matter


def test_cpu_and_backend_problems_block_exactly_their_lessons():
    # ONEDNN_MAX_CPU_ISA=AVX2 on a CPU with native bf16: TensorFlow ignores the cap, and its bf16 matmul crashes.
    capped = replace(AVX2_CPU, isa="AVX2", bf16_flags=("avx512_bf16",), onednn_cap="AVX2", tf_onednn=True)
    assert doctor.blocked_lessons(machine(hardware=capped)) == {
        "09": ["TensorFlow's bf16 would crash under the oneDNN cap"]}
    assert blocked(machine(hardware=replace(capped, tf_onednn=False))) == []  # TF_ENABLE_ONEDNN_OPTS=0
    assert blocked(without(machine(hardware=capped), "tensorflow")) == ["02", "04", "06", "09", "10", "11"]
    assert doctor.blocked_lessons(machine(gloo=False)) == {"05": ["no gloo"], "12": ["no gloo"]}
    assert doctor.blocked_lessons(machine(cxx_compiler=None)) == {"11": ["no C++ compiler"]}
    bad_engine = machine(engine_error="COURSE_QUANTIZED_ENGINE='arm' is not an int8 engine of this PyTorch build")
    assert doctor.blocked_lessons(bad_engine) == {"07": ["bad $COURSE_QUANTIZED_ENGINE"]}
    no_engine = machine(hardware=replace(AVX2_CPU, quantized_engine=None))
    assert doctor.blocked_lessons(no_engine) == {"07": ["no int8 engine"]}


def test_text_report_of_a_made_up_gpu_machine():
    text = doctor.format_report(machine(4, capability=(9, 0)))
    assert text.count("Test GPU, 16 GiB") == 4 and "CUDA GPUs          4 (torch built with CUDA 13.0)" in text
    assert "cuda:0           compute capability 9.0: fp16 tensor cores yes, bf16 yes, fp8 yes" in text
    assert "  05 Distributed PyTorch: DataParallel, model parallel and DDP, on cuda:0 (Test GPU); " in text
    assert "Problems: none" in text and text.endswith(f"\nAll {len(EVERY)} lessons can run here.")
    corrupt = doctor.format_report(with_dataset(machine(), "fashion_mnist", "corrupt"))
    assert "[blocks 03, 04, 07, 08, 09, 10] FashionMNIST is corrupt" in corrupt
    assert corrupt.endswith(f"\n6 of {len(EVERY)} lessons cannot run here: 03, 04, 07, 08, 09, 10.")


# ---------------------------------------------------------------------------------------------------------
# This machine
# ---------------------------------------------------------------------------------------------------------

def test_collect_reports_this_machine(fake_root: Path):
    report = doctor.collect(network=False)
    assert report.python == platform.python_version() and report.logical_cores == os.cpu_count()
    assert report.torch_threads == torch.get_num_threads() and len(report.hardware.gpus) == gpu_count()
    assert report.gloo == dist.is_gloo_available() and report.engine_error is None
    assert report.tf_error is None and isinstance(report.tf_gpus, tuple)  # TensorFlow was imported and asked
    versions = {p.name: p.version for p in report.packages}
    assert versions["torch"] == package_version("torch") and versions["tensorflow"] is not None
    assert report.requirements == str(REPO / "requirements.txt")
    assert all(p.matches_pin is not None for p in report.packages)
    assert report.data_root == str(fake_root) and report.data_source == "from $COURSE_DATA_DIR"
    status = {d.name: d for d in report.datasets}
    assert status["mnist"].status == "verified" and "SHA256SUMS" in status["mnist"].detail
    assert status["fashion_mnist"].status == "missing"
    assert report.network is None and report.profile == "full" and "unset" in report.profile_source
    assert doctor.blocked_lessons(report) == {}  # FashionMNIST missing, network unchecked: a warning only
    text = doctor.format_report(report)
    for section in ("Machine", "Versions", "Accelerators", "Precision", "Data", "Network", "Run profile",
                    "Lessons on this machine", "Problems"):
        assert f"\n{section}" in text
    assert "not checked (--offline)" in text and str(fake_root) in text


def test_a_bad_quantized_engine_is_reported_not_raised(fake_root: Path, clean_env: pytest.MonkeyPatch):
    clean_env.setenv("COURSE_QUANTIZED_ENGINE", "bogus")
    report = doctor.collect(network=False, tensorflow=False)
    assert "COURSE_QUANTIZED_ENGINE='bogus'" in (report.engine_error or "") and report.hardware.quantized_engine
    assert doctor.blocked_lessons(report) == {"07": ["bad $COURSE_QUANTIZED_ENGINE"]}
    assert os.environ["COURSE_QUANTIZED_ENGINE"] == "bogus"


def test_unknown_profile_and_bad_data_root_from_the_environment(fake_root: Path, clean_env: pytest.MonkeyPatch):
    clean_env.setenv("COURSE_PROFILE", "fast")
    report = doctor.collect(network=False, tensorflow=False)
    assert report.profile is None and "Unknown run profile 'fast'" in (report.profile_error or "")
    assert blocked(report) == EVERY
    clean_env.delenv("COURSE_PROFILE")
    clean_env.setenv("COURSE_DATA_DIR", str(fake_root / "nowhere"))
    report = doctor.collect(network=False, tensorflow=False)
    assert report.data_root is None and "is not a folder" in (report.data_error or "") and blocked(report) == EVERY


def test_without_requirements_txt_versions_are_compared_with_the_reference(tmp_path: Path, fake_root: Path):
    report = doctor.collect(network=False, tensorflow=False, requirements=tmp_path / "requirements.txt")
    pins = {p.name: p.pin for p in report.packages}
    assert report.requirements is None and pins["torch"] == versions.REFERENCE["torch"] and pins["numpy"] is None
    assert "no requirements.txt next to the package" in doctor.format_report(report)
    assert doctor.exit_status(report) == 0
    pins = tmp_path / "pins.txt"
    pins.write_text("# comment\ntorch==2.14.1\ntensorflow[and-cuda] == 2.21.0 ; sys_platform == 'linux'\n"
                    "Keras_Nightly==3.0\nnumpy>=2\n")
    assert doctor.read_pins(pins) == {"torch": "2.14.1", "tensorflow": "2.21.0", "keras-nightly": "3.0"}
    assert versions.same_version("2.14.1+cu130", "2.14.1") and not versions.same_version("2.14.0", "2.14.1")


def test_command_line_json(fake_root: Path):
    # TensorFlow is left out here (test_collect_reports_this_machine imports it): this test is about the command.
    out = subprocess.run([sys.executable, "-m", "course_utils", "doctor", "--offline", "--json", "--no-tensorflow"],
                         cwd=REPO, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["data_root"] == str(fake_root) and report["network"] is None and report["tf_gpus"] is None
    assert list(report["lessons"]) == EVERY and report["lessons_blocked"] == []
    assert report["logical_cores"] == os.cpu_count() and "usable_cores" in report["hardware"]
    assert any("FashionMNIST" in p["summary"] and p["lessons"] == [] for p in report["problems"])


def test_command_line_text_and_exit_status(fake_root: Path, clean_env: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]):
    assert cli.main(["doctor", "--offline", "--no-tensorflow"]) == 0
    text = capsys.readouterr().out
    assert "TensorFlow GPUs    not checked (--no-tensorflow)" in text
    assert text.endswith(f"All {len(EVERY)} lessons can run here.\n")
    assert all(f"\n  {e.number} {e.title}, on " in text for e in LESSONS)
    clean_env.setenv("COURSE_PROFILE", "fast")
    assert cli.main(["doctor", "--offline", "--no-tensorflow"]) == 1
    n = len(EVERY)
    assert capsys.readouterr().out.endswith(f"{n} of {n} lessons cannot run here: {', '.join(EVERY)}.\n")


def test_bad_arguments_give_clear_errors(capsys: pytest.CaptureFixture[str]):
    cases = {(): "error: no command given. Try `python -m course_utils doctor`",
             ("frobnicate",): "invalid choice: 'frobnicate'",
             ("doctor", "--timeout", "0"): "--timeout: must be a positive number of seconds, got '0'",
             ("doctor", "--timeout", "soon"): "must be a positive number of seconds, got 'soon'",
             ("doctor", "--bogus"): "unrecognized arguments: --bogus"}
    for argv, message in cases.items():
        with pytest.raises(SystemExit) as exit_info:
            cli.main(list(argv))
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and err.startswith("usage: python -m course_utils")
    with pytest.raises(ValueError, match="positive number of seconds"):
        doctor.check_endpoints(["pypi.org:443"], timeout=0)
    with pytest.raises(ValueError, match="'host:port'"):
        doctor.check_endpoints(["pypi.org"])


# ---------------------------------------------------------------------------------------------------------
# The network check
# ---------------------------------------------------------------------------------------------------------

def test_closed_port_is_unreachable_and_open_port_reachable():
    closed = f"127.0.0.1:{free_port()}"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        opened = f"127.0.0.1:{server.getsockname()[1]}"
        start = time.monotonic()
        result = doctor.check_endpoints([closed, opened], timeout=3.0)
    assert time.monotonic() - start < 3.0
    assert result == {closed: "unreachable (connection refused)", opened: "reachable"}


def test_a_hanging_connection_is_abandoned_at_the_timeout(monkeypatch: pytest.MonkeyPatch):
    def hang(*args, **kwargs):
        time.sleep(5)
        raise TimeoutError("timed out")  # what a real connect does at its own timeout

    monkeypatch.setattr(doctor.socket, "create_connection", hang)
    start = time.monotonic()
    result = doctor.check_endpoints(["hangs.example:443"], timeout=0.3)
    assert time.monotonic() - start < 1.0
    assert result == {"hangs.example:443": "unreachable (no answer within 0.3 s)"}


def test_real_network_check_is_bounded_and_drives_the_verdict(fake_root: Path):
    start = time.monotonic()
    report = doctor.collect(tensorflow=False, timeout=2.0)
    assert time.monotonic() - start < 10.0  # the network part itself is cut at 2 s
    endpoints = report.network or {}
    assert doctor.PYPI in endpoints and "ossci-datasets.s3.amazonaws.com:443" in endpoints
    assert all(s == "reachable" or s.startswith("unreachable (") for s in endpoints.values())
    fashion = next(d for d in report.datasets if d.name == "fashion_mnist")
    if any(endpoints[m] == "reachable" for m in fashion.mirrors):
        assert blocked(report) == [] and "downloaded into the data root first" in doctor.lesson_plan(report)["09"]
    else:  # offline, as on the course's CI machine
        assert blocked(report) == ["03", "04", "07", "08", "09", "10"] and doctor.exit_status(report) == 1
        fix = next(p.fix for p in doctor.problems(report) if "FashionMNIST" in p.summary)
        assert "COURSE_DATA_DIR" in fix and "README.md#data" in fix
