r"""Measurement helpers used only by the chapters: a straight-line intercept fit (the singular
limit's $t^*/\ln(1/\epsilon)$), the distance of a curve from its step-function limit, and the times
at which trajectories cross a level (switch-on times read off a solution)."""

from __future__ import annotations


import numpy as np
from jaxtyping import Float
from nqf._checks import check_ndim
from nqf._checks import check_positive
from nqf._checks import check_shape
from nqf._checks import require_value
from nqf._fit import fit_line
from nqf._types import ArrayLike
from nqf.training import first_crossing



def intercept_fit(x: Float[ArrayLike, " n"], y: Float[ArrayLike, " n"]) -> tuple[float, float]:
    r"""Least-squares line $y = y_0 + sx$; returns ``(y0, s)``. Used with $x = 1/\ln(1/\epsilon)$ to
    extrapolate switch-on times to the singular limit $x\to0$ (Eq. 158 is exactly linear in $x$
    up to $O(\epsilon)$)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    check_ndim("x", x, 1)
    check_shape("y", y, x.shape, "one value per x")
    ok = np.isfinite(x) & np.isfinite(y)
    require_value("x, y", ok.sum() >= 2, "at least two finite points to fit a line", str(int(ok.sum())))
    s, y0 = fit_line(x[ok], y[ok])
    return y0, s


def step_deviation(taus, curve, step, jumps, margin: float) -> np.ndarray:
    r"""$\max|\text{curve}(\tau) - \text{step}(\tau)|$ over the $\tau$ at least ``margin`` away from every
    jump of the limiting step function (pointwise convergence holds away from the jumps, Thms 9–10).
    ``curve`` may carry leading batch axes (one row per $\epsilon$)."""
    taus = np.asarray(taus, dtype=float)
    check_positive("margin", margin)
    away = np.min(np.abs(taus[:, None] - np.asarray(jumps, dtype=float)[None, :]), axis=1) >= margin
    require_value("margin", away.any(), "small enough that some tau point is `margin` away from every jump",
                  f"{margin!r} (lower it)")
    diff = np.abs(np.asarray(curve) - np.asarray(step))
    return diff[..., away].max(axis=-1)


def crossing_time(t: Float[ArrayLike, " T"], x: Float[ArrayLike, "T ..."], level) -> np.ndarray:
    r"""First time a sampled trajectory ``x`` (time on axis 0) reaches ``level`` from below, by linear
    interpolation between samples (``nan`` if never, or if already reached at the first sample): the one
    first-crossing rule, :func:`nqf.training.first_crossing`, with those two readings. For measured GD curves."""
    t, x = np.asarray(t, dtype=float), np.asarray(x, dtype=float)
    check_ndim("t", t, 1)
    require_value("t", t.size <= 1 or bool(np.all(np.diff(t) > 0)), "strictly increasing (sample times)",
                  f"{t[:5]}...")
    require_value("x", x.shape[0] == t.shape[0], "one row per time", f"{x.shape[0]} rows for {t.shape[0]} times")
    return first_crossing(t, x, level, axis=0, if_never=np.nan, if_first=np.nan)
