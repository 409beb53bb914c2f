"""The environment doctor, ``python -m course_utils doctor``: this machine's facts, and what each lesson does here.

:func:`collect` reads the facts once into a :class:`Report`; the plans and problems are computed from that report
and the registry of lessons (:mod:`course_utils.lessons`) alone, so a made-up machine (``dataclasses.replace``)
gets them like a real one. No lesson is described here::

    report = doctor.collect(network=False)
    print(doctor.format_report(report))
"""

from __future__ import annotations

import os
import platform
import re
import socket
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import torch
import torch.distributed as dist
import torchvision

from course_utils import data, hardware, versions
from course_utils.data import DATA_ENV, DATASETS, DataError, dataset_info
from course_utils.device import default_device, device_name, mps_available, package_version
from course_utils.hardware import AVX2_ONLY_ENV, ENGINE_ENV, TENSOR_CORE_CAPABILITY, Hardware
from course_utils.lessons import LESSONS, Lesson
from course_utils.lessons.lesson06 import find_tpu, tf_replicas
from course_utils.placement import process_placement
from course_utils.profile import PROFILE_ENV, PROFILES, get_profile
from course_utils.timing import format_bytes
from course_utils.versions import DISTRIBUTIONS, same_version

# The packages reported: the course's base, then those the lessons import (the registry's); the distributions
# that provide one where they differ from its name (the pin is tensorflow-cpu; GPUs need tensorflow[and-cuda]).
PACKAGES = tuple(dict.fromkeys(["torch", "torchvision", "numpy", "jupyterlab", *(p for e in LESSONS
                                                                                for p in e.packages)]))
PYPI = "pypi.org:443"


@dataclass(frozen=True)
class Package:
    """One package: the distribution installed (``None``: not installed), its version, and the course's pin."""

    name: str
    distribution: str | None
    version: str | None
    pin: str | None  # None: not pinned (without requirements.txt: the reference version, if any)
    matches_pin: bool | None  # None: nothing to compare


@dataclass(frozen=True)
class DatasetStatus:
    """One dataset in the data root: "verified", "missing", "incomplete", "corrupt" or "unknown" (no data root)."""

    name: str
    folder: str
    status: str
    detail: str
    mirrors: tuple[str, ...]  # torchvision's download endpoints, as host:port


@dataclass(frozen=True)
class Report:
    """Everything the doctor found; the plans and problems are computed from it alone."""

    os: str
    python: str
    cpu_model: str
    logical_cores: int
    torch_threads: int
    ram_bytes: int
    hardware: Hardware  # CPU precision, int8 engine, usable cores, CUDA GPUs (course_utils.hardware)
    engine_error: str | None  # $COURSE_QUANTIZED_ENGINE names no engine of this build (hardware: the default)
    gpu_memory: tuple[int, ...]  # bytes, per CUDA GPU
    torch_cuda: str | None  # the CUDA version torch was built with (None: a CPU-only build)
    mps: bool
    tf_gpus: tuple[str, ...] | None  # None: TensorFlow not checked, not installed or not importable
    tf_error: str | None  # why importing TensorFlow failed
    gloo: bool
    cxx_compiler: str | None  # the C++ compiler torch.compile's Inductor builds CPU kernels with (None: none)
    tpu: str | None  # what find_tpu() found
    requirements: str | None  # the requirements.txt compared with (None: none found, as in Colab)
    packages: tuple[Package, ...]
    data_root: str | None  # None: not usable (data_error says why)
    data_source: str
    data_error: str | None
    datasets: tuple[DatasetStatus, ...]
    network: dict[str, str] | None  # host:port -> "reachable" or "unreachable (why)"; None: not checked
    profile: str | None  # None: $COURSE_PROFILE names no profile (profile_error says why)
    profile_source: str
    profile_error: str | None


@dataclass(frozen=True)
class Problem:
    """Something to fix. ``lessons``: those it stops (empty: a warning); ``reason``: a few words for their lines."""

    summary: str
    fix: str
    lessons: tuple[str, ...]
    reason: str = ""


# ---------------------------------------------------------------------------------------------------------
# Collecting the facts
# ---------------------------------------------------------------------------------------------------------

def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, str] | None:
    """The ``name==version`` pins of a requirements file, by normalized name (``None``: no such file)."""
    if not path.is_file():
        return None
    matches = (re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*==\s*([^\s;#]+)", line)
               for line in path.read_text().splitlines())
    return {_normalize(m.group(1)): m.group(3) for m in matches if m}


def _package(name: str, pins: dict[str, str] | None) -> Package:
    distributions = DISTRIBUTIONS.get(name, (name,))
    dist_name, version = next(((d, v) for d in distributions if (v := package_version(d))), (None, None))
    pin = next((pins[_normalize(d)] for d in distributions if pins and _normalize(d) in pins), None)
    return Package(name, dist_name, version, pin, same_version(version, pin) if version and pin else None)


def _os_name() -> str:
    try:
        pretty = f" ({platform.freedesktop_os_release()['PRETTY_NAME']})"
    except (OSError, KeyError):
        pretty = f" (macOS {platform.mac_ver()[0]})" if platform.system() == "Darwin" else ""
    return f"{platform.system()} {platform.release()}{pretty}, {platform.machine()}"


def _hardware() -> tuple[Hardware, str | None]:
    """``hardware.detect()``'s facts, read afresh; a bad ``$COURSE_QUANTIZED_ENGINE`` is reported, not raised."""
    try:
        return hardware.detect.__wrapped__(), None
    except ValueError as exc:  # then: the facts with the default engine, and the error
        saved = os.environ.pop(ENGINE_ENV)
        try:
            return hardware.detect.__wrapped__(), str(exc)
        finally:
            os.environ[ENGINE_ENV] = saved


def _tensorflow(check: bool) -> tuple[tuple[str, ...] | None, str | None]:
    """TensorFlow's GPUs, or why it fails to import. Imported here only, after torch (course_utils/__init__: why)."""
    if not check or not any(package_version(d) for d in DISTRIBUTIONS["tensorflow"]):
        return None, None
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf

        return tuple(d.name for d in tf.config.list_physical_devices("GPU")), None
    except Exception as exc:  # a broken install raises anything from ImportError to RuntimeError
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _dataset_status(name: str, root: Path | None) -> DatasetStatus:
    info = dataset_info(name)
    urls = [urlsplit(u) for u in getattr(getattr(torchvision.datasets, info.torchvision_class), "mirrors", ())]
    mirrors = tuple(dict.fromkeys(f"{u.hostname}:{u.port or (443 if u.scheme == 'https' else 80)}" for u in urls))
    if root is None:
        return DatasetStatus(name, info.folder, "unknown", "no usable data root", mirrors)
    paths = {f: data.raw_path(root, info, f) for f in info.raw_md5}
    if missing := [f for f, path in paths.items() if not path.is_file()]:
        if len(missing) == len(paths):
            return DatasetStatus(name, info.folder, "missing", f"no {info.folder}/raw/ files in the data root", mirrors)
        return DatasetStatus(name, info.folder, "incomplete", f"missing {', '.join(missing)}", mirrors)
    try:
        data.ensure_dataset(name, download=False)  # the checks a lesson runs, nothing downloaded
    except DataError as exc:
        return DatasetStatus(name, info.folder, "corrupt", str(exc), mirrors)
    how = Counter(data.verify_file(path, root, info.raw_md5[f], path.stat().st_mtime) for f, path in paths.items())
    checks = ", ".join(f"{n} by {method}" for method, n in sorted(how.items()))
    return DatasetStatus(name, info.folder, "verified", f"{len(paths)} raw files verified ({checks})", mirrors)


def check_endpoints(endpoints: Sequence[str], timeout: float = 3.0) -> dict[str, str]:
    """Open a TCP connection to each ``host:port``, all at once; return ``"reachable"`` or ``"unreachable (why)"``
    for each, within about ``timeout`` seconds in total (an endpoint that has not answered by then, slow name
    lookups included, is unreachable).

    Raises:
        ValueError: for a non-positive timeout or an endpoint that is not ``host:port``.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
    targets = [(endpoint, *endpoint.rpartition(":")[::2]) for endpoint in endpoints]
    if bad := [e for e, host, port in targets if not host or not port.isdigit()]:
        raise ValueError(f"endpoint must be 'host:port', got {bad[0]!r}.")
    results: dict[str, str] = {}

    def attempt(endpoint: str, host: str, port: str) -> None:
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                results[endpoint] = "reachable"
        except OSError as exc:
            results[endpoint] = "unreachable ({})".format(
                "host name not resolved" if isinstance(exc, socket.gaierror) else "connection refused"
                if isinstance(exc, ConnectionRefusedError) else "timed out" if isinstance(exc, TimeoutError)
                else exc.strerror or str(exc) or type(exc).__name__)

    # Daemon threads: a name lookup that hangs past the deadline is abandoned, and never delays exit.
    threads = [threading.Thread(target=attempt, args=target, daemon=True) for target in targets]
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return {e: results.get(e, f"unreachable (no answer within {timeout:g} s)") for e, _, _ in targets}


def _cxx_compiler() -> str | None:
    """The C++ compiler Inductor would build CPU kernels with (``$CXX`` on Windows, else the first of
    ``torch._inductor.config.cpp.cxx`` that works), or ``None`` when it finds none."""
    from torch._inductor import cpp_builder

    try:
        return cpp_builder.get_cpp_compiler()
    except (RuntimeError, OSError):  # InvalidCxxCompiler is a RuntimeError
        return None


def collect(*, network: bool = True, tensorflow: bool = True, timeout: float = 3.0,
            requirements: Path | None = None) -> Report:
    """Examine this machine and return the :class:`Report`.

    Args:
        network: try TCP connections to the dataset download hosts and PyPI (``False``: skip).
        tensorflow: import TensorFlow to list its GPUs (a few seconds; ``False``: skip).
        timeout: seconds the whole network check may take.
        requirements: the requirements file to compare versions with (default: the checkout's).
    """
    requirements = requirements or Path(__file__).resolve().parent.parent / "requirements.txt"
    pins = read_pins(requirements)
    if pins is None:  # no checkout (Colab): compare with the versions the stored outputs were made with
        pins = {_normalize(name): version for name, version in versions.REFERENCE.items()}
    hw, engine_error = _hardware()
    data_source = (f"from ${DATA_ENV}" if os.environ.get(DATA_ENV, "").strip() else
                   f"default: the course checkout's data/ folder; ${DATA_ENV} is unset" if data.checkout_data_dir()
                   else f"default: ./data in the current folder, no course checkout found; ${DATA_ENV} is unset")
    try:
        root, data_error = data.data_root(), None
    except DataError as exc:
        root, data_error = None, str(exc)
    datasets = tuple(_dataset_status(name, root) for name in DATASETS)
    tf_gpus, tf_error = _tensorflow(tensorflow)  # after torch: TensorFlow is imported last
    raw = os.environ.get(PROFILE_ENV, "").strip()
    profile_source = (f"${PROFILE_ENV}={raw}" if raw else f"default under CI: $CI is set, ${PROFILE_ENV} is not"
                      if os.environ.get("CI") else f"default: ${PROFILE_ENV} and $CI are unset")
    try:
        profile, profile_error = get_profile().name, None
    except ValueError as exc:
        profile, profile_error = None, str(exc)
    endpoints = [*dict.fromkeys(m for d in datasets for m in d.mirrors), PYPI]
    return Report(
        os=_os_name(), python=platform.python_version(), cpu_model=device_name("cpu"),
        logical_cores=os.cpu_count() or 1, torch_threads=torch.get_num_threads(),
        ram_bytes=int(psutil.virtual_memory().total), hardware=hw, engine_error=engine_error,
        gpu_memory=tuple(int(torch.cuda.get_device_properties(i).total_memory) for i in range(len(hw.gpus))),
        torch_cuda=torch.version.cuda, mps=mps_available(), tf_gpus=tf_gpus, tf_error=tf_error,
        gloo=dist.is_available() and dist.is_gloo_available(),
        cxx_compiler=_cxx_compiler(),
        tpu=find_tpu(), requirements=str(requirements) if requirements.is_file() else None,
        packages=tuple(_package(name, pins) for name in PACKAGES),
        data_root=str(root) if root else None, data_source=data_source, data_error=data_error, datasets=datasets,
        network=check_endpoints(endpoints, timeout) if network else None,
        profile=profile, profile_source=profile_source, profile_error=profile_error,
    )


# ---------------------------------------------------------------------------------------------------------
# Conclusions, from the report and the registry alone
# ---------------------------------------------------------------------------------------------------------

# Whether each requirement of the registry (course_utils.lessons.REQUIREMENTS) holds on a machine.
HOLDS: dict[str, Callable[[Report], bool]] = {
    "cuda": lambda r: default_device(len(r.hardware.gpus), r.mps) == "cuda",
    "tensor_cores": lambda r: r.hardware.fp16_tensor_cores.holds,
    # lessons 05 and 12 start 2 processes a node; lesson 05's model-parallel run gives each 2 stages
    "nccl_2_gpus": lambda r: process_placement(0, 2, gpus=len(r.hardware.gpus), nccl=r.hardware.nccl).on_gpus,
    "nccl_4_gpus": lambda r: process_placement(0, 2, gpus=len(r.hardware.gpus), nccl=r.hardware.nccl,
                                               stages=2).on_gpus,
    "tf_2_gpus": lambda r: not tf_replicas(len(r.tf_gpus or ())).on_cpu,
    "tpu": lambda r: r.tpu is not None,
    "native_bf16": lambda r: r.hardware.native_bf16.holds,
    "two_cores": lambda r: r.hardware.cores(2).holds,
    "x86_int8": lambda r: r.hardware.x86_int8.holds,
    "int8_engine": lambda r: r.hardware.quantized_engine is not None and r.engine_error is None,
    "gloo": lambda r: r.gloo,
    "cxx_compiler": lambda r: r.cxx_compiler is not None,
}


def lessons_where(test: Callable[[Lesson], bool]) -> tuple[str, ...]:
    """The numbers of the registry's lessons that pass ``test``."""
    return tuple(entry.number for entry in LESSONS if test(entry))


def _using(package: str) -> tuple[str, ...]:
    return lessons_where(lambda entry: package in entry.packages)


def _needing(requirement: str) -> tuple[str, ...]:
    return lessons_where(lambda entry: requirement in entry.needs)


def _installed(report: Report, package: str) -> bool:
    return any(p.version for p in report.packages if p.name == package)


def _download(report: Report, dataset: DatasetStatus) -> bool | None:
    """Whether a missing dataset can be downloaded (``None``: the network was not checked)."""
    return None if report.network is None else any(report.network.get(m) == "reachable" for m in dataset.mirrors)


def problems(report: Report) -> list[Problem]:
    """What stops a lesson (a :class:`Problem` with lessons) or may surprise (one without), and what to do."""
    r, hw, every = report, report.hardware, lessons_where(lambda entry: True)
    found = []
    if r.profile_error:
        found.append(Problem(f"the run profile is unknown ({r.profile_source})", r.profile_error, every,
                             "unknown run profile"))
    if r.data_error:
        found.append(Problem("the data root is not usable", r.data_error, every, "the data root is not usable"))
    for ds in r.datasets:
        lessons, can = lessons_where(lambda entry: ds.name in entry.datasets), _download(r, ds)
        point = f"set {DATA_ENV} to a folder with {ds.folder}/raw/ in torchvision's layout (see README.md#data)"
        where = f"{ds.folder} is {ds.status} in the data root {r.data_root}"
        if ds.status == "corrupt":
            found.append(Problem(where, ds.detail, lessons, f"{ds.folder} is corrupt"))
        elif ds.status in ("missing", "incomplete") and can is False:
            found.append(Problem(f"{where} and its download hosts ({', '.join(ds.mirrors)}) are unreachable",
                                 f"{point}, or make a download host reachable", lessons,
                                 f"{ds.folder} {ds.status}, its download hosts unreachable"))
        elif ds.status in ("missing", "incomplete") and can is None:
            found.append(Problem(f"{where}; lessons {', '.join(lessons)} will try to download it (network not "
                                 "checked: --offline)", f"{point}, or run the doctor without --offline", ()))
    offline = r.network is not None and r.network.get(PYPI) != "reachable"
    for p in r.packages:
        if p.version is None and _using(p.name):
            fix = f"pip install {versions.to_install(p.name)}" + (f"=={p.pin}" if p.pin else "")
            if offline:
                fix += " (PyPI is unreachable from here: install from a local wheel folder)"
            found.append(Problem(f"{p.name} is not installed", fix, _using(p.name)))
    if r.tf_error:
        found.append(Problem(f"TensorFlow is installed but fails to import ({r.tf_error})",
                             "reinstall the pinned version (pip install -r requirements.txt) and import course_utils "
                             "before tensorflow", _using("tensorflow"), "TensorFlow fails to import"))
    if mismatched := [p for p in r.packages if p.matches_pin is False]:
        compared = "requirements.txt" if r.requirements else "the versions of the stored outputs"
        found.append(Problem(f"versions differ from {compared}: " + ", ".join(
            f"{p.name} {p.version} (pinned {p.pin})" for p in mismatched), "the committed outputs come from the "
            "pinned versions; `make lab` builds a virtual environment with exactly those. Numbers may differ", ()))
    if hw.gpus and r.tf_gpus == ():
        found.append(Problem(f"TensorFlow sees no GPU although PyTorch sees {len(hw.gpus)}",
                             "replace tensorflow-cpu with tensorflow[and-cuda] of the same version (README, GPUs); "
                             f"until then lessons {', '.join(_using('tensorflow'))} run TensorFlow on the CPU", ()))
    if r.engine_error:
        found.append(Problem(f"${ENGINE_ENV} names no int8 engine of this PyTorch build", r.engine_error,
                             _needing("int8_engine"), f"bad ${ENGINE_ENV}"))
    elif hw.quantized_engine is None:
        found.append(Problem(f"this PyTorch build has no int8 engine among {', '.join(hardware.QUANTIZED_ENGINES)}",
                             "install the PyTorch wheel pinned in requirements.txt", _needing("int8_engine"),
                             "no int8 engine"))
    if hw.bf16_flags and not hw.onednn_bf16 and hw.tf_onednn and _installed(r, "tensorflow"):
        found.append(Problem(
            f"oneDNN is capped below this CPU's native bf16 (ONEDNN_MAX_CPU_ISA={hw.onednn_cap}), but TensorFlow "
            "ignores the cap: its bf16 matrix products would pick the native kernels and crash the process",
            "also set TF_ENABLE_ONEDNN_OPTS=0 (the course's AVX2-only simulation sets "
            + " ".join(f"{k}={v}" for k, v in AVX2_ONLY_ENV.items()) + "), or unset ONEDNN_MAX_CPU_ISA",
            lessons_where(lambda e: "tensorflow" in e.packages and any(b.needs == "native_bf16" for b in e.branches)),
            "TensorFlow's bf16 would crash under the oneDNN cap"))
    if not r.gloo:
        found.append(Problem("torch.distributed has no gloo backend in this PyTorch build",
                             "install the PyTorch wheel pinned in requirements.txt (Linux and macOS builds have gloo)",
                             _needing("gloo"), "no gloo"))
    if r.cxx_compiler is None:
        found.append(Problem("no C++ compiler for torch.compile: Inductor builds its CPU kernels with one",
                             "install one: `apt install g++` (Debian, Ubuntu, WSL), `xcode-select --install` (macOS), "
                             "Visual Studio's C++ build tools (Windows, then set CXX=cl)", _needing("cxx_compiler"),
                             "no C++ compiler"))
    return found


def blocked_lessons(report: Report) -> dict[str, list[str]]:
    """The lessons that cannot run here, each with the reasons."""
    blocked: dict[str, list[str]] = {}
    for problem in problems(report):
        for number in problem.lessons:
            blocked.setdefault(number, []).append(problem.reason or problem.summary)
    return blocked


def lesson_plan(report: Report) -> dict[str, str]:
    """One line per lesson of the registry: its title, its device, and what each of its branches does here."""
    hw, blocked = report.hardware, blocked_lessons(report)
    device = {"cuda": f"cuda:0 ({hw.gpus[0]})" if hw.gpus else "", "mps": "mps (Apple's GPU)",
              "cpu": "the CPU"}[default_device(len(hw.gpus), report.mps)]
    plans = {}
    for entry in LESSONS:
        plan = f"{entry.title}, on {device}" + "".join(
            f"; {b.then if HOLDS[b.needs](report) else b.otherwise}" for b in entry.branches)
        notes = [f"{ds.folder} is downloaded into the data root first" if _download(report, ds) else
                 f"{ds.folder} is {ds.status}: the lesson will try to download it" for ds in report.datasets
                 if ds.name in entry.datasets and ds.status in ("missing", "incomplete")
                 and _download(report, ds) is not False]
        plans[entry.number] = (f"CANNOT RUN ({'; '.join(blocked[entry.number])}, see Problems). Once fixed: {plan}"
                               if entry.number in blocked else plan + (f" [{'; '.join(notes)}]" if notes else ""))
    return plans


def exit_status(report: Report) -> int:
    """1 when a lesson cannot run here, else 0."""
    return 1 if blocked_lessons(report) else 0


# ---------------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------------

def to_json(report: Report) -> dict[str, Any]:
    """The report as plain JSON types, with the lesson plans and problems added."""
    return {**asdict(report), "lessons": lesson_plan(report), "problems": [asdict(p) for p in problems(report)],
            "lessons_blocked": sorted(blocked_lessons(report))}


def _wrap(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, width=116, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def _rows(rows: Sequence[tuple[str, str]]) -> list[str]:
    """Aligned ``key  value`` lines, long values wrapped under themselves."""
    width = max(len(k) for k, _ in rows)
    return [line for key, value in rows for line in _wrap(value, f"  {key:<{width}}  ", " " * (width + 4))]


def format_report(report: Report) -> str:
    """The report as text for a terminal: facts by section, then one plan per lesson, then problems."""
    r, hw = report, report.hardware
    lines = ["Accelerated Deep Learning: environment doctor", "", "Machine", *_rows([
        ("OS", r.os), ("Python", r.python), ("CPU", f"{r.cpu_model}, {r.logical_cores} logical cores "
                                                   f"({hw.usable_cores} usable), torch uses {r.torch_threads} threads"),
        ("RAM", format_bytes(r.ram_bytes))])]
    lines += ["", f"Versions (compared with the pins in {r.requirements})" if r.requirements else
              "Versions (no requirements.txt next to the package, as when it is pip-installed from git in Colab: "
              "compared with the versions the stored outputs were made with, course_utils.versions)"]
    installed = {p.name: "not installed" if p.version is None else p.version
                 + (f" ({p.distribution})" if p.distribution != p.name else "") for p in r.packages}
    width = max(map(len, installed.values()))
    lines += _rows([(p.name, f"{installed[p.name]:<{width}}  " + (
        "" if p.pin is None else f"pinned {p.pin}" if p.matches_pin is None
        else "matches the pin" if p.matches_pin else f"DIFFERS from the pin {p.pin}")) for p in r.packages])

    build = f"torch built with CUDA {r.torch_cuda}" if r.torch_cuda else "CPU-only torch build"
    tf = (f"import failed: {r.tf_error}" if r.tf_error else ", ".join(r.tf_gpus) or "none" if r.tf_gpus is not None
          else "not checked (--no-tensorflow)" if _installed(r, "tensorflow")
          else "TensorFlow is not installed")
    lines += ["", "Accelerators", *_rows([
        ("CUDA GPUs", f"{len(hw.gpus)} ({build})" if hw.gpus else f"none: no CUDA GPU ({build})"),
        *((f"GPU {i}", name + (f", {format_bytes(r.gpu_memory[i])}" if i < len(r.gpu_memory) else ""))
          for i, name in enumerate(hw.gpus)),
        ("Apple MPS", "available" if r.mps else "not available"), ("TensorFlow GPUs", tf),
        ("torch.distributed", f"NCCL {'' if r.hardware.nccl else 'not '}available, "
                              f"gloo {'' if r.gloo else 'not '}available"),
        ("C++ compiler", r.cxx_compiler or "none found (torch.compile cannot build CPU kernels)"),
        ("TPU", f"detected ({r.tpu})" if r.tpu else "not detected")])]

    cap = hw.gpu_capability
    cuda0 = [] if cap is None else [("cuda:0", f"compute capability {cap[0]}.{cap[1]}: " + ", ".join(
        f"{kind} {'yes' if cap >= needs else 'no'}" for kind, needs in
        (("fp16 tensor cores", TENSOR_CORE_CAPABILITY), ("bf16", (8, 0)), ("fp8", (8, 9)))))]
    lines += ["", "Precision", *_rows([
        ("CPU kernels", hw.isa), ("PyTorch bf16", hw.bf16_text), ("TensorFlow bf16", hw.tf_text),
        ("int8", hw.int8_text + (f" ({r.engine_error})" if r.engine_error else "")), *cuda0])]

    lines += ["", "Data", *_rows([("root", f"{r.data_root} ({r.data_source})" if r.data_root else
                                   f"not usable ({r.data_source})"),
                                  *((ds.folder, f"{ds.status}: {ds.detail}") for ds in r.datasets)])]
    lines += ["", "Network", *(_rows(list(r.network.items())) if r.network is not None
                               else ["  not checked (--offline)"])]
    prof = PROFILES.get(r.profile or "")
    lines += ["", "Run profile", f"  {prof.name} ({r.profile_source}): {prof.train_samples or 'all'} training / "
              f"{prof.test_samples or 'all'} test images, {prof.epochs} epochs, {prof.repeats} timing repeats"
              if prof else f"  UNKNOWN ({r.profile_source}): see Problems"]

    lines += ["", "Lessons on this machine"]
    for number, plan in lesson_plan(r).items():
        lines += _wrap(plan, f"  {number} ", " " * 5)
    found, blocked = problems(r), blocked_lessons(r)
    lines += ["", "Problems" if found else "Problems: none"]
    for problem in found:
        tag = f"[blocks {', '.join(problem.lessons)}]" if problem.lessons else "[warning]"
        lines += _wrap(f"{tag} {problem.summary}", "  ", "    ") + _wrap(f"what to do: {problem.fix}", "    ", "    ")
    lines += ["", f"{len(blocked)} of {len(LESSONS)} lessons cannot run here: {', '.join(sorted(blocked))}."
              if blocked else f"All {len(LESSONS)} lessons can run here."]
    return "\n".join(lines)
