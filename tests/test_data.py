import gzip
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision

import course_utils.data as data
from conftest import REPO, write_idx


def test_data_root_precedence(clean_env, tmp_path):
    assert data.data_root() == REPO / "data"  # the checkout's data/ folder
    clean_env.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert data.data_root() == tmp_path.resolve()


def test_missing_data_root_says_what_to_do(clean_env, tmp_path):
    clean_env.setenv("COURSE_DATA_DIR", str(tmp_path / "nope"))
    with pytest.raises(data.DataError, match="COURSE_DATA_DIR=.*is not a folder.*torchvision's layout"):
        data.data_root()


def test_unknown_dataset_and_split(fake_root):
    with pytest.raises(ValueError, match="Unknown dataset 'cifar10'"):
        data.load_numpy("cifar10")
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        data.load_numpy("mnist", "val")
    assert data.dataset_info("Fashion-MNIST") is data.DATASETS["fashion_mnist"]


def test_loads_from_a_root_verified_by_its_manifest(fake_root):
    images, labels = data.load_numpy("mnist", "train")
    assert images.shape == (20, 28, 28) and images.dtype == np.uint8
    assert labels.tolist() == [i % 10 for i in range(20)] and labels.dtype == np.int64


def test_subsets_are_seeded_and_in_order(fake_root):
    _, a = data.load_numpy("mnist", "train", subset=5, seed=1)
    _, b = data.load_numpy("mnist", "train", subset=5, seed=1)
    _, c = data.load_numpy("mnist", "train", subset=5, seed=2)
    assert a.tolist() == b.tolist() and len(a) == 5 and a.tolist() != c.tolist()
    for bad in (0, 21, 2.5, True):
        with pytest.raises(ValueError, match="subset"):
            data.load_numpy("mnist", "train", subset=bad)


def test_tensors_are_scaled_and_normalised(fake_root):
    x, y = data.load_tensors("mnist", "test", normalize=False)
    assert x.shape == (10, 1, 28, 28) and x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
    xn, _ = data.load_tensors("mnist", "test")
    info = data.dataset_info("mnist")
    assert torch.allclose(xn, (x - info.mean) / info.std) and y.dtype == torch.int64


def test_corrupt_file_is_detected(fake_root):
    path = fake_root / "MNIST/raw/t10k-labels-idx1-ubyte"
    content = path.read_bytes()
    path.write_bytes(content[:-1] + bytes([content[-1] ^ 1]))  # flip one bit of the last label
    os.utime(path, (1, 1))  # a new mtime, so the cached verdict is not reused
    with pytest.raises(data.DataError, match="does not match its canonical checksum nor the data root's SHA256SUMS"):
        data.load_numpy("mnist", "test")


def test_missing_files_offline_explain_the_data_root(clean_env, tmp_path):
    clean_env.setenv("COURSE_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataError, match=r"missing from the data root.*Set COURSE_DATA_DIR"):
        data.ensure_dataset("fashion_mnist", download=False)


def test_read_idx_plain_gzip_and_errors(tmp_path):
    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a", arr)
    (tmp_path / "a.gz").write_bytes(gzip.compress((tmp_path / "a").read_bytes()))
    assert (data.read_idx(tmp_path / "a") == arr).all() and (data.read_idx(tmp_path / "a.gz") == arr).all()
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(data.DataError, match="magic"):
        data.read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes((tmp_path / "a").read_bytes()[:-2])
    with pytest.raises(data.DataError, match="truncated"):
        data.read_idx(tmp_path / "short")


def test_real_datasets_match_their_checksums_and_statistics(real_data_root, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(real_data_root))
    for name, mean in (("mnist", 0.1307), ("fashion_mnist", 0.2860)):
        images, labels = data.load_numpy(name, "train")
        assert images.shape == (60_000, 28, 28) and np.bincount(labels).min() > 5_000
        assert abs(images.mean() / 255 - mean) < 1e-3
        assert data.load_numpy(name, "test")[0].shape == (10_000, 28, 28)


def test_real_torchvision_dataset(real_data_root, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(real_data_root))
    ds = torchvision.datasets.FashionMNIST(str(data.ensure_dataset("fashion_mnist")), train=False)
    assert len(ds) == 10_000 and ds.classes[9] == "Ankle boot"
    image, label = ds[0]
    raw_images, raw_labels = data.load_numpy("fashion_mnist", "test", subset=None)
    assert (np.asarray(image) == raw_images[0]).all() and label == raw_labels[0]


def test_fashion_mnist_files_are_the_canonical_ones(real_data_root):
    info = data.dataset_info("fashion_mnist")
    for filename, md5 in info.raw_md5.items():
        assert data._file_digest(Path(real_data_root) / "FashionMNIST/raw" / filename, "md5") == md5


def test_tf_dataset_batches_scaled_images(fake_root):
    ds = data.tf_dataset("mnist", "train", batch_size=8, shuffle=False)
    images, labels = next(iter(ds))
    assert tuple(images.shape) == (8, 28, 28, 1) and str(images.dtype.name) == "float32"
    assert float(images.numpy().max()) <= 1.0 and labels.numpy().tolist() == list(range(8))
    with pytest.raises(ValueError, match="batch_size"):
        data.tf_dataset("mnist", batch_size=0)
