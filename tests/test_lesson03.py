"""Lesson 03: the worker module (workloads, process handling, datasets, disk helpers) and the exercise checks."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import time

import numpy as np
import pytest
import torch
import torch.multiprocessing as tmp
from torch.utils import data

from course_utils import workers
from course_utils.exercises import lesson03

# ----------------------------------------------------------------------------- workloads


def test_cpu_bound_matches_a_vectorised_sum():
    n = 1000
    assert workers.cpu_bound(n) == int((np.arange(n) ** 2 % 7).sum())
    assert workers.cpu_bound(0) == 0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_cpu_bound_rejects_bad_n(bad):
    with pytest.raises(ValueError):
        workers.cpu_bound(bad)


def test_cpu_bound_timed_reports_thread_cpu_seconds():
    value, seconds = workers.cpu_bound_timed(50_000)
    assert value == workers.cpu_bound(50_000)
    assert seconds > 0


def test_io_bound_waits():
    start = time.perf_counter()
    assert workers.io_bound(0.02) == 0.02
    assert time.perf_counter() - start >= 0.019
    with pytest.raises(ValueError):
        workers.io_bound(-1)


# ----------------------------------------------------------------------------- processes


def test_started_joins_and_reports_exit_codes():
    ctx = mp.get_context("fork")
    with workers.started(ctx.Process(target=workers.noop)) as (p,):
        assert p.pid is not None
    assert p.exitcode == 0
    with pytest.raises(RuntimeError, match="exit"), workers.started(ctx.Process(target=os._exit, args=(3,))):
        pass


def test_started_kills_a_process_that_outlives_the_timeout():
    ctx = mp.get_context("fork")
    with pytest.raises(RuntimeError), workers.started(ctx.Process(target=time.sleep, args=(60,)), timeout=0.2) as (p,):
        pass
    assert not p.is_alive()


def test_started_validates_arguments():
    with pytest.raises(ValueError), workers.started():
        pass
    with pytest.raises(ValueError), workers.started(mp.get_context("fork").Process(target=workers.noop), timeout=0):
        pass


def test_add_one_worker_writes_through_shared_memory():
    ctx = tmp.get_context("fork")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    t = torch.zeros(3)
    with workers.started(ctx.Process(target=workers.add_one_worker, args=(inbox, outbox)), timeout=30) as (p,):
        inbox.put(t)
        shared, pid = outbox.get(timeout=30)
        inbox.put(None)
    assert shared and pid == p.pid and t.is_shared()
    assert torch.equal(t, torch.ones(3))


@pytest.mark.parametrize("reuse", [False, True])
def test_producer_delivers_every_batch(reuse):
    ctx = tmp.get_context("fork")
    free, full, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    shape = (4, 5)
    buffers = [torch.empty(shape).share_memory_() for _ in range(2)] if reuse else None
    got = []
    with workers.started(ctx.Process(target=workers.producer, args=(free, full, done, 5, shape, buffers)), timeout=30):
        for index in range(2 if reuse else 0):
            free.put(index)
        while (item := full.get(timeout=30)) is not None:
            batch = buffers[item] if reuse else item
            assert batch.shape == shape
            got.append(batch[0, 0].item())
            if reuse:
                free.put(item)
        done.set()
    assert got == [0.0, 1.0, 2.0, 3.0, 4.0]


# ----------------------------------------------------------------------------- datasets


@pytest.fixture
def png_root(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (12, 28, 28), dtype=np.uint8)
    labels = np.arange(12) % 3
    paths = workers.write_png_images(images, labels, tmp_path / "png")
    return tmp_path / "png", images, labels, paths


def test_png_files_round_trip(png_root):
    root, images, labels, paths = png_root
    assert [p.parent.name for p in paths] == [str(c) for c in labels]
    ds = workers.PngDataset(root, transform=lambda im: torch.from_numpy(np.array(im)))
    assert len(ds) == 12 and ds.targets == labels.tolist()
    for i in (0, 5, 11):
        x, y = ds[i]
        assert y == labels[i] and torch.equal(x, torch.from_numpy(images[i]))


def test_png_dataset_without_transform_returns_pil_images(png_root):
    root, images, _, _ = png_root
    image, _ = workers.PngDataset(root)[3]
    assert np.array_equal(np.asarray(image), images[3])


def test_png_helpers_validate(tmp_path):
    with pytest.raises(ValueError):
        workers.write_png_images(np.zeros((2, 4, 4), dtype=np.float32), np.zeros(2), tmp_path)
    with pytest.raises(ValueError):
        workers.write_png_images(np.zeros((2, 4, 4), dtype=np.uint8), np.zeros(3), tmp_path)
    with pytest.raises(ValueError, match="no PNG"):
        workers.PngDataset(tmp_path)


def test_remote_dataset_waits_then_returns_the_base_item():
    base = list(range(5))
    remote = workers.RemoteDataset(base, 0.01)  # type: ignore[arg-type]
    start = time.perf_counter()
    assert remote[3] == 3 and len(remote) == 5
    assert time.perf_counter() - start >= 0.009
    with pytest.raises(ValueError):
        workers.RemoteDataset(base, -0.1)  # type: ignore[arg-type]


def draws(worker_init_fn):
    loader = data.DataLoader(workers.NoisyDataset(4), batch_size=None, num_workers=2,
                             worker_init_fn=worker_init_fn, generator=torch.Generator().manual_seed(0))
    return list(loader)


def test_seed_worker_makes_workers_draw_differently_and_reproducibly():
    unseeded = draws(None)
    assert [w for w, _ in unseeded] == [0, 1, 0, 1]
    assert unseeded[0][1] == unseeded[1][1]  # both workers hold a copy of the same generator
    seeded = draws(workers.seed_worker)
    assert seeded[0][1] != seeded[1][1]
    assert seeded == draws(workers.seed_worker)


def test_noisy_dataset_in_the_main_process():
    ds = workers.NoisyDataset(3, seed=1)
    worker, value = ds[0]
    assert worker == -1 and 0 <= value < 1 and len(ds) == 3
    with pytest.raises(ValueError):
        workers.NoisyDataset(0)


def test_dict_collate():
    batch = workers.dict_collate([(torch.zeros(1, 2, 2), 3), (torch.ones(1, 2, 2), 4)])
    assert batch["image"].shape == (2, 1, 2, 2) and batch["label"].tolist() == [3, 4]
    with pytest.raises(ValueError):
        workers.dict_collate([])


# ----------------------------------------------------------------------------- disk


def test_page_cache_helpers(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(64 * 4096))
    path.read_bytes()
    before = workers.resident_fraction(path)
    if before is None:
        pytest.skip("mincore is not available on this system")
    assert 0.0 <= before <= 1.0
    if workers.drop_page_cache(path):
        after = workers.resident_fraction(path)
        assert after is not None and 0.0 <= after <= before
    empty = tmp_path / "empty"
    empty.touch()
    assert workers.resident_fraction(empty) is None


# ----------------------------------------------------------------------------- exercises


def test_check_ideal_batch_time():
    assert lesson03.check_ideal_batch_time(10)
    assert lesson03.check_ideal_batch_time(10.0, latency_ms=5, batch_size=8, workers=4)
    wrong = lesson03.check_ideal_batch_time(40)
    assert not wrong and "t0 / 4" in wrong.message
    assert not lesson03.check_ideal_batch_time(None)
    assert lesson03.check_ideal_batch_time(5, latency_ms=5, batch_size=8, workers=8)


def test_check_weighted_draw():
    assert lesson03.check_weighted_draw(0.25)
    assert not lesson03.check_weighted_draw(0.5)
    assert not lesson03.check_weighted_draw(0.1)
    assert not lesson03.check_weighted_draw(None)
    assert not lesson03.check_weighted_draw("a quarter")
    assert lesson03.check_weighted_draw(0.5, counts=(400, 400))
    assert lesson03.check_weighted_draw(math.sqrt(100) / (math.sqrt(100) + math.sqrt(2500)), counts=(2500, 100))


def test_check_start_method():
    assert lesson03.check_start_method("spawn")
    assert lesson03.check_start_method(" Forkserver ")
    fork = lesson03.check_start_method("fork")
    assert not fork and "CUDA" in fork.message
    assert "not a start method" in lesson03.check_start_method("threads").message
    assert not lesson03.check_start_method(None)
    assert not lesson03.check_start_method(3)  # type: ignore[arg-type]
