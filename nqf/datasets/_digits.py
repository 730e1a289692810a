r"""Odd-vs-even handwritten digits for Fig. 7 (App. C): scikit-learn's bundled 8x8 digits.

The paper trains on 4000 MNIST images (odd vs even, MSE loss). MNIST cannot be
downloaded on the book's machines, so the default is the 1797 8x8 images that ship
inside scikit-learn (``sklearn.datasets.load_digits``, no network). The MNIST path
(:func:`nqf.datasets.mnist_odd_even`) reads local IDX files instead and returns the
same :class:`DigitsData`.

Targets: $y = +1$ for an odd digit, $-1$ for an even one; a prediction is correct
when $\operatorname{sign} f(x) = y$.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import check_size
from .._checks import invalid


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
