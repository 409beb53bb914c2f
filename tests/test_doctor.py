"""The environment doctor: real facts from this machine, and plans for made-up CPU and GPU machines."""

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

from conftest import REPO
from course_utils import __main__ as cli
from course_utils import doctor
from course_utils.device import gpu_count, package_version
from course_utils.launch import free_port
from course_utils.profile import PROFILES

UNREACHABLE = "unreachable (host name not resolved)"


def fake_report(n_gpus: int = 0, *, capability: tuple[int, int] = (8, 0), tf_gpus: int | None = None,
                onednn_bf16: bool = False, mnist: str = "verified", fashion: str = "verified",
                endpoints: dict[str, str] | None = None) -> doctor.Report:
    """A made-up machine: ``n_gpus`` identical GPUs (TensorFlow sees ``tf_gpus``, default as many), quick profile,
    the pinned versions, both datasets as given; ``endpoints`` None means the network was not checked."""
    gpus = tuple(doctor.Gpu(i, "Test GPU", capability, 16 * 2**30) for i in range(n_gpus))
    tf_count = n_gpus if tf_gpus is None else tf_gpus
    mirrors = {"mnist": ("mnist.example:443",), "fashion_mnist": ("fashion.example:80",)}
    datasets = tuple(doctor.DatasetStatus(name, folder, status, "test", mirrors[name]) for name, folder, status in
                     (("mnist", "MNIST", mnist), ("fashion_mnist", "FashionMNIST", fashion)))
    packages = tuple(doctor.Package(name, dists[0], "1.0", "1.0", True) for name, dists in doctor.PACKAGES.items())
    return doctor.Report(
        machine=doctor.Machine("Linux test", "3.11.0", "Test CPU", 2, 2, 2, 8 * 2**30),
        requirements="/repo/requirements.txt", packages=packages,
        accelerators=doctor.Accelerators("13.0" if n_gpus else None, gpus, False,
                                         tuple(f"/physical_device:GPU:{i}" for i in range(tf_count)), None,
                                         True, True, True, None),
        cpu=doctor.CpuPrecision((), onednn_bf16, "AVX2", ("qnnpack", "x86", "fbgemm")),
        data=doctor.Data("/data", "from $COURSE_DATA_DIR", None, datasets),
        network=doctor.Network(endpoints is not None, 3.0, endpoints or {}),
        profile=doctor.RunProfile("quick", "$COURSE_PROFILE=quick", None),
    )


def test_lesson_tables_match_what_the_notebooks_load_and_import():
    loads = re.compile(r'(?:load_tensors|load_numpy|tf_dataset|torchvision_dataset|ensure_dataset)\(\s*"(\w+)"')
    modules = {"tensorflow": "tensorflow", "keras": "keras", "torchao": "torchao",
               "tensorboard": r"(tensorboard|torch\.utils\.tensorboard)"}
    imports = {name: re.compile(rf"^\s*(import|from) {module}\b", re.M) for name, module in modules.items()}
    for lesson, name in doctor.LESSONS.items():
        notebook = json.loads((REPO / "notebooks" / f"{lesson}_{name}.ipynb").read_text())
        code = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
        assert tuple(sorted(set(loads.findall(code)))) == doctor.LESSON_DATASETS[lesson], lesson
        used = {package for package, pattern in imports.items() if pattern.search(code)}
        assert used == set(doctor.LESSON_PACKAGES.get(lesson, ())), lesson


def test_collect_reports_this_machine(fake_root: Path):
    report = doctor.collect(network=False)
    machine, acc = report.machine, report.accelerators
    assert machine.python == platform.python_version() and machine.logical_cores == os.cpu_count()
    assert machine.torch_threads == torch.get_num_threads() and 1 <= machine.usable_cores <= machine.logical_cores
    assert len(acc.gpus) == gpu_count() and acc.gloo == dist.is_gloo_available()
    assert acc.tf_error is None and isinstance(acc.tf_gpus, tuple)  # TensorFlow was imported and asked
    versions = {p.name: p.version for p in report.packages}
    assert versions["torch"] == package_version("torch") and versions["tensorflow"] is not None
    assert report.requirements == str(REPO / "requirements.txt")
    assert all(p.matches_pin == (p.version.split("+")[0] == p.pin) for p in report.packages if p.version and p.pin)
    assert report.data.root == str(fake_root) and report.data.source == "from $COURSE_DATA_DIR"
    status = {d.name: d for d in report.data.datasets}
    assert status["mnist"].status == "verified" and "SHA256SUMS" in status["mnist"].detail
    assert status["fashion_mnist"].status == "missing"
    assert not report.network.checked and report.profile.name == "full" and "unset" in report.profile.source
    assert doctor.blocked_lessons(report) == {}  # FashionMNIST missing, network unchecked: a warning only

    text = doctor.format_report(report)
    for section in ("Machine", "Versions", "Accelerators", "Precision", "Data", "Network", "Run profile",
                    "Lessons on this machine", "Problems"):
        assert f"\n{section}" in text
    assert "not checked (--offline)" in text and str(fake_root) in text
    if not acc.gpus:
        assert "none: no CUDA GPU" in text
        plan = doctor.lesson_plan(report)
        assert "DDP with gloo, 2 CPU processes via torchrun" in plan["05"] and "(no GPU)" in plan["05"]


def test_command_line_json(fake_root: Path):
    # TensorFlow is left out here (test_collect_reports_this_machine imports it): this test is about the command.
    out = subprocess.run([sys.executable, "-m", "course_utils", "doctor", "--offline", "--json", "--no-tensorflow"],
                         cwd=REPO, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["data"]["root"] == str(fake_root)
    assert report["network"] == {"checked": False, "timeout": 3.0, "endpoints": {}}
    assert sorted(report["lessons"]) == sorted(doctor.LESSONS) and report["lessons_blocked"] == []
    assert report["machine"]["logical_cores"] == os.cpu_count() and report["accelerators"]["tf_gpus"] is None
    assert any("FashionMNIST" in p["summary"] and p["lessons"] == [] for p in report["problems"])


def test_text_output_of_both_entry_points(fake_root: Path, capsys: pytest.CaptureFixture[str]):
    assert cli.main(["doctor", "--offline", "--no-tensorflow"]) == 0
    text = capsys.readouterr().out
    assert "TensorFlow GPUs    not checked (--no-tensorflow)" in text and "All 9 lessons can run here." in text
    for lesson, name in doctor.LESSONS.items():
        assert f"\n  {lesson} {name}: " in text
    assert doctor.main(["--offline", "--no-tensorflow"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == text.splitlines()[0]


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
    endpoints = report.network.endpoints
    assert doctor.PYPI in endpoints and "ossci-datasets.s3.amazonaws.com:443" in endpoints
    assert all(s == "reachable" or s.startswith("unreachable (") for s in endpoints.values())
    fashion = next(d for d in report.data.datasets if d.name == "fashion_mnist")
    blocked = doctor.blocked_lessons(report)
    if any(endpoints[m] == "reachable" for m in fashion.mirrors):
        assert blocked == {} and "downloaded into the data root first" in doctor.lesson_plan(report)["09"]
    else:  # offline, as on the course's CI machine
        assert sorted(blocked) == ["03", "04", "07", "08", "09"] and doctor.exit_status(report) == 1
        fix = next(p.fix for p in doctor.problems(report) if "FashionMNIST" in p.summary)
        assert "COURSE_DATA_DIR" in fix and "README.md#data" in fix


def test_plans_differ_between_cpu_single_gpu_and_multi_gpu_machines():
    cpu, one, two, four = (doctor.lesson_plan(fake_report(n)) for n in (0, 1, 2, 4))
    assert "DDP with gloo, 2 CPU processes via torchrun" in cpu["05"] and "skipped (no GPU)" in cpu["05"]
    assert "DDP with gloo" in one["05"] and "NCCL needs one GPU per process" in one["05"]
    assert "DDP with NCCL on 2 of the 2 GPUs" in two["05"] and "needs 4 GPUs" in two["05"]
    assert "DDP with NCCL on 2 of the 4 GPUs" in four["05"] and "with NCCL on 4 GPUs" in four["05"]
    no_nccl = replace(fake_report(4), accelerators=replace(fake_report(4).accelerators, nccl=False))
    assert "this PyTorch build has no NCCL" in doctor.lesson_plan(no_nccl)["05"]

    assert "2 logical CPU devices" in cpu["06"] and "2 logical CPU devices" in one["06"]
    assert "MirroredStrategy on 4 GPUs" in four["06"]
    assert "2 logical CPU devices" in doctor.lesson_plan(fake_report(4, tf_gpus=0))["06"]

    assert "bf16 autocast on the CPU, emulated" in cpu["09"] and "kept to 1 epoch" in cpu["09"]
    assert "fp16 + GradScaler CUDA run skipped" in cpu["09"]
    native = doctor.lesson_plan(fake_report(0, onednn_bf16=True))["09"]
    assert "native bf16 kernels" in native and f"all {PROFILES['quick'].epochs} epochs" in native
    assert "fp16 autocast + GradScaler on Test GPU (tensor cores" in four["09"]
    assert "no tensor cores" in doctor.lesson_plan(fake_report(1, capability=(6, 1)))["09"]

    assert "GPU matmul timing skipped" in cpu["01"] and "adds a matmul timing on Test GPU" in one["01"]
    assert all("int8 kernels run on the CPU in any case" in plans["07"] for plans in (cpu, one, four))
    assert cpu["07"] == four["07"] and all(cpu[k] != four[k] for k in ("01", "02", "03", "05", "06", "08", "09"))
    text = doctor.format_report(fake_report(4, capability=(9, 0)))
    assert text.count("Test GPU, compute capability 9.0, 16 GiB") == 4 and "fp8: yes" in text


def test_precision_rules():
    assert doctor.gpu_precision((6, 1)) == {"fp16 tensor cores": False, "bf16": False, "fp8": False}
    assert doctor.gpu_precision((7, 5)) == {"fp16 tensor cores": True, "bf16": False, "fp8": False}
    assert doctor.gpu_precision((8, 6)) == {"fp16 tensor cores": True, "bf16": True, "fp8": False}
    assert doctor.gpu_precision((8, 9)) == {"fp16 tensor cores": True, "bf16": True, "fp8": True}
    cpu = fake_report().cpu
    native = replace(cpu, bf16_flags=("amx_bf16",), onednn_bf16=True)
    assert doctor.cpu_bf16(native).startswith("fast: native bf16 instructions")
    assert doctor.cpu_bf16(cpu).startswith("emulated: runs, but slower than fp32")
    capped = replace(native, onednn_bf16=False, onednn_cap="AVX2")
    assert doctor.cpu_bf16(capped).startswith("emulated in PyTorch: the CPU has native bf16 (amx_bf16), but oneDNN is "
                                              "capped at AVX2")
    assert doctor.cpu_bf16(replace(cpu, bf16_flags=None, onednn_bf16=True)).startswith("fast (CPU flags unreadable")


def test_a_onednn_cap_without_tensorflow_s_opt_out_blocks_lesson_09():
    """ONEDNN_MAX_CPU_ISA=AVX2 on a CPU with native bf16: TensorFlow ignores the cap and its bf16 matmul crashes."""
    report = fake_report()
    capped = replace(report.cpu, bf16_flags=("avx512_bf16",), onednn_bf16=False, onednn_cap="AVX2")
    assert doctor.blocked_lessons(replace(report, cpu=capped)) == {
        "09": ["TensorFlow's bf16 would crash under the oneDNN cap"]}
    fixed = replace(capped, tf_onednn=False)  # TF_ENABLE_ONEDNN_OPTS=0: TensorFlow uses its Eigen kernels
    assert doctor.blocked_lessons(replace(report, cpu=fixed)) == {}
    native = replace(capped, onednn_bf16=True, onednn_cap=None)
    assert doctor.blocked_lessons(replace(report, cpu=native)) == {}


def test_missing_data_blocks_only_when_it_cannot_be_downloaded():
    down = {"mnist.example:443": UNREACHABLE, "fashion.example:80": "reachable", doctor.PYPI: "reachable"}
    report = fake_report(mnist="missing", endpoints=down)
    assert sorted(doctor.blocked_lessons(report)) == ["02", "05", "06"] and doctor.exit_status(report) == 1
    (problem,) = [p for p in doctor.problems(report) if p.lessons]
    assert "MNIST is missing" in problem.summary and "unreachable" in problem.summary
    assert "set COURSE_DATA_DIR to a folder with MNIST/raw/" in problem.fix and "README.md#data" in problem.fix
    plans = doctor.lesson_plan(report)
    assert plans["02"].startswith("CANNOT RUN (MNIST missing") and not plans["01"].startswith("CANNOT")

    reachable = fake_report(mnist="missing", endpoints={**down, "mnist.example:443": "reachable"})
    assert doctor.exit_status(reachable) == 0
    assert "MNIST is downloaded into the data root first" in doctor.lesson_plan(reachable)["02"]
    unchecked = fake_report(mnist="incomplete")
    assert doctor.exit_status(unchecked) == 0 and "--offline" in doctor.problems(unchecked)[0].summary
    assert sorted(doctor.blocked_lessons(fake_report(fashion="corrupt"))) == ["03", "04", "07", "08", "09"]
    assert doctor.exit_status(fake_report(endpoints=down)) == 0  # data present: the network does not matter


def test_missing_packages_and_mismatched_versions():
    base = fake_report()
    no_tf = replace(base, packages=tuple(replace(p, distribution=None, version=None, matches_pin=None)
                                         if p.name == "tensorflow" else p for p in base.packages))
    assert sorted(doctor.blocked_lessons(no_tf)) == ["01", "04", "06", "09"]
    old = replace(base, packages=tuple(replace(p, version="0.9", matches_pin=False) if p.name == "torch" else p
                                       for p in base.packages))
    (warning,) = doctor.problems(old)
    assert warning.lessons == () and "torch 0.9 (pinned 1.0)" in warning.summary
    assert "DIFFERS from the pin 1.0" in doctor.format_report(old)
    cpu_tf = fake_report(2, tf_gpus=0)
    assert doctor.exit_status(cpu_tf) == 0 and "tensorflow[and-cuda]" in doctor.problems(cpu_tf)[0].fix
    no_int8 = replace(base, cpu=replace(base.cpu, quantized_engines=("onednn",)))
    assert list(doctor.blocked_lessons(no_int8)) == ["07"] and "no int8 engine" in doctor.problems(no_int8)[0].summary


def test_unknown_profile_and_bad_data_root_stop_every_lesson(fake_root: Path, clean_env: pytest.MonkeyPatch):
    clean_env.setenv("COURSE_PROFILE", "fast")
    report = doctor.collect(network=False, tensorflow=False)
    assert report.profile.name is None and "Unknown run profile 'fast'" in (report.profile.error or "")
    assert sorted(doctor.blocked_lessons(report)) == sorted(doctor.LESSONS) and doctor.exit_status(report) == 1
    assert "UNKNOWN ($COURSE_PROFILE=fast): see Problems" in doctor.format_report(report)

    clean_env.delenv("COURSE_PROFILE")
    clean_env.setenv("COURSE_DATA_DIR", str(fake_root / "nowhere"))
    report = doctor.collect(network=False, tensorflow=False)
    assert report.data.root is None and "is not a folder" in (report.data.error or "")
    assert sorted(doctor.blocked_lessons(report)) == sorted(doctor.LESSONS)


def test_without_requirements_txt_versions_are_not_compared(tmp_path: Path, fake_root: Path):
    report = doctor.collect(network=False, tensorflow=False, requirements=tmp_path / "requirements.txt")
    assert report.requirements is None and all(p.pin is None and p.matches_pin is None for p in report.packages)
    assert "no requirements.txt next to the package" in doctor.format_report(report)
    assert doctor.exit_status(report) == 0
    pins = tmp_path / "pins.txt"
    pins.write_text("# comment\ntorch==2.14.1\ntensorflow[and-cuda] == 2.21.0 ; sys_platform == 'linux'\n"
                    "Keras_Nightly==3.0\nnumpy>=2\n")
    assert doctor.read_pins(pins) == {"torch": "2.14.1", "tensorflow": "2.21.0", "keras-nightly": "3.0"}


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
    with pytest.raises(SystemExit) as exit_info:
        doctor.main(["--json", "--oops"])
    assert exit_info.value.code == 2 and "usage: python -m course_utils doctor" in capsys.readouterr().err
    with pytest.raises(ValueError, match="positive number of seconds"):
        doctor.check_endpoints(["pypi.org:443"], timeout=0)
    with pytest.raises(ValueError, match="'host:port'"):
        doctor.check_endpoints(["pypi.org"])
