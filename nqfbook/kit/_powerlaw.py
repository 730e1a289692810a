r"""A power-law fit a reader can trust: the slope of $\ln\mathcal E$ against $\ln t$ over a window chosen by
a stated rule, with the sensitivity of the slope to that window.

The rule used throughout chapter 7 (:func:`switch_on_window`): a staircase of switch-ons looks like a
power law only between the switch-on of mode $k_\mathrm{lo}$ (before it the first few modes are
separate steps) and that of mode $k_\mathrm{hi}$ (after it the finite number of modes cuts the law
off). The window is expressed in modes and converted to times with the predicted switch-on times
(Eq. 158); it is never tuned on the measured curve. :func:`window_sensitivity` refits with each edge
moved by a factor 2 in $k$ and reports the spread.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nqf._checks import require_value
from nqf._fit import fit_line


class PowerLawFit(NamedTuple):
    r"""A straight line fitted to a loss curve in log-log over a window (:func:`power_law_fit`).

    Attributes:
        exponent: $-\mathrm{d}\ln\mathcal E / \mathrm{d}\ln t$ over the window (positive for a
            decaying law).
        intercept: $\ln\mathcal E$ at $\ln t = 0$ of the fitted line.
        t_lo: the window's first time.
        t_hi: the window's last time.
        rms: the rms residual of $\ln\mathcal E$ about the line (0 for an exact power law).
    """

    exponent: float
    intercept: float
    t_lo: float
    t_hi: float
    rms: float


def power_law_fit(t, E, t_lo: float, t_hi: float, *, n: int = 200) -> PowerLawFit:
    r"""Least-squares line through $(\ln t, \ln\mathcal E)$ on ``n`` points spaced uniformly in $\ln t$ over
    $[t_\mathrm{lo}, t_\mathrm{hi}]$ (the curve is interpolated linearly in log-log), so that the fit
    weighs every decade equally whatever the save times. Returns the exponent $-$slope."""
    t, E = np.asarray(t, dtype=float), np.asarray(E, dtype=float)
    require_value("t, E", t.ndim == 1 and E.shape == t.shape, "1-d of equal length",
                  f"shapes {t.shape} and {E.shape}")
    require_value("t_lo, t_hi", bool(np.isfinite(t_lo) and np.isfinite(t_hi) and 0 < t_lo < t_hi),
                  "finite with 0 < t_lo < t_hi", f"t_lo = {t_lo!r}, t_hi = {t_hi!r}")
    keep = (t > 0) & (E > 0) & np.isfinite(E)
    t, E = t[keep], E[keep]
    positive = f"[{t[0]:.4g}, {t[-1]:.4g}]" if t.size else "none"
    require_value("t_lo, t_hi", t.size >= 2 and t[0] <= t_lo and t_hi <= t[-1],
                  f"a window inside the positive times (with E > 0): {positive}", f"the window [{t_lo:.4g}, {t_hi:.4g}]")
    require_value("t", bool(np.all(np.diff(t) > 0)), "strictly increasing", f"{t[:5]}...")
    x = np.linspace(np.log(t_lo), np.log(t_hi), int(n))
    y = np.interp(x, np.log(t), np.log(E))
    slope, icpt = fit_line(x, y)
    rms = float(np.sqrt(np.mean((y - (slope * x + icpt)) ** 2)))
    return PowerLawFit(float(-slope), float(icpt), float(t_lo), float(t_hi), rms)


def switch_on_window(tstar, k_lo: int, k_hi: int) -> tuple[float, float]:
    r"""The window rule: from the predicted switch-on time of mode ``k_lo`` to that of mode ``k_hi``
    (1-based indices into ``tstar``, the switch-on times in mode order)."""
    tstar = np.asarray(tstar, dtype=float)
    require_value("k_lo, k_hi", 1 <= int(k_lo) < int(k_hi) <= tstar.size, f"modes with 1 <= k_lo < k_hi <= {tstar.size}",
                  f"k_lo = {k_lo!r}, k_hi = {k_hi!r}")
    return float(tstar[int(k_lo) - 1]), float(tstar[int(k_hi) - 1])


class Sensitivity(NamedTuple):
    """How a fitted exponent moves with the fit window (:func:`window_sensitivity`).

    Attributes:
        exponents: the exponent of each window variant.
        windows: ``(n, 2)``, the modes ``(k_lo, k_hi)`` that bound each variant.
        lo: the smallest exponent.
        hi: the largest exponent.
    """

    exponents: np.ndarray
    windows: np.ndarray
    lo: float
    hi: float


def window_sensitivity(t, E, tstar, k_lo: int, k_hi: int, *, factor: float = 2.0, t_max: float | None = None) -> Sensitivity:
    r"""Refit with each edge of the mode window moved by ``factor`` (down, not at all, up): nine windows
    $(k_\mathrm{lo}/f^{\pm1,0}, k_\mathrm{hi}/f^{\pm1,0})$, clipped to the available modes and, with
    ``t_max``, to switch-ons before ``t_max``. The spread of the exponents is the honest precision of one
    number read off a finite staircase."""
    tstar = np.asarray(tstar, dtype=float)
    K = tstar.size if t_max is None else int(np.searchsorted(tstar, t_max, side="right"))
    out, wins = [], []
    for fl in (1 / factor, 1.0, factor):
        for fh in (1 / factor, 1.0, factor):
            lo = max(1, int(round(k_lo * fl)))
            hi = min(K, int(round(k_hi * fh)))
            if hi <= lo or (lo, hi) in wins:
                continue
            a, b = switch_on_window(tstar, lo, hi)
            if t_max is not None:
                b = min(b, t_max)
            out.append(power_law_fit(t, E, a, b).exponent)
            wins.append((lo, hi))
    out = np.asarray(out)
    return Sensitivity(out, np.asarray(wins), float(out.min()), float(out.max()))


def sharp_switch_tolerance(log_ratio_min: float, exponent: float, *, k_lo: float | int | None = None, k_hi: float | int | None = None,
                           coef: float = 0.25, floor: float = 3e-3) -> float:
    r"""Tolerance for comparing a fitted slope with Eqs. (289)-(292), which treat every switch-on as a sharp
    step at its midpoint $t^*_k$ and the sum over modes as an integral.

    * Width: a logistic switch-on has a 10-90 % width $\ln 81/\zeta_k$, a fraction
      $w = \ln 81/\ln(\zeta_k/(C_kz_k(0)))$ of $t^*_k$; the first-order effect cancels along a dense staircase, so
      the slope error is $O(w^2)$: ``coef`` $\cdot w^2\cdot$ ``exponent``, with $w$ at the smallest ``log_ratio``
      in the window (the widest switch-on).
    * Discreteness (with ``k_lo``, ``k_hi``, the window's modes): by Euler–Maclaurin the staircase read at
      the midpoints, $\sum_{j>k}V_j + V_k/4$, differs from $\int_kV$ by a relative $-(\alpha_1-1)/(4k)$, which
      changes the local slope by a relative $1/(4k)$; averaged uniformly in $\ln k$ over the window this is
      $\frac{1/k_\mathrm{lo} - 1/k_\mathrm{hi}}{4\ln(k_\mathrm{hi}/k_\mathrm{lo})}$ times the exponent.
    * ``floor``: interpolation and fit resolution.
    """
    L = float(log_ratio_min)
    require_value("log_ratio_min", L > 0, "> 0", repr(log_ratio_min))
    w = np.log(81.0) / L
    tol = coef * w**2 * abs(float(exponent)) + floor
    if k_lo is not None or k_hi is not None:
        require_value("k_lo, k_hi", k_lo is not None and k_hi is not None and 0 < float(k_lo) < float(k_hi),
                      "both given, with 0 < k_lo < k_hi", f"k_lo = {k_lo!r}, k_hi = {k_hi!r}")
        a, b = float(k_lo), float(k_hi)
        tol += abs(float(exponent)) * (1 / a - 1 / b) / (4 * np.log(b / a))
    return float(tol)
