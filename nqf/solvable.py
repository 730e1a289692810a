r"""Exactly solvable cases of the NQF gradient flow under Assumption 1 (Sec. 5).

Datasets built to satisfy each assumption, and the closed forms of

* Proposition 7 (Eq. 30): off-diagonal entries of $\tilde M = P^\top M P$ are slaved to
  the features, $\tilde M_{ij}(t) = \tilde M_{ij}(0)\sqrt{z_i(t)z_j(t)/(z_i(0)z_j(0))}$;
* Theorem 4 (Eqs. 33–34), proportional samples $A(x_\mu) = c_\mu A$;
* Theorem 5 (Eqs. 35–36), orthogonal samples $A(x_\mu)A(x_\nu) = 0$;
* Theorem 6 (Eqs. 38–39), orthogonal features (full $W(t)$ and $M(t)$).

Theorems 4 and 5 are *implicit* (Eqs. 34, 36); their quadratures are evaluated and
inverted in :mod:`nqf.implicit`, without integrating any differential equation. The isotropic case (Thm 7) and the
projector solution (Thm 16, Cor. 4) live in :mod:`nqf.riccati`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._checks import check_finite, check_ndim, check_shape
from ._types import ArrayLike, Matrix, StructureStack
from .data import random_orthogonal
from .lotka_volterra import growth_and_competition
from .dynamics import require_x64
from .implicit import implicit_xi
from .model import check_dataset, check_order_parameter, flow_field


class SolvableData(NamedTuple):
    """A dataset built to satisfy an assumption: ``As = P diag(lambdas[mu]) P^T``."""

    As: Float[ArrayLike, "m p p"]
    ys: Float[ArrayLike, " m"]
    P: Float[ArrayLike, "p p"]  # shared eigenbasis (columns)
    lambdas: Float[ArrayLike, "m p"]  # lambda_{mu,k}


# --------------------------------------------------------------------------- datasets
def _basis(p: int, P, seed) -> np.ndarray:
    if P is None:
        return np.eye(p) if seed is None else random_orthogonal(p, seed)
    P = np.asarray(P, dtype=float)
    check_shape("P", P, (p, p), "orthogonal eigenbasis")
    if not np.allclose(P.T @ P, np.eye(p), atol=1e-10):
        raise ValueError(f"`P` must be orthogonal; got max |P^T P - I| = {np.abs(P.T @ P - np.eye(p)).max():.3g}.")
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
    r: Float[ArrayLike, " p"], C_kk: float = 1.0, *, seed: int = 0, P=None, rotate_seed: int | None = None
) -> SolvableData:
    r"""Orthogonal features (Theorem 6): the Fig. 3 construction of
    :func:`nqf.data.orthogonal_features_dataset` ($\sum_\mu\lambda_{\mu,k}\lambda_{\mu,j} = 0$ for
    $k\ne j$), optionally rotated into a random eigenbasis ``P`` (``rotate_seed``)."""
    from .data import orthogonal_features_dataset

    As, ys = orthogonal_features_dataset(r, C_kk, seed)
    lam = np.einsum("mii->mi", np.asarray(As))
    return commuting_dataset(lam, ys, P=P, seed=rotate_seed)


_KINDS = ("commuting", "proportional", "orthogonal_samples", "orthogonal_features", "feedforward")


def breaking_direction(
    kind: str, As: StructureStack, *, P: Float[ArrayLike, "p p"] | None = None,
    lambdas: Float[ArrayLike, "m p"] | None = None, n_out: int | None = None, seed: int = 0,
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
        raise ValueError(f"`kind` must be one of {_KINDS}; got {kind!r}.")
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
            raise ValueError("`lambdas` is required for kind='orthogonal_samples'.")
        lam = np.asarray(lambdas, dtype=float)
        check_shape("lambdas", lam, (m, p), "eigenvalues of each sample")
        d = np.zeros((m, p))
        for mu in range(m):
            nxt = np.flatnonzero(lam[(mu + 1) % m])
            d[mu, nxt[0]] = 1.0
        E = np.einsum("ik,mk,jk->mij", Pm, d, Pm)
    else:
        if n_out is None or not 0 < int(n_out) < p:
            raise ValueError(f"`n_out` must be an integer in (0, p={p}) for kind='feedforward'; got {n_out!r}.")
        n_out = int(n_out)
        G = rng.normal(size=(m, n_out, p - n_out))
        E = np.zeros((m, p, p))
        E[:, :n_out, n_out:] = 0.5 * G
        E[:, n_out:, :n_out] = 0.5 * np.swapaxes(G, 1, 2)
    scale = np.mean(np.linalg.norm(np.asarray(As), axis=(1, 2)))
    return E * (scale / np.linalg.norm(E, axis=(1, 2), keepdims=True).clip(1e-300))


# ------------------------------------------------------------------ batched numerical flow
def gradient_flow_batch(
    As: Float[ArrayLike, "n m p p"], ys: Float[ArrayLike, "n m"], M0: Float[ArrayLike, "n p p"],
    ts: Float[ArrayLike, " T"], *, rtol: float = 1e-10, atol: float = 1e-14, max_steps: int = 1_000_000,
) -> Float[Array, "n T p p"]:
    r"""The gradient flow $\dot M = -HM - MH$ (Eq. 28) for ``n`` datasets at once
    (``jax.vmap`` over the leading axis; same Tsit5 solver as :func:`nqf.gradient_flow`)."""
    require_x64("gradient_flow_batch")
    As, ys, M0 = (jnp.asarray(a) for a in (As, ys, M0))
    check_ndim("As", As, 4, "a batch of structure-matrix stacks (n, m, p, p)")
    n, m, p, _ = As.shape
    check_shape("ys", ys, (n, m), "one target vector per dataset")
    check_shape("M0", M0, (n, p, p), "one initial order parameter per dataset")
    for i in range(n):
        check_dataset(As[i], ys[i])
        check_order_parameter(M0[i], p)
    return _flow_batch(As, ys, M0, jnp.asarray(ts), rtol=float(rtol), atol=float(atol), max_steps=int(max_steps))


@functools.partial(jax.jit, static_argnames=("rtol", "atol", "max_steps"))
def _flow_batch(As, ys, M0, ts, *, rtol, atol, max_steps):
    def one(A, y, M):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, M, args: flow_field(M, *args)), diffrax.Tsit5(), t0=ts[0], t1=ts[-1],
            dt0=None, y0=M, args=(A, y), saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol), max_steps=max_steps, throw=True,
        )
        return sol.ys

    return jax.vmap(one)(As, ys, M0)


def trajectory_error(M: Float[ArrayLike, "T p p"], M_ref: Float[ArrayLike, "T p p"]) -> float:
    r"""$\max_t\|M(t) - M_\mathrm{ref}(t)\|_F \,/\, \max_t\|M_\mathrm{ref}(t)\|_F$: how far a
    closed form drifts from the numerical flow, relative to the trajectory's size."""
    M, M_ref = np.asarray(M), np.asarray(M_ref)
    if M.shape != M_ref.shape:
        raise ValueError(f"`M` and `M_ref` must have the same shape; got {M.shape} and {M_ref.shape}.")
    axes = tuple(range(1, M.ndim))
    return float(np.max(np.sqrt(np.sum((M - M_ref) ** 2, axis=axes))) / np.max(np.sqrt(np.sum(M_ref**2, axis=axes))))


# ------------------------------------------------------------------ Theorem 4
class ProportionalSolution(NamedTuple):
    xi: Float[Array, " T"]  # auxiliary scalar of Eq. (34)
    z: Float[Array, "T p"]  # features z_k(t) = z_k(0) exp(-2 lambda_k xi)
    alpha: float
    beta: float


def proportional_solution(
    t: Float[ArrayLike, " T"], lambdas: Float[ArrayLike, " p"], cs: Float[ArrayLike, " m"],
    ys: Float[ArrayLike, " m"], z0: Float[ArrayLike, " p"],
) -> ProportionalSolution:
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
    P, M0 = jnp.asarray(P, dtype=float), jnp.asarray(M0, dtype=float)
    check_order_parameter(M0, P.shape[0])
    Mt0 = P.T @ M0 @ P
    sol = proportional_solution(t, lambdas, cs, ys, jnp.diag(Mt0))
    E = jnp.exp(-sol.xi[:, None] * jnp.asarray(lambdas)[None, :])
    return jnp.einsum("ik,tk,kl,tl,jl->tij", P, E, Mt0, E, P)


# ------------------------------------------------------------------ Theorem 5
class OrthogonalSamplesSolution(NamedTuple):
    xi: Float[Array, "T m"]  # one xi_mu per sample, Eq. (36)
    residuals: Float[Array, "T m"]  # Delta_mu(t) = d xi_mu / dt
    z: Float[Array, "T p"]  # features, Eq. (131)


def orthogonal_samples_solution(
    t: Float[ArrayLike, " T"], lambdas: Float[ArrayLike, "m p"], ys: Float[ArrayLike, " m"], z0: Float[ArrayLike, " p"]
) -> OrthogonalSamplesSolution:
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
        raise ValueError("`lambdas` violate Theorem 5's orthogonal samples (A_mu A_nu = 0): "
                         f"largest |lambda_mu,k lambda_nu,k| for mu != nu is {overlap.max():.3g}.")
    z0, ys = jnp.asarray(z0, dtype=float), jnp.asarray(ys, dtype=float)
    xi, res = implicit_xi(t, lam * z0[None, :], 8.0 / m * lam, ys)  # (m, T)
    z = z0[None, :] * jnp.exp(-8.0 / m * xi.T @ lam)
    return OrthogonalSamplesSolution(xi=xi.T, residuals=res.T, z=z)


def orthogonal_samples_M(t, P, lambdas, ys, M0) -> Float[Array, "T p p"]:
    r"""$M(t)$ from Eq. (35): $W(t) = Pe^{-\Sigma(t)}P^\top W(0)$, $\Sigma = \frac4m\sum_\mu\xi_\mu\Lambda_\mu$."""
    P, M0, lam = (jnp.asarray(v, dtype=float) for v in (P, M0, lambdas))
    check_order_parameter(M0, P.shape[0])
    Mt0 = P.T @ M0 @ P
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
    D = jnp.where(z00 > 0, jnp.sqrt(jnp.clip(z, 0.0) / jnp.where(z00 > 0, z00, 1.0)), 0.0)
    return jnp.einsum("ik,tk,kl,tl,jl->tij", P, D, Mt0, D, P)


def orthogonal_features_M(t, P, r, C_kk, M0) -> Float[Array, "T p p"]:
    r"""$M(t)$ under orthogonal features, Eq. (38): $W(t) = PD(t)P^\top W(0)$ with
    $d_k = \sqrt{z_k(t)/z_k(0)}$ and the logistic $z_k(t)$ of Eq. (39)."""
    from .lotka_volterra import logistic_solution

    P, M0 = jnp.asarray(P, dtype=float), jnp.asarray(M0, dtype=float)
    check_order_parameter(M0, P.shape[0])
    z0 = jnp.diag(P.T @ M0 @ P)
    z = logistic_solution(jnp.asarray(t, dtype=float)[:, None], jnp.asarray(r)[None], jnp.asarray(C_kk)[None], z0[None])
    return slaved_M(P, M0, z)


__all__ = [
    "OrthogonalSamplesSolution",
    "ProportionalSolution",
    "SolvableData",
    "breaking_direction",
    "commuting_dataset",
    "gradient_flow_batch",
    "growth_and_competition",
    "orthogonal_features_M",
    "orthogonal_features_data",
    "orthogonal_samples_M",
    "orthogonal_samples_dataset",
    "orthogonal_samples_solution",
    "proportional_M",
    "proportional_dataset",
    "proportional_solution",
    "slaved_M",
    "trajectory_error",
]
