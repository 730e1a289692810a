r"""Scaling laws from many sudden switch-ons (Sec. 6, Thms 9 and 11, App. C): exponents (Eqs. 161, 187,
289-295), the excess loss of logistic modes (Eqs. 39, 163) and the per-sample losses of Thm 5 (Eq. 133)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import check_finite, check_ndim, check_positive, check_shape, failed, invalid, require_x64, wrong_kind
from .._fit import fit_line
from .._types import ArrayLike
from ..flow._flow import integrate, ODEOptions, succeeded


def _real(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise wrong_kind(name, 'be a real number', f'{value!r}') from exc
    if not np.isfinite(v):
        raise invalid(name, 'be finite', f'{v!r}')
    return v


# ------------------------------------------------------------------ the exponents
def feature_exponent(alpha1: float, alpha2: float, *, beta: float | None = None) -> float:
    r"""Feature-wise scaling exponent of Thm 9 (Eq. 161): with $V_k\propto k^{-\alpha_1}$,
    $\zeta_k\propto k^{-\alpha_2}$ and $z_k(0) = \epsilon c_kk^{-\beta}$, the singular limit of the excess loss
    in rescaled time is $\mathcal E(\tau) = \Theta(\tau^{-(\alpha_1-1)/\alpha_2})$.

    Conditions (Thm 9): $\alpha_1 > 1$ (finite initial loss), $\alpha_2 > 0$, and, when the initial
    profile exponent ``beta`` is given, $\beta\ge\alpha_1-\alpha_2$ (every mode starts far below its
    final value, Eq. 164). Returns the exponent as a positive number (the slope is its negative).
    The Fourier MLP (Eqs. 297-298) has $\alpha_1 = 2\beta$, $\alpha_2 = \theta+\beta$.
    """
    a1, a2 = _real("alpha1", alpha1), _real("alpha2", alpha2)
    if a1 <= 1:
        raise invalid("alpha1", "be > 1 (Thm 9: finite initial excess loss, sum of V_k)", f"{a1!r}")
    if a2 <= 0:
        raise invalid("alpha2", "be > 0 (Thm 9: growth rates decaying as k^-alpha2)", f"{a2!r}")
    if beta is not None:
        b = _real("beta", beta)
        if b < a1 - a2:
            raise invalid("beta", f"be >= alpha1 - alpha2 = {a1 - a2!r} (Thm 9's initial profile exponent; Eq. 164: "
                          "z_k(0)/z_k(inf) must not grow with k)", f"beta = {b!r}")
    return (a1 - 1.0) / a2


def sample_exponent(gamma1: float, gamma2: float) -> float:
    r"""Sample-wise scaling exponent of Thm 11 (Eq. 187): with labels $y_\mu\propto\mu^{-\gamma_1}$ and
    growth rates $\zeta_\mu = \frac8m\lambda_{\mu,\max}y_\mu\propto\mu^{-\gamma_2}$ (orthogonal samples,
    Thm 5), the limiting loss is $\Theta(\tau^{-(2\gamma_1-1)/\gamma_2})$.

    Conditions: $\gamma_1 > 1/2$ (finite initial loss, $\sum_\mu y_\mu^2 < \infty$) and $\gamma_2 > 0$.
    """
    g1, g2 = _real("gamma1", gamma1), _real("gamma2", gamma2)
    if g1 <= 0.5:
        raise invalid("gamma1", "be > 1/2 (Thm 11: finite initial loss, sum of y_mu^2)", f"{g1!r}")
    if g2 <= 0:
        raise invalid("gamma2", "be > 0 (Thm 11: growth rates decaying as mu^-gamma2)", f"{g2!r}")
    return (2.0 * g1 - 1.0) / g2


def effective_exponent(alpha1: float, alpha2: float, log_ratio) -> np.ndarray | float:
    r"""Finite-$\epsilon$ effective exponent, Eq. (292):

    $$ k_\mathrm{eff} = \frac{\alpha_1-1}{\alpha_2 - (\alpha_1-\alpha_2)/\ln\big(\zeta_k/(C_k\epsilon)\big)}, $$

    the local slope $-d\ln\mathcal E/d\ln t$ when mode $k$ switches on at
    $t(k) = \zeta_k^{-1}\ln(\zeta_k/(C_kz_k(0)))$ (Eq. 290). ``log_ratio`` is
    $\ln(\zeta_k/(C_kz_k(0)))$ (any shape). When this ratio is the same for every $k$ (as for
    $z_k(0)\propto k^{-(\alpha_1-\alpha_2)}$) Eq. (291) has no second term and the exponent is exactly
    $(\alpha_1-1)/\alpha_2$; use :func:`effective_exponent_window` then. Needs $\alpha_1 > 1$,
    $\alpha_2 > 0$ and a positive denominator (mode $k$ must start below saturation by enough).
    """
    a1, a2 = _real("alpha1", alpha1), _real("alpha2", alpha2)
    feature_exponent(a1, a2)
    L = np.asarray(log_ratio, dtype=float)
    if np.any(~np.isfinite(L)) or np.any(L <= 0):
        raise invalid("log_ratio", "be finite and > 0 (ln(zeta_k/(C_k z_k(0))), a mode below saturation)", f"{L}")
    den = a2 - (a1 - a2) / L
    if np.any(den <= 0):
        raise invalid("log_ratio", "make alpha2 - (alpha1 - alpha2)/ln(zeta_k/(C_k eps)) > 0 (Eq. 292)",
                      f"denominators {np.asarray(den)[np.asarray(den) <= 0][:5]} (log_ratio too small for "
                      f"alpha1 - alpha2 = {a1 - a2!r})")
    return (a1 - 1.0) / den


def effective_exponent_window(alpha1: float, alpha2: float, k, log_ratio, *, K: float | None = None) -> float:
    r"""The slope a least-squares fit of $\ln\mathcal E$ against $\ln t$ returns over a window of
    modes, predicted by Eqs. (289)-(290): mode $k$ switches on at $t(k)\propto k^{\alpha_2}\ln(\zeta_k/(C_kz_k(0)))$
    and leaves $\mathcal E(k)\propto k^{-(\alpha_1-1)}$ behind. ``k`` are the (log-spaced) modes of the
    window and ``log_ratio`` the value of $\ln(\zeta_k/(C_kz_k(0)))$ at each; the fit is uniform in $\ln k$.
    With ``K`` modes the integral of Eq. (289) stops at $K$: $\mathcal E(k)\propto k^{1-\alpha_1} - K^{1-\alpha_1}$."""
    a1, a2 = _real("alpha1", alpha1), _real("alpha2", alpha2)
    feature_exponent(a1, a2)
    k = np.asarray(k, dtype=float)
    check_ndim("k", k, 1, "modes of the fit window")
    L = np.broadcast_to(np.asarray(log_ratio, dtype=float), k.shape)
    if k.size < 2 or np.any(k <= 0) or np.any(L <= 0):
        raise invalid("k", "hold >= 2 positive modes, with `log_ratio` > 0 at each", f"{k.size} modes, min k = "
                      f"{np.min(k, initial=np.inf)!r}, min log_ratio = {np.min(L, initial=np.inf)!r}")
    x = a2 * np.log(k) + np.log(L)
    if K is None:
        y = -(a1 - 1.0) * np.log(k)
    else:
        if not float(K) > k.max():
            raise invalid("K", f"exceed the window's last mode {k.max():g} (K: the number of modes)", repr(K))
        y = np.log(k ** (1.0 - a1) - float(K) ** (1.0 - a1))
    return -fit_line(x, y)[0]


# ------------------------------------------------------------------ feature-wise closed form
def logistic_excess_loss(t: Float[ArrayLike, " T"], r: Float[ArrayLike, " K"], C_kk: Float[ArrayLike, " K"],
                         z0: Float[ArrayLike, " K"], *, a: float = 1.0) -> Float[Array, " T"]:
    r"""Excess loss $\mathcal E(t) = \sum_kV_k(1 - z_k(t)/z_k(\infty))^2$ (Eq. 163) of decoupled logistic
    modes (Thm 6, Eq. 39; Thm 7, Eq. 42 with ``a = 2``), with $V_k = \zeta_k^2/(8C_k)$.

    Evaluated as $\sigma(\ln\tilde C_k - a\zeta_kt)$, $\tilde C_k = \zeta_k/(C_kz_k(0)) - 1$ (Eq. 166), one time
    at a time (``lax.map``). Needs $\zeta_k > C_kz_k(0) > 0$.
    """
    require_x64("logistic_excess_loss")
    r = jnp.asarray(r, dtype=float)
    check_ndim("r", r, 1, "growth rates, one per mode")
    K = r.shape[0]
    check_shape("C_kk", C_kk, (K,), "self-competition, one per mode")
    check_shape("z0", z0, (K,), "initial features, one per mode")
    t = jnp.asarray(t, dtype=float)
    check_ndim("t", t, 1, "times")
    for name, v in (("r", r), ("C_kk", C_kk), ("z0", z0), ("t", t)):
        check_finite(name, v)
    C_kk, z0 = jnp.asarray(C_kk, dtype=float), jnp.asarray(z0, dtype=float)
    if bool(jnp.any(r <= 0)) or bool(jnp.any(z0 <= 0)) or bool(jnp.any(C_kk * z0 >= r)):
        raise invalid("z0", "make every mode grow from below saturation: r > C_kk z0 > 0 (logistic_excess_loss)",
                      "a mode with r <= C_kk z0 or z0 <= 0")
    return _logistic_excess(t, r, C_kk, z0, jnp.asarray(float(a)))


@jax.jit
def _logistic_excess(t, r, C, z0, a):
    V = r**2 / (8.0 * C)
    logC = jnp.log(r / (C * z0) - 1.0)

    def one(tt):
        return jnp.sum(V * jax.nn.sigmoid(logC - a * r * tt) ** 2)

    return jax.lax.map(one, t, batch_size=16)


# ------------------------------------------------------------------ sample-wise (Thm 5, Eq. 133)
def sample_wise_loss(t: Float[ArrayLike, " T"], lambdas: Float[ArrayLike, "m K"], ys: Float[ArrayLike, " m"],
                     z0: Float[ArrayLike, "m K"], *, m_eff: int | None = None, tail: float = 60.0,
                     rtol: float = 1e-10, atol: float = 1e-12) -> Float[Array, "T m"]:
    r"""Per-sample residuals $\Delta_\mu(t)/y_\mu$ under Thm 5 (orthogonal samples), from Eq. (133):
    $\dot\xi_\mu = \sum_j\lambda_{\mu,j}z_{\mu j}(0)e^{-\frac8m\lambda_{\mu,j}\xi_\mu} - y_\mu$, $\Delta_\mu = \dot\xi_\mu$.

    The samples decouple, and each depends on its data only through $\kappa_{\mu j} = \lambda_{\mu,j}z_{\mu j}(0)/y_\mu$
    and $c_{\mu j} = \lambda_{\mu,j}/\lambda_{\mu,\max}$: with $u = \zeta_\mu t$ ($\zeta_\mu = \frac8m\lambda_{\mu,\max}y_\mu$,
    Eq. 174) and $\psi = -\frac8m\lambda_{\mu,\max}\xi_\mu$,
    $$ \frac{d\psi}{du} = 1 - \sum_j\kappa_{\mu j}e^{c_{\mu j}\psi},\qquad \frac{\Delta_\mu}{y_\mu} = \sum_j\kappa_{\mu j}e^{c_{\mu j}\psi} - 1. $$
    Each sample is integrated (Tsit5, vmapped) in its own clock up to $u^* + $ ``tail``
    ($u^*\approx\ln(1/\sum_j\kappa_{\mu j})$, its switch-on); beyond it its residual is reported as 0.

    ``lambdas`` are the eigenvalues of the directions sample $\mu$ owns (one row per sample, padded with
    zeros), ``z0`` their initial features; ``m_eff`` is the $m$ of the $\frac8m$ (default: the number of rows).
    Needs $y_\mu > 0$ and $\lambda_{\mu,\max} > 0$ (Thm 10).
    """
    require_x64("sample_wise_loss")
    check_positive("rtol", rtol)
    check_positive("atol", atol, strict=False)
    lam = jnp.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 2, "eigenvalues of each sample's own directions (m, K)")
    m, K = lam.shape
    check_shape("ys", ys, (m,), "one label per sample")
    check_shape("z0", z0, (m, K), "initial feature of each direction")
    t = jnp.asarray(t, dtype=float)
    check_ndim("t", t, 1, "times")
    ys, z0 = jnp.asarray(ys, dtype=float), jnp.asarray(z0, dtype=float)
    for name, v in (("lambdas", lam), ("ys", ys), ("z0", z0), ("t", t)):
        check_finite(name, v)
    lmax = jnp.max(lam, axis=1)
    if bool(jnp.any(ys <= 0)) or bool(jnp.any(lmax <= 0)) or bool(jnp.any(z0 < 0)):
        raise invalid("ys", "be > 0 with lambda_max > 0 for every sample and z0 >= 0 (sample_wise_loss, Thm 10: "
                      "y_mu > 0)", "a sample with y_mu <= 0, lambda_max <= 0 or z0 < 0")
    m_eff = m if m_eff is None else int(m_eff)
    zeta = 8.0 / m_eff * lmax * ys
    kappa = lam * z0 / ys[:, None]
    c = lam / lmax[:, None]
    if bool(jnp.any(jnp.sum(jnp.where(c > 0, kappa, 0.0), axis=1) >= 1.0)):
        raise invalid("z0", "make every sample start below its label: sum_j lambda_j z0_j < y_mu for the growing "
                      "directions", "a sample at or above its label")
    u_end = jnp.log(1.0 / jnp.sum(jnp.where(c > 0, kappa, 0.0), axis=1)) + float(tail)
    frac, ok = _sample_solve(t, zeta, kappa, c, u_end, jnp.asarray(float(rtol)), jnp.asarray(float(atol)))
    if not bool(np.all(ok)):
        raise failed("sample_wise_loss", f"the ODE solver failed for {int(np.size(ok) - np.sum(ok))} of {m} sample(s) "
                     f"(samples {np.flatnonzero(~np.asarray(ok))[:5].tolist()}); loosen `rtol`/`atol`.")
    return frac


_SAMPLE_MAX_STEPS = 16_384


@jax.jit
def _sample_solve(t, zeta, kappa, c, u_end, rtol, atol):
    def one(z, kap, cc, ue):
        u = jnp.minimum(z * t, ue - 1.0)  # non-decreasing save times in this sample's clock
        options = ODEOptions(rtol, atol, "tsit5", "linear", _SAMPLE_MAX_STEPS, False, dtmax=4.0)
        sol = integrate(_psi_field, jnp.zeros(()), u, (kap, cc), options, span=(jnp.zeros(()), ue))
        frac = jnp.sum(kap[None, :] * jnp.exp(cc[None, :] * sol.ys[:, None]), axis=1) - 1.0
        return jnp.where(z * t >= ue - 1.0, 0.0, frac), succeeded(sol)

    return jax.vmap(one, out_axes=(1, 0))(zeta, kappa, c, u_end)


def _psi_field(u, psi, args):
    kap, cc = args
    # the exponent is capped so that a trial step far past the switch-on gives a large finite slope
    # (and a rejected step) instead of inf/nan, which would stall the step-size controller
    return 1.0 - jnp.sum(kap * jnp.exp(jnp.minimum(cc * psi, 600.0)))
