r"""Helpers for thresholds fixed before the runs: the confidence interval of a seed mean
and the band a statement "about x" covers. The decision itself is :mod:`nqfbook.kit._verdicts`
(:func:`nqfbook.kit.judge`), the one rule for every figure.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nqf._checks import require_value

__all__ = ["mean_interval", "about_band"]


def _check_seeds(v: np.ndarray, axis: int) -> None:
    require_value("values", v.ndim > 0 and v.shape[axis] >= 2, f"at least 2 seeds along axis {axis}",
                  f"shape {v.shape}")


def mean_interval(values: Any, *, axis: int = 0, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    r"""Mean over seeds and the half-width of its two-sided ``level`` confidence interval (Student t,
    ``n - 1`` degrees of freedom): ``(mean, half_width)``."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    _check_seeds(v, axis)
    require_value("level", 0 < level < 1, "in (0, 1)", repr(level))
    n = v.shape[axis]
    half = stats.t.ppf(0.5 + level / 2, n - 1) * np.std(v, axis=axis, ddof=1) / np.sqrt(n)
    return np.mean(v, axis=axis), half


def about_band(value: Any, *, factor: float = math.sqrt(10.0)) -> tuple[float, float]:
    r"""The band ``(value / factor, value * factor)`` a statement "about ``value``" covers.

    The default factor $\sqrt{10}$ is half a decade either side: the values that round to ``value``'s
    decade on a logarithmic axis, the reading of "about" for a quantity the paper gives to one
    significant figure on a log-scaled figure.
    """
    v, f = float(value), float(factor)
    require_value("value", math.isfinite(v) and v > 0, "a positive number", repr(value))
    require_value("factor", math.isfinite(f) and f > 1, "a number > 1", repr(factor))
    return v / f, v * f
