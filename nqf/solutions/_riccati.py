r"""Isotropic samples (Thm 7: under Assumption 2, Eq. 40, the Riccati equation $\dot M = YM + MY - 8cM^2$,
Eq. 143, solved by Eq. 41) and the projector solution (Thm 16, Cor. 4, App. B.7; Saxe et al.'s, Eq. 288)."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_ndim, check_positive, check_shape, check_symmetric, invalid
from .._types import ArrayLike, Matrix, StructureStack
from ..model._data import NQFData, require_data
from ..model._model import check_dataset, check_order_parameter


def isotropy_residual(As: StructureStack, c: float) -> float:
    r"""Largest deviation of $\frac1m\sum_\mu A_{ij}A_{kl}$ from Eq. (40), relative to ``c``."""
    m, p = check_dataset(As)
    check_positive("c", c)
    A = np.asarray(As)
    T = np.einsum("mij,mkl->ijkl", A, A) / m
    I = np.eye(p)
    target = 0.5 * c * (np.einsum("ik,jl->ijkl", I, I) + np.einsum("il,jk->ijkl", I, I))
    return float(np.max(np.abs(T - target)) / c)


def riccati_solution(
    t: Float[ArrayLike, " T"], Y: Float[ArrayLike, "p p"], M0: Matrix, c: float
) -> Float[Array, "T p p"]:
    r"""Theorem 7, Eq. (41): $M(t) = e^{Yt}M(0)[I + 8c\Phi(t)M(0)]^{-1}e^{Yt}$,
    $\Phi(t) = \int_0^t e^{2Y\tau}d\tau$, for any PSD $M(0)$ (it need not commute with $Y$).

    Evaluated in the eigenbasis of $Y$ ($\Phi$ via ``expm1``). When $M(0)$ is invertible the
    algebraically equivalent, better-conditioned form
    $M(t)^{-1} = e^{-Yt}M(0)^{-1}e^{-Yt} + 8c\int_0^te^{-2Y\tau}d\tau$ is used (the inverse obeys
    the linear equation $\frac{d}{dt}M^{-1} = -YM^{-1} - M^{-1}Y + 8c$). For a rank-deficient
    $M(0) = \tilde W\tilde W^\top$ it uses $M = F(I + 8cF^\top\Psi F)^{-1}F^\top$ with
    $F = e^{Yt}\tilde W$ and $\Psi = e^{-Yt}\Phi e^{-Yt}$, evaluated through a QR factorisation of $F$.
    """
    Y, M0 = jnp.asarray(Y, dtype=float), jnp.asarray(M0, dtype=float)
    check_symmetric("Y", Y)
    p = check_order_parameter(M0, Y.shape[0])
    check_positive("c", c)
    t = jnp.asarray(t, dtype=float)
    check_ndim("t", t, 1, "times")
    gam, Q = jnp.linalg.eigh(Y)
    Mt0 = Q.T @ M0 @ Q
    tg = t[:, None] * gam[None, :]
    safe = jnp.where(gam == 0, 1.0, gam)
    ev = np.linalg.eigvalsh(np.asarray(Mt0))
    if ev.min() > 1e-10 * max(ev.max(), 1e-300):
        psi = jnp.where(gam == 0, t[:, None], -jnp.expm1(-2 * tg) / (2 * safe)[None, :])  # int_0^t e^{-2 gam tau}
        E = jnp.exp(-tg)
        Minv = E[:, :, None] * jnp.linalg.inv(Mt0)[None] * E[:, None, :] + 8 * c * _diag(psi)
        Mt = jnp.linalg.inv(Minv)
    else:  # rank-deficient M(0) = W W^T: Eq. (41) as F (I + 8c F^T Psi F)^{-1} F^T, F = e^{Yt} W
        psi = jnp.where(gam == 0, t[:, None], -jnp.expm1(-2 * tg) / (2 * safe)[None, :])
        lam0, V0 = np.linalg.eigh(np.asarray(Mt0))
        keep = lam0 > 1e-12 * max(lam0.max(), 1e-300)
        if not keep.any():
            return jnp.zeros((t.shape[0], p, p))
        Wt = jnp.asarray(V0[:, keep] * np.sqrt(lam0[keep]))  # (p, k)
        F = jnp.exp(tg)[:, :, None] * Wt[None]  # (T, p, k)
        Qf, Rf = jnp.linalg.qr(F)  # F = Q R; then M = Q ((R R^T)^{-1}... see below) Q^T
        Rinv = jnp.linalg.inv(Rf)
        inner = jnp.swapaxes(Rinv, 1, 2) @ Rinv + 8 * c * jnp.einsum("tpk,tp,tpl->tkl", Qf, psi, Qf)
        Mt = Qf @ jnp.linalg.solve(inner, jnp.swapaxes(Qf, 1, 2))
    Mt = 0.5 * (Mt + jnp.swapaxes(Mt, 1, 2))
    return jnp.einsum("ik,tkl,jl->tij", Q, Mt, Q)


def _diag(v: Float[Array, "T p"]) -> Float[Array, "T p p"]:
    """Batch of diagonal matrices from rows of ``v``."""
    return v[..., :, None] * jnp.eye(v.shape[-1])[(None,) * (v.ndim - 1)]


def riccati_eigenvalues(t, gammas, c: float, z0) -> Float[Array, "T p"]:
    r"""Eq. (42): with $M(0)$ and $Y$ simultaneously diagonalisable,
    $z_k(t) = \frac{\gamma_kz_k(0)}{4cz_k(0) + (\gamma_k - 4cz_k(0))e^{-2\gamma_kt}}$
    ($z_k(0)/(1 + 8cz_k(0)t)$ if $\gamma_k = 0$): a logistic with rate $2\gamma_k$ — hence
    $a = 2$ in Thm 8."""
    check_positive("c", c)
    return projector_solution(t, gammas, 4.0 * c * jnp.ones_like(jnp.asarray(gammas, dtype=float)), z0)


# ------------------------------------------------------------------ Theorem 16
class ProjectorCoefficients(NamedTuple):
    gammas: Float[Array, " r"]  # Eq. (253)
    kappas: Float[Array, " r"]  # Eq. (254)
    residual_253: float  # max_a ||Y Pi_a + Pi_a Y - 2 gamma_a Pi_a||_F
    residual_254: float  # max_{a,b} ||K(Pi_b) Pi_a + Pi_a K(Pi_b) - 2 kappa_a delta_ab Pi_a||_F


def projector_coefficients(data: NQFData, projectors: Float[ArrayLike, "r p p"]) -> ProjectorCoefficients:
    r"""Check Theorem 16's conditions for given orthogonal projectors $\Pi_a$ and read off
    $\gamma_a$, $\kappa_a$: $Y\Pi_a + \Pi_aY = 2\gamma_a\Pi_a$ (253) and
    $\mathcal K(\Pi_b)\Pi_a + \Pi_a\mathcal K(\Pi_b) = 2\kappa_a\delta_{ab}\Pi_a$ (254), with
    $\mathcal K(X) = \frac4m\sum_\mu\langle A_\mu, X\rangle_F A_\mu$ (252). The residuals say how
    far the data are from satisfying them (0 up to rounding when they hold)."""
    data = require_data(data)
    m, p = data.m, data.p
    Pi = np.asarray(projectors, dtype=float)
    check_ndim("projectors", Pi, 3, "a stack of projectors (r, p, p)")
    check_shape("projectors", Pi, (None, p, p), "projectors acting on R^p")
    r = Pi.shape[0]
    orth = np.einsum("aij,bjk->abik", Pi, Pi) - np.einsum("ab,bik->abik", np.eye(r), Pi)
    if np.abs(orth).max() > 1e-9:
        raise invalid("projectors", 'satisfy Pi_a Pi_b = delta_ab Pi_a', f'max deviation {np.abs(orth).max():.3g}')
    A = np.asarray(data.As)
    Y = 4.0 / m * np.einsum("m,mij->ij", np.asarray(data.ys), A)
    rank = np.einsum("aii->a", Pi)
    gam = np.einsum("ij,aji->a", Y, Pi) / rank
    res253 = max(np.linalg.norm(Y @ P + P @ Y - 2 * g * P) for P, g in zip(Pi, gam))
    KPi = 4.0 / m * np.einsum("mij,bij,mkl->bkl", A, Pi, A)
    kap = np.einsum("aij,aji->a", KPi, Pi) / rank
    res254 = max(
        np.linalg.norm(KPi[b] @ Pi[a] + Pi[a] @ KPi[b] - 2 * kap[a] * (a == b) * Pi[a])
        for a in range(r) for b in range(r)
    )
    return ProjectorCoefficients(jnp.asarray(gam), jnp.asarray(kap), float(res253), float(res254))


def projector_solution(t, gammas, kappas, z0) -> Float[Array, "T r"]:
    r"""Theorem 16, Eqs. (256)–(257): $\dot z_a = 2z_a(\gamma_a - \kappa_az_a)$ gives
    $z_a(t) = \frac{\gamma_az_a(0)}{\kappa_az_a(0) + (\gamma_a-\kappa_az_a(0))e^{-2\gamma_at}}$, or
    $z_a(0)/(1 + 2\kappa_az_a(0)t)$ when $\gamma_a = 0$. Returns shape ``(T, r)``."""
    t = jnp.asarray(t, dtype=float)[:, None]
    g, k, z0 = (jnp.asarray(v, dtype=float)[None, :] for v in (gammas, kappas, z0))
    safe = jnp.where(g == 0, 1.0, g)
    logistic = safe * z0 / (k * z0 + (safe - k * z0) * jnp.exp(-2 * safe * t))
    return jnp.where(g == 0, z0 / (1 + 2 * k * z0 * t), logistic)


def projector_M(t, projectors, gammas, kappas, z0) -> Float[Array, "T p p"]:
    r"""$M(t) = \sum_a z_a(t)\Pi_a$ (Eq. 255)."""
    z = projector_solution(t, gammas, kappas, z0)
    return jnp.einsum("ta,aij->tij", z, jnp.asarray(projectors, dtype=float))


def linear_network_modes(t, tau, c, rho0) -> Float[Array, "T r"]:
    r"""Cor. 4, Eqs. (271)–(272): $\rho_a(t) = \frac{\tau_a\rho_a(0)}{c_a\rho_a(0) +
    (\tau_a - c_a\rho_a(0))e^{-4\tau_at}}$; with $c_a = 1$ this is Eq. (288),
    $\dot\rho = 4\rho(\tau-\rho)$, the balanced deep-linear solution of Saxe et al. run twice as fast
    (their $\tau\dot u = 2u(s-u)$ with $\tau = 1$ comes from a loss with a factor ½)."""
    z = projector_solution(t, 2 * jnp.asarray(tau, dtype=float), jnp.asarray(c, dtype=float) * jnp.ones_like(jnp.asarray(tau, dtype=float)), 2 * jnp.asarray(rho0, dtype=float))
    return z / 2


def saxe_mode_strength(t_saxe, s: float, u0: float, *, tau: float = 1.0):
    r"""Saxe et al.'s balanced solution of $\tau\dot u = 2u(s-u)$ on their own clock:
    $u(t) = \frac{s\,e^{2st/\tau}}{e^{2st/\tau} - 1 + s/u_0}$."""
    check_positive("s", s)
    check_positive("u0", u0)
    check_positive("tau", tau)
    x = np.exp(2 * s * np.asarray(t_saxe, dtype=float) / tau)
    return s * x / (x - 1 + s / u0)
