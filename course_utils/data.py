"""MNIST and Fashion-MNIST for PyTorch and TensorFlow, from a local data root.

The data root is ``$COURSE_DATA_DIR`` when set, else the ``data/`` folder of the
course checkout (or ``./data`` when the package is installed elsewhere, as on
Colab). Files use torchvision's layout (``<root>/MNIST/raw/train-images-idx3-ubyte``)
and are checked against the canonical MD5 checksums, or against a ``SHA256SUMS``
manifest that the data root ships for a documented local copy. When a file is
missing, the real torchvision download fills the root; offline, the error says
how to point the data root at a local copy instead.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

if TYPE_CHECKING:
    import tensorflow as tf

DATA_ENV = "COURSE_DATA_DIR"
Split = Literal["train", "test"]


@dataclass(frozen=True)
class DatasetInfo:
    """Where a dataset lives in the data root and what its classes are."""

    folder: str
    torchvision_class: str
    classes: tuple[str, ...]
    mean: float  # pixel mean of the training images, in [0, 1]
    std: float
    raw_md5: dict[str, str]  # canonical MD5 of each uncompressed raw file


DATASETS: dict[str, DatasetInfo] = {
    "mnist": DatasetInfo(
        folder="MNIST",
        torchvision_class="MNIST",
        classes=tuple(str(d) for d in range(10)),
        mean=0.1307,
        std=0.3081,
        raw_md5={
            "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
            "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
            "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
            "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
        },
    ),
    "fashion_mnist": DatasetInfo(
        folder="FashionMNIST",
        torchvision_class="FashionMNIST",
        classes=("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                 "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
        mean=0.2860,
        std=0.3530,
        raw_md5={
            "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
            "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
            "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
            "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
        },
    ),
}

_SPLIT_PREFIX = {"train": "train", "test": "t10k"}


class DataError(RuntimeError):
    """A dataset is missing, corrupt, or cannot be downloaded."""


def dataset_info(name: str) -> DatasetInfo:
    """Return the :class:`DatasetInfo` of ``"mnist"`` or ``"fashion_mnist"``."""
    key = name.strip().lower().replace("-", "_") if isinstance(name, str) else name
    if key == "fashionmnist":
        key = "fashion_mnist"
    if key not in DATASETS:
        raise ValueError(f"Unknown dataset {name!r}: use one of {sorted(DATASETS)}.")
    return DATASETS[key]


def checkout_data_dir() -> Path | None:
    """The ``data/`` folder of the course checkout this package was imported from."""
    candidate = Path(__file__).resolve().parent.parent / "data"
    return candidate if (candidate / "README.md").is_file() else None


def data_root() -> Path:
    """Resolve the data root: ``$COURSE_DATA_DIR``, else the checkout's ``data/``, else ``./data``.

    Raises:
        DataError: if ``$COURSE_DATA_DIR`` is set but is not an existing folder.
    """
    env = os.environ.get(DATA_ENV, "").strip()
    if env:
        root = Path(env).expanduser().resolve()
        if not root.is_dir():
            raise DataError(
                f"{DATA_ENV}={env!r} is not a folder (resolved to {root}). Point it at a folder that "
                f"holds MNIST/ and FashionMNIST/ in torchvision's layout, or unset it to use the course's data/ folder."
            )
        return root
    return checkout_data_dir() or (Path.cwd() / "data").resolve()


def _file_digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _manifest(root: Path) -> dict[str, str]:
    """Entries of ``<root>/SHA256SUMS`` (``sha256  relative/path`` per line), if present."""
    path = root / "SHA256SUMS"
    if not path.is_file():
        return {}
    entries = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, _, name = line.strip().partition("  ")
            entries[name.strip().lstrip("*")] = digest
    return entries


@cache
def verify_file(path: Path, root: Path, canonical_md5: str, mtime: float) -> str:
    """Check one raw file; return how it was verified (``mtime`` keys the cache)."""
    if _file_digest(path, "md5") == canonical_md5:
        return "canonical md5"
    relative = path.relative_to(root).as_posix()
    listed = _manifest(root).get(relative)
    if listed is not None and _file_digest(path, "sha256") == listed:
        return "data root SHA256SUMS"
    raise DataError(
        f"{path} does not match its canonical checksum"
        + (" nor the data root's SHA256SUMS" if listed else "")
        + ". The file is corrupt or incomplete: delete it so that it is downloaded again, "
        f"or point {DATA_ENV} at a verified copy."
    )


def raw_path(root: Path, info: DatasetInfo, filename: str) -> Path:
    """Where a raw file of a dataset lies in a data root (torchvision's layout)."""
    return root / info.folder / "raw" / filename


def ensure_dataset(name: str, *, download: bool = True) -> Path:
    """Make sure the raw files of a dataset are in the data root and verified.

    Missing files are fetched with torchvision's real download (when ``download``),
    which writes torchvision's layout into the data root.

    Returns:
        The data root.

    Raises:
        DataError: if files are missing and cannot be downloaded, or fail their checksum.
    """
    return _ensure(dataset_info(name), download)


def _ensure(info: DatasetInfo, download: bool) -> Path:
    root = data_root()
    missing = [f for f in info.raw_md5 if not raw_path(root, info, f).is_file()]
    if missing and download:
        try:
            import torchvision  # here, not at the top: a second or two that only a download needs

            for train in (True, False):  # torchvision's real download, into its own layout
                getattr(torchvision.datasets, info.torchvision_class)(str(root), train=train, download=True)
        except Exception as exc:  # network errors come in many types; re-raise with the fix
            raise DataError(
                f"{info.folder} is not in the data root {root} and could not be downloaded ({exc}). "
                f"If this machine is offline, copy the dataset in torchvision's layout to a folder and set "
                f"{DATA_ENV} to it (e.g. `export {DATA_ENV}=../shared/data`)."
            ) from exc
        missing = [f for f in info.raw_md5 if not raw_path(root, info, f).is_file()]
    if missing:
        raise DataError(
            f"{info.folder} files {missing} are missing from the data root {root}. "
            f"Set {DATA_ENV} to a folder holding {info.folder}/raw/, or allow the download."
        )
    for filename, md5 in info.raw_md5.items():
        path = raw_path(root, info, filename)
        verify_file(path, root, md5, path.stat().st_mtime)
    return root


def read_idx(path: Path | str) -> np.ndarray:
    """Read an IDX file (the MNIST format), plain or gzipped, into a uint8 array."""
    path = Path(path)
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    if len(data) < 4 or data[0:2] != b"\x00\x00" or data[2] != 0x08:
        raise DataError(f"{path} is not an unsigned-byte IDX file (bad magic number); delete it and download again.")
    ndim = data[3]
    dims = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    offset = 4 + 4 * ndim
    if len(data) - offset != int(np.prod(dims)):
        raise DataError(f"{path} is truncated: header says {dims}, file holds {len(data) - offset} bytes of data.")
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims)


def _subset_indices(n_total: int, subset: int | None, seed: int) -> np.ndarray:
    if subset is None:
        return np.arange(n_total)
    if isinstance(subset, bool) or not isinstance(subset, int) or not 0 < subset <= n_total:
        raise ValueError(f"subset must be an int in [1, {n_total}] or None for all examples, got {subset!r}.")
    return np.sort(np.random.default_rng(seed).permutation(n_total)[:subset])


def load_numpy(name: str, split: Split = "train", *, subset: int | None = None,
               seed: int = 0, download: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Images ``(N, 28, 28)`` uint8 and labels ``(N,)`` int64 as NumPy arrays.

    Args:
        name: ``"mnist"`` or ``"fashion_mnist"``.
        split: ``"train"`` or ``"test"``.
        subset: keep this many examples, drawn without replacement by ``seed`` and
            kept in dataset order (``None``: all; lessons pass ``profile.train_samples``).
    """
    return _load_numpy(dataset_info(name), split, subset, seed, download)


def _load_numpy(info: DatasetInfo, split: Split, subset: int | None, seed: int,
                download: bool) -> tuple[np.ndarray, np.ndarray]:
    if split not in _SPLIT_PREFIX:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}.")
    root = _ensure(info, download)
    prefix = _SPLIT_PREFIX[split]
    images = read_idx(raw_path(root, info, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(raw_path(root, info, f"{prefix}-labels-idx1-ubyte")).astype(np.int64)
    keep = _subset_indices(len(labels), subset, seed)
    return images[keep], labels[keep]


def load_tensors(name: str, split: Split = "train", *, subset: int | None = None, seed: int = 0,
                 normalize: bool = True, device: torch.device | str = "cpu",
                 download: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """In-memory float images ``(N, 1, 28, 28)`` and int64 labels, ready for fast training.

    With ``normalize`` the pixels are scaled to [0, 1] and standardised with the
    training set's mean and standard deviation; otherwise they are only scaled.
    """
    info = dataset_info(name)
    images, labels = _load_numpy(info, split, subset, seed, download)
    x = torch.from_numpy(images).float().div_(255.0).unsqueeze(1)
    if normalize:
        x = (x - info.mean) / info.std
    return x.to(device), torch.from_numpy(labels).to(device)


def tf_dataset(name: str, split: Split = "train", *, batch_size: int = 128, subset: int | None = None,
               shuffle: bool = True, seed: int = 0) -> tf.data.Dataset:
    """A batched ``tf.data.Dataset`` of ``(image (28, 28, 1) float32 in [0, 1], label int64)``."""
    import tensorflow as tf

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    images, labels = load_numpy(name, split, subset=subset, seed=seed)
    ds = tf.data.Dataset.from_tensor_slices(((images[..., None] / np.float32(255.0)).astype(np.float32), labels))
    if shuffle:
        ds = ds.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)
