r"""Datasets that satisfy (or break: chapter 4) the assumptions of the solvable cases (Sec. 5):
commuting structure matrices (Assumption 1), proportional samples (Thm 4), orthogonal samples (Thm 5, Fig. 4)
and orthogonal features (Thm 6, Fig. 3), each with its eigenbasis. The closed forms live in :mod:`nqf.solutions`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Float
from .._checks import check_finite, check_ndim, check_positive, check_shape, check_size, invalid
from .._types import ArrayLike, StructureStack
from ..model._data import NQFData, require_data
from ..model._model import check_dataset


def random_orthogonal(n: int, *, seed: int) -> np.ndarray:
    """A Haar-random ``n x n`` orthogonal matrix (QR of a Gaussian matrix, signs fixed)."""
    check_size("n", n)
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(n, n)))
    return q * np.sign(np.diag(r))


def orthogonal_features_dataset(r: Float[ArrayLike, " p"], C_kk: float, *,
                                seed: int) -> tuple[Float[ArrayLike, "p p p"], Float[ArrayLike, " p"]]:
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


class SolvableData(NamedTuple):
    """A dataset built to satisfy an assumption: ``As = P diag(lambdas[mu]) P^T``."""

    As: Float[ArrayLike, "m p p"]  # the commuting structure matrices A_mu
    ys: Float[ArrayLike, " m"]  # the targets y_mu
    P: Float[ArrayLike, "p p"]  # shared eigenbasis (columns)
    lambdas: Float[ArrayLike, "m p"]  # lambda_{mu,k}

    @property
    def data(self) -> NQFData:
        """``(As, ys)`` as a validated :class:`~nqf.model.NQFData`."""
        return NQFData(self.As, self.ys)


def _basis(p: int, P, seed) -> np.ndarray:
    if P is None:
        return np.eye(p) if seed is None else random_orthogonal(p, seed=seed)
    P = np.asarray(P, dtype=float)
    check_shape("P", P, (p, p), "orthogonal eigenbasis")
    if not np.allclose(P.T @ P, np.eye(p), atol=1e-10):
        raise invalid("P", 'be orthogonal', f'max |P^T P - I| = {np.abs(P.T @ P - np.eye(p)).max():.3g}')
    return P


def commuting_dataset(lambdas: Float[ArrayLike, "m p"], ys: Float[ArrayLike, " m"], *, P=None,
                      seed: int | None = None) -> SolvableData:
    r"""Commuting structure matrices $A(x_\mu) = P\,\mathrm{diag}(\lambda_{\mu,\cdot})P^\top$
    (Assumption 1). ``P`` defaults to the identity, or a random orthogonal matrix when
    ``seed`` is given."""
    lam = np.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 2, "one row of eigenvalues per sample")
    m, p = lam.shape
    check_shape("ys", ys, (m,), "one target per sample")
    check_finite("lambdas", lam)
    check_finite("ys", ys)
    Pm = _basis(p, P, seed)
    As = np.einsum("ik,mk,jk->mij", Pm, lam, Pm)
    As = 0.5 * (As + np.swapaxes(As, 1, 2))
    return SolvableData(jnp.asarray(As), jnp.asarray(ys, dtype=float), jnp.asarray(Pm), jnp.asarray(lam))


def proportional_dataset(lambdas: Float[ArrayLike, " p"], cs: Float[ArrayLike, " m"], ys: Float[ArrayLike, " m"], *,
                         P=None, seed: int | None = None) -> SolvableData:
    r"""Proportional samples $A(x_\mu) = c_\mu A$, $A = P\,\mathrm{diag}(\lambda)P^\top$ (Theorem 4)."""
    lam = np.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 1, "eigenvalues of the shared matrix A")
    cs = np.asarray(cs, dtype=float)
    check_ndim("cs", cs, 1, "one proportionality constant per sample")
    return commuting_dataset(cs[:, None] * lam[None, :], ys, P=P, seed=seed)


def orthogonal_samples_dataset(block_eigs: Float[ArrayLike, "m K"], ys: Float[ArrayLike, " m"], *, P=None,
                               seed: int | None = None) -> SolvableData:
    r"""Orthogonal samples (Theorem 5): sample $\mu$ has eigenvalues ``block_eigs[mu]`` on its
    own block of $K$ eigen-directions (indices $\mu K, \dots, \mu K + K - 1$, counting from 0)
    and zero elsewhere, so $A(x_\mu)A(x_\nu) = 0$ for $\mu\ne\nu$; $p = mK$."""
    be = np.asarray(block_eigs, dtype=float)
    check_ndim("block_eigs", be, 2, "one block of K eigenvalues per sample")
    m, K = be.shape
    lam = np.zeros((m, m * K))
    for mu in range(m):
        lam[mu, mu * K:(mu + 1) * K] = be[mu]
    return commuting_dataset(lam, ys, P=P, seed=seed)


def orthogonal_features_data(r: Float[ArrayLike, " p"], C_kk: float, *, seed: int, P=None,
                             rotate_seed: int | None = None) -> SolvableData:
    r"""Orthogonal features (Theorem 6): the Fig. 3 construction of
    ``orthogonal_features_dataset`` ($\sum_\mu\lambda_{\mu,k}\lambda_{\mu,j} = 0$ for
    $k\ne j$), optionally rotated into a random eigenbasis ``P`` (``rotate_seed``)."""
    As, ys = orthogonal_features_dataset(r, C_kk, seed=seed)
    lam = np.einsum("mii->mi", np.asarray(As))
    return commuting_dataset(lam, ys, P=P, seed=rotate_seed)


_KINDS = ("commuting", "proportional", "orthogonal_samples", "orthogonal_features", "feedforward")


def breaking_direction(
    kind: str, As: StructureStack, *, P: Float[ArrayLike, "p p"] | None = None,
    lambdas: Float[ArrayLike, "m p"] | None = None, n_out: int | None = None, seed: int,
) -> np.ndarray:
    r"""A perturbation $E_\mu$ that breaks one assumption on purpose; the data $A_\mu + \eta E_\mu$
    violate it by an amount $\propto\eta$. Each $E_\mu$ is scaled to the mean Frobenius norm of the
    $A_\mu$, so $\eta$ is a relative size.

    ``kind``:
      * ``"commuting"`` — random symmetric $E_\mu$ (breaks Assumption 1, and Assumption 2);
      * ``"proportional"`` — $P\,\mathrm{diag}(d_\mu)P^\top$, random $d_\mu$ (keeps Assumption 1,
        breaks $A_\mu = c_\mu A$ of Thm 4);
      * ``"orthogonal_samples"`` — sample $\mu$ also touches the first direction used by sample
        $\mu+1$ (keeps Assumption 1, breaks $A_\mu A_\nu = 0$ of Thm 5; needs ``lambdas``);
      * ``"orthogonal_features"`` — $P\,\mathrm{diag}(G_{\cdot\mu})P^\top$, random $G$ (keeps
        Assumption 1, makes $\sum_\mu\lambda_{\mu,k}\lambda_{\mu,j}\ne0$, breaking Thm 6);
      * ``"feedforward"`` — random $\frac12[[0, E],[E^\top, 0]]$ with $E\in\mathbb R^{n_\mathrm{out}\times n_\mathrm{in}}$
        (keeps the form of Eq. 265, breaks the eigen-condition (268) of Cor. 4; needs ``n_out``).
    """
    if kind not in _KINDS:
        raise invalid("kind", f'be one of {_KINDS}', f'{kind!r}')
    m, p = check_dataset(As)
    rng = np.random.default_rng(seed)
    Pm = np.eye(p) if P is None else np.asarray(P, dtype=float)
    check_shape("P", Pm, (p, p), "eigenbasis")
    if kind == "commuting":
        E = rng.normal(size=(m, p, p))
        E = 0.5 * (E + np.swapaxes(E, 1, 2))
    elif kind in ("proportional", "orthogonal_features"):
        E = np.einsum("ik,mk,jk->mij", Pm, rng.normal(size=(m, p)), Pm)
    elif kind == "orthogonal_samples":
        if lambdas is None:
            raise invalid("lambdas", "be given for kind='orthogonal_samples'", "None")
        lam = np.asarray(lambdas, dtype=float)
        check_shape("lambdas", lam, (m, p), "eigenvalues of each sample")
        d = np.zeros((m, p))
        for mu in range(m):
            nxt = np.flatnonzero(lam[(mu + 1) % m])
            d[mu, nxt[0]] = 1.0
        E = np.einsum("ik,mk,jk->mij", Pm, d, Pm)
    else:
        if n_out is None or not 0 < int(n_out) < p:
            raise invalid("n_out", f"be an integer in (0, p={p}) for kind='feedforward'", f'{n_out!r}')
        n_out = int(n_out)
        G = rng.normal(size=(m, n_out, p - n_out))
        E = np.zeros((m, p, p))
        E[:, :n_out, n_out:] = 0.5 * G
        E[:, n_out:, :n_out] = 0.5 * np.swapaxes(G, 1, 2)
    scale = np.mean(np.linalg.norm(np.asarray(As), axis=(1, 2)))
    return E * (scale / np.linalg.norm(E, axis=(1, 2), keepdims=True).clip(1e-300))


def broken_datasets(kind: str, data: NQFData, etas: Float[ArrayLike, " n"], **kwargs) -> list[NQFData]:
    r"""The data broken by every size in ``etas`` at once: $A_\mu + \eta_i E_\mu$ for each $\eta_i$
    (targets unchanged), with $E_\mu$ from :func:`breaking_direction` (``kind`` and ``kwargs`` as
    there). One :class:`~nqf.model.NQFData` per $\eta_i$, all of one shape, ready for the batched
    flow (:func:`nqf.gradient_flow` with ``M0`` of shape ``(n, p, p)``, one dataset per lane);
    ``etas[i] = 0`` gives the unbroken data."""
    data = require_data(data)
    etas = np.asarray(etas, dtype=float)
    check_ndim("etas", etas, 1, "perturbation sizes")
    check_finite("etas", etas)
    E = breaking_direction(kind, data.As, **kwargs)
    A = np.asarray(data.As, dtype=float)
    return [NQFData(A + eta * E, data.ys, gs=data.gs, Bs=data.Bs, f0=data.f0) for eta in etas]


# ------------------------------------------------------------------ Fig. 4 (Sec. 6)
def fig4_dataset(*, ys: Float[ArrayLike, " m"] | None = None, block: Float[ArrayLike, " K"] | None = None) -> SolvableData:
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
