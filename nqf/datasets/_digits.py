r"""Odd-vs-even handwritten digits for Fig. 7 (App. C): scikit-learn's bundled 1797 8x8 digits (no
network; the paper's 4000 MNIST images cannot be downloaded on the book's machines), or MNIST from the four
standard IDX files (each possibly gzipped) in a directory the user passes. Targets: $y = +1$ for an odd
digit, $-1$ for an even one.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._checks import check_int, check_size, invalid


class DigitsData(NamedTuple):
    """A train/test split of images with odd-vs-even targets.

    Attributes:
        x_train, x_test: images, shape ``(n, h, w)``, pixel values in ``[0, 1]``.
        y_train, y_test: targets, ``+1.0`` (odd digit) or ``-1.0`` (even digit).
        digits_train, digits_test: the digit labels ``0..9`` (int).
        source: a short description of where the images come from and of the split.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    digits_train: np.ndarray
    digits_test: np.ndarray
    source: str


def odd_even_targets(digits) -> np.ndarray:
    """$+1$ for odd digits, $-1$ for even ones (float64)."""
    digits = np.asarray(digits)
    if digits.size and (digits.min() < 0 or digits.max() > 9):
        raise invalid("digits", 'hold labels in 0..9', f'range [{digits.min()}, {digits.max()}]')
    return np.where(digits % 2 == 1, 1.0, -1.0)


def _split_counts(n_total: int, n_train: int | None, n_test: int | None) -> tuple[int, int]:
    if n_train is None and n_test is None:
        n_test = n_total // 3
    if n_test is None:
        n_test = n_total - n_train
    if n_train is None:
        n_train = n_total - n_test
    for name, v in (("n_train", n_train), ("n_test", n_test)):
        check_size(name, v)
    if n_train + n_test > n_total:
        raise invalid("n_train", f"+ `n_test` be at most the {n_total} images available",
                      f"`n_train` + `n_test` = {n_train + n_test}, which exceeds the {n_total} images available")
    return int(n_train), int(n_test)


def digits_odd_even(*, n_train: int | None = None, n_test: int | None = None, seed: int) -> DigitsData:
    r"""scikit-learn's bundled 8x8 digits (1797 images), odd vs even, split at random.

    The images are shuffled by a ``numpy`` generator seeded with ``seed``; the first
    ``n_train`` form the training set and the next ``n_test`` the test set (default:
    two thirds / one third, 1198 / 599). Pixels (0..16) are divided by 16. No network.
    """
    from sklearn.datasets import load_digits  # bundled with scikit-learn, read from disk

    data = load_digits()
    images = np.asarray(data.images, dtype=float) / 16.0
    digits = np.asarray(data.target, dtype=int)
    n_train, n_test = _split_counts(len(digits), n_train, n_test)
    order = np.random.default_rng(seed).permutation(len(digits))
    tr, te = order[:n_train], order[n_train:n_train + n_test]
    return DigitsData(
        images[tr], odd_even_targets(digits[tr]), images[te], odd_even_targets(digits[te]),
        digits[tr], digits[te],
        f"scikit-learn 8x8 digits ({len(digits)} images), random split (seed {seed}): "
        f"{n_train} train / {n_test} test",
    )


MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

_IDX_TYPES = {
    0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}


def _read_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise invalid("directory", "hold readable IDX files", f"cannot read IDX file {path}: {exc.strerror or exc}") from exc
    if raw[:2] == b"\x1f\x8b":  # gzip magic, whatever the file is called
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise invalid("directory", "hold readable IDX files", f"IDX file {path} is gzip-compressed but corrupt or truncated: {exc}") from exc
    if path.suffix == ".gz":
        raise invalid("directory", "hold readable IDX files", f"IDX file {path} ends in .gz but is not gzip data (first bytes {raw[:4].hex()})")
    return raw


def read_idx(path: "str | os.PathLike") -> np.ndarray:
    """Read one IDX file (optionally gzipped) into a NumPy array of its stored dtype and shape.

    Raises ``ValueError`` naming ``path`` if the file is missing or unreadable, is not
    valid gzip when compressed, has a bad magic number, an unknown type code, or a
    payload shorter or longer than its header declares.
    """
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise invalid("directory", "hold readable IDX files", f"IDX file {path} is truncated: {len(raw)} bytes, shorter than the 4-byte magic number")
    if raw[0] != 0 or raw[1] != 0:
        raise invalid("directory", "hold readable IDX files (the first two bytes of the magic number must be zero)",
                      f"IDX file {path} has a bad magic number {raw[:4].hex()}")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_TYPES:
        raise invalid("directory", "hold readable IDX files", f"IDX file {path} has an unknown data type code 0x{code:02x}")
    if ndim < 1:
        raise invalid("directory", "hold readable IDX files (at least 1 dimension)", f"IDX file {path} declares {ndim} dimensions")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise invalid("directory", "hold readable IDX files", f"IDX file {path} is truncated: its header declares {ndim} dimensions "
                      f"({header} bytes) but the file has {len(raw)} bytes")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_TYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(raw) - header
    if got != expected:
        kind = "truncated" if got < expected else "longer than declared"
        raise invalid("directory", "hold readable IDX files", f"IDX file {path} is {kind}: shape {shape} of {dtype.name} needs "
                      f"{expected} data bytes, the file holds {got}")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def _find(directory: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (directory / name).is_file():
            return directory / name
    raise invalid("directory", f"hold the four standard IDX files: {', '.join(MNIST_FILES.values())}",
                  f"MNIST file {stem} (or {stem}.gz) not found in {directory}")


def load_mnist(directory: "str | os.PathLike") -> dict[str, np.ndarray]:
    """The four MNIST arrays from ``directory``: ``train_images`` ``(n, h, w)`` uint8,
    ``train_labels`` ``(n,)``, ``test_images``, ``test_labels``.

    Checks that images are 3-D ``uint8`` arrays, labels 1-D ``uint8`` in 0..9, and that
    each image file has as many images as its label file has labels.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise invalid("directory", 'be an existing directory holding the MNIST IDX files', f'{directory}')
    out, paths = {}, {}
    for key, stem in MNIST_FILES.items():
        paths[key] = _find(directory, stem)
        arr = read_idx(paths[key])
        want = 3 if key.endswith("images") else 1
        if arr.ndim != want or arr.dtype != np.uint8:
            raise invalid("directory", f"hold IDX files of MNIST: {paths[key]} must hold a {want}-D uint8 array ({key})",
                          f"shape {arr.shape} of {arr.dtype}")
        if key.endswith("labels") and arr.size and arr.max() > 9:
            raise invalid("directory", "hold IDX files of MNIST (digit labels 0..9)", f"IDX file {paths[key]} holds labels up to {arr.max()}")
        out[key] = arr
    for split in ("train", "test"):
        ni, nl = len(out[f"{split}_images"]), len(out[f"{split}_labels"])
        if ni != nl:
            raise invalid("directory", "hold as many labels as images", f"MNIST {split} set: {paths[split + '_images']} has {ni} images but "
                          f"{paths[split + '_labels']} has {nl} labels")
    return out


def mnist_odd_even(directory: "str | os.PathLike", *, n_train: int = 4000, n_test: int = 1000, seed: int) -> DigitsData:
    r"""MNIST odd vs even, as in Fig. 7: ``n_train`` images drawn at random (seed ``seed``)
    from the training file and ``n_test`` from the test file; pixels divided by 255."""
    data = load_mnist(directory)
    rng = np.random.default_rng(seed)
    sets = []
    for split, n in (("train", n_train), ("test", n_test)):
        total = len(data[f"{split}_labels"])
        name = f"n_{split}"
        check_int(name, n, minimum=1, maximum=total)  # at most the images in the split's file
        idx = np.sort(rng.choice(total, size=int(n), replace=False))
        digits = data[f"{split}_labels"][idx].astype(int)
        sets.append((data[f"{split}_images"][idx].astype(float) / 255.0, odd_even_targets(digits), digits))
    (xtr, ytr, dtr), (xte, yte, dte) = sets
    return DigitsData(xtr, ytr, xte, yte, dtr, dte,
                      f"MNIST IDX files, {n_train} train / {n_test} test images drawn at random (seed {seed})")
