r"""Exactly solvable flows under Assumption 1 (Sec. 5): Prop. 7 (Eq. 30), Thms 4 and 5 (Eqs. 33-36, by
quadrature) and Thm 6 (Eqs. 38-39)."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_ndim, check_shape, invalid
from .._types import ArrayLike, Matrix
from ..model._model import check_order_parameter
from ._implicit import implicit_xi
from ._lotka_volterra import logistic_solution


def _rotated(P, M0) -> tuple[Array, Array]:
    """``(P, P^T M0 P)`` as float arrays, ``M0`` checked."""
    P, M0 = jnp.asarray(P, dtype=float), jnp.asarray(M0, dtype=float)
    check_order_parameter(M0, P.shape[0])
    return P, P.T @ M0 @ P


# ------------------------------------------------------------------ Theorem 4
class ProportionalSolution(NamedTuple):
    xi: Float[Array, " T"]  # auxiliary scalar of Eq. (34)
    z: Float[Array, "T p"]  # features z_k(t) = z_k(0) exp(-2 lambda_k xi)
    alpha: float  # (4/m) sum_mu c_mu^2, with A(x_mu) = c_mu A (Thm 4)
    beta: float  # (4/m) sum_mu c_mu y_mu


def proportional_solution(t: Float[ArrayLike, " T"], lambdas: Float[ArrayLike, " p"], cs: Float[ArrayLike, " m"],
                          ys: Float[ArrayLike, " m"], z0: Float[ArrayLike, " p"]) -> ProportionalSolution:
    r"""Theorem 4 (proportional samples $A(x_\mu) = c_\mu A$, $A = P\Lambda P^\top$): with
    $\alpha = \frac4m\sum_\mu c_\mu^2$, $\beta = \frac4m\sum_\mu c_\mu y_\mu$, the scalar $\xi(t)$
    solves Eq. (34), $t = \int_0^{\xi}\frac{ds}{\alpha\sum_j\lambda_j z_j(0)e^{-2\lambda_j s}-\beta}$,
    and $z_k(t) = z_k(0)e^{-2\lambda_k\xi(t)}$ (Eq. 123)."""
    lam = jnp.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 1, "eigenvalues of A")
    cs, ys = jnp.asarray(cs, dtype=float), jnp.asarray(ys, dtype=float)
    check_ndim("cs", cs, 1)
    check_shape("ys", ys, cs.shape, "one target per proportionality constant")
    check_shape("z0", z0, lam.shape, "one initial feature per eigenvalue")
    z0 = jnp.asarray(z0, dtype=float)
    m = cs.shape[0]
    alpha = 4.0 / m * jnp.sum(cs**2)
    beta = 4.0 / m * jnp.sum(cs * ys)
    xi, _ = implicit_xi(t, alpha * lam * z0, 2.0 * lam, beta)
    z = z0[None, :] * jnp.exp(-2.0 * lam[None, :] * xi[:, None])
    return ProportionalSolution(xi=xi, z=z, alpha=float(alpha), beta=float(beta))


def proportional_M(t, P, lambdas, cs, ys, M0) -> Float[Array, "T p p"]:
    r"""$M(t) = W(t)W(t)^\top$ from Eq. (33), $W(t) = Pe^{-\xi(t)\Lambda}P^\top W(0)$."""
    P, Mt0 = _rotated(P, M0)
    sol = proportional_solution(t, lambdas, cs, ys, jnp.diag(Mt0))
    E = jnp.exp(-sol.xi[:, None] * jnp.asarray(lambdas)[None, :])
    return jnp.einsum("ik,tk,kl,tl,jl->tij", P, E, Mt0, E, P)


# ------------------------------------------------------------------ Theorem 5
class OrthogonalSamplesSolution(NamedTuple):
    xi: Float[Array, "T m"]  # one xi_mu per sample, Eq. (36)
    residuals: Float[Array, "T m"]  # Delta_mu(t) = d xi_mu / dt
    z: Float[Array, "T p"]  # features, Eq. (131)


def orthogonal_samples_solution(t: Float[ArrayLike, " T"], lambdas: Float[ArrayLike, "m p"], ys: Float[ArrayLike, " m"],
                                z0: Float[ArrayLike, " p"]) -> OrthogonalSamplesSolution:
    r"""Theorem 5 (orthogonal samples, $A(x_\mu)A(x_\nu) = 0$): each $\xi_\mu$ solves Eq. (36),
    $t = \int_0^{\xi_\mu}\frac{ds}{\sum_k\lambda_{\mu,k}z_k(0)e^{-\frac8m\lambda_{\mu,k}s}-y_\mu}$, the
    residual is $\Delta_\mu = \dot\xi_\mu$, and $z_k(t) = z_k(0)\exp(-\frac8m\sum_\nu\xi_\nu\lambda_{\nu,k})$
    (Eq. 131). Raises if the samples are not orthogonal."""
    lam = jnp.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 2, "one row of eigenvalues per sample")
    m, p = lam.shape
    check_shape("ys", ys, (m,), "one target per sample")
    check_shape("z0", z0, (p,), "one initial feature per eigen-direction")
    overlap = np.abs(np.asarray(lam)[:, None, :] * np.asarray(lam)[None, :, :]) * (1 - np.eye(m))[:, :, None]
    if overlap.max() > 0:
        raise invalid("lambdas", "be Theorem 5's orthogonal samples (A_mu A_nu = 0)",
                      f"largest |lambda_mu,k lambda_nu,k| for mu != nu of {overlap.max():.3g}")
    z0, ys = jnp.asarray(z0, dtype=float), jnp.asarray(ys, dtype=float)
    xi, res = implicit_xi(t, lam * z0[None, :], 8.0 / m * lam, ys)  # (m, T)
    z = z0[None, :] * jnp.exp(-8.0 / m * xi.T @ lam)
    return OrthogonalSamplesSolution(xi=xi.T, residuals=res.T, z=z)


def orthogonal_samples_M(t, P, lambdas, ys, M0) -> Float[Array, "T p p"]:
    r"""$M(t)$ from Eq. (35): $W(t) = Pe^{-\Sigma(t)}P^\top W(0)$, $\Sigma = \frac4m\sum_\mu\xi_\mu\Lambda_\mu$."""
    P, Mt0 = _rotated(P, M0)
    lam = jnp.asarray(lambdas, dtype=float)
    sol = orthogonal_samples_solution(t, lam, ys, jnp.diag(Mt0))
    E = jnp.exp(-4.0 / lam.shape[0] * sol.xi @ lam)
    return jnp.einsum("ik,tk,kl,tl,jl->tij", P, E, Mt0, E, P)


# ------------------------------------------------------------------ Theorem 6 and Prop. 7
def slaved_M(P: Float[ArrayLike, "p p"], M0: Matrix, z: Float[ArrayLike, "T p"]) -> Float[Array, "T p p"]:
    r"""Rebuild $M(t)$ from its features (Prop. 7). By Eq. (31), $e^{-\int_0^t\tilde H_{ii}} =
    \sqrt{z_i(t)/z_i(0)}$, so Eq. (30) reads $\tilde M_{ij}(t) = \tilde M_{ij}(0)
    \sqrt{z_i(t)z_j(t)/(z_i(0)z_j(0))}$: the correlations $\tilde M_{ij}/\sqrt{\tilde M_{ii}\tilde M_{jj}}$
    never change. Directions with $z_i(0) = 0$ stay zero."""
    P, M0, z = (jnp.asarray(v, dtype=float) for v in (P, M0, z))
    check_order_parameter(M0, P.shape[0])
    check_shape("z", z, (None, P.shape[0]), "feature trajectory (T, p)")
    Mt0 = P.T @ M0 @ P
    z00 = jnp.diag(Mt0)
    D = jnp.where(z00 > 0, jnp.sqrt(jnp.clip(z, 0.0) / jnp.where(z00 > 0, z00, 1.0)[None, :]), 0.0)
    return jnp.einsum("ik,tk,kl,tl,jl->tij", P, D, Mt0, D, P)


def orthogonal_features_M(t, P, r, C_kk, M0) -> Float[Array, "T p p"]:
    r"""$M(t)$ under orthogonal features, Eq. (38): $W(t) = PD(t)P^\top W(0)$ with
    $d_k = \sqrt{z_k(t)/z_k(0)}$ and the logistic $z_k(t)$ of Eq. (39)."""
    P, M0 = jnp.asarray(P, dtype=float), jnp.asarray(M0, dtype=float)
    check_order_parameter(M0, P.shape[0])
    z0 = jnp.diag(P.T @ M0 @ P)
    z = logistic_solution(jnp.asarray(t, dtype=float)[:, None], jnp.asarray(r)[None], jnp.asarray(C_kk)[None], z0[None])
    return slaved_M(P, M0, z)
