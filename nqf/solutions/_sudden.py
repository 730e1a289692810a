r"""Sudden learning and its singular limit (Sec. 6, Thms 8–10, Figs. 3-4): switch-on times (Eqs. 47, 158),
step-function limits in $\tau = t/\ln(1/\epsilon)$ (Eqs. 168, 175), the flow (Eq. 28) over a grid of $\epsilon$."""

from __future__ import annotations

import functools
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_ndim, check_shape, failed, invalid, require_x64, wrong_kind
from .._types import ArrayLike
from ..flow._flow import integrate, ODEOptions, solve_ode
from ..flow._sharding import check_mesh, sharded_vmap
from ..model._data import NQFData, require_data
from ._implicit import fixed_point, implicit_time
from ..training import first_crossing


def sample_growth_rates(lambdas: Float[ArrayLike, "m p"], ys: Float[ArrayLike, " m"]) -> Float[Array, " m"]:
    r"""$\zeta_\mu = \frac8m\lambda_{\mu,\max}y_\mu$ (Eq. 174), the effective growth rate of sample $\mu$."""
    lam = jnp.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 2, "one row of eigenvalues per sample")
    check_shape("ys", ys, (lam.shape[0],), "one label per sample")
    return 8.0 / lam.shape[0] * jnp.max(lam, axis=1) * jnp.asarray(ys, dtype=float)


class XiFlow(NamedTuple):
    xi: Float[Array, "T m"]  # xi_mu(t) of Eq. (36)
    residuals: Float[Array, "T m"]  # Delta_mu(t) = d xi_mu / dt
    num_steps: Array  # steps taken by the solver


def sample_xi_flow(
    t: Float[ArrayLike, " T"], lambdas: Float[ArrayLike, "m p"], ys: Float[ArrayLike, " m"],
    z0: Float[ArrayLike, " p"], *, options: ODEOptions = ODEOptions(rtol=1e-11, atol=1e-13, solver="tsit5"),
) -> XiFlow:
    r"""Runge–Kutta integration of Eq. (36) in differential form (Eq. 133),
    $\dot\xi_\mu = \sum_k\lambda_{\mu,k}z_k(0)e^{-\frac8m\lambda_{\mu,k}\xi_\mu} - y_\mu$, as the paper
    does for Fig. 4, through :func:`nqf.flow.solve_ode` under ``options`` (compiled once per shape). Returns
    :class:`XiFlow` ``(xi, residuals, num_steps)`` with $\Delta_\mu = \dot\xi_\mu$."""
    lam = jnp.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 2, "one row of eigenvalues per sample")
    m = lam.shape[0]
    check_shape("ys", ys, (m,), "one label per sample")
    check_shape("z0", z0, (lam.shape[1],), "one initial feature per eigen-direction")
    ys, z0 = jnp.asarray(ys, dtype=float), jnp.asarray(z0, dtype=float)
    sol = solve_ode(_xi_field, jnp.zeros(m), t, args=(lam, z0, ys), options=options)
    return XiFlow(sol.ys, _xi_residuals(sol.ys, (lam, z0, ys)), sol.num_steps)


@jax.jit
def _xi_residuals(xi, args):
    return jax.vmap(lambda x: _xi_field(0.0, x, args))(xi)


def _xi_field(t, xi, args):
    """Right-hand side of Eq. (133); module level, so repeated solves reuse one compilation."""
    lam, z0, ys = args
    return jnp.sum(lam * z0[None, :] * jnp.exp(-8.0 / lam.shape[0] * lam * xi[:, None]), axis=1) - ys


def sample_switch_on_times(
    lambdas: Float[ArrayLike, "m p"], ys: Float[ArrayLike, " m"], z0: Float[ArrayLike, "*batch p"], *, rho: float = 0.5,
    logistic: bool = False,
) -> Float[Array, "*batch m"]:
    r"""Exact time at which sample $\mu$ is a fraction ``rho`` learned, $\Delta_\mu = -(1-\rho)y_\mu$
    (per-sample loss $(1-\rho)^2y_\mu^2$), under Thm 5. Since $\Delta_\mu = g_\mu(\xi_\mu)$, the target
    $\xi^*$ is the root of $g_\mu + (1-\rho)y_\mu$ and $t^*_\mu = \int_0^{\xi^*}ds/g_\mu$ (Eq. 36).
    ``z0`` may carry leading batch axes (e.g. one row per $\epsilon$ of a sweep); all are solved at once.

    With ``logistic=True``, the logistic approximation of Thm 10's proof (Eq. 179 without the sub-dominant
    remainder $R$): $Z = \lambda_{\mu,\max}\sum_{k\in\mathcal K_\mu}z_k$ grows logistically to $y_\mu$ at rate
    $\zeta_\mu$, so $t^*_\mu \approx \frac1{\zeta_\mu}\ln\big(\frac{\rho}{1-\rho}(\frac{y_\mu}{Z(0)} - 1)\big)$ (the
    sample-wise analogue of Eq. 158), with an error $O(\epsilon^{\delta})$,
    $\delta = 1 - \max_{k\notin\mathcal K_\mu}\lambda_{\mu,k}/\lambda_{\mu,\max}$."""
    if logistic:
        return _switch_on_logistic(lambdas, ys, z0, rho)
    if not 0 < rho < 1:
        raise invalid("rho", 'lie in (0, 1)', f'{rho!r}')
    lam = jnp.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 2, "one row of eigenvalues per sample")
    m, p = lam.shape
    check_shape("ys", ys, (m,), "one label per sample")
    z0 = jnp.asarray(z0, dtype=float)
    if z0.ndim < 1 or z0.shape[-1] != p:
        raise invalid("z0", f'have shape (..., {p}) (one initial feature per eigen-direction)', f'{z0.shape}')
    ys = jnp.asarray(ys, dtype=float)
    a = lam.reshape((1,) * (z0.ndim - 1) + lam.shape) * z0[..., None, :]
    b = jnp.broadcast_to(8.0 / m * lam, a.shape)
    xi_star = fixed_point(a, b, jnp.broadcast_to(rho * ys, a.shape[:-1]))
    return implicit_time(xi_star, a, b, jnp.broadcast_to(ys, a.shape[:-1]))


def _switch_on_logistic(lambdas, ys, z0, rho):
    lam = jnp.asarray(lambdas, dtype=float)
    check_ndim("lambdas", lam, 2)
    lmax = jnp.max(lam, axis=1)
    z0 = jnp.asarray(z0, dtype=float)
    top = jnp.where(lam == lmax[:, None], lam, 0.0)
    Z0 = jnp.sum(top.reshape((1,) * (z0.ndim - 1) + top.shape) * z0[..., None, :], axis=-1)
    zeta = sample_growth_rates(lam, ys)
    ys, zeta = jnp.broadcast_to(jnp.asarray(ys), Z0.shape), jnp.broadcast_to(zeta, Z0.shape)
    return jnp.log(rho / (1 - rho) * (ys / Z0 - 1.0)) / zeta


# ------------------------------------------------------------------ feature-wise switch-on


def feature_excess_loss(z, V, z_inf) -> Float[Array, "..."]:
    r"""Eq. (163): $\mathcal E = \sum_kV_k(1 - z_k/z_k(\infty))^2$ with $V_k = r_k^2/(8C_{kk})$ (Thm 6)
    or $\gamma_k^2/(16c)$ (Thm 7); ``z`` has the mode axis last."""
    z, V, z_inf = jnp.broadcast_arrays(*(jnp.asarray(v, dtype=float) for v in (z, V, z_inf)))
    return jnp.sum(V * (1.0 - z / z_inf) ** 2, axis=-1)


def feature_step_loss(tau, V, zeta, *, a: float = 1.0) -> Float[Array, "..."]:
    r"""The $\epsilon\to0$ limit of the excess loss in rescaled time, Eq. (168):
    $\mathcal E(\tau) = \sum_kV_k\,\mathbb 1(\tau < 1/(a\zeta_k))$."""
    tau = jnp.asarray(tau, dtype=float)[..., None]
    tau, V, limit = jnp.broadcast_arrays(tau, jnp.asarray(V), 1.0 / (a * jnp.asarray(zeta)))
    return jnp.sum(V * (tau < limit).astype(V.dtype), axis=-1)


def sample_step_loss(tau, ys, zeta) -> Float[Array, "..."]:
    r"""The $\epsilon\to0$ limit of the loss in rescaled time, Eq. (47)/(175):
    $\frac1m\sum_\mu y_\mu^2\,\mathbb 1(\tau < 1/\zeta_\mu)$."""
    tau = jnp.asarray(tau, dtype=float)[..., None]
    tau, ys, limit = jnp.broadcast_arrays(tau, jnp.asarray(ys, dtype=float), 1.0 / jnp.asarray(zeta))
    return jnp.mean(ys**2 * (tau < limit).astype(ys.dtype), axis=-1)


# ------------------------------------------------------------------ the singular-limit sweep
class SingularSweep(NamedTuple):
    eps: Float[Array, " E"]  # initial scale: M(0) = eps * M0_unit (z_k(0) = eps for M0_unit = I)
    taus: Float[Array, " T"]  # rescaled times tau = t / ln(1/eps)
    loss: Float[Array, "E T"]  # L(tau ln(1/eps))
    log_z: Float[Array, "E T p"]  # ln z_k, features in the basis P
    residuals: Float[Array, "E T m"]  # Delta_mu = f_mu - y_mu along each run
    tau_star: Float[Array, "E R p"]  # tau at which z_k = rho * z_final_k, per level rho
    tau_star_samples: Float[Array, "E R m"]  # tau at which Delta_mu = -(1 - rho) y_mu
    rho: Float[Array, " R"]  # the levels rho of tau_star
    num_steps: Float[Array, " E"]  # solver steps of each run


class SweepOptions(eqx.Module):
    r"""How :func:`singular_limit_sweep` solves (one frozen object, as :class:`nqf.flow.ODEOptions`): ``rtol`` and
    ``atol`` on $N = M/\epsilon$ component-wise (max norm), ``atol_M`` an absolute tolerance on $M$ itself
    ($\mathrm{atol}_N = \max(\mathrm{atol}, \mathrm{atol}_M/\epsilon)$: for non-commuting data (Thm 7), where
    rounding in $H$ puts noise of relative size $10^{-16}$ into entries that vanish exactly), the ``solver``
    (``"tsit5"`` or ``"dopri8"``), ``max_steps``, diffrax's ``progress`` bar, ``pad_to = (m_pad, p_pad)`` (exact
    zero padding: sweeps of different sizes share one program) and a ``mesh`` (:func:`nqf.flow.batch_mesh`)
    splitting the grid of $\epsilon$ over devices."""

    rtol: float | Float[Array, ""] = 1e-10
    atol: float | Float[Array, ""] = 1e-12
    atol_M: float | Float[Array, ""] = 0.0
    solver: str = eqx.field(static=True, default="tsit5")
    max_steps: int = eqx.field(static=True, default=16_384)
    progress: bool = eqx.field(static=True, default=False)
    pad_to: tuple[int, int] | None = eqx.field(static=True, default=None)
    mesh: jax.sharding.Mesh | None = eqx.field(static=True, default=None)


def singular_limit_sweep(
    data: NQFData, eps: Float[ArrayLike, " E"], taus: Float[ArrayLike, " T"], *,
    M0_unit: Float[ArrayLike, "p p"] | None = None, P: Float[ArrayLike, "p p"] | None = None,
    z_final: Float[ArrayLike, " p"] | None = None, rho: tuple[float, ...] = (0.1, 0.5, 0.9),
    options: SweepOptions = SweepOptions(),
) -> SingularSweep:
    r"""The gradient flow (Eq. 28) from $M(0) = \epsilon M_0$ for every $\epsilon$ of a grid at once
    (``jax.vmap``), integrated in the rescaled clock $\tau = t/\ln(1/\epsilon)$, under ``options``
    (:class:`SweepOptions`).

    The state is $N = M/\epsilon$, so that initial scales down to $10^{-300}$ keep full relative
    accuracy: $\frac{dN}{d\tau} = -\ln(1/\epsilon)\,[H(\epsilon N)N + NH(\epsilon N)]$, $N(0) = M_0$
    (``M0_unit``, $I$ by default: $z_k(0) = \epsilon$ in any basis, the convention of Sec. 6 and Fig. 3).
    ``data`` is an :class:`~nqf.model.NQFData` with ZGZ (targets $y_\mu - f_0$); it enters the vmap once.

    Switch-on times, per level $\rho$: features $z_k = (P^\top MP)_{kk}$ reach $\rho z_k^\mathrm{final}$ (needs
    ``z_final``; NaN without it), samples reach $\Delta_\mu = -(1-\rho)y_\mu$ (assumes $y_\mu > 0$ and a monotone
    residual, as under Thm 5), by :func:`nqf.training.first_crossing`'s rule on ``taus``, refined by bisection on
    the dense solution (NaN if the level is crossed and left again).
    """
    require_x64("singular_limit_sweep")
    data = require_data(data)
    if not data.zgz:
        raise invalid("data", "be ZGZ data (no `gs`, no `Bs`): singular_limit_sweep integrates the flow on M alone "
                      "(Eq. 28)", "data with `gs` or `Bs`")
    if not isinstance(options, SweepOptions):
        raise wrong_kind("options", "be an nqf.solutions.SweepOptions", type(options).__name__)
    check_mesh(options.mesh)
    m, p = data.m, data.p
    eps = jnp.asarray(eps, dtype=float)
    check_ndim("eps", eps, 1, "grid of initial scales")
    if bool(jnp.any((eps <= 0) | (eps >= 1))):
        raise invalid("eps", 'lie in (0, 1)', f'{np.asarray(eps)}')
    taus = jnp.asarray(taus, dtype=float)
    check_ndim("taus", taus, 1, "rescaled save times")
    if float(taus[0]) != 0.0 or not bool(jnp.all(jnp.diff(taus) > 0)):
        raise invalid("taus", "start at 0 and increase strictly", f"{np.asarray(taus)[:5]}")
    P = jnp.eye(p) if P is None else jnp.asarray(P, dtype=float)
    check_shape("P", P, (p, p), "feature basis (columns)")
    N0 = jnp.eye(p) if M0_unit is None else jnp.asarray(M0_unit, dtype=float)
    check_shape("M0_unit", N0, (p, p), "initial order parameter divided by eps")
    zf = jnp.full((p,), jnp.nan) if z_final is None else jnp.asarray(z_final, dtype=float)
    check_shape("z_final", zf, (p,), "final value of each feature")
    rho = jnp.asarray(rho, dtype=float)
    check_ndim("rho", rho, 1, "levels in (0, 1)")
    if bool(jnp.any((rho <= 0) | (rho >= 1))):
        raise invalid("rho", "hold levels in (0, 1)", f"{np.asarray(rho)}")
    padded = _padded(np.asarray(data.As), np.asarray(data.ys - data.f0), P, N0, zf, options.pad_to)
    out = _sweep_impl(*(jnp.asarray(v) for v in padded), rho, eps, taus, jnp.asarray(float(options.rtol)),
                      jnp.asarray(float(options.atol)), jnp.asarray(float(options.atol_M)),
                      max_steps=int(options.max_steps), progress=bool(options.progress), solver=options.solver,
                      mesh=options.mesh)
    loss, log_z, res, ts_f, ts_s, steps, ok = out
    if not bool(np.all(ok)):
        bad = np.asarray(eps)[~np.asarray(ok)]
        raise failed("singular_limit_sweep", f"the ODE solver failed for eps = {bad[:5]} (steps taken: "
                     f"{np.asarray(steps)[~np.asarray(ok)][:5]}); raise `max_steps` or loosen `rtol`/`atol`.")
    log_z, res, r = log_z[..., :p], res[..., :m], np.asarray(rho)[:, None]
    ys = np.asarray(data.ys - data.f0)
    tau_f = _first_crossing(taus, log_z, np.log(r * np.asarray(zf)[None]), ts_f[..., :p])
    tau_s = _first_crossing(taus, res, -(1 - r) * ys[None], ts_s[..., :m])
    return SingularSweep(eps, taus, loss, log_z, res, tau_f, tau_s, rho, steps)


def _padded(As, ys, P, N0, zf, pad_to):
    """The sweep's data padded to ``pad_to = (m_pad, p_pad)``: zero samples of weight 0, zero directions."""
    m, p = ys.shape[0], P.shape[0]
    m_pad, p_pad = (m, p) if pad_to is None else (int(pad_to[0]), int(pad_to[1]))
    if m_pad < m or p_pad < p:
        raise invalid("pad_to", f'be at least the data size (m, p) = {(m, p)}', f'{pad_to!r}')
    A_p, y_p, w = np.zeros((m_pad, p_pad, p_pad)), np.zeros(m_pad), np.zeros(m_pad)
    A_p[:m, :p, :p], y_p[:m], w[:m] = As, ys, 1.0
    P_p, N0_p, zf_p = np.eye(p_pad), np.eye(p_pad), np.full(p_pad, np.nan)
    P_p[:p, :p], N0_p[:p, :p], zf_p[:p] = np.asarray(P), np.asarray(N0), np.asarray(zf)
    return A_p, y_p, w, P_p, N0_p, zf_p


def _first_crossing(taus, values, level, roots):
    """THE first-crossing rule on the saved values (``(E, T, k)``, level ``(R, k)``): ``taus[0]`` if reached at the
    first record, ``inf`` if never, else the bisection's root on the dense solution; NaN for a NaN level."""
    rec = first_crossing(np.asarray(taus), np.asarray(values)[:, :, None, :], level, axis=1, interpolate=False)
    located = np.where(np.isfinite(rec) & (rec > float(taus[0])), np.asarray(roots), rec)
    return jnp.asarray(np.where(np.isnan(level), np.nan, located))


def _max_norm(x):
    """Error norm of the sweep: the largest scaled component (so zero padding changes nothing)."""
    return jnp.max(jnp.abs(x))


@functools.partial(jax.jit, static_argnames=("max_steps", "progress", "solver", "mesh"))
def _sweep_impl(As, ys, w, P, N0, zf, rho, eps, taus, rtol, atol, atol_M, *, max_steps, progress, solver, mesh):
    m, p = As.shape[0], As.shape[1]
    data = (As.reshape(m, p * p), ys, w, P, N0, zf, rho, taus, rtol, atol, atol_M)

    def one(e, data):
        return _sweep_lane(e, *data, max_steps=max_steps, progress=progress, solver=solver)

    return sharded_vmap(one, (0, None), mesh, sequential=True)(eps, data)


def _sweep_field(tau, N, args):
    r"""Eq. (28) for $N = M/\epsilon$ in $\tau = t/\ln(1/\epsilon)$, with
    $H = \frac{4}{\sum w}\sum_\mu w_\mu\Delta_\mu A_\mu$ ($w = 0$ on padding); module level, data in ``args``."""
    e, L, A2, ys, w = args
    p = N.shape[-1]
    delta = e * (A2 @ N.reshape(-1)) - ys
    H = (4.0 / jnp.sum(w)) * ((w * delta) @ A2).reshape(p, p)
    return -L * (H @ N + N @ H)


def _sweep_lane(e, A2, ys, w, P, N0, zf, rho, taus, rtol, atol, atol_M, *, max_steps, progress, solver):
    r"""One $\epsilon$ of the sweep: the solve, the loss and features on ``taus``, the switch-on times."""
    m, p = A2.shape[0], P.shape[0]
    tau_max = taus[-1]

    def feats(N):
        return jnp.einsum("ik,ij,jk->k", P, N, P)

    options = ODEOptions(rtol, jnp.maximum(atol, atol_M / e), solver, "linear", max_steps, progress, norm=_max_norm)
    sol = integrate(_sweep_field, N0, taus, (e, -jnp.log(e), A2, ys, w), options, dense=True)
    Ns = sol.ys
    log_z = jnp.log(e) + jnp.log(jax.vmap(feats)(Ns))
    res = e * (Ns.reshape(Ns.shape[0], p * p) @ A2.T) - ys[None, :]
    loss = jnp.sum(w[None, :] * res**2, axis=1) / jnp.sum(w)

    # switch-on times: one batched bisection on the dense solution for every level and
    # every feature (z_k = rho z_final_k) and sample (Delta_mu = -(1 - rho) y_mu)
    R = rho.shape[0]
    kk = jnp.tile(jnp.arange(p), R)
    rk = jnp.repeat(rho, p)
    mm = jnp.tile(jnp.arange(m), R)
    rm = jnp.repeat(rho, m)

    def values(tq_f, tq_s):
        Nf = jax.vmap(sol.evaluate)(tq_f)
        zf_q = jax.vmap(feats)(Nf)[jnp.arange(kk.shape[0]), kk]
        vf_ = jnp.log(e) + jnp.log(zf_q) - jnp.log(rk * zf[kk])
        Nq = jax.vmap(sol.evaluate)(tq_s)
        vs_ = e * jnp.sum(Nq.reshape(Nq.shape[0], p * p) * A2[mm], axis=1) - ys[mm] + (1 - rm) * ys[mm]
        return vf_, vs_

    def bis(_, state):
        lo_f, hi_f, lo_s, hi_s = state
        mid_f, mid_s = 0.5 * (lo_f + hi_f), 0.5 * (lo_s + hi_s)
        up_f, up_s = (v >= 0 for v in values(mid_f, mid_s))
        return (jnp.where(up_f, lo_f, mid_f), jnp.where(up_f, mid_f, hi_f),
                jnp.where(up_s, lo_s, mid_s), jnp.where(up_s, mid_s, hi_s))

    zeros_f, zeros_s = jnp.zeros(kk.shape), jnp.zeros(mm.shape)
    lo_f, hi_f, lo_s, hi_s = jax.lax.fori_loop(
        0, 64, bis, (zeros_f, zeros_f + tau_max, zeros_s, zeros_s + tau_max))
    v0_f, v0_s = values(zeros_f, zeros_s)
    v1_f, v1_s = values(zeros_f + tau_max, zeros_s + tau_max)
    ts_f = jnp.where((v1_f >= 0) & (v0_f < 0), 0.5 * (lo_f + hi_f), jnp.nan).reshape(R, p)
    ts_s = jnp.where((v1_s >= 0) & (v0_s < 0), 0.5 * (lo_s + hi_s), jnp.nan).reshape(R, m)
    ok = sol.result == diffrax.RESULTS.successful
    return loss, log_z, res, ts_f, ts_s, sol.stats["num_steps"], ok
