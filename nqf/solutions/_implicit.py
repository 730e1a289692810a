r"""Theorems 4 and 5 (Eqs. 34, 36) by quadrature: $t = \int_0^{\xi}ds/g(s)$, $g(s) = \sum_j a_je^{-b_js} - c$
(every $a_jb_j \ge 0$), inverted without an ODE."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_finite, check_ndim, check_shape, invalid, require_x64
from .._types import ArrayLike


_PANELS = 8
_TABLE = 129  # points of the t(v) table used to start Newton's method
_NEWTON = 6
_GL_X, _GL_W = np.polynomial.legendre.leggauss(32)  # NumPy float64: no JAX array at import (x64 may be set later)


def _phi(x):
    """$e^x - 1 - x$ without cancellation."""
    small = jnp.abs(x) < 1e-3
    xs = jnp.where(small, x, 0.0)
    series = xs * xs * (0.5 + xs * (1 / 6 + xs * (1 / 24 + xs * (1 / 120 + xs / 720))))
    return jnp.where(small, series, jnp.expm1(x) - x)


def _log_g_ratio(s, a, b, c):
    """$g(s)/(|c| + \\sum_j |a_j| e^{-b_j s})$, computed without overflow (same sign as g)."""
    la = jnp.where(a != 0, jnp.log(jnp.abs(jnp.where(a != 0, a, 1.0))), -jnp.inf) - b * s
    lc = jnp.where(c != 0, jnp.log(jnp.abs(jnp.where(c != 0, c, 1.0))), -jnp.inf)
    T = jnp.maximum(jnp.max(la), lc)
    num = jnp.sum(jnp.sign(a) * jnp.exp(la - T)) - jnp.sign(c) * jnp.exp(lc - T)
    den = jnp.sum(jnp.exp(la - T)) + jnp.exp(lc - T)
    return num / den


def _fixed_point(a, b, c):
    """Root $\\xi_\\infty$ of the decreasing function $g$ in the direction $\\xi$ moves
    (``nan`` if there is none); found by doubling then 200 bisection steps."""
    g0 = _log_g_ratio(0.0, a, b, c)
    direction = jnp.sign(g0)  # xi moves the way g(0) points

    def grow(state):
        k, hi = state
        return k + 1, hi * 2.0

    def keep(state):
        k, hi = state
        return (k < 1000) & (_log_g_ratio(direction * hi, a, b, c) * g0 > 0)

    k, hi = jax.lax.while_loop(keep, grow, (0, jnp.asarray(1e-3)))
    found = _log_g_ratio(direction * hi, a, b, c) * g0 <= 0  # false if g never changes sign (or nan)

    def bisect(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        same = _log_g_ratio(direction * mid, a, b, c) * g0 > 0
        return jnp.where(same, mid, lo), jnp.where(same, hi, mid)

    lo, hi = jax.lax.fori_loop(0, 200, bisect, (jnp.asarray(0.0), hi))
    root = direction * 0.5 * (lo + hi)
    return jnp.where(g0 == 0, 0.0, jnp.where(found, root, jnp.nan))


def _setup(a, b, c):
    """Fixed point, singularity-free integrand and t(v) for g(s) = sum_j a_j e^{-b_j s} - c."""
    xi_inf = _fixed_point(a, b, c)
    d0 = -xi_inf  # signed distance of the start from the fixed point
    degenerate = (d0 == 0) | ~jnp.isfinite(d0)
    d0s = jnp.where(degenerate, 1.0, d0)
    xi_s = jnp.where(degenerate, -1.0, xi_inf)
    logA = jnp.where(a != 0, jnp.log(jnp.abs(jnp.where(a != 0, a, 1.0))), -jnp.inf) - b * xi_s
    A = jnp.sign(a) * jnp.exp(logA)  # a_j e^{-b_j xi_inf}; sum_j A_j = c at the root
    g1 = -jnp.sum(A * b)  # g'(xi_inf) < 0

    def ghat(delta):  # g(xi_inf + delta), no cancellation
        return jnp.sum(A * jnp.expm1(-b * delta))

    def r_of_w(w):  # integrand of t(v) after removing the log singularity
        delta = d0s * jnp.exp(-w)
        return jnp.sum(A * _phi(-b * delta)) / (ghat(delta) * g1)

    W = jnp.maximum(0.0, jnp.log(jnp.max(jnp.abs(b * d0s)) + 1e-300)) + 40.0

    def integral(v, fn=r_of_w):  # int_0^min(v, W) fn(w) dw, composite Gauss-Legendre
        top = jnp.minimum(v, W)
        h = top / _PANELS
        left = jnp.arange(_PANELS, dtype=float) * h
        w = (left[:, None] + 0.5 * h * (_GL_X[None, :] + 1.0)).ravel()
        wt = jnp.tile(_GL_W, _PANELS) * 0.5 * h
        return jnp.sum(wt * jax.vmap(fn)(w))

    def t_of_v(v):
        return -v / g1 + integral(v)

    return xi_inf, d0, d0s, degenerate, ghat, integral, r_of_w, W, g1, t_of_v


def _implicit_problem(ts, a, b, c):
    """xi(t) at every t of ``ts`` for one problem: tabulate t(v), interpolate, then Newton."""
    xi_inf, d0, d0s, degenerate, ghat, integral, r_of_w, W, g1, t_of_v = _setup(a, b, c)
    R = integral(W, lambda w: jnp.abs(r_of_w(w)))
    v_max = -g1 * (jnp.max(ts) + R) + 1.0  # t(v_max) >= max(ts), since t(v) >= -v/g1 - R
    v_grid = jnp.expm1(jnp.linspace(0.0, jnp.log1p(v_max), _TABLE))  # dense near v = 0 (early times)
    t_grid = jax.vmap(t_of_v)(v_grid)
    v = jnp.interp(ts, t_grid, v_grid)

    def newton(v, _):  # dt/dv = -delta/g(xi_inf + delta) > 0
        delta = d0s * jnp.exp(-v)
        slope = -delta / jax.vmap(ghat)(delta)
        return jnp.clip(v - (jax.vmap(t_of_v)(v) - ts) / slope, 0.0, v_max), None

    v, _ = jax.lax.scan(newton, v, None, length=_NEWTON)
    delta = d0s * jnp.exp(-v)
    xi = jnp.where(degenerate, jnp.where(d0 == 0, 0.0, jnp.nan), xi_inf + delta)
    rate = jnp.where(degenerate, jnp.where(d0 == 0, 0.0, jnp.nan), jax.vmap(ghat)(delta))
    return xi, rate


def _time_one(xi, a, b, c):
    xi_inf, d0, d0s, degenerate, ghat, integral, r_of_w, W, g1, t_of_v = _setup(a, b, c)
    ratio = (xi - xi_inf) / d0s
    v = -jnp.log(ratio)
    ok = (ratio > 0) & (ratio <= 1) & ~degenerate
    return jnp.where(ok, t_of_v(jnp.where(ok, v, 0.0)), jnp.where(ratio == 0, jnp.inf, jnp.nan))


_implicit_batch = jax.jit(jax.vmap(_implicit_problem, in_axes=(None, 0, 0, 0)))
_time_batch = jax.jit(jax.vmap(_time_one))
_fixed_point_batch = jax.jit(jax.vmap(_fixed_point))


def _check_terms(a, b, c):
    a, b = jnp.asarray(a, dtype=float), jnp.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim < 1:
        raise invalid("b", "have the shape (..., n) of `a`", f"{a.shape} and {b.shape}")
    c = jnp.asarray(c, dtype=float)
    check_shape("c", c, a.shape[:-1], "one constant per problem (leading axes of `a`)")
    for name, v in (("a", a), ("b", b), ("c", c)):
        check_finite(name, v)
    if bool(jnp.any(a * b < 0)):
        raise invalid("b", "make a_j * b_j >= 0 for every term (g non-increasing), as the implicit solutions need",
                      f"min a*b = {float(jnp.min(a * b)):.3g}")
    return a, b, c


def fixed_point(a: Float[ArrayLike, "... n"], b: Float[ArrayLike, "... n"], c: Float[ArrayLike, "..."]) -> Float[Array, "..."]:
    r"""The root $\xi_\infty$ of $g(s) = \sum_ja_je^{-b_js} - c$ that $\dot\xi = g(\xi)$ approaches
    from $\xi(0) = 0$ (``nan`` if $g$ has no root in that direction)."""
    require_x64("fixed_point")
    a, b, c = _check_terms(a, b, c)
    n = a.shape[-1]
    return _fixed_point_batch(a.reshape(-1, n), b.reshape(-1, n), c.reshape(-1)).reshape(c.shape)


def implicit_time(xi: Float[ArrayLike, "..."], a: Float[ArrayLike, "... n"], b: Float[ArrayLike, "... n"],
                  c: Float[ArrayLike, "..."]) -> Float[Array, "..."]:
    r"""The quadrature $t(\xi) = \int_0^{\xi}\frac{ds}{g(s)}$ of Eqs. (34)/(36) evaluated directly
    (same singularity-free Gauss–Legendre rule as :func:`implicit_xi`): the time at which the
    auxiliary scalar reaches ``xi``. ``inf`` at the fixed point, ``nan`` beyond it or behind the start."""
    require_x64("implicit_time")
    a, b, c = _check_terms(a, b, c)
    xi = jnp.asarray(xi, dtype=float)
    check_shape("xi", xi, c.shape, "one target value per problem")
    n = a.shape[-1]
    return _time_batch(xi.reshape(-1), a.reshape(-1, n), b.reshape(-1, n), c.reshape(-1)).reshape(c.shape)


def implicit_xi(t: Float[ArrayLike, " T"], a: Float[ArrayLike, "... n"], b: Float[ArrayLike, "... n"],
                c: Float[ArrayLike, "..."]) -> tuple[Float[Array, "... T"], Float[Array, "... T"]]:
    r"""Solve $t = \int_0^{\xi(t)} \frac{ds}{g(s)}$, $g(s) = \sum_j a_j e^{-b_j s} - c$ (the form
    shared by Eqs. 34 and 36) for $\xi(t)$, by quadrature and Newton iteration.

    $g$ is non-increasing when every $a_jb_j\ge0$ (true for both theorems), so $\xi$ moves
    monotonically to the root $\xi_\infty$ of $g$, reached only as $t\to\infty$ with
    $t \approx \ln|\xi-\xi_\infty|/g'(\xi_\infty)$. Writing $\xi = \xi_\infty + (0-\xi_\infty)e^{-v}$
    turns the quadrature into $t(v) = -v/g'(\xi_\infty) + \int_0^v r(w)\,dw$ with a smooth,
    exponentially decaying $r$ (evaluated with ``expm1`` so that nothing cancels), which is
    integrated by composite Gauss–Legendre (8 panels of 32 nodes), tabulated on 129 values of $v$,
    interpolated and polished by six Newton steps ($dt/dv = -(\xi-\xi_\infty)/g(\xi)$).

    Args:
        t: times, 1-D, ``>= 0``.
        a, b: coefficients with a trailing term axis; leading axes batch independent problems.
        c: constant of $g$, one per problem (shape = leading axes of ``a``).

    Returns:
        ``(xi, rate)`` of shape ``leading + (T,)``: $\xi(t)$ and $\dot\xi = g(\xi(t))$ (which is
        the residual $\Delta_\mu$ in Thm 5). ``nan`` where $g$ has no root in the direction of motion.
    """
    require_x64("implicit_xi")
    t = jnp.asarray(t, dtype=float)
    check_ndim("t", t, 1, "times")
    check_finite("t", t)
    if bool(jnp.any(t < 0)):
        raise invalid("t", 'be >= 0', f'min {float(jnp.min(t))!r}')
    a, b, c = _check_terms(a, b, c)
    lead = a.shape[:-1]
    n = a.shape[-1]
    xi, rate = _implicit_batch(t, a.reshape(-1, n), b.reshape(-1, n), c.reshape(-1))
    return xi.reshape(lead + t.shape), rate.reshape(lead + t.shape)
