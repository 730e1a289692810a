r"""Datasets that satisfy (or break) the assumptions of the solvable cases (Sec. 5).

Commuting structure matrices (Assumption 1), proportional samples (Thm 4), orthogonal samples
(Thm 5) and orthogonal features (Thm 6, the Fig. 3 construction), each as a :class:`SolvableData`
carrying its eigenbasis; and :func:`breaking_direction`, the perturbation that breaks each assumption
(chapter 4's "what if the hypothesis fails"). The closed forms live in :mod:`nqf.solutions`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Float
from .._checks import check_finite
from .._checks import check_ndim
from .._checks import check_shape
from .._types import ArrayLike
from .._types import StructureStack
from ..model._data import NQFData
from ..model._data import require_data
from ..model._model import check_dataset
from ._random import orthogonal_features_dataset
from ._random import random_orthogonal
from .._checks import invalid



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


# --------------------------------------------------------------------------- datasets
def _basis(p: int, P, seed) -> np.ndarray:
    if P is None:
        return np.eye(p) if seed is None else random_orthogonal(p, seed=seed)
    P = np.asarray(P, dtype=float)
    check_shape("P", P, (p, p), "orthogonal eigenbasis")
    if not np.allclose(P.T @ P, np.eye(p), atol=1e-10):
        raise invalid("P", 'be orthogonal', f'max |P^T P - I| = {np.abs(P.T @ P - np.eye(p)).max():.3g}')
    return P


def commuting_dataset(
    lambdas: Float[ArrayLike, "m p"], ys: Float[ArrayLike, " m"], *, P=None, seed: int | None = None
) -> SolvableData:
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


def proportional_dataset(
    lambdas: Float[ArrayLike, " p"], cs: Float[ArrayLike, " m"], ys: Float[ArrayLike, " m"], *, P=None,
    seed: int | None = None,
) -> SolvableData:
    r"""Proportional samples $A(x_\mu) = c_\mu A$, $A = P\,\mathrm{diag}(\lambda)P^\top$ (Theorem 4)."""
    lam = np.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 1, "eigenvalues of the shared matrix A")
    cs = np.asarray(cs, dtype=float)
    check_ndim("cs", cs, 1, "one proportionality constant per sample")
    return commuting_dataset(cs[:, None] * lam[None, :], ys, P=P, seed=seed)


def orthogonal_samples_dataset(
    block_eigs: Float[ArrayLike, "m K"], ys: Float[ArrayLike, " m"], *, P=None, seed: int | None = None
) -> SolvableData:
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


def orthogonal_features_data(
    r: Float[ArrayLike, " p"], C_kk: float, *, seed: int, P=None, rotate_seed: int | None = None
) -> SolvableData:
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
    elif kind == "proportional":
        E = np.einsum("ik,mk,jk->mij", Pm, rng.normal(size=(m, p)), Pm)
    elif kind == "orthogonal_features":
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


def broken_datasets(
    kind: str, data: NQFData, etas: Float[ArrayLike, " n"], **kwargs
) -> list[NQFData]:
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
