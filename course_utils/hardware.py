"""The facts of this machine that decide a lesson's measurements: bf16 and int8 on the CPU, cores, GPUs, load.

:func:`detect` reads them once; the setup cell prints :meth:`Hardware.summary`, so a reader can tell whether
their machine should reproduce the stored numbers, and the lessons pass its conditions to
:func:`course_utils.claims.expect`::

    hw = env.hardware
    hw.native_bf16          # Condition: oneDNN has native bf16 kernels on this CPU
    hw.cores(2)             # Condition: at least 2 usable cores
    with cu.cpu_load() as load:
        ...                 # a measurement
    load.spare(2)           # Condition: 2 cores were free of other processes' work meanwhile
    cu.core_capacity(2).at_least(1.5)   # Condition: 2 threads really got 1.5 cores' worth of arithmetic
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import psutil
import torch
import torch.distributed

from course_utils.claims import Condition
from course_utils.timing import Timing, ratio_by_round

# CPU flags of native bf16 arithmetic: x86 (Linux /proc/cpuinfo), Arm (Linux "Features"), Apple (sysctl).
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16", "bf16", "FEAT_BF16")
# CPU flags of int8 dot-product instructions: VNNI and AMX on x86, the dot-product extension on Arm.
INT8_DOT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "FEAT_DotProd")
QUANTIZED_ENGINES = ("x86", "fbgemm", "qnnpack")  # lesson 07 takes the first one supported ...
ENGINE_ENV = "COURSE_QUANTIZED_ENGINE"  # ... unless this names another (qnnpack: the ARM engine, on any CPU)
# Makes a CPU with AVX-512 (bf16, VNNI) behave like one with AVX2 only, for PyTorch and TensorFlow: oneDNN
# and FBGEMM capped at AVX2, PyTorch's own kernels too. TensorFlow does not follow the oneDNN cap (its bf16
# kernels would still be chosen, and crash), so its oneDNN operations are switched off.
# First CUDA compute capability with tensor cores (Volta, 7.0): fp16 products run several times faster there.
TENSOR_CORE_CAPABILITY = (7, 0)
AVX2_ONLY_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "TF_ENABLE_ONEDNN_OPTS": "0", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
                 "ATEN_CPU_CAPABILITY": "avx2"}


def cpu_has_fast_bf16() -> bool:
    """True when oneDNN reports native bf16 kernels for this CPU (AVX-512 BF16/AMX class, or Arm BF16)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def _cores(n: int, kind: str) -> str:
    return f"{n} {kind} core{'s' if n != 1 else ''}"


def cpu_flags() -> set[str] | None:
    """The processor's feature flags (Linux ``/proc/cpuinfo``; Apple ``sysctl``), or ``None`` if unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return set(value.split())
    except OSError:
        pass
    if sys.platform == "darwin":
        found = set()
        for flag in ("FEAT_BF16", "FEAT_DotProd"):
            try:
                out = subprocess.run(["sysctl", "-n", f"hw.optional.arm.{flag}"], capture_output=True, text=True,
                                     timeout=5)
            except (OSError, subprocess.SubprocessError):
                return None
            if out.stdout.strip() == "1":
                found.add(flag)
        return found
    return None


def usable_cores() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup CPU quota (``docker --cpus``)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="utf-8") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def quantized_engine() -> str | None:
    """The int8 engine for lesson 07: ``$COURSE_QUANTIZED_ENGINE`` if set, else the first supported of
    :data:`QUANTIZED_ENGINES` (``None``: this PyTorch build has none).

    Raises:
        ValueError: if ``$COURSE_QUANTIZED_ENGINE`` names an engine this PyTorch build does not support.
    """
    supported = torch.backends.quantized.supported_engines
    chosen = os.environ.get(ENGINE_ENV, "").strip().lower()
    if chosen and chosen not in supported:
        raise ValueError(f"{ENGINE_ENV}={chosen!r} is not an int8 engine of this PyTorch build: use one of "
                         f"{[e for e in supported if e != 'none']}, or unset it.")
    return chosen or next((e for e in QUANTIZED_ENGINES if e in supported), None)


# TensorFlow turns its oneDNN operations on by default on Linux only for CPUs with these "neural network"
# features (tensorflow/core/util/port.cc, DefaultOneDnnPolicy), and always on x86-64 Windows.
TF_ONEDNN_CPU_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")


def _tf_onednn_enabled(flags: set[str] | None) -> bool:
    """Whether TensorFlow uses its oneDNN operations: ``$TF_ENABLE_ONEDNN_OPTS`` if set, else its default."""
    setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip().lower()
    if setting:
        return setting not in ("0", "false")
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    return sys.platform == "win32" or bool(set(TF_ONEDNN_CPU_FLAGS) & (flags or set()))


@dataclass(frozen=True)
class Hardware:
    """What this machine offers the lessons. The properties turn each fact into a :class:`Condition`."""

    isa: str  # PyTorch's CPU kernel level (AVX2, AVX512, ...)
    bf16_flags: tuple[str, ...] | None  # native bf16 flags of the CPU (None: the flags could not be read)
    int8_flags: tuple[str, ...] | None  # int8 dot-product flags of the CPU
    onednn_bf16: bool  # oneDNN's own answer for PyTorch: native bf16 kernels (it follows ONEDNN_MAX_CPU_ISA)
    onednn_cap: str | None  # $ONEDNN_MAX_CPU_ISA, when set
    fbgemm_cap: str | None  # $FBGEMM_ENABLE_INSTRUCTIONS, when set
    tf_onednn: bool  # TensorFlow uses its oneDNN operations
    quantized_engine: str | None  # the int8 engine lesson 07 uses
    usable_cores: int
    gpus: tuple[str, ...]  # CUDA GPUs, by name
    gpu_capability: tuple[int, int] | None  # compute capability of cuda:0
    nccl: bool = False  # torch.distributed has its NCCL backend (Linux CUDA builds)
    gpu_peer_access: bool | None = None  # every GPU reads every other's memory directly (NVLink or PCIe P2P); None: < 2

    # ---- the facts as conditions -------------------------------------------------------------------------
    @property
    def native_bf16(self) -> Condition:
        return Condition(self.onednn_bf16, "PyTorch's oneDNN has native bf16 kernels (AVX-512 BF16, AMX, Arm BF16)",
                         self.bf16_text)

    @property
    def emulated_bf16(self) -> Condition:
        return Condition(not self.onednn_bf16, "PyTorch's oneDNN has no native bf16 kernels (bf16 is emulated)",
                         self.bf16_text)

    @property
    def tf_native_bf16(self) -> Condition:
        return Condition(self.tf_onednn and bool(self.bf16_flags),
                         "TensorFlow's oneDNN operations are on and the CPU has native bf16", self.tf_text)

    @property
    def tf_emulated_bf16(self) -> Condition:
        return Condition(not self.tf_native_bf16.holds,
                         "TensorFlow runs bf16 without native instructions (no CPU bf16, or oneDNN off)", self.tf_text)

    @property
    def x86_int8(self) -> Condition:
        return Condition(self.quantized_engine in ("x86", "fbgemm"),
                         "int8 runs on the x86 engine (FBGEMM and oneDNN, AVX2 or better)",
                         f"int8 engine {self.quantized_engine}, CPU kernels {self.isa}")

    @property
    def fp16_tensor_cores(self) -> Condition:
        """cuda:0 multiplies fp16 on tensor cores: compute capability 7.0 or newer (a T4 is 7.5, an H100 9.0)."""
        return Condition(self.gpu_capability is not None and self.gpu_capability >= TENSOR_CORE_CAPABILITY,
                         "the GPU has fp16 tensor cores (compute capability 7.0 or newer)", self.gpu_text)

    def cores(self, n: int) -> Condition:
        """At least ``n`` usable cores."""
        if n < 1:
            raise ValueError(f"n must be a positive number of cores, got {n}.")
        wanted = f"there are at least {n} usable cores" if n > 1 else "there is a usable core"
        return Condition(self.usable_cores >= n, wanted, _cores(self.usable_cores, "usable"))

    # ---- the facts in words ------------------------------------------------------------------------------
    @property
    def bf16_text(self) -> str:
        if self.onednn_bf16:
            flags = f" ({', '.join(self.bf16_flags)})" if self.bf16_flags else ""
            return f"bf16 native{flags}"
        capped = f", oneDNN capped at {self.onednn_cap}" if self.onednn_cap else ""
        return f"bf16 emulated (CPU kernels {self.isa}{capped})"

    @property
    def tf_text(self) -> str:
        cpu = f"CPU bf16 {', '.join(self.bf16_flags)}" if self.bf16_flags else "no CPU bf16"
        return f"TensorFlow oneDNN {'on' if self.tf_onednn else 'off'}, {cpu}"

    @property
    def int8_text(self) -> str:
        dot = f"with {', '.join(self.int8_flags)}" if self.int8_flags else "without int8 dot-product instructions"
        capped = f" (FBGEMM capped at {self.fbgemm_cap})" if self.fbgemm_cap else ""
        return f"int8 engine {self.quantized_engine or 'none'} {dot}{capped}"

    @property
    def gpu_text(self) -> str:
        if not self.gpus:
            return "no CUDA GPU"
        cap = ".".join(map(str, self.gpu_capability or ()))
        return f"{len(self.gpus)} CUDA GPU(s), {self.gpus[0]} (compute capability {cap})" + (
            f", {self.gpu_link_text}" if len(self.gpus) > 1 else "")

    @property
    def gpu_link_text(self) -> str:
        """How the GPUs reach each other, which bounds every collective between them."""
        if len(self.gpus) < 2:
            return "one GPU: no GPU-to-GPU traffic"
        nccl = "NCCL" if self.nccl else "no NCCL in this PyTorch build"
        if self.gpu_peer_access:
            return f"{nccl}, peer-to-peer between all GPUs (NVLink or PCIe P2P)"
        return f"{nccl}, no peer-to-peer between some GPUs (their traffic goes through host memory)"

    def summary(self) -> str:
        """One line with the facts that decide the lessons' hardware-dependent results."""
        return " · ".join([f"CPU {self.isa}", self.bf16_text, self.int8_text,
                           _cores(self.usable_cores, "usable"), self.gpu_text])


@cache
def detect() -> Hardware:
    """This machine's :class:`Hardware`, read once per process."""
    flags = cpu_flags()
    gpus = tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())) \
        if torch.cuda.is_available() else ()
    pairs = [(i, j) for i in range(len(gpus)) for j in range(len(gpus)) if i != j]
    return Hardware(
        isa=torch.backends.cpu.get_cpu_capability(),
        bf16_flags=None if flags is None else tuple(f for f in BF16_CPU_FLAGS if f in flags),
        int8_flags=None if flags is None else tuple(f for f in INT8_DOT_FLAGS if f in flags),
        onednn_bf16=cpu_has_fast_bf16(),
        onednn_cap=os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or None,
        fbgemm_cap=os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS") or None,
        tf_onednn=_tf_onednn_enabled(flags),
        quantized_engine=quantized_engine(),
        usable_cores=usable_cores(), gpus=gpus,
        gpu_capability=torch.cuda.get_device_capability(0) if gpus else None,
        nccl=torch.distributed.is_available() and torch.distributed.is_nccl_available(),
        gpu_peer_access=all(torch.cuda.can_device_access_peer(i, j) for i, j in pairs) if pairs else None,
    )


# ---------------------------------------------------------------------------------------------------------
# The load of the machine during a measurement
# ---------------------------------------------------------------------------------------------------------

@dataclass
class CpuLoad:
    """How much of the CPU other processes used while a measurement ran (filled in when its block ends).

    ``other_cores`` counts every process outside this one and its descendants (their CPU seconds per
    second of wall time), plus time the hypervisor gave to other machines (steal).
    """

    usable_cores: int
    seconds: float = math.nan
    other_cores: float = math.nan

    def spare(self, n: int, slack: float = 0.5) -> Condition:
        """At least ``n`` usable cores were free of other processes' work, within ``slack`` of a core. A claim
        that needs every core (its own processes fill them all) passes a smaller slack."""
        if math.isnan(self.other_cores):
            raise RuntimeError("The load is known once the `with cpu_load()` block has ended.")
        if not 0 <= slack < 1:
            raise ValueError(f"slack must be in [0, 1) of a core, got {slack!r}.")
        free = self.usable_cores - self.other_cores
        return Condition(free >= n - slack,
                         f"{n} core{'s were' if n > 1 else ' was'} free of other work during the measurement",
                         f"{free:.1f} of {_cores(self.usable_cores, 'usable')} free ({self.other_cores:.1f} used by "
                         f"other processes)", of_this_run=True)


    @property
    def quiet(self) -> Condition:
        """Other processes used less than half a core: a timing with a modest margin can be trusted."""
        if math.isnan(self.other_cores):
            raise RuntimeError("The load is known once the `with cpu_load()` block has ended.")
        return Condition(self.other_cores < 0.5, "no other process used the CPU during the measurement",
                         f"other processes used {self.other_cores:.1f} cores meanwhile", of_this_run=True)


def _busy_seconds(cpus: list[int]) -> float:
    """CPU seconds spent busy (or stolen by the hypervisor) on the given logical CPUs since boot."""
    per_cpu = psutil.cpu_times(percpu=True)
    return sum(getattr(per_cpu[i], field, 0.0) for i in cpus if i < len(per_cpu)
               for field in ("user", "nice", "system", "irq", "softirq", "steal"))


def _own_cpu_seconds() -> float:
    """CPU seconds of this process and all its descendants, living or reaped."""
    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # exited meanwhile: its time reaches its parent when reaped
            continue
        total += t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    return total


@contextmanager
def cpu_load() -> Iterator[CpuLoad]:
    """Measure how many cores other processes kept busy while the block ran.

    A speedup that needs idle cores (processes against threads, workers overlapping a training step)
    holds only where the cores were really free; ``load.spare(n)`` is that condition::

        with cpu_load() as load:
            timing = cu.measure(...)
        cu.expect("2 processes are faster than 1", ..., when=env.hardware.cores(2) & load.spare(2))
    """
    load = CpuLoad(usable_cores=usable_cores())
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    start, busy, own = time.perf_counter(), _busy_seconds(cpus), _own_cpu_seconds()
    yield load
    load.seconds = time.perf_counter() - start
    others = (_busy_seconds(cpus) - busy) - (_own_cpu_seconds() - own)
    load.other_cores = max(0.0, others / load.seconds) if load.seconds > 0 else 0.0


# ---------------------------------------------------------------------------------------------------------
# What the cores deliver at once
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CoreCapacity:
    """How many cores' worth of arithmetic ``threads`` threads got at once, each running its own products.

    A virtual machine's "cores" may be two hyperthreads of one physical core, or share their core's vector
    units with another tenant: no other process shows in :class:`CpuLoad` and no time is stolen, yet two
    threads do less than twice the work of one. This measures what the cores deliver.

    Attributes:
        threads: how many threads ran products at once.
        alone: seconds one thread took for its block of products alone, one per round.
        together: seconds until ``threads`` threads had each done the same block at once, one per round.
    """

    threads: int
    alone: tuple[float, ...]
    together: tuple[float, ...]

    @property
    def cores(self) -> float:
        """Cores' worth of work done at once: ``threads`` with no sharing, 1 where they take turns. The median
        over the rounds of each round's ratio: a round's two timings are adjacent, so a slower minute of the
        machine cancels out."""
        rounds = {"alone": Timing(self.alone), "together": Timing(self.together)}
        return self.threads * ratio_by_round(rounds, "alone", "together")

    def at_least(self, cores: float) -> Condition:
        """The threads did at least ``cores`` cores' worth of products at once (a fact of this run)."""
        return Condition(self.cores >= cores,
                         f"{self.threads} threads did at least {cores:g} cores' worth of arithmetic at once",
                         f"{self.threads} single-threaded products at once ran at {self.cores:.2f} cores' worth",
                         of_this_run=True)


def core_capacity(threads: int | None = None, *, size: int = 256, calls: int = 30, rounds: int = 7) -> CoreCapacity:
    """Measure :class:`CoreCapacity`: a block of ``calls`` single-threaded ``size``×``size`` float32 products,
    timed on one thread alone, then on ``threads`` threads at once (default: the usable cores), alternately
    for ``rounds`` rounds. Takes about ``2 · rounds`` blocks of time (0.1 to 0.5 s on a laptop core).

    PyTorch's own thread count is set to 1 in every thread meanwhile (else each product would start a team of
    OpenMP threads, and the threads would crowd the cores they measure), then restored.
    """
    n = usable_cores() if threads is None else threads
    for name, value in (("threads", n), ("size", size), ("calls", calls), ("rounds", rounds)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}.")
    a = torch.randn(size, size)
    outs = [torch.empty(size, size) for _ in range(n)]

    def block(i: int) -> None:
        torch.set_num_threads(1)  # in each worker too: without it each product here ran an OpenMP team (measured)
        for _ in range(calls):
            torch.mm(a, a, out=outs[i])

    previous = torch.get_num_threads()  # block() sets 1 in every thread that runs it, this one included
    try:
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(block, range(n)))  # warm-up: the threads exist, the kernels are chosen
            alone, together = [], []
            for _ in range(rounds):
                start = time.perf_counter()
                block(0)
                alone.append(time.perf_counter() - start)
                start = time.perf_counter()
                list(pool.map(block, range(n)))
                together.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    return CoreCapacity(n, tuple(alone), tuple(together))
