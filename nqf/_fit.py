r"""The one least-squares line of nqf (:func:`fit_line`), and log-log slopes (:func:`loglog_slope`, whose
``keep`` names the points that carry order information): remainder orders (Theorem 1, Eq. 2), power-law
exponents (Eqs. 289-292), extrapolations of switch-on times.
"""

from __future__ import annotations

import numpy as np


def fit_line(x, y) -> tuple[float, float]:
    r"""``(slope, intercept)`` of the least-squares line $y = \text{slope}\,x + \text{intercept}$
    (``numpy.polyfit`` of degree 1) through every point given."""
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def loglog_slope(x, y, *, keep=None) -> float:
    r"""Least-squares slope of $\log y$ against $\log x$ over the points ``keep`` (a boolean mask; by
    default the points where both ``x`` and ``y`` are positive); ``nan`` when fewer than two are kept."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = (x > 0) & (y > 0) if keep is None else np.asarray(keep, dtype=bool)
    if keep.sum() < 2:
        return float("nan")
    return fit_line(np.log(x[keep]), np.log(y[keep]))[0]
