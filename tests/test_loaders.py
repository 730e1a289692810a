"""The Fig. 7 loaders: scikit-learn's 8x8 digits and MNIST from IDX files the tests write."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from nqf.datasets import digits_odd_even, mnist_odd_even
from nqf.datasets._digits import load_mnist, read_idx

FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def idx_bytes(arr: np.ndarray, code: int = 0x08) -> bytes:
    arr = np.asarray(arr)
    return bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.astype(">u1").tobytes()


def write_mnist(directory, *, gz=False, n_train=30, n_test=12, size=6, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {
        "train_images": rng.integers(0, 256, size=(n_train, size, size), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, size=n_train, dtype=np.uint8),
        "test_images": rng.integers(0, 256, size=(n_test, size, size), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, size=n_test, dtype=np.uint8),
    }
    for key, name in FILES.items():
        data = idx_bytes(arrays[key])
        if gz:
            (directory / (name + ".gz")).write_bytes(gzip.compress(data))
        else:
            (directory / name).write_bytes(data)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_roundtrip(tmp_path, gz):
    arrays = write_mnist(tmp_path, gz=gz)
    got = load_mnist(tmp_path)
    for key in FILES:
        np.testing.assert_array_equal(got[key], arrays[key])
        assert got[key].dtype == np.uint8


def test_mnist_odd_even(tmp_path):
    arrays = write_mnist(tmp_path)
    data = mnist_odd_even(tmp_path, n_train=20, n_test=5, seed=3)
    assert data.x_train.shape == (20, 6, 6) and data.x_test.shape == (5, 6, 6)
    assert 0.0 <= data.x_train.min() and data.x_train.max() <= 1.0
    np.testing.assert_array_equal(data.y_train, np.where(data.digits_train % 2 == 1, 1.0, -1.0))
    # the drawn images are rows of the file, in file order, and carry their own labels
    rows = [int(np.flatnonzero((arrays["train_images"] == np.round(x * 255)).all(axis=(1, 2)))[0]) for x in data.x_train]
    assert rows == sorted(rows)
    np.testing.assert_array_equal(arrays["train_labels"][rows], data.digits_train)
    with pytest.raises(ValueError, match="n_train"):
        mnist_odd_even(tmp_path, n_train=31, seed=0)


def test_missing_file_named(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / FILES["test_labels"]).unlink()
    with pytest.raises(ValueError, match="t10k-labels-idx1-ubyte"):
        load_mnist(tmp_path)
    with pytest.raises(ValueError, match="directory"):
        load_mnist(tmp_path / "nope")


def test_truncated_file_named(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / FILES["train_images"]
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte is truncated"):
        load_mnist(tmp_path)
    path.write_bytes(path.read_bytes()[:10])  # inside the header
    with pytest.raises(ValueError, match="truncated.*header"):
        read_idx(path)
    path.write_bytes(b"\x00\x00")
    with pytest.raises(ValueError, match="truncated"):
        read_idx(path)


def test_corrupt_files_named(tmp_path):
    write_mnist(tmp_path, gz=True)
    path = tmp_path / (FILES["train_labels"] + ".gz")
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])  # truncated gzip stream
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte.gz is gzip-compressed but corrupt"):
        load_mnist(tmp_path)
    path.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="not gzip"):
        read_idx(path)
    bad = tmp_path / "bad-magic"
    bad.write_bytes(b"\x01\x02\x08\x01" + struct.pack(">I", 3) + b"abc")
    with pytest.raises(ValueError, match="bad-magic has a bad magic number"):
        read_idx(bad)
    bad.write_bytes(b"\x00\x00\x07\x01" + struct.pack(">I", 3) + b"abc")
    with pytest.raises(ValueError, match="unknown data type code 0x07"):
        read_idx(bad)
    longer = tmp_path / "longer"
    longer.write_bytes(idx_bytes(np.arange(3)) + b"x")
    with pytest.raises(ValueError, match="longer than declared"):
        read_idx(longer)


def test_inconsistent_files_named(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / FILES["train_labels"]).write_bytes(idx_bytes(np.zeros(29, np.uint8)))
    with pytest.raises(ValueError, match="30 images but .*train-labels-idx1-ubyte has 29 labels"):
        load_mnist(tmp_path)
    (tmp_path / FILES["train_labels"]).write_bytes(idx_bytes(np.full(30, 12, np.uint8)))
    with pytest.raises(ValueError, match="labels up to 12"):
        load_mnist(tmp_path)
    (tmp_path / FILES["train_labels"]).write_bytes(idx_bytes(np.zeros((30, 2), np.uint8)))
    with pytest.raises(ValueError, match="1-D uint8"):
        load_mnist(tmp_path)


def test_read_idx_other_types(tmp_path):
    arr = np.arange(6, dtype=">i4").reshape(2, 3)
    path = tmp_path / "ints"
    path.write_bytes(bytes([0, 0, 0x0C, 2]) + struct.pack(">2I", 2, 3) + arr.tobytes())
    np.testing.assert_array_equal(read_idx(path), arr)


def test_digits_default_split():
    data = digits_odd_even(seed=0)
    assert data.x_train.shape == (1198, 8, 8) and data.x_test.shape == (599, 8, 8)
    assert 0.0 <= data.x_train.min() and data.x_train.max() <= 1.0
    np.testing.assert_array_equal(data.y_test, np.where(data.digits_test % 2 == 1, 1.0, -1.0))
    again = digits_odd_even(seed=0)
    np.testing.assert_array_equal(again.x_train, data.x_train)  # seeded: same split every time
    small = digits_odd_even(n_train=100, n_test=50, seed=1)
    assert small.x_train.shape == (100, 8, 8) and small.x_test.shape == (50, 8, 8)
    with pytest.raises(ValueError, match="exceeds"):
        digits_odd_even(n_train=1500, n_test=500, seed=0)
    with pytest.raises(ValueError, match="n_test"):
        digits_odd_even(n_test=0, seed=0)
