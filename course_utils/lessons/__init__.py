"""The registry of lessons: one entry per notebook, the only place a lesson is described.

The README's notebook table is generated from it (:func:`markdown_table`), the doctor's plans read
it, and the tests check it against ``notebooks/`` in both directions. Each lesson's own plumbing
and exercise checks are in ``course_utils.lessons.lessonNN``, imported by that notebook only::

    from course_utils.lessons import LESSONS, lesson
    print(lesson("09").title, lesson("09").notebook)

How long each lesson takes is measured, not written: ``run_times.json`` beside this file is the one record of the
reference machine's runs (``python -m course_utils execute`` writes it after each run of a lesson of this checkout:
``make execute`` the quick profile's time, ``make full`` the full profile's, the one its published copy's banner
states), and everything that prints a lesson's time reads it (:attr:`Lesson.quick_s`, the README's tables, the
site, ``cu.setup``).

Adding a lesson: CONTRIBUTING.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

RUN_TIMES = Path(__file__).with_name("run_times.json")  # {"01": {"quick_s": 12, "full_s": 16}, ...}
PROFILE_KEYS = {"quick": "quick_s", "full": "full_s"}

# What a lesson may need from the machine. The doctor decides each one from its report.
REQUIREMENTS: dict[str, str] = {
    "cuda": "a CUDA GPU",
    "tensor_cores": "a CUDA GPU with tensor cores (compute capability >= 7.0)",
    "nccl_2_gpus": "2 CUDA GPUs and NCCL",
    "nccl_4_gpus": "4 CUDA GPUs and NCCL",
    "tf_2_gpus": "2 GPUs visible to TensorFlow",
    "tpu": "a TPU",
    "native_bf16": "native bf16 on the CPU (AVX-512 BF16 or AMX)",
    "two_cores": "2 usable CPU cores",
    "x86_int8": "PyTorch's x86 int8 engine (FBGEMM and oneDNN)",
    "int8_engine": "an int8 engine in this PyTorch build (x86, fbgemm or qnnpack)",
    "gloo": "torch.distributed with the gloo backend",
    "cxx_compiler": "a C++ compiler for torch.compile's CPU kernels (g++, clang++ or MSVC)",
}


@dataclass(frozen=True)
class Branch:
    """A part of a lesson that depends on the machine: what it does when ``needs`` holds, and otherwise."""

    needs: str  # a key of REQUIREMENTS
    then: str
    otherwise: str

    def __post_init__(self) -> None:
        if self.needs not in REQUIREMENTS:
            raise ValueError(f"unknown requirement {self.needs!r}; known: {', '.join(REQUIREMENTS)}.")


@dataclass(frozen=True)
class Lesson:
    """One notebook of the course."""

    number: str  # "01"
    slug: str  # the notebook is notebooks/{number}_{slug}.ipynb
    title: str  # the notebook's heading after "NN · "
    topics: str  # one line for the README table
    gpu: str  # what a GPU changes, for the README table
    datasets: tuple[str, ...] = ()  # loaded through course_utils.data
    packages: tuple[str, ...] = ()  # imported beyond torch and torchvision
    branches: tuple[Branch, ...] = ()  # what depends on the machine, for the doctor
    needs: tuple[str, ...] = ()  # requirements (keys of REQUIREMENTS) without which the lesson cannot run
    full_scale: str = ""  # what the full profile runs that the quick one does not, and why (README)
    teaches: tuple[str, ...] = ()  # the terms a sentence refers to this lesson for (tests/test_cross_references.py)

    def __post_init__(self) -> None:
        unknown = [need for need in self.needs if need not in REQUIREMENTS]
        if unknown:
            raise ValueError(f"lesson {self.number} needs unknown requirements {unknown}; "
                             f"known: {', '.join(REQUIREMENTS)}.")

    @property
    def notebook(self) -> str:
        """The notebook's file name."""
        return f"{self.number}_{self.slug}.ipynb"

    @property
    def quick_s(self) -> int | None:
        """Seconds of the last quick-profile run (``make execute``) on the reference machine, from the record."""
        return run_times().get(self.number, {}).get("quick_s")

    @property
    def full_s(self) -> int | None:
        """Seconds of the run that made the published full-profile copy (``make full``), from ``run_times.json``."""
        return run_times().get(self.number, {}).get("full_s")


def run_times() -> dict[str, dict[str, int]]:
    """The record of the lessons' measured run times: lesson number -> ``{"quick_s": ..., "full_s": ...}``."""
    return json.loads(RUN_TIMES.read_text()) if RUN_TIMES.is_file() else {}


def record_run_time(number: str, profile: str, seconds: int) -> None:
    """Write a lesson's measured time in ``profile`` into the record (``python -m course_utils execute`` does).

    Raises:
        ValueError: for a number that is not a lesson's, an unknown profile or a time that is not a positive int.
    """
    lesson(number)
    if profile not in PROFILE_KEYS:
        raise ValueError(f"unknown profile {profile!r}; the record keeps {', '.join(PROFILE_KEYS)}.")
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        raise ValueError(f"a run time is a positive number of whole seconds, got {seconds!r}.")
    times = run_times()
    times.setdefault(number, {})[PROFILE_KEYS[profile]] = seconds
    RUN_TIMES.write_text(json.dumps(dict(sorted(times.items())), indent=1) + "\n")


LESSONS: tuple[Lesson, ...] = (
    Lesson("01", "autograd", "Tensors and autograd",
           "tensors, dtypes, memory sharing, matmul throughput; autograd by hand and by PyTorch, vector–Jacobian "
           "products, a sigmoid neuron's gradient, XOR",
           "optional: adds a GPU matmul timing",
           branches=(Branch("cuda", "adds a matmul timing on the GPU", "GPU matmul timing skipped"),),
           teaches=("autograd", "vector–Jacobian"),
           full_scale=("the matmul timing at n = 2,048 instead of 512, 20 timed repeats instead of 5 (steadier "
                       "medians)")),
    Lesson("02", "optimizers", "Optimizers",
           "gradient descent and its variants, learning rates and schedules, momentum to AdamW written from their "
           "formulas and checked against `torch.optim`, where ε goes in PyTorch and Keras, sparse features, the "
           "lecture's MNIST comparison at its scale (full profile) and why SGD starts slowly, `foreach`/`fused` steps",
           "optional: times the optimizer step on the GPU", datasets=("mnist",), packages=("tensorflow", "keras"),
           branches=(Branch("cuda", "Adam step timings on the GPU too", "Adam step timings on the CPU only"),),
           teaches=("optimizers", "momentum"),
           full_scale=("the lecture's own comparison at its scale: 3 networks × 7 optimizers, 20,000 iterations of "
                       "batch 128 on all 60,000 MNIST images (≈ 42.7 epochs; quick: 500 iterations on 6,000). The 7 "
                       "optimizers of a network train side by side in one forward and backward, which keeps the "
                       "420,000 steps within the budget")),
    Lesson("03", "multiprocessing", "Multiprocessing and the DataLoader",
           "threads (`threading.local`, daemon threads) vs processes and the GIL, what starting each costs, start "
           "methods, OS shared memory and shared tensors (pickle's copy against the shared-memory handle), a "
           "DataLoader's queues and threads, `Dataset`/`DataLoader` and samplers, the worker-count experiment "
           "against the ideal (the lecture's table too), prefetching, disk reads",
           "optional: times `pin_memory`", datasets=("fashion_mnist",),
           branches=(Branch("two_cores", "process speedups checked", "speedups that need 2 cores explained, not "
                                                                     "checked"),
                     Branch("cuda", "times pin_memory copies to the GPU and shows the pin-memory thread",
                            "pin_memory timing and thread skipped")),
           teaches=("DataLoader", "GIL", "multiprocessing", "start method"),
           full_scale=("longer measurements, same experiments: 3 M loop iterations per task instead of 400 k, 64 "
                       "MiB shared tensors instead of 16, the worker experiment with 64 batches at 20 ms an item "
                       "instead of 16 at 5 ms, 30 training batches instead of 12, 512 MiB and 20,000 random reads "
                       "on disk instead of 64 MiB and 4,000")),
    Lesson("04", "tensorboard", "TensorBoard and hyper-parameter sweeps",
           "`SummaryWriter` logging (its default `runs/` folder), the GRAPHS tab read from the event file, which loss "
           "applies which activation, a learning-rate × batch-size × shuffle sweep, the lecture's SGD against Adam, "
           "shuffling measured, HParams read back from the event files, Keras TensorBoard callback", "optional",
           datasets=("fashion_mnist",),
           packages=("tensorflow", "keras", "tensorboard"),
           branches=(Branch("cuda", "the sweep trains on the GPU", "the sweep trains on the CPU"),),
           teaches=("TensorBoard", "sweep"),
           full_scale=("the sweep: 12 runs (batch 10, 100 and 1,000; quick: 8, without 1,000) of 5 epochs on all "
                       "60,000 Fashion-MNIST images (quick: 2 epochs on 6,000); the SGD / SGD-momentum / Adam check "
                       "for one epoch of all 60,000 images at batch 100 and 10 (600 and 6,000 steps; quick: 6,000 "
                       "images), the sorted-file shuffle check and the Keras runs on all of them. Five epochs keep the "
                       "12 runs, the batch-10 ones the longest, well within the budget")),
    Lesson("05", "distributed_pytorch", "Distributed PyTorch: DataParallel, model parallel and DDP",
           "`DataParallel`, model parallel, GPipe pipelining, DDP with `torchrun` on one and two \"nodes\" (gloo), "
           "rank and local rank, `mp.spawn`, Slurm ([`05_slurm_ddp.sbatch`](notebooks/05_slurm_ddp.sbatch)), scaling "
           "and failures, what DDP does not do (it splits no batch), the libraries that wrap it",
           "optional: NCCL and multi-GPU paths when present", datasets=("mnist",),
           branches=(Branch("nccl_2_gpus", "DDP with NCCL, one process per GPU; DataParallel and the 2-stage model on "
                                           "2 GPUs", "DDP with gloo on 2 CPU processes; DataParallel and both model-"
                                                     "parallel stages on one device"),
                     Branch("nccl_4_gpus", "DDP + model parallel with NCCL on 4 GPUs",
                            "DDP + model parallel with gloo on CPU processes")),
           needs=("gloo",),
           teaches=("DDP", "DistributedDataParallel", "DataParallel", "torchrun", "all-reduce", "Gloo", "GPipe",
                    "model parallel"),
           full_scale=("DDP trains on all 60,000 MNIST images for 10 epochs (quick: 6,000 for 2); the DDP "
                       "throughput benchmark times 40 steps instead of 10")),
    Lesson("06", "tf_distribute", "tf.distribute and the Keras functional API",
           "`MirroredStrategy` on logical devices, `MultiWorkerMirroredStrategy` on two local workers, "
           "`ParameterServerStrategy` with a variable sharded over two parameter servers, synchronous "
           "`CentralStorageStrategy` and what it saves, `TF_CONFIG`, cross-replica sums and TPU detection, eager "
           "replicas against one `tf.function` graph, the Keras functional two-head model and transfer learning",
           "optional: mirrored sections use GPUs when present", datasets=("mnist",), packages=("tensorflow", "keras"),
           branches=(Branch("tf_2_gpus", "MirroredStrategy on 2 GPUs (the default CollectiveAllReduce with NCCL; "
                                         "NcclAllReduce too)",
                            "MirroredStrategy on 2 logical CPU devices, a single GPU hidden from TensorFlow "
                            "(CollectiveAllReduce with RING; NcclAllReduce has no kernel)"),
                     Branch("tpu", "TPUStrategy on the TPU", "TPUStrategy skipped (detected, explained)")),
           teaches=("tf.distribute", "MirroredStrategy", "functional API"),
           full_scale=("every strategy trains on all 60,000 MNIST images for 10 epochs (quick: 6,000 for 2)")),
    Lesson("07", "quantization", "Quantization",
           "affine int8 by hand, dynamic and static PTQ, QAT (on the course's CNN and torchvision's quantizable "
           "ResNet-18), torchao `quantize_`; size, latency and accuracy "
           "measured; the x86 and qnnpack (ARM) engines compared", "not used (int8 kernels are CPU kernels)",
           datasets=("fashion_mnist",), packages=("torchao",),
           branches=(Branch("x86_int8", "int8 on the x86 engine: its speedups are checked",
                            "int8 on another engine: speedups reported, not checked"),),
           needs=("int8_engine",),
           teaches=("quantization", "quantize"),
           full_scale=("the fp32 model trains on all 60,000 Fashion-MNIST images for 10 epochs (quick: 6,000 for "
                       "2), QAT fine-tunes 3 epochs on half of them (quick: 1), latencies take 81 repeats instead "
                       "of 21 (ResNet-18's 11 instead of 5)")),
    Lesson("08", "pruning", "Pruning",
           "unstructured, structured and global pruning, masks and hooks, iterative pruning with fine-tuning, what "
           "sparsity buys in size and latency", "optional: adds GPU latencies", datasets=("fashion_mnist",),
           branches=(Branch("cuda", "latencies on the GPU too", "latencies on the CPU only"),),
           teaches=("pruning", "sparsity"),
           full_scale=("the dense model trains on all 60,000 Fashion-MNIST images for 10 epochs (quick: 6,000 for "
                       "2), each pruning step fine-tunes a whole epoch (quick: half), latencies take 80 repeats "
                       "instead of 20")),
    Lesson("09", "mixed_precision", "Mixed precision",
           "fp32/fp16/bf16/fp8 formats, Apex to `torch.amp`, autocast op lists, loss scaling and `GradScaler`, AMP "
           "training, Keras mixed-precision policies", "recommended: fp16 + `GradScaler` speedups need a GPU",
           datasets=("fashion_mnist",), packages=("tensorflow", "keras"),
           branches=(Branch("cuda", "fp16 autocast + GradScaler training on the GPU",
                            "fp16 + GradScaler run skipped (bf16 autocast on the CPU)"),
                     Branch("tensor_cores", "fp16 tensor cores: a 4096x4096 product checked over 2x faster than fp32, "
                                            "the fp16 run trains all epochs",
                            "no fp16 tensor cores (none below compute capability 7.0): no fp16 speed claim"),
                     Branch("native_bf16", "bf16 autocast on the CPU with native kernels: the mixed run trains all "
                                           "epochs", "bf16 autocast on the CPU is emulated (slower than fp32): the "
                                                     "mixed run is kept to one epoch")),
           teaches=("mixed precision", "autocast", "loss scaling"),
           full_scale=("fp32 and mixed-precision runs on all 60,000 Fashion-MNIST images for 10 epochs (quick: "
                       "6,000 for 2; where bf16 is emulated the mixed run stays at 1 epoch), 20 timed repeats "
                       "instead of 5")),
    Lesson("10", "profiling", "Profiling: where does the time go?",
           "`torch.profiler` tables (self/total time, shapes, FLOPs, memory, stacks) and what recording costs, "
           "schedules and Chrome traces in Perfetto and TensorBoard, a slow training loop found and fixed, "
           "`torch.utils.benchmark` and CUDA events, the machine's roofline measured in steady state, TensorFlow's "
           "profiler",
           "optional: adds CUDA kernels to the profiles and the cost of `.item()`", datasets=("fashion_mnist",),
           packages=("tensorflow", "keras"),
           branches=(Branch("cuda", "profiles CUDA kernels too, sorted by GPU time; measures the synchronisation of "
                                    "`.item()`; times with CUDA events and an NVTX range",
                            "profiles the CPU; `.item()` costs no synchronisation there; CUDA events skipped"),
                     Branch("two_cores", "the one-thread timer is checked slower than all threads",
                            "the thread comparison is explained, not checked")),
           teaches=("profiler", "roofline", "Perfetto"),
           full_scale=("longer measurements, same experiments: 40 profiled and 100 timed steps of each training "
                       "loop instead of 10 and 20, 1 s of back-to-back calls for each roofline measurement instead "
                       "of 0.2 s (the same sizes: the roof does not depend on the profile), TensorFlow's profile "
                       "over 100 steps instead of 20, 20 timed repeats instead of 5")),
    Lesson("11", "compilers", "Compilers: torch.compile and XLA",
           "TorchDynamo's FX graphs, graph breaks (`torch._dynamo.explain`, `fullgraph=True`), guards, `dynamic=` and "
           "`mark_dynamic`, Inductor's fused kernels and their speed apart from the allocator's page faults (cold "
           "and warm compiles, break-even), a compiled optimizer step, modes and CUDA graphs, `torch.export` and "
           "Core ATen, XLA with `tf.function(jit_compile=True)` and when Keras uses it",
           "optional: adds CUDA graphs (`reduce-overhead`) and Triton kernels", packages=("tensorflow", "keras"),
           branches=(Branch("cuda", "Inductor writes Triton kernels; `reduce-overhead` replays CUDA graphs",
                            "Inductor writes C++ kernels; CUDA graphs skipped (explained)"),),
           needs=("cxx_compiler",),
           teaches=("torch.compile", "XLA", "TorchDynamo", "compilers"),
           full_scale=("20 timed repeats instead of 5 (the elementwise chain runs on 8,192 rows in both profiles: "
                       "temporaries of 32 MiB, the same allocator regime)")),
    Lesson("12", "memory_sharding", "Memory and sharded training",
           "where training memory goes (parameters, gradients, Adam, activations), gradient accumulation and DDP's "
           "`no_sync`, activation checkpointing, ZeRO stages 1–3, FSDP2 (`fully_shard`) against DDP on two gloo "
           "processes, sharded checkpoints with `torch.distributed.checkpoint`; the memory timeline of a step, "
           "Adam's fused step, selective checkpointing, FSDP1 → FSDP2, accumulation under FSDP2 "
           "(`set_requires_gradient_sync`), resharding a checkpoint onto 3 processes and `dcp.async_save`",
           "optional: NCCL, bf16 all-gathers and CPU offload with 2 GPUs; peak GPU memory with one",
           datasets=("mnist",),
           branches=(Branch("nccl_2_gpus", "FSDP's GPU features (NCCL, bf16 all-gathers, prefetching, CPU offload) on "
                                           "one process per GPU", "FSDP's features on 2 CPU processes with gloo, "
                                                                  "without CPU offload"),
                     Branch("cuda", "adds the peak GPU memory of a training step, the allocator's memory snapshot "
                                    "(for pytorch.org/memory_viz) and activation offloading (`save_on_cpu`)",
                            "GPU memory, snapshot and offload skipped")),
           needs=("gloo",),
           teaches=("ZeRO", "FSDP", "gradient accumulation", "activation checkpointing"),
           full_scale=("DDP and FSDP train on all 60,000 MNIST images for 3 epochs (quick: 6,000 for 2), the resumed "
                       "run the 2 epochs after its checkpoint (quick: 1), so that the test accuracy is a trained "
                       "model's; 20 timed repeats instead of 5")),
)


def lesson(number: str) -> Lesson:
    """The lesson with this two-digit number.

    Raises:
        ValueError: for a number that is not a lesson's.
    """
    found = [entry for entry in LESSONS if entry.number == number]
    if not found:
        raise ValueError(f"no lesson {number!r}; the lessons are {', '.join(e.number for e in LESSONS)}.")
    return found[0]


TEMPLATE = "00"  # the number of docs/00_template.ipynb, the notebook a new lesson starts from: not a lesson


def reference_times(number: str, profile: str) -> str | None:
    """How long a lesson took on the reference machine in ``profile``, and in the other profile, in words
    (``None`` for the template, or when the lesson was not timed in ``profile``).

    Raises:
        ValueError: for a number that is not a lesson's.
    """
    if number == TEMPLATE:
        return None
    entry = lesson(number)
    times = {"quick": entry.quick_s, "full": entry.full_s}
    if times.get(profile) is None:
        return None
    other = "full" if profile == "quick" else "quick"
    return (f"the reference machine (2 CPU cores, no GPU) ran this lesson in {_duration(times[profile])} "
            f"({other} profile: {_duration(times[other])})")


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "not measured"
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


def _full_time(entry: Lesson) -> str:
    """The full-profile time, linked to the published run (``notebooks/full/``) once it is measured."""
    if entry.full_s is None:
        return _duration(None)
    return f"[{_duration(entry.full_s)}](notebooks/full/{entry.notebook})"


def markdown_table() -> str:
    """The README's notebook table."""
    rows = ["| # | notebook | topic | quick profile | full profile | GPU |", "|---|---|---|---|---|---|"]
    for entry in LESSONS:
        rows.append(f"| {entry.number} | [`notebooks/{entry.notebook}`](notebooks/{entry.notebook}) | {entry.topics} "
                    f"| {_duration(entry.quick_s)} | {_full_time(entry)} | {entry.gpu} |")
    return "\n".join(rows)


def site_table() -> str:
    """The course site's notebook table: the README table's columns folded into four that fit a laptop's screen
    (each title links its lesson; what a GPU adds goes under the topics; both profiles' times share a column)."""
    rows = ["| # | lesson | topics | quick · full |", "|---|---|---|---|"]
    for entry in LESSONS:
        rows.append(f"| {entry.number} | [{entry.title}](notebooks/{entry.notebook}) | {entry.topics}<br>"
                    f"*GPU:* {entry.gpu} | {_duration(entry.quick_s)} · {_full_time(entry)} |")
    return "\n".join(rows)


def full_profile_table() -> str:
    """The README's table of what the full profile runs, lesson by lesson, with its measured times and their sum."""
    rows = ["| # | what the full profile runs (beyond the quick one), and why | full profile |", "|---|---|---|"]
    rows += [f"| {entry.number} | {entry.full_scale} | {_full_time(entry)} |" for entry in LESSONS]
    times = [entry.full_s for entry in LESSONS]
    total = _duration(sum(t for t in times if t is not None)) if None not in times else _duration(None)
    rows.append(f"| all | the whole course, one lesson after another | {total} |")
    return "\n".join(rows)
