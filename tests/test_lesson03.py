"""Lesson 03: the modules that the notebook writes with %%writefile for its child processes, and the exercise checks."""

from __future__ import annotations

import importlib
import math
import multiprocessing as mp
import re
import sys
import time
import types
from collections.abc import Iterator

import numpy as np
import pytest
import torch
import torch.multiprocessing as tmp
from PIL import Image
from torch.utils import data

from conftest import REPO, load_notebook, source
from course_utils.checks import ASK_FOR_SOLUTION
from course_utils.lessons import lesson03

NOTEBOOK = REPO / "notebooks" / "03_multiprocessing.ipynb"
WRITEFILE = re.compile(r"%%writefile scratch/03/(\w+)\.py\n")
MODULES = {"workloads", "light_tasks", "torch_tasks", "add_one", "producer", "png_dataset", "loader_hooks",
           "remote_dataset"}


def written_modules() -> dict[str, str]:
    """{module name: source} of every `%%writefile scratch/03/<name>.py` cell of the notebook."""
    modules = {}
    for cell in load_notebook(NOTEBOOK)["cells"]:
        if cell["cell_type"] == "code" and (match := WRITEFILE.match(source(cell))):
            modules[match[1]] = source(cell)[match.end():]
    return modules


@pytest.fixture(scope="module")
def lesson(tmp_path_factory: pytest.TempPathFactory) -> Iterator[types.SimpleNamespace]:
    """The notebook's modules, written into a folder on sys.path (children inherit it) and imported by name."""
    folder = tmp_path_factory.mktemp("scratch03")
    modules = written_modules()
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(text)
    sys.path.insert(0, str(folder))
    try:
        yield types.SimpleNamespace(**{name: importlib.import_module(name) for name in modules})
    finally:
        sys.path.remove(str(folder))
        for name in modules:
            sys.modules.pop(name, None)


def test_the_notebook_writes_the_modules_its_children_import():
    assert set(written_modules()) == MODULES
    text = NOTEBOOK.read_text()
    assert "course_utils.workers" not in text and "from course_utils import workers" not in text


def test_the_notebook_corrects_the_lecture_errors_on_its_topics():
    """Each slide error on this lesson's topics has its correction cell (the form is checked by the conventions)."""
    corrections = [source(c) for c in load_notebook(NOTEBOOK)["cells"]
                   if c["cell_type"] == "markdown" and "The lecture says" in source(c)]
    for quoted in ("global interrupt lock",  # lecture 000: the GIL's name
                   "Daemon threads: They do not die with the parent",  # lecture 003: what daemon=True changes
                   "then `def f(x): return x*x`",  # lecture 003: the Process/Pool example's two f
                   "WorkerManager (thread): Dispatch batches to workers",  # lecture 003: no manager thread today
                   "(114.07 + 15.10) / 8 = 16.15"):  # lecture 003: the DataLoader ideal divides the step too
        assert sum(quoted in text for text in corrections) == 1, quoted


# ----------------------------------------------------------------------------- workloads


def test_cpu_bound_sums_squares_mod_7(lesson):
    assert lesson.workloads.cpu_bound(0) == 0
    assert lesson.workloads.cpu_bound(7) == 14  # 0 + 1 + 4 + 2 + 2 + 4 + 1
    assert lesson.workloads.cpu_bound(1000) == 2001  # 142 full cycles of 7 (14 each) + 0 + 1 + 4 + 2 + 2 + 4


def test_cpu_bound_timed_reports_thread_cpu_seconds(lesson):
    value, seconds = lesson.workloads.cpu_bound_timed(50_000)
    assert value == 100_001  # 7142 cycles of 14, then 13
    assert seconds > 0


def test_io_bound_waits(lesson):
    start = time.perf_counter()
    assert lesson.workloads.io_bound(0.02) == 0.02
    assert time.perf_counter() - start >= 0.019


# ----------------------------------------------------------------------------- processes


def test_add_one_worker_is_found_by_name_in_a_spawned_child(lesson):
    ctx = tmp.get_context("spawn")  # the child imports add_one by name, as in the notebook's forkserver
    inbox, outbox = ctx.Queue(), ctx.Queue()
    t = torch.zeros(3)
    child = ctx.Process(target=lesson.add_one.add_one_worker, args=(inbox, outbox))
    child.start()
    try:
        inbox.put(t)
        shared, pid = outbox.get(timeout=120)
        inbox.put(None)
    finally:
        child.join(120)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0 and shared and pid == child.pid and t.is_shared()
    assert t.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("reuse", [False, True])
def test_producer_delivers_every_batch(lesson, reuse):
    ctx = tmp.get_context("fork")
    free, full, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    shape = (4, 5)
    buffers = [torch.empty(shape).share_memory_() for _ in range(2)] if reuse else None
    child = ctx.Process(target=lesson.producer.producer, args=(free, full, done, 5, shape, buffers))
    child.start()
    got = []
    try:
        for index in range(2 if reuse else 0):
            free.put(index)
        while (item := full.get(timeout=30)) is not None:
            batch = buffers[item] if reuse else item
            assert tuple(batch.shape) == shape
            got.append(batch[0, 0].item())
            if reuse:
                free.put(item)
        done.set()
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    assert got == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_light_and_torch_noops_return_none(lesson):
    assert lesson.light_tasks.noop() is None and lesson.torch_tasks.noop() is None
    assert lesson.light_tasks.square(7) == 49


# ----------------------------------------------------------------------------- datasets


def test_png_dataset_reads_labels_from_folders_and_decodes_pixels(lesson, tmp_path):
    images = np.arange(6 * 4 * 4, dtype=np.uint8).reshape(6, 4, 4)
    for i, label in enumerate([2, 0, 1, 2, 0, 1]):
        (tmp_path / str(label)).mkdir(exist_ok=True)
        Image.fromarray(images[i]).save(tmp_path / str(label) / f"{i:05d}.png")
    ds = lesson.png_dataset.PngDataset(tmp_path, transform=lambda im: torch.from_numpy(np.array(im)))
    assert len(ds) == 6 and ds.targets == [2, 0, 1, 2, 0, 1]
    x, y = ds[1]
    assert y == 0 and x[0].tolist() == [16, 17, 18, 19] and x[3].tolist() == [28, 29, 30, 31]
    image, y = lesson.png_dataset.PngDataset(tmp_path)[5]  # no transform: the PIL image
    assert y == 1 and image.size == (4, 4) and np.asarray(image)[0, 0] == 80


def test_remote_dataset_waits_then_returns_the_base_item(lesson):
    remote = lesson.remote_dataset.RemoteDataset(list(range(5)), 0.01)
    start = time.perf_counter()
    assert remote[3] == 3 and len(remote) == 5
    assert time.perf_counter() - start >= 0.009


def draws(lesson, worker_init_fn):
    loader = data.DataLoader(lesson.loader_hooks.NoisyDataset(4), batch_size=None, num_workers=2,
                             worker_init_fn=worker_init_fn, generator=torch.Generator().manual_seed(0),
                             multiprocessing_context=mp.get_context("fork"))
    return [(w, round(v, 4)) for w, v in loader]


def test_seed_worker_makes_workers_draw_differently_and_reproducibly(lesson):
    # Without reseeding both workers copy the dataset's generator, default_rng(0): 0.6370, then 0.2698.
    assert draws(lesson, None) == [(0, 0.637), (1, 0.637), (0, 0.2698), (1, 0.2698)]
    seeded = draws(lesson, lesson.loader_hooks.seed_worker)
    assert [w for w, _ in seeded] == [0, 1, 0, 1]
    assert seeded[0][1] != seeded[1][1] and seeded[2][1] != seeded[3][1]
    assert seeded == draws(lesson, lesson.loader_hooks.seed_worker)


def test_noisy_dataset_in_the_main_process(lesson):
    ds = lesson.loader_hooks.NoisyDataset(3)
    assert len(ds) == 3
    assert ds[0] == (-1, pytest.approx(0.6369617))  # the first draw of default_rng(0)


def test_dict_collate(lesson):
    batch = lesson.loader_hooks.dict_collate([(torch.zeros(1, 2, 2), 3), (torch.ones(1, 2, 2), 4)])
    assert set(batch) == {"image", "label"}
    assert tuple(batch["image"].shape) == (2, 1, 2, 2) and batch["label"].tolist() == [3, 4]
    assert batch["image"][1].sum().item() == 4.0


# ----------------------------------------------------------------------------- the DataLoader drawing


def test_draw_dataloader_draws_one_queue_and_one_worker_per_worker_and_no_manager_thread():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        labels = lesson03.draw_dataloader(ax, workers=3)
    finally:
        plt.close(fig)
    assert [label.splitlines()[0] for label in labels] == [
        "main thread: sampler -> indices of batch i,",
        "index_queue 0", "worker 0 (process):", "index_queue 1", "worker 1 (process):", "index_queue 2",
        "worker 2 (process):", "worker_result_queue (one, shared)", "pin-memory thread",
        "main thread: next(iterator) -> the batches in order"]
    assert "index_queue (i mod 3)" in labels[0]
    assert "with an accelerator" in labels[-2]  # pin_memory=True alone starts no thread
    assert not any("manager" in label.lower() for label in labels)
    assert "DataLoader(num_workers=3)" in ax.get_title()


@pytest.mark.parametrize("workers", [0, 5, 2.0, True])
def test_draw_dataloader_rejects_what_it_cannot_draw(workers):
    with pytest.raises(ValueError, match="workers must be an int from 1 to 4"):
        lesson03.draw_dataloader(None, workers=workers)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- exercises


def test_check_ideal_batch_time():
    assert lesson03.check_ideal_batch_time(10)
    assert lesson03.check_ideal_batch_time(10.0, latency_ms=5, batch_size=8, workers=4)
    wrong = lesson03.check_ideal_batch_time(40)
    assert not wrong and "you have 40; hint: start from the time t0" in wrong.message and "section 7" in wrong.message
    assert "t0 / 4" not in wrong.message and wrong.message.endswith(ASK_FOR_SOLUTION)  # the derivation stays hidden
    assert not lesson03.check_ideal_batch_time(None)
    for answer in (None, 40, 10):
        shown = lesson03.check_ideal_batch_time(answer, solution=True)
        assert shown.is_solution and "t0 = 8 × 5 ms = 40 ms" in shown.message and "t0 / 4" in shown.message
        assert shown.message.endswith("is 10 ms.")
    assert lesson03.check_ideal_batch_time(5, latency_ms=5, batch_size=8, workers=8)


def test_check_weighted_draw():
    assert lesson03.check_weighted_draw(0.25)
    for wrong in (0.5, 0.1):  # 1/n_c weights (balanced), the raw frequency
        verdict = lesson03.check_weighted_draw(wrong)
        assert not verdict and "hint: a WeightedRandomSampler draws each class" in verdict.message
        assert "section 6" in verdict.message and "sqrt(100)" not in verdict.message and "0.25" not in verdict.message
    shown = lesson03.check_weighted_draw(0.5, solution=True)
    assert shown.is_solution and "sqrt(100) / (sqrt(900) + sqrt(100))" in shown.message
    assert shown.message.endswith("P(minority class) = 0.25.")
    assert not lesson03.check_weighted_draw(None)
    assert not lesson03.check_weighted_draw("a quarter")
    assert lesson03.check_weighted_draw(0.5, counts=(400, 400))
    assert lesson03.check_weighted_draw(math.sqrt(100) / (math.sqrt(100) + math.sqrt(2500)), counts=(2500, 100))


def test_check_start_method():
    assert lesson03.check_start_method("spawn")
    assert lesson03.check_start_method(" Forkserver ")
    fork = lesson03.check_start_method("fork")
    assert not fork and "section 2's table" in fork.message and fork.message.endswith(ASK_FOR_SOLUTION)
    assert "spawn" not in fork.message and "Cannot re-initialize" not in fork.message  # the answer stays hidden
    for answer in (None, "fork", "spawn"):
        shown = lesson03.check_start_method(answer, solution=True)
        assert not shown and shown.is_solution and repr(shown).startswith("📖 Solution: \"spawn\" or \"forkserver\"")
        assert "Cannot re-initialize CUDA in forked subprocess" in shown.message
    assert "not a start method" in lesson03.check_start_method("threads").message
    assert not lesson03.check_start_method(None)
    assert not lesson03.check_start_method(3)  # type: ignore[arg-type]


def test_idle_spin_is_cpu_time_after_a_parallel_operation():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert lesson03.idle_spin_seconds() == 0.0  # no worker thread, nothing spins
        torch.set_num_threads(2)
        spin = lesson03.idle_spin_seconds(listen=0.02, repeats=3)
        assert 0.0 <= spin <= 0.02 * 1.5  # at most the 20 ms listened to, per idle thread (the main one sleeps)
    finally:
        torch.set_num_threads(threads)
    with pytest.raises(ValueError, match="listen must be positive"):
        lesson03.idle_spin_seconds(listen=0)
