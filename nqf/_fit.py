r"""The one least-squares line of nqf, on the ground floor beside ``_checks``.

Every fitted order of a remainder (Theorem 1, Eq. 2), power-law exponent (chapter 7's windows, the
predicted effective exponent of Eqs. 289-292) and straight-line extrapolation (switch-on times to the
singular limit) is :func:`fit_line`; the log-log slopes are :func:`loglog_slope`, whose ``keep`` names
the points that carry order information (by default the positive ones; the remainder fits keep those
above round-off).
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
