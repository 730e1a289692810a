r"""The Lotka–Volterra reduction of the NQF flow under Assumption 1 (Sec. 5, Eq. 32) and its closed forms:
$\dot z_k = z_k(r_k - \sum_j C_{kj}z_j)$, $r_k = \frac8m\sum_\mu\lambda_{\mu,k}y_\mu$,
$C_{kj} = \frac8m\sum_\mu\lambda_{\mu,k}\lambda_{\mu,j}$; logistic modes when $C$ is diagonal (Thm 6, Eq. 39)."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import (as_real_array, check_finite, check_ndim, check_positive, check_shape, check_tolerance, invalid,
                       is_concrete, require_x64)
from .._types import ArrayLike, Matrix, StructureStack
from ..flow._flow import ODEOptions, ODESolution, solve_ode
from ..model._data import NQFData, require_data
from ..model._model import check_dataset, check_order_parameter


class LotkaVolterra(NamedTuple):
    """Coefficients of Eq. (32) and the common eigenbasis they live in."""

    P: Float[ArrayLike, "p p"]  # orthogonal, columns = shared eigenvectors
    lambdas: Float[ArrayLike, "m p"]  # lambda_{mu,k}: eigenvalue k of A(x_mu)
    r: Float[ArrayLike, " p"]  # growth rates r_k
    C: Float[ArrayLike, "p p"]  # interaction matrix C_kj


def commuting_eigenbasis(
    As: StructureStack, *, tol: float = 1e-9, seed: int
) -> tuple[Float[ArrayLike, "p p"], Float[ArrayLike, "m p"]]:
    r"""Shared eigenbasis of commuting structure matrices (Assumption 1).

    Diagonalises a random combination $\sum_\mu c_\mu A_\mu$ ($c$ drawn by NumPy from ``seed``, required) and checks that it
    diagonalises every $A_\mu$. Raises ``ValueError`` (with the measured
    off-diagonal residue) when the matrices do not commute.

    Returns:
        ``(P, lambdas)`` with $A_\mu = P\,\mathrm{diag}(\lambda_{\mu,\cdot})P^\top$.
    """
    check_tolerance("tol", tol)
    m, p = check_dataset(As)
    A = np.asarray(As, dtype=float)
    c = np.random.default_rng(seed).normal(size=m)
    _, P = np.linalg.eigh(np.einsum("m,mij->ij", c, A))
    D = np.einsum("ki,mkl,lj->mij", P, A, P)
    lambdas = np.einsum("mii->mi", D)
    off = D - np.einsum("mi,ij->mij", lambdas, np.eye(p))
    scale = max(np.max(np.abs(A)), 1e-300)
    resid = np.max(np.abs(off)) / scale
    if resid > tol:
        comm = max(
            np.max(np.abs(A[i] @ A[j] - A[j] @ A[i])) for i in range(m) for j in range(i + 1, m)
        ) if m > 1 else 0.0
        raise invalid("As", "share an eigenbasis (Assumption 1)",
                      f"after diagonalising a random combination the largest relative off-diagonal entry {resid:.3g} "
                      f"(tolerance {tol:g}); largest commutator |A_i A_j - A_j A_i| = {comm:.3g}")
    return jnp.asarray(P), jnp.asarray(lambdas)


def lv_coefficients(data: NQFData, *, tol: float = 1e-9) -> LotkaVolterra:
    """Reduce a commuting dataset to the Lotka–Volterra coefficients ``(r, C)`` of Eq. (32)."""
    data = require_data(data)
    if is_concrete(data.As) and not np.any(np.asarray(data.As)):
        raise invalid("data", "have a nonzero structure matrix A(x_mu) (if every one is zero the NQF's output does not "
                      "depend on M and nothing is learned: r = 0, C = 0; check how the A's were built)", "only zeros")
    P, lam = commuting_eigenbasis(data.As, tol=tol, seed=0)  # the seed of the generic combination (as before)
    r, C = growth_and_competition(lam, data.ys)
    return LotkaVolterra(P=P, lambdas=lam, r=r, C=C)


def features(M: Matrix, P: Float[ArrayLike, "p p"]) -> Float[ArrayLike, " p"]:
    r"""Features $z_k = (P^\top M P)_{kk}$ (Sec. 5); they alone carry the loss (Eq. 29)."""
    p = check_order_parameter(M, None, psd=False)
    check_shape("P", P, (p, p), "an orthogonal eigenbasis, one column per feature")
    if is_concrete(P):
        Pn = np.asarray(P, dtype=float)
        err = float(np.max(np.abs(Pn.T @ Pn - np.eye(p)))) if p else 0.0
        if not err <= 1e-8:
            raise invalid("P", 'be orthogonal (P^T P = I, the shared eigenbasis of Assumption 1)',
                          f'max |P^T P - I| = {err:.3g}')
    return jnp.einsum("ik,ij,jk->k", P, M, P)


def lv_flow(
    r: Float[ArrayLike, " p"],
    C: Float[ArrayLike, "p p"],
    z0: Float[ArrayLike, " p"],
    ts: Float[ArrayLike, " T"],
    *,
    options: ODEOptions = ODEOptions(atol=1e-12, solver="tsit5"),
) -> ODESolution:
    r"""Integrate the Lotka–Volterra equation (32) from $z(0) = z_0$ at times ``ts``.

    Integrates $u_k = \ln z_k$, $\dot u_k = r_k - \sum_j C_{kj} e^{u_j}$, so that
    initial scales down to $10^{-300}$ (the singular limit $\epsilon\to 0$) keep
    full relative accuracy. Modes with $z_k(0) = 0$ stay at zero. Goes through
    :func:`nqf.flow.solve_ode` under ``options`` (an :class:`~nqf.flow.ODEOptions`; compiled once per $p$ and
    number of save times). Returns an :class:`~nqf.flow.ODESolution`
    with ``ys`` = $z(t)$, shape ``(T, p)``, and the solver's step counts.
    """
    require_x64("lv_flow")
    r = jnp.asarray(r, dtype=float)
    check_ndim("r", r, 1)
    p = r.shape[0]
    check_shape("C", C, (p, p), "interaction matrix, one row per mode")
    check_shape("z0", z0, (p,), "one initial feature per mode")
    for name, val in (("r", r), ("C", C), ("z0", z0)):
        check_finite(name, val)
    z0 = np.asarray(z0, dtype=float)
    if np.any(z0 < 0):
        raise invalid("z0", 'be >= 0 (features of a PSD M)', f'min {float(np.min(z0)):.3g}')
    alive = z0 > 0
    u0 = np.log(np.where(alive, z0, 1.0))
    args = (r, jnp.asarray(C, dtype=float), jnp.asarray(alive))
    sol = solve_ode(_lv_field, u0, ts, args=args, options=options)
    return sol._replace(ys=jnp.where(alive, jnp.exp(sol.ys), 0.0))


def _lv_field(t, u, args):
    r"""Eq. (32) in $u = \ln z$; module level, with the data in ``args``, so it compiles once per shape."""
    r, C, alive = args
    z = jnp.where(alive, jnp.exp(u), 0.0)
    return jnp.where(alive, r - C @ z, 0.0)


def logistic_solution(t, r, C_kk, z0) -> Float[Array, "..."]:
    r"""Closed form of one mode under orthogonal features, Theorem 6, Eq. (39):

    $$ z_k(t) = \frac{r_k z_k(0)}{C_{kk}z_k(0) + (r_k - C_{kk}z_k(0))e^{-r_k t}}, $$

    and $z_k(0)/(1 + C_{kk} z_k(0) t)$ when $r_k = 0$. Arguments broadcast.
    """
    t, r, C_kk, z0 = (as_real_array(n, a) for n, a in (("t", t), ("r", r), ("C_kk", C_kk), ("z0", z0)))
    for name, v in (("C_kk", C_kk), ("z0", z0)):
        if is_concrete(v) and bool(jnp.any(v < 0)):
            raise invalid(name, 'be >= 0 (a competition coefficient / a feature (P^T M P)_kk)',
                          f'min {float(jnp.min(v))!r}')
    t, r, C_kk, z0 = jnp.broadcast_arrays(t, r, C_kk, z0)  # "arguments broadcast", explicitly
    safe_r = jnp.where(r == 0, 1.0, r)
    logistic = safe_r * z0 / (C_kk * z0 + (safe_r - C_kk * z0) * jnp.exp(-safe_r * t))
    return jnp.where(r == 0, z0 / (1.0 + C_kk * z0 * t), logistic)


def switch_on_time(r, C_kk, z0, *, a: float = 1.0, rho: float = 0.5):
    r"""Exact switch-on time of a logistic mode, Eq. (158): the time at which $z_k$ reaches the
    fraction $\rho$ of its final value,

    $$ t^*_k = \frac{1}{a\zeta_k}\ln\Big(\frac{\zeta_k - C_k z_k(0)}{C_k z_k(0)}\,\frac{\rho}{1-\rho}\Big), $$

    with $(\zeta_k, C_k, a) = (r_k, C_{kk}, 1)$ under Theorem 6 (Eq. 39) and $(\gamma_k, 4c, 2)$
    under Theorem 7 (Eq. 42). At $\rho = \tfrac12$, $a = 1$ it is
    $\frac1{r_k}\ln\big(\frac{r_k}{C_{kk}z_k(0)} - 1\big)$; for $z_k(0) = c_k\epsilon\to 0$ it tends to
    $\ln(1/\epsilon)/(a\zeta_k)$ (Eq. 153); the lines of Fig. 3 drop the $-1$.
    Requires a growing mode that starts below $\rho$ of its final value.
    """
    check_positive("a", a)
    if not 0 < rho < 1:
        raise invalid("rho", 'lie in (0, 1)', f'{rho!r}')
    for name, v in (("r", r), ("C_kk", C_kk), ("z0", z0)):
        as_real_array(name, v)  # TypeError naming it for strings, None, complex
    r, C_kk, z0 = (np.asarray(v, dtype=float) for v in (r, C_kk, z0))  # NumPy float64 whatever JAX's x64
    for name, v in (("r", r), ("C_kk", C_kk), ("z0", z0)):
        check_finite(name, v)
        if np.any(v <= 0):
            raise invalid(name, 'be > 0 (a growing mode r > 0 with competition C_kk > 0 from z0 > 0)',
                          f'min {float(np.min(v))!r}')
    arg = (r - C_kk * z0) / (C_kk * z0) * rho / (1 - rho)
    if np.any(~np.isfinite(arg)) or np.any(arg <= 1) or np.any(r <= 0):
        raise invalid("z0", f'start below rho of the final value r/C_kk (a growing mode, 0 < C_kk z0 < r); `switch_on_time` needs a growing mode (r > 0, 0 < C_kk z0 < r) that starts below rho = {rho} of its final value r/C_kk',
                      f'r/(C_kk z0) = {r / (C_kk * z0)}')
    return np.log(arg) / (a * r)


def growth_and_competition(
    lambdas: Float[ArrayLike, "m p"], ys: Float[ArrayLike, " m"]
) -> tuple[Float[Array, " p"], Float[Array, "p p"]]:
    r"""Lotka–Volterra coefficients of Eq. (32) in a known eigenbasis:
    $r_k = \frac8m\sum_\mu\lambda_{\mu,k}y_\mu$, $C_{kj} = \frac8m\sum_\mu\lambda_{\mu,k}\lambda_{\mu,j}$
    (Eq. 37 on the diagonal), in the order of the columns of ``lambdas``."""
    lam = jnp.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 2, "one row of eigenvalues per sample")
    check_shape("ys", ys, (lam.shape[0],), "one target per sample")
    m = lam.shape[0]
    return 8.0 / m * lam.T @ jnp.asarray(ys, dtype=float), 8.0 / m * lam.T @ lam


def saxe_learning_time(s: float, u0: float, uf: float, *, tau: float = 1.0) -> float:
    r"""Learning time of Saxe, McClelland & Ganguli (2014), Eqs. (10)–(12):
    $\tau\dot u = 2u(s-u)$ gives $t = \frac{\tau}{2s}\ln\frac{u_f(s-u_0)}{u_0(s-u_f)}$.

    Their loss carries a factor ½; the paper's loss (no ½) runs the same curve
    twice as fast (Eq. 288, "up to a rescaling of time").
    """
    for name, v in (("s", s), ("u0", u0), ("uf", uf), ("tau", tau)):
        check_positive(name, v)
    if not uf < s:
        raise invalid("uf", 'be < `s` (the mode saturates at s)', f'uf={uf!r}, s={s!r}')
    if not u0 < uf:
        raise invalid("u0", 'be < `uf` (the mode grows from u0 to uf)', f'u0={u0!r}, uf={uf!r}')
    return tau / (2 * s) * float(np.log(uf * (s - u0) / (u0 * (s - uf))))
