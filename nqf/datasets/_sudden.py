r"""Data and initialisations of the sudden-learning figures (Sec. 6): the Fig. 4 dataset
(orthogonal samples with per-sample switch-on times, Thm 10) and Gaussian initial weights."""

from __future__ import annotations


import numpy as np
from jaxtyping import Float
from .._checks import check_ndim
from .._checks import check_positive
from .._checks import check_size
from .._types import ArrayLike
from ._solvable import SolvableData
from ._solvable import orthogonal_samples_dataset



# ------------------------------------------------------------------ Fig. 4 data and Eq. (36)
def fig4_dataset(
    *, ys: Float[ArrayLike, " m"] | None = None, block: Float[ArrayLike, " K"] | None = None
) -> SolvableData:
    r"""Fig. 4's orthogonal samples (App. C): $m$ diagonal $A(x_\mu)$ with entries ``block``
    (paper: 1, 1.5, 2) on sample $\mu$'s own block of $K$ indices, $p = mK$. The paper gives
    neither the labels nor $\epsilon$; the default labels $y_\mu = 2^{-(\mu-1)}$ are this book's
    choice (distinct growth rates $\zeta_\mu$, well separated plateaus)."""
    ys = np.array([1.0, 0.5, 0.25, 0.125]) if ys is None else np.asarray(ys, dtype=float)
    block = np.array([1.0, 1.5, 2.0]) if block is None else block
    check_ndim("ys", ys, 1, "one label per sample")
    block = np.asarray(block, dtype=float)
    check_ndim("block", block, 1, "the K non-zero diagonal entries of each A(x_mu)")
    return orthogonal_samples_dataset(np.tile(block, (ys.shape[0], 1)), ys)


def gaussian_init(p: int, d: int, sigma: float, *, seed: int) -> np.ndarray:
    r"""Weights $W_{ij}\sim\mathcal N(0,\sigma^2)$, shape ``(p, d)`` (App. C's "$\epsilon$" is this $\sigma$).
    Then $z_k(0) = (W W^\top)_{kk} \approx d\sigma^2$, so $\ln(1/z_k(0)) \approx 2\ln(1/\sigma) - \ln d$.
    ``seed`` (required) seeds NumPy's generator."""
    p, d = check_size("p", p), check_size("d", d)
    check_positive("sigma", sigma)
    return sigma * np.random.default_rng(seed).normal(size=(p, d))
