"""The course's environment doctor: what this machine has, and what each lesson will do on it.

Run it as ``python -m course_utils doctor`` (``--json`` for the report as JSON, ``--offline`` to skip the
network check). :func:`collect` gathers the facts once; the lesson plans and the problems are computed
from that report alone, so they can be checked for any machine, real or made up::

    from course_utils import doctor

    report = doctor.collect(network=False)
    print(doctor.format_report(report))
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import torch
import torch.distributed as dist
import torchvision

from course_utils import data, hardware
from course_utils.data import DATA_ENV, DATASETS, DataError, data_root, dataset_info, ensure_dataset
from course_utils.device import device_name, gpu_count, mps_available, package_version
from course_utils.hardware import AVX2_ONLY_ENV, QUANTIZED_ENGINES
from course_utils.precision import TENSOR_CORE_CAPABILITY, format_bytes
from course_utils.profile import PROFILE_ENV, PROFILES, get_profile
from course_utils.tf_cluster import find_tpu, worker_inter_op_threads

LESSONS: dict[str, str] = {
    "01": "autograd", "02": "optimizers", "03": "multiprocessing", "04": "tensorboard", "05": "distributed_pytorch",
    "06": "tf_distribute", "07": "quantization", "08": "pruning", "09": "mixed_precision",
}
# What each lesson loads through course_utils.data, and the packages it imports beyond torch and torchvision.
LESSON_DATASETS: dict[str, tuple[str, ...]] = {
    "01": (), "02": ("mnist",), "03": ("fashion_mnist",), "04": ("fashion_mnist",), "05": ("mnist",),
    "06": ("mnist",), "07": ("fashion_mnist",), "08": ("fashion_mnist",), "09": ("fashion_mnist",),
}
LESSON_PACKAGES: dict[str, tuple[str, ...]] = {
    "01": ("tensorflow",), "04": ("tensorflow", "keras", "tensorboard"), "06": ("tensorflow", "keras"),
    "07": ("torchao",), "09": ("tensorflow", "keras"),
}
# The packages reported, each with the distributions that provide it (the pin is tensorflow-cpu;
# GPU users install tensorflow[and-cuda] instead).
PACKAGES: dict[str, tuple[str, ...]] = {
    "torch": ("torch",), "torchvision": ("torchvision",), "torchao": ("torchao",),
    "tensorflow": ("tensorflow-cpu", "tensorflow", "tensorflow-macos"), "keras": ("keras",),
    "tensorboard": ("tensorboard",), "numpy": ("numpy",), "jupyterlab": ("jupyterlab",),
}
BF16_CAPABILITY = (8, 0)  # Ampere: bf16 tensor cores
FP8_CAPABILITY = (8, 9)  # Ada Lovelace and Hopper: fp8 tensor cores
PYPI = "pypi.org:443"
README_DATA = "README.md#data"


@dataclass(frozen=True)
class Machine:
    """The computer: OS, Python, processor, cores, threads and memory."""

    os: str
    python: str
    cpu_model: str
    logical_cores: int
    usable_cores: int  # the cores this process may run on (its CPU affinity)
    torch_threads: int  # PyTorch's intra-op threads
    ram_bytes: int | None


@dataclass(frozen=True)
class Package:
    """One package: the distribution installed, its version, and the course's pin for it."""

    name: str
    distribution: str | None  # None: not installed
    version: str | None
    pin: str | None  # the version pinned in requirements.txt (None: not pinned, or no requirements.txt)
    matches_pin: bool | None  # None: nothing to compare


@dataclass(frozen=True)
class Gpu:
    """A CUDA GPU as PyTorch sees it."""

    index: int
    name: str
    capability: tuple[int, int]
    memory_bytes: int


@dataclass(frozen=True)
class Accelerators:
    """GPUs, MPS, TPUs and the torch.distributed backends."""

    torch_cuda: str | None  # the CUDA version PyTorch was built with (None: a CPU-only build)
    gpus: tuple[Gpu, ...]
    mps: bool
    tf_gpus: tuple[str, ...] | None  # None: TensorFlow not checked, not installed or not importable
    tf_error: str | None  # why importing TensorFlow failed
    distributed: bool
    nccl: bool
    gloo: bool
    tpu: str | None  # what find_tpu() found


@dataclass(frozen=True)
class CpuPrecision:
    """What the CPU offers for low precision and int8."""

    bf16_flags: tuple[str, ...] | None  # native bf16 flags found (None: the CPU flags could not be read)
    onednn_bf16: bool  # oneDNN's own answer, which lesson 09 follows
    capability: str  # PyTorch's CPU kernel level (AVX2, AVX512, ...)
    quantized_engines: tuple[str, ...]
    onednn_cap: str | None = None  # $ONEDNN_MAX_CPU_ISA, when set
    tf_onednn: bool = True  # TensorFlow uses its oneDNN operations ($TF_ENABLE_ONEDNN_OPTS)


@dataclass(frozen=True)
class DatasetStatus:
    """One dataset in the data root."""

    name: str
    folder: str
    status: str  # "verified", "missing", "incomplete", "corrupt" or "unknown" (no usable data root)
    detail: str
    mirrors: tuple[str, ...]  # torchvision's download endpoints, as host:port


@dataclass(frozen=True)
class Data:
    """The data root, where its path came from, and each dataset in it."""

    root: str | None
    source: str
    error: str | None
    datasets: tuple[DatasetStatus, ...]


@dataclass(frozen=True)
class Network:
    """TCP reachability of the dataset download hosts and PyPI (``checked=False``: skipped)."""

    checked: bool
    timeout: float
    endpoints: dict[str, str]  # host:port -> "reachable" or "unreachable (why)"


@dataclass(frozen=True)
class RunProfile:
    """The run profile in effect, and why."""

    name: str | None  # None: $COURSE_PROFILE names no profile
    source: str
    error: str | None


@dataclass(frozen=True)
class Report:
    """Everything the doctor found; the plans and problems are computed from it alone."""

    machine: Machine
    requirements: str | None  # the requirements.txt compared with (None: not found, as in Colab)
    packages: tuple[Package, ...]
    accelerators: Accelerators
    cpu: CpuPrecision
    data: Data
    network: Network
    profile: RunProfile


@dataclass(frozen=True)
class Problem:
    """Something to fix. ``lessons``: the lessons it stops (empty: a warning, every lesson still runs)."""

    summary: str
    fix: str
    lessons: tuple[str, ...]
    reason: str = ""  # a few words for the lesson lines (default: the summary)


# ---------------------------------------------------------------------------------------------------------
# Collecting the facts
# ---------------------------------------------------------------------------------------------------------

def default_requirements() -> Path:
    """Where the repository's requirements.txt is when the package runs from a checkout."""
    return Path(__file__).resolve().parent.parent / "requirements.txt"


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, str] | None:
    """The ``name==version`` pins of a requirements file, by normalized name (``None``: no such file)."""
    if not path.is_file():
        return None
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*==\s*([^\s;#]+)", line)
        if match:
            pins[_normalize(match.group(1))] = match.group(3)
    return pins


def _same_version(installed: str, pin: str) -> bool:
    """Equal, ignoring a local build tag (``2.14.1+cu130`` matches ``2.14.1``)."""
    return installed.split("+")[0] == pin.split("+")[0]


def _packages(pins: dict[str, str] | None) -> tuple[Package, ...]:
    packages = []
    for name, distributions in PACKAGES.items():
        installed = next(((d, v) for d in distributions if (v := package_version(d))), None)
        pinned = [pins[_normalize(d)] for d in distributions if pins and _normalize(d) in pins]
        pin = pinned[0] if pinned else None
        dist_name, version = installed if installed else (None, None)
        matches = _same_version(version, pin) if version and pin else None
        packages.append(Package(name, dist_name, version, pin, matches))
    return tuple(packages)


def _os_name() -> str:
    system = platform.system()
    if system == "Linux":
        try:
            pretty = platform.freedesktop_os_release().get("PRETTY_NAME", "")
        except OSError:
            pretty = ""
        return f"Linux {platform.release()}{f' ({pretty})' if pretty else ''}, {platform.machine()}"
    if system == "Darwin":
        return f"macOS {platform.mac_ver()[0]}, {platform.machine()}"
    return f"{platform.platform()}, {platform.machine()}"


def _ram_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _machine() -> Machine:
    logical = os.cpu_count() or 1
    return Machine(os=_os_name(), python=platform.python_version(), cpu_model=device_name("cpu"),
                   logical_cores=logical, usable_cores=hardware.usable_cores(), torch_threads=torch.get_num_threads(),
                   ram_bytes=_ram_bytes())


def _cpu_precision() -> CpuPrecision:
    hw = hardware.detect()
    return CpuPrecision(bf16_flags=hw.bf16_flags, onednn_bf16=hw.onednn_bf16, capability=hw.isa,
                        quantized_engines=tuple(torch.backends.quantized.supported_engines),
                        onednn_cap=hw.onednn_cap, tf_onednn=hw.tf_onednn)


def _gpus() -> tuple[Gpu, ...]:
    gpus = []
    for i in range(gpu_count()):
        props = torch.cuda.get_device_properties(i)
        gpus.append(Gpu(i, props.name, (props.major, props.minor), int(props.total_memory)))
    return tuple(gpus)


def _tensorflow_gpus(check: bool) -> tuple[tuple[str, ...] | None, str | None]:
    """TensorFlow's GPUs. TensorFlow is imported here only, after torch (see course_utils/__init__.py)."""
    if not check or not any(package_version(d) for d in PACKAGES["tensorflow"]):
        return None, None
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf

        return tuple(d.name for d in tf.config.list_physical_devices("GPU")), None
    except Exception as exc:  # a broken install raises anything from ImportError to RuntimeError
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _accelerators(tensorflow: bool) -> Accelerators:
    tf_gpus, tf_error = _tensorflow_gpus(tensorflow)
    available = dist.is_available()
    return Accelerators(torch_cuda=torch.version.cuda, gpus=_gpus(), mps=mps_available(), tf_gpus=tf_gpus,
                        tf_error=tf_error, distributed=available, nccl=available and dist.is_nccl_available(),
                        gloo=available and dist.is_gloo_available(), tpu=find_tpu())


def _endpoint(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def _mirrors(name: str) -> tuple[str, ...]:
    """The download endpoints that torchvision tries for a dataset, in order."""
    cls = getattr(torchvision.datasets, dataset_info(name).torchvision_class)
    return tuple(dict.fromkeys(_endpoint(url) for url in getattr(cls, "mirrors", ())))


def _dataset_status(name: str, root: Path | None) -> DatasetStatus:
    info = dataset_info(name)
    mirrors = _mirrors(name)
    if root is None:
        return DatasetStatus(name, info.folder, "unknown", "no usable data root", mirrors)
    paths = {f: data.raw_path(root, info, f) for f in info.raw_md5}
    missing = [f for f, path in paths.items() if not path.is_file()]
    if len(missing) == len(paths):
        return DatasetStatus(name, info.folder, "missing", f"no {info.folder}/raw/ files in the data root", mirrors)
    if missing:
        return DatasetStatus(name, info.folder, "incomplete", f"missing {', '.join(missing)}", mirrors)
    try:
        ensure_dataset(name, download=False)  # the same checks a lesson runs, nothing downloaded
    except DataError as exc:
        return DatasetStatus(name, info.folder, "corrupt", str(exc), mirrors)
    how = Counter(data.verify_file(path, root, info.raw_md5[f], path.stat().st_mtime) for f, path in paths.items())
    checks = ", ".join(f"{n} by {method}" for method, n in sorted(how.items()))
    return DatasetStatus(name, info.folder, "verified", f"{len(paths)} raw files verified ({checks})", mirrors)


def _data() -> Data:
    env = os.environ.get(DATA_ENV, "").strip()
    if env:
        source = f"from ${DATA_ENV}"
    elif data.checkout_data_dir() is not None:
        source = f"default: the course checkout's data/ folder; ${DATA_ENV} is unset"
    else:
        source = f"default: ./data in the current folder, no course checkout found; ${DATA_ENV} is unset"
    try:
        root: Path | None = data_root()
        error = None
    except DataError as exc:
        root, error = None, str(exc)
    return Data(root=str(root) if root else None, source=source, error=error,
                datasets=tuple(_dataset_status(name, root) for name in DATASETS))


def _describe(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return "host name not resolved"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__


def check_endpoints(endpoints: Sequence[str], timeout: float = 3.0) -> dict[str, str]:
    """Open a TCP connection to each ``host:port``, all at once; return ``"reachable"`` or
    ``"unreachable (why)"`` for each, within about ``timeout`` seconds in total (slow name lookups
    included: an endpoint that has not answered by then is unreachable).

    Raises:
        ValueError: for a non-positive timeout or an endpoint that is not ``host:port``.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
    targets = []
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"endpoint must be 'host:port', got {endpoint!r}.")
        targets.append((endpoint, host, int(port)))
    results: dict[str, str] = {}

    def attempt(endpoint: str, host: str, port: int) -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                results[endpoint] = "reachable"
        except OSError as exc:
            results[endpoint] = f"unreachable ({_describe(exc)})"

    # Daemon threads: a name lookup that hangs past the deadline is abandoned, and never delays exit.
    threads = [threading.Thread(target=attempt, args=target, daemon=True) for target in targets]
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return {e: results.get(e, f"unreachable (no answer within {timeout:g} s)") for e, _, _ in targets}


def _run_profile() -> RunProfile:
    raw = os.environ.get(PROFILE_ENV, "").strip()
    if raw:
        source = f"${PROFILE_ENV}={raw}"
    elif os.environ.get("CI"):
        source = f"default under CI: $CI is set, ${PROFILE_ENV} is not"
    else:
        source = f"default: ${PROFILE_ENV} and $CI are unset"
    try:
        return RunProfile(get_profile().name, source, None)
    except ValueError as exc:
        return RunProfile(None, source, str(exc))


def collect(*, network: bool = True, tensorflow: bool = True, timeout: float = 3.0,
            requirements: Path | None = None) -> Report:
    """Examine this machine and return the :class:`Report`.

    Args:
        network: try TCP connections to the dataset download hosts and PyPI (``False``: skip).
        tensorflow: import TensorFlow to list its GPUs (slow: a few seconds; ``False``: skip).
        timeout: seconds the whole network check may take.
        requirements: the requirements file to compare versions with (default: the checkout's).
    """
    requirements = default_requirements() if requirements is None else requirements
    pins = read_pins(requirements)
    data_report = _data()
    endpoints = [*dict.fromkeys(m for d in data_report.datasets for m in d.mirrors), PYPI]
    return Report(
        machine=_machine(),
        requirements=str(requirements) if pins is not None else None,
        packages=_packages(pins),
        accelerators=_accelerators(tensorflow),  # after torch: TensorFlow is imported last
        cpu=_cpu_precision(),
        data=data_report,
        network=Network(checked=network, timeout=timeout,
                        endpoints=check_endpoints(endpoints, timeout) if network else {}),
        profile=_run_profile(),
    )


# ---------------------------------------------------------------------------------------------------------
# Conclusions, from the report alone
# ---------------------------------------------------------------------------------------------------------

def gpu_precision(capability: Sequence[int]) -> dict[str, bool]:
    """Which low-precision formats a CUDA compute capability runs on tensor cores."""
    cap = tuple(capability)
    return {"fp16 tensor cores": cap >= TENSOR_CORE_CAPABILITY, "bf16": cap >= BF16_CAPABILITY,
            "fp8": cap >= FP8_CAPABILITY}


def cpu_bf16(cpu: CpuPrecision) -> str:
    """One line on bf16 on this CPU: native (fast) or emulated (runs, slower than fp32)."""
    onednn = f"oneDNN native bf16 kernels: {'yes' if cpu.onednn_bf16 else 'no'}"
    if cpu.bf16_flags and not cpu.onednn_bf16:
        return (f"emulated in PyTorch: the CPU has native bf16 ({', '.join(cpu.bf16_flags)}), but oneDNN is capped "
                f"at {cpu.onednn_cap or 'a lower ISA'}; {onednn}")
    if cpu.bf16_flags:
        return f"fast: native bf16 instructions ({', '.join(cpu.bf16_flags)}); {onednn}"
    if cpu.bf16_flags is None:
        verdict = "fast" if cpu.onednn_bf16 else "emulated: runs, but slower than fp32"
        return f"{verdict} (CPU flags unreadable; {onednn})"
    return (f"emulated: runs, but slower than fp32 (no AVX512-BF16/AMX-BF16 in the CPU flags; PyTorch CPU kernels "
            f"{cpu.capability}; {onednn})")


def _package(report: Report, name: str) -> Package | None:
    return next((p for p in report.packages if p.name == name), None)


def _download(report: Report, dataset: DatasetStatus) -> bool | None:
    """Whether a missing dataset can be downloaded (``None``: the network was not checked)."""
    if not report.network.checked:
        return None
    return any(report.network.endpoints.get(m) == "reachable" for m in dataset.mirrors)


def _lessons_using(name: str) -> tuple[str, ...]:
    return tuple(lesson for lesson, names in LESSON_DATASETS.items() if name in names)


def problems(report: Report) -> list[Problem]:
    """What stops a lesson (a :class:`Problem` with lessons) or may surprise (one without), and what to do."""
    every = tuple(LESSONS)
    found = []
    if report.profile.error:
        found.append(Problem(f"the run profile is unknown ({report.profile.source})", report.profile.error, every,
                             "unknown run profile"))
    if report.data.error:
        found.append(Problem("the data root is not usable", report.data.error, every, "the data root is not usable"))
    for ds in report.data.datasets:
        lessons = _lessons_using(ds.name)
        where = f"the data root {report.data.root}"
        point = (f"set {DATA_ENV} to a folder with {ds.folder}/raw/ in torchvision's layout (see {README_DATA}), "
                 f"e.g. `export {DATA_ENV}=/path/to/data`")
        if ds.status == "corrupt":
            found.append(Problem(f"{ds.folder} fails its checksum in {where}", ds.detail, lessons,
                                 f"{ds.folder} fails its checksum"))
        elif ds.status in ("missing", "incomplete"):
            can = _download(report, ds)
            hosts = ", ".join(ds.mirrors) or "none known"
            if can is False:
                found.append(Problem(f"{ds.folder} is {ds.status} in {where} and its download host ({hosts}) is "
                                     f"unreachable", f"{point}; or make the download host reachable", lessons,
                                     f"{ds.folder} {ds.status}, its download host unreachable"))
            elif can is None:
                found.append(Problem(f"{ds.folder} is {ds.status} in {where}; lessons {', '.join(lessons)} will try "
                                     f"to download it from {hosts} (network not checked: --offline)",
                                     f"{point}, or run the doctor without --offline", ()))
    pypi_down = report.network.checked and report.network.endpoints.get(PYPI) != "reachable"
    for name in sorted({p for names in LESSON_PACKAGES.values() for p in names}):
        package = _package(report, name)
        if package is not None and package.version is None:
            lessons = tuple(lesson for lesson, names in LESSON_PACKAGES.items() if name in names)
            install = (f"pip install {PACKAGES[name][0]}=={package.pin}" if package.pin
                       else f"pip install -r requirements.txt (or pip install {PACKAGES[name][0]})")
            found.append(Problem(f"{name} is not installed", install + (
                " (PyPI is unreachable from here: install from a local wheel folder)" if pypi_down else ""), lessons))
    jupyterlab = _package(report, "jupyterlab")
    if jupyterlab is not None and jupyterlab.version is None:
        found.append(Problem("JupyterLab is not installed", "`make lab` installs it (Colab needs none)", ()))
    if report.accelerators.tf_error:
        found.append(Problem(f"TensorFlow is installed but fails to import ({report.accelerators.tf_error})",
                             "reinstall the pinned version (pip install -r requirements.txt) and import course_utils "
                             "before tensorflow", tuple(k for k, v in LESSON_PACKAGES.items() if "tensorflow" in v)))
    mismatched = [p for p in report.packages if p.matches_pin is False]
    if mismatched:
        found.append(Problem(
            "versions differ from requirements.txt: "
            + ", ".join(f"{p.name} {p.version} (pinned {p.pin})" for p in mismatched),
            "the committed outputs come from the pinned versions; `make lab` builds a virtual environment with "
            "exactly those. Numbers may differ slightly otherwise", ()))
    acc = report.accelerators
    if acc.gpus and acc.tf_gpus == ():
        found.append(Problem(
            f"TensorFlow sees no GPU although PyTorch sees {len(acc.gpus)}",
            "replace tensorflow-cpu with tensorflow[and-cuda] of the same version (README, GPUs); until then "
            "lessons 04, 06 and 09 run TensorFlow on the CPU", ()))
    if not any(e in report.cpu.quantized_engines for e in QUANTIZED_ENGINES):
        found.append(Problem(f"this PyTorch build has no int8 engine among {', '.join(QUANTIZED_ENGINES)} "
                             f"(it has: {', '.join(report.cpu.quantized_engines) or 'none'})",
                             "install the PyTorch wheel pinned in requirements.txt", ("07",)))
    cpu = report.cpu
    tensorflow = _package(report, "tensorflow")
    if cpu.bf16_flags and not cpu.onednn_bf16 and cpu.tf_onednn and tensorflow is not None and tensorflow.version:
        found.append(Problem(
            f"oneDNN is capped below this CPU's native bf16 (ONEDNN_MAX_CPU_ISA={cpu.onednn_cap}), but TensorFlow "
            "ignores the cap: its bf16 matrix products would pick the native kernels and crash the process",
            "also set TF_ENABLE_ONEDNN_OPTS=0 (the course's AVX2-only simulation sets "
            + " ".join(f"{k}={v}" for k, v in AVX2_ONLY_ENV.items()) + "), or unset ONEDNN_MAX_CPU_ISA",
            ("09",), "TensorFlow's bf16 would crash under the oneDNN cap"))
    if not acc.gloo:
        found.append(Problem("torch.distributed has no gloo backend in this PyTorch build",
                             "install the PyTorch wheel pinned in requirements.txt (Linux and macOS builds have "
                             "gloo)", ("05",)))
    return found


def blocked_lessons(report: Report) -> dict[str, list[str]]:
    """The lessons that cannot run here, each with the reasons."""
    blocked: dict[str, list[str]] = {}
    for problem in problems(report):
        for lesson in problem.lessons:
            blocked.setdefault(lesson, []).append(problem.reason or problem.summary)
    return blocked


def _sizes(report: Report) -> str:
    if report.profile.name is None:
        return "sizes unknown"
    p = PROFILES[report.profile.name]
    images = f"{p.train_samples:,} training images" if p.train_samples else "all training images"
    return f"{report.profile.name} profile: {images}, {p.epochs} epochs"


def _data_note(report: Report, lesson: str) -> str:
    notes = []
    for ds in report.data.datasets:
        if ds.name in LESSON_DATASETS[lesson] and ds.status in ("missing", "incomplete"):
            can = _download(report, ds)
            if can:
                notes.append(f"{ds.folder} is downloaded into the data root first")
            elif can is None:
                notes.append(f"{ds.folder} is {ds.status}: the lesson will try to download it")
    return f" [{'; '.join(notes)}]" if notes else ""


def lesson_plan(report: Report) -> dict[str, str]:
    """What each lesson (01-09) will do on the machine described by ``report``, one or two sentences each."""
    acc, machine = report.accelerators, report.machine
    gpu0 = f"{acc.gpus[0].name} (cuda:0)" if acc.gpus else ""
    device = gpu0 if acc.gpus else ("Apple's GPU (MPS)" if acc.mps else "the CPU")
    skipped = "no CUDA GPU" + ("; MPS is not timed" if acc.mps else "")
    tf_device = f"{len(acc.tf_gpus)} GPU(s)" if acc.tf_gpus else "the CPU"
    if acc.tf_gpus is None:
        tf_device += " (its GPUs not checked)"

    plans = {
        "01": f"tensors and autograd on {device}; matmul throughput on the CPU ({machine.torch_threads} threads) vs "
              "NumPy; a tf.function traced by TensorFlow; "
              + (f"adds a matmul timing on {gpu0}" if acc.gpus else f"GPU matmul timing skipped ({skipped})"),
        "02": f"optimizers written from their formulas and checked against torch.optim; the MNIST comparison on the "
              f"CPU ({_sizes(report)}); Adam step timings (for-loop, foreach, fused) on the CPU"
              + (f" and on {gpu0}" if acc.gpus else f"; GPU timings skipped ({skipped})"),
        "03": f"threads vs processes on {machine.usable_cores} usable core(s)"
              + ("" if machine.usable_cores >= 2 else " (speedups that need 2 cores are explained, not checked)")
              + "; fork/forkserver/spawn start costs; DataLoader workers on Fashion-MNIST; "
              + (f"pin_memory copy timing on {gpu0}" if acc.gpus else f"pin_memory timing skipped ({skipped})"),
        "04": f"SummaryWriter sweep on Fashion-MNIST on {device}; Keras TensorBoard callback, TensorFlow on "
              f"{tf_device}; the live TensorBoard view only in an interactive session (skipped under CI/nbconvert)",
        "05": _lesson05(report),
        "06": _lesson06(report, tf_device),
        "07": _lesson07(report),
        "08": f"pruning a LeNet on Fashion-MNIST on {device}; latencies on the CPU (1 thread)"
              + (f" and on {gpu0}" if acc.gpus else f"; GPU latencies skipped ({skipped})"),
        "09": _lesson09(report, tf_device),
    }
    blocked = blocked_lessons(report)
    return {lesson: (f"CANNOT RUN ({'; '.join(blocked[lesson])}, see Problems). Once fixed: {plan}"
                     if lesson in blocked else plan + _data_note(report, lesson)) for lesson, plan in plans.items()}


def _lesson05(report: Report) -> str:
    acc = report.accelerators
    n = len(acc.gpus)
    if acc.nccl and n >= 2:
        both = "DDP + model parallel with NCCL on 4 GPUs (2 processes x 2 stages)" if n >= 4 else \
               "DDP + model parallel needs 4 GPUs: it runs with gloo on CPU processes"
        return (f"DDP with NCCL on 2 of the {n} GPUs via torchrun (one process per GPU, also the scaling benchmark); "
                f"DataParallel scatter/gather and the 2-stage model on cuda:0/cuda:1; {both}; the GPipe pipeline and "
                f"the two-'node' run use gloo on CPU processes")
    why = ("no GPU" if n == 0 else "1 GPU: NCCL needs one GPU per process" if n == 1
           else "this PyTorch build has no NCCL")
    return (f"DDP with gloo, 2 CPU processes via torchrun (one and two 'nodes', scaling benchmark); GPipe pipeline on "
            f"2 CPU processes; NCCL/multi-GPU sections skipped ({why}): DataParallel only calls the module"
            + (" on cuda:0" if n == 1 else "") + ", both model-parallel stages on the CPU")


def _lesson06(report: Report, tf_device: str) -> str:
    acc, cores = report.accelerators, report.machine.logical_cores
    tf_gpus = len(acc.tf_gpus or ())
    mirrored = (f"MirroredStrategy on {tf_gpus} GPUs (NcclAllReduce included)" if tf_gpus >= 2 else
                "MirroredStrategy on 2 logical CPU devices (fewer than 2 TensorFlow GPUs; NcclAllReduce prints its "
                "error)")
    tpu = f"TPUStrategy on the TPU ({acc.tpu})" if acc.tpu else "TPUStrategy skipped (no TPU detected)"
    return (f"{mirrored}; MultiWorkerMirroredStrategy with 2 local worker processes (gRPC, ring); "
            f"ParameterServerStrategy in-process (2 workers with {worker_inter_op_threads(2, cpu_count=cores)} "
            f"inter-op threads each, 1 ps); {tpu}; TensorFlow on {tf_device}")


def _lesson07(report: Report) -> str:
    engine = next((e for e in QUANTIZED_ENGINES if e in report.cpu.quantized_engines), None)
    torchao = _package(report, "torchao")
    version = f" {torchao.version}" if torchao and torchao.version else ""
    return (f"int8 kernels run on the CPU in any case (engine {engine!r}; the GPU is not used): int8 by hand, dynamic "
            f"and static PTQ, QAT, torchao{version} quantize_; size, 1-thread latency and accuracy on Fashion-MNIST")


def _lesson09(report: Report, tf_device: str) -> str:
    acc, cpu = report.accelerators, report.cpu
    epochs = PROFILES[report.profile.name].epochs if report.profile.name else None
    all_epochs = f"all {epochs} epochs" if epochs else "all epochs"
    keras = f"; Keras mixed_bfloat16 fit, TensorFlow on {tf_device}"
    if acc.gpus:
        gpu = acc.gpus[0]
        cap = ".".join(map(str, gpu.capability))
        if gpu_precision(gpu.capability)["fp16 tensor cores"]:
            return (f"AMP with fp16 autocast + GradScaler on {gpu.name} (tensor cores, compute capability {cap}): the "
                    f"mixed run trains {all_epochs}; the CPU bf16 autocast table and memory peaks too{keras}")
        return (f"fp16 autocast + GradScaler on {gpu.name}, which has no tensor cores (compute capability {cap} < "
                f"7.0): the mixed run is kept to 1 epoch{keras}")
    if acc.mps:
        return (f"bf16 autocast on Apple's GPU (MPS), whose speed this course does not measure: the mixed run is kept "
                f"to 1 epoch; fp16 + GradScaler CUDA run skipped (no CUDA GPU){keras}")
    if cpu.onednn_bf16:
        mixed = f"AMP with bf16 autocast on the CPU, native bf16 kernels (oneDNN): the mixed run trains {all_epochs}"
    else:
        mixed = ("AMP with bf16 autocast on the CPU, emulated (no native bf16 kernels): slower than fp32, so the mixed "
                 "run is kept to 1 epoch")
    return f"{mixed}; fp16 + GradScaler CUDA run skipped (no GPU){keras}"


# ---------------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------------

def to_json(report: Report) -> dict[str, Any]:
    """The report as plain JSON types, with the lesson plans and problems added."""
    return {**asdict(report), "lessons": lesson_plan(report), "problems": [asdict(p) for p in problems(report)],
            "lessons_blocked": sorted(blocked_lessons(report))}


def _rows(rows: Sequence[tuple[str, str]], indent: str = "  ", width: int = 116) -> list[str]:
    """Aligned ``key  value`` lines, long values wrapped under themselves."""
    key_width = max(len(k) for k, _ in rows)
    lines = []
    for key, value in rows:
        first = f"{indent}{key:<{key_width}}  "
        lines += textwrap.wrap(value, width=max(width, len(first) + 40), initial_indent=first,
                               subsequent_indent=" " * len(first), break_on_hyphens=False) or [first.rstrip()]
    return lines


def format_report(report: Report) -> str:
    """The report as text for a terminal: facts by section, then one plan per lesson, then problems."""
    m, acc, cpu, d = report.machine, report.accelerators, report.cpu, report.data
    lines = ["Accelerated Deep Learning: environment doctor", "", "Machine"]
    lines += _rows([
        ("OS", m.os), ("Python", m.python), ("CPU", f"{m.cpu_model}, {m.logical_cores} logical cores "
                                                   f"({m.usable_cores} usable), torch uses {m.torch_threads} threads"),
        ("RAM", format_bytes(m.ram_bytes) if m.ram_bytes else "unknown"),
    ])
    if report.requirements:
        lines += ["", f"Versions (compared with the pins in {report.requirements})"]
    else:
        lines += ["", "Versions (no requirements.txt next to the package, as when it is pip-installed from git in "
                      "Colab: versions not compared with the course's pins)"]
    installed = {p.name: "not installed" if p.version is None else p.version
                 + (f" ({p.distribution})" if p.distribution != p.name else "") for p in report.packages}
    width = max(map(len, installed.values()))
    rows = []
    for p in report.packages:
        verdict = ("" if p.pin is None else f"pinned {p.pin}" if p.matches_pin is None
                   else "matches the pin" if p.matches_pin else f"DIFFERS from the pin {p.pin}")
        rows.append((p.name, f"{installed[p.name]:<{width}}  {verdict}".rstrip()))
    lines += _rows(rows)

    lines += ["", "Accelerators"]
    build = f"torch built with CUDA {acc.torch_cuda}" if acc.torch_cuda else "CPU-only torch build"
    gpu_rows = [(f"GPU {g.index}", f"{g.name}, compute capability {g.capability[0]}.{g.capability[1]}, "
                                   f"{format_bytes(g.memory_bytes)}") for g in acc.gpus]
    tf_package = _package(report, "tensorflow")
    if acc.tf_error:
        tf = f"import failed: {acc.tf_error}"
    elif acc.tf_gpus is not None:
        tf = ", ".join(acc.tf_gpus) or "none"
    elif tf_package is not None and tf_package.version is None:
        tf = "TensorFlow is not installed"
    else:
        tf = "not checked (--no-tensorflow)"
    def yes_no(ok: bool) -> str:
        return "available" if ok else "not available"

    backends = (f"NCCL {yes_no(acc.nccl)}, gloo {yes_no(acc.gloo)}" if acc.distributed
                else "not available in this PyTorch build")
    lines += _rows([("CUDA GPUs", f"{len(acc.gpus)} ({build})" if acc.gpus else f"none: no CUDA GPU ({build})"),
                    *gpu_rows, ("Apple MPS", "available" if acc.mps else "not available"),
                    ("TensorFlow GPUs", tf), ("torch.distributed", backends),
                    ("TPU", f"detected ({acc.tpu})" if acc.tpu else "not detected")])

    lines += ["", "Precision"]
    prec_rows = [("CPU bf16", cpu_bf16(cpu))]
    for g in acc.gpus:
        flags = gpu_precision(g.capability)
        prec_rows.append((f"GPU {g.index}", ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in flags.items())))
    prec_rows.append(("int8 engines", ", ".join(cpu.quantized_engines) or "none"))
    lines += _rows(prec_rows)

    lines += ["", "Data"]
    data_rows = [("root", f"{d.root} ({d.source})" if d.root else f"not usable ({d.source})")]
    data_rows += [(ds.folder, f"{ds.status}: {ds.detail}") for ds in d.datasets]
    lines += _rows(data_rows)

    lines += ["", "Network"]
    if report.network.checked:
        lines += _rows([(e, s) for e, s in report.network.endpoints.items()])
    else:
        lines += ["  not checked (--offline)"]

    lines += ["", "Run profile"]
    if report.profile.name:
        prof = PROFILES[report.profile.name]
        train = f"{prof.train_samples:,}" if prof.train_samples else "all"
        test = f"{prof.test_samples:,}" if prof.test_samples else "all"
        lines += [f"  {prof.name} ({report.profile.source}): {train} training / {test} test images, {prof.epochs} "
                  f"epochs, {prof.repeats} timing repeats"]
    else:
        lines += [f"  UNKNOWN ({report.profile.source}): see Problems"]

    lines += ["", "Lessons on this machine"]
    for lesson, plan in lesson_plan(report).items():
        lines += textwrap.wrap(plan, width=116, initial_indent=f"  {lesson} {LESSONS[lesson]}: ",
                               subsequent_indent=" " * 7, break_on_hyphens=False)

    found = problems(report)
    blocked = blocked_lessons(report)
    lines += ["", "Problems" if found else "Problems: none"]
    for problem in found:
        tag = f"[blocks {', '.join(problem.lessons)}]" if problem.lessons else "[warning]"
        lines += textwrap.wrap(f"{tag} {problem.summary}", width=116, initial_indent="  ", subsequent_indent="    ",
                               break_on_hyphens=False)
        lines += textwrap.wrap(f"what to do: {problem.fix}", width=116, initial_indent="    ",
                               subsequent_indent="    ", break_on_hyphens=False)
    lines += ["", f"{len(blocked)} of {len(LESSONS)} lessons cannot run here: {', '.join(sorted(blocked))}."
              if blocked else f"All {len(LESSONS)} lessons can run here."]
    return "\n".join(lines)


def exit_status(report: Report) -> int:
    """1 when a lesson cannot run here, else 0."""
    return 1 if blocked_lessons(report) else 0


# ---------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------

DESCRIPTION = ("Print what this machine has (CPU, GPUs, versions, data, network, run profile) and what each lesson "
               "will do on it; exit with 1 when a lesson cannot run.")


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The doctor's options, on its own parser or on the ``doctor`` subcommand of ``python -m course_utils``."""
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--offline", action="store_true", help="skip the network check")
    parser.add_argument("--timeout", type=_positive_seconds, default=3.0, metavar="SECONDS",
                        help="time limit of the network check (default: 3)")
    parser.add_argument("--no-tensorflow", action="store_true",
                        help="do not import TensorFlow (faster; its GPUs are then not listed)")


def run(args: argparse.Namespace) -> int:
    """Collect, print (text or JSON), and return the exit status: 1 when a lesson cannot run, else 0."""
    report = collect(network=not args.offline, tensorflow=not args.no_tensorflow, timeout=args.timeout)
    print(json.dumps(to_json(report), indent=2) if args.json else format_report(report))
    return exit_status(report)


def main(argv: Sequence[str] | None = None) -> int:
    """``doctor`` as a command of its own: parse ``argv`` (default: ``sys.argv[1:]``) and :func:`run`."""
    parser = argparse.ArgumentParser(prog="python -m course_utils doctor", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))
