r"""Datasets for the isotropic case (Thm 7, Assumption 2:
$\frac1m\sum_\mu A_{ij}A_{kl} = \frac c2(\delta_{ik}\delta_{jl}+\delta_{il}\delta_{jk})$) and the deep linear network
of Saxe et al. (2014) as an NQF (Eq. 288). The Riccati and projector solutions live in :mod:`nqf.solutions`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_ndim, check_positive, check_shape, check_size, check_symmetric, invalid
from .._types import ArrayLike
from ..model._data import NQFData
from ._solvable import random_orthogonal


def _sym_basis(p: int) -> np.ndarray:
    """Frobenius-orthonormal basis of symmetric p x p matrices, shape (p(p+1)/2, p, p)."""
    out = []
    for i in range(p):
        for j in range(i, p):
            B = np.zeros((p, p))
            if i == j:
                B[i, i] = 1.0
            else:
                B[i, j] = B[j, i] = 1.0 / np.sqrt(2.0)
            out.append(B)
    return np.stack(out)


class IsotropicData(NamedTuple):
    As: Float[ArrayLike, "m p p"]  # the structure matrices A_mu of Eq. (40)
    ys: Float[ArrayLike, " m"]  # the targets y_mu
    Y: Float[ArrayLike, "p p"]  # (4/m) sum_mu y_mu A_mu
    c: float  # the constant of Eq. (40)

    @property
    def data(self) -> NQFData:
        """``(As, ys)`` as a validated :class:`~nqf.model.NQFData`."""
        return NQFData(self.As, self.ys)


def isotropic_dataset(Y: Float[ArrayLike, "p p"], c: float, *, seed: int) -> IsotropicData:
    r"""Structure matrices satisfying Assumption 2 exactly, with a prescribed target matrix $Y$.

    With $\{B_a\}$ a Frobenius-orthonormal basis of the $p(p+1)/2$ symmetric matrices and $O$ a
    random orthogonal $m\times m$ matrix ($m = p(p+1)/2$), $A_\mu = \sqrt{cm}\sum_a O_{\mu a}B_a$
    gives $\frac1m\sum_\mu A_{ij}A_{kl} = \frac c2(\delta_{ik}\delta_{jl}+\delta_{il}\delta_{jk})$
    (Eq. 40); the $A_\mu$ do not commute. The targets $y = \frac{m}{4\sqrt{cm}}O\,\mathrm{vec}_B(Y)$
    make $\frac4m\sum_\mu y_\mu A_\mu = Y$.
    """
    Y = np.asarray(Y, dtype=float)
    check_ndim("Y", Y, 2, "target matrix (p, p)")
    check_symmetric("Y", Y)
    check_positive("c", c)
    p = Y.shape[0]
    B = _sym_basis(p)
    m = B.shape[0]
    O = random_orthogonal(m, seed=seed)
    As = np.sqrt(c * m) * np.einsum("ma,aij->mij", O, B)
    coeffs = np.einsum("aij,ij->a", B, Y)
    ys = m / (4.0 * np.sqrt(c * m)) * O @ coeffs
    return IsotropicData(jnp.asarray(As), jnp.asarray(ys), jnp.asarray(Y), float(c))


# ------------------------------------------------------------------ Corollary 4 and Saxe et al.
class LinearNetworkData(NamedTuple):
    As: Float[ArrayLike, "m p p"]  # A_nu = 1/2 [[0, S_nu], [S_nu^T, 0]], S_nu = e_o x_mu^T
    ys: Float[ArrayLike, " m"]  # the targets, entries of the teacher T* x_mu
    teacher: Float[ArrayLike, "o i"]  # T* = U diag(s) V^T
    s: Float[ArrayLike, " r"]  # singular values tau_a of T (Eq. 267)
    u: Float[ArrayLike, "o r"]  # left singular vectors u_a of T*
    v: Float[ArrayLike, "i r"]  # right singular vectors v_a of T*
    projectors: Float[ArrayLike, "r p p"]  # Pi_a = psi_a psi_a^T, psi_a = [u_a; v_a]/sqrt(2) (Eq. 276)

    @property
    def data(self) -> NQFData:
        """``(As, ys)`` as a validated :class:`~nqf.model.NQFData`."""
        return NQFData(self.As, self.ys)


def linear_network_dataset(s: Float[ArrayLike, " r"], n_in: int, n_out: int, *, seed: int) -> LinearNetworkData:
    r"""A two-layer linear network $\hat y = UV^\top x$ as an NQF (Cor. 4, Eq. 265).

    A random teacher $T^* = U_T\,\mathrm{diag}(s)V_T^\top$; inputs $x_\mu$ ($\mu = 1..n_\mathrm{in}$)
    from the columns of a random orthogonal matrix scaled so that
    $\frac1{n_\mathrm{in}}\sum_\mu x_\mu x_\mu^\top = n_\mathrm{out}I$; one scalar NQF sample per
    (input, output) pair, $S_\nu = e_ox_\mu^\top$, $y_\nu = (T^*x_\mu)_o$, $m = n_\mathrm{in}n_\mathrm{out}$.
    Then Eq. (266) gives $\mathcal C(Q) = Q$ (so $c_a = 1$, the whitened case of Eq. 287) and
    $T = T^*$, so $\tau_a = s_a$ and Eq. (288) holds exactly.
    """
    s = np.asarray(s, dtype=float)
    check_ndim("s", s, 1, "teacher singular values")
    r = s.shape[0]
    n_in, n_out = check_size("n_in", n_in), check_size("n_out", n_out)
    if not (r <= min(n_in, n_out)):
        raise invalid("s", 'have len(s) <= min(n_in, n_out)', f'len(s)={r}, n_in={n_in}, n_out={n_out}')
    if np.any(s < 0):
        raise invalid("s", 'be >= 0 (singular values)', f'{s}')
    rng_u = random_orthogonal(n_out, seed=seed)[:, :r]
    rng_v = random_orthogonal(n_in, seed=seed + 1)[:, :r]
    Tstar = rng_u @ np.diag(s) @ rng_v.T
    X = np.sqrt(n_out * n_in) * random_orthogonal(n_in, seed=seed + 2)  # columns are inputs
    p = n_out + n_in
    As, ys = [], []
    for mu in range(n_in):
        for o in range(n_out):
            S = np.zeros((n_out, n_in))
            S[o] = X[:, mu]
            A = np.zeros((p, p))
            A[:n_out, n_out:] = 0.5 * S
            A[n_out:, :n_out] = 0.5 * S.T
            As.append(A)
            ys.append((Tstar @ X[:, mu])[o])
    psi = np.concatenate([rng_u, rng_v], axis=0) / np.sqrt(2.0)
    Pi = np.einsum("ia,ja->aij", psi, psi)
    return LinearNetworkData(
        jnp.asarray(np.stack(As)), jnp.asarray(np.array(ys)), jnp.asarray(Tstar), jnp.asarray(s),
        jnp.asarray(rng_u), jnp.asarray(rng_v), jnp.asarray(Pi),
    )


def balanced_init(data: LinearNetworkData, rho0: Float[ArrayLike, " r"]) -> Float[Array, "p p"]:
    r"""$M(0) = \sum_a 2\rho_a(0)\Pi_a$ (Eq. 283), the balanced, aligned start of Eq. (269)."""
    rho0 = jnp.asarray(rho0, dtype=float)
    check_shape("rho0", rho0, (data.s.shape[0],), "one initial mode strength per singular value")
    return jnp.einsum("a,aij->ij", 2 * rho0, jnp.asarray(data.projectors))


def mode_strengths(M: Float[ArrayLike, "T p p"], data: LinearNetworkData) -> Float[Array, "T r"]:
    r"""$\rho_a = u_a^\top(UV^\top)v_a$, read from the off-diagonal block $UV^\top$ of $M$."""
    n_out = data.u.shape[0]
    M = jnp.asarray(M)
    return jnp.einsum("oa,toi,ia->ta", jnp.asarray(data.u), M[:, :n_out, n_out:], jnp.asarray(data.v))
