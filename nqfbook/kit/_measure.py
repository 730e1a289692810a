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
    interpolation between samples: THE first-crossing rule, :func:`nqf.training.first_crossing`, with its one
    reading of the ends (``t[0]`` if reached at the first sample, ``inf`` if never). For measured GD curves."""
    return first_crossing(t, x, level, axis=0)
