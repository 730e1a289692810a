r"""Datasets of structure matrices built to satisfy the paper's assumptions.

Each builder returns ``(As, ys)``: a stack of structure matrices ``(m, p, p)``
and targets ``(m,)``; ``nqf.NQFData(As, ys)`` makes them the data of
:func:`nqf.gradient_flow` or :func:`nqf.solutions.lv_coefficients`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Float
from .._checks import check_size
from .._checks import check_finite
from .._checks import check_ndim
from .._checks import check_positive
from .._types import ArrayLike



def random_orthogonal(n: int, *, seed: int) -> np.ndarray:
    """A Haar-random ``n x n`` orthogonal matrix (QR of a Gaussian matrix, signs fixed)."""
    check_size("n", n)
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(n, n)))
    return q * np.sign(np.diag(r))


def orthogonal_features_dataset(
    r: Float[ArrayLike, " p"], C_kk: float, *, seed: int
) -> tuple[Float[ArrayLike, "p p p"], Float[ArrayLike, " p"]]:
    r"""Diagonal structure matrices with orthogonal features (Theorem 6, Fig. 3 left/middle).

    With $O$ a random $p\times p$ orthogonal matrix and $m = p$ samples,
    $A(x_\mu) = c\,\mathrm{diag}(O_{\cdot\mu})$ gives
    $\sum_\mu\lambda_{\mu,k}\lambda_{\mu,j} = c^2\delta_{kj}$; $c = \sqrt{C_{kk} m/8}$ makes
    $C_{kk}$ of Eq. (37) equal to ``C_kk`` and $y = \frac{m}{8c}O^\top r$ gives the growth
    rates ``r``.
    """
    r = np.asarray(r, dtype=float)
    check_ndim("r", r, 1, "one growth rate per mode")
    check_finite("r", r)
    check_positive("C_kk", C_kk)
    m = p = r.shape[0]
    O = random_orthogonal(p, seed=seed)
    c = np.sqrt(C_kk * m / 8.0)
    As = np.stack([np.diag(c * O[:, mu]) for mu in range(m)])
    ys = m / (8.0 * c) * O.T @ r
    return jnp.asarray(As), jnp.asarray(ys)
