r"""Criteria fixed before the runs (BOOK.md rule 10).

A figure's verdict is one rule, the same for every architecture and optimiser, whose threshold is
derived from something other than the value it judges: the recording interval, the spread over seeds,
or a theory bound. These helpers compute such thresholds and record the verdict of a fixed rule as a
claim, so that a chapter writes its criteria as constants in a cell before any run and reads them
here afterwards.

Example::

    from nqf.pipeline import interval_tolerance, seed_spread, record_verdict

    TOL = interval_tolerance(EVERY, 1)         # one recording interval, in steps
    ...                                        # the runs
    band = seed_spread(half_times, axis=0)     # 2 std over seeds (a measured spread, not the gap)
    record_verdict(claims, "MLP, GD: switch-on steps agree", gap, TOL + band, paper_side="below")

:func:`nqf.pipeline.record_verdict` records a ``kind="paper"`` claim when the measurement lies on the side of the
threshold the paper predicts and a ``kind="finding"`` claim, with the *same* threshold and the
opposite inequality, when it does not: the rule and its threshold never change with the value; the
claims table and the page say which panels the rule rejects.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._checks import check_size
from .._checks import check_option
from .._checks import require_value

__all__ = ["interval_tolerance", "seed_spread", "mean_interval", "shift_gap", "about_band",
           "record_verdict"]


def _check_seeds(v: np.ndarray, axis: int) -> None:
    require_value("values", v.ndim > 0 and v.shape[axis] >= 2, f"at least 2 seeds along axis {axis}",
                  f"shape {v.shape}")


def interval_tolerance(record_every: Any, intervals: Any) -> float:
    r"""The resolution of a recorded step: ``intervals`` recording intervals of ``record_every`` steps.

    Two events recorded every ``record_every`` steps that happen at the same true step can be read
    up to one interval apart (each is read at the first recorded step after it), so a difference of
    recorded steps is only resolved beyond ``record_every``.
    """
    every = float(record_every)
    n = float(intervals)
    require_value("record_every", math.isfinite(every) and every > 0, "a positive number of steps", repr(record_every))
    require_value("intervals", math.isfinite(n) and n >= 0, "a non-negative number", repr(intervals))
    return every * n


def seed_spread(values: Any, *, axis: int = 0, k: float = 2.0) -> np.ndarray:
    r"""``k`` sample standard deviations (``ddof = 1``) of ``values`` over the seed axis ``axis``.

    The spread of a quantity over independent seeds measures how far one run's value can fall from
    another's by chance; a difference inside it is not a difference a figure of one seed can show.
    Non-finite entries are ignored (a quantity that is never reached has no spread); fewer than two
    finite seeds give ``nan``.
    """
    v = np.asarray(values, dtype=float)
    _check_seeds(v, axis)
    require_value("k", math.isfinite(k) and k >= 0, "a non-negative number", repr(k))
    v = np.where(np.isfinite(v), v, np.nan)
    n = np.sum(np.isfinite(v), axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sd = np.nanstd(v, axis=axis, ddof=1)
    sd = np.where(n >= 2, sd, np.nan)
    return k * sd


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


def shift_gap(curve: Any, shift: Any, *, time_axis: int = -2) -> np.ndarray:
    r"""The largest change of ``curve`` over ``shift`` recorded steps along ``time_axis``:
    $\max_t|c(t + \text{shift}) - c(t)|$, reduced over the time axis and every axis after it.

    This is the height-equivalent of a time tolerance: two curves that differ only by a time shift
    of ``shift`` recorded steps are this far apart. It is computed on one curve (the reference run),
    never on the gap it will judge.
    """
    c = np.asarray(curve, dtype=float)
    s = int(shift)
    require_value("shift", s == shift and s >= 0, "a non-negative whole number of recorded steps", repr(shift))
    ax = time_axis % c.ndim
    if s == 0:
        return np.zeros(c.shape[:ax])
    check_size("curve length along the time axis", c.shape[ax])
    s = min(s, c.shape[ax] - 1)
    later = np.take(c, np.arange(s, c.shape[ax]), axis=ax)
    earlier = np.take(c, np.arange(0, c.shape[ax] - s), axis=ax)
    d = np.abs(later - earlier)
    return np.asarray(np.nanmax(d.reshape(d.shape[:ax] + (-1,)), axis=-1))


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


def record_verdict(claims: Any, name: str, measured: Any, threshold: Any, *, paper_side: str,
                   note: str = "", derivation: str = "", exact_note: str = "", kind: str = "paper") -> bool:
    r"""Record the verdict of a fixed rule ``measured <paper_side> threshold`` on ``claims``.

    ``paper_side`` is ``"below"`` (the paper predicts ``measured < threshold``) or ``"above"``.
    When the measurement is on the paper's side the claim is ``kind="paper"``; otherwise it is a
    ``kind="finding"`` with the opposite strict inequality and the same threshold, named "... (the
    paper's claim fails under this rule)". A NaN measurement or threshold is recorded as a paper
    claim, which fails. ``exact_note`` is passed to the claim (a measurement that can be exactly 0,
    such as a difference of recorded steps, needs one). ``kind="finding"`` records both sides as findings
    (a labelled contrast that is not a test of the paper's model). Returns whether the paper's side holds.
    """
    check_option("kind", kind, ("paper", "finding"))
    check_option("paper_side", paper_side, ("below", "above"))
    m, t = float(measured), float(threshold)
    full = "; ".join(x for x in (note, f"rule: {derivation}" if derivation else "") if x)
    extra = {"exact_note": exact_note} if exact_note else {}
    holds = (m < t) if paper_side == "below" else (m > t)
    if holds or math.isnan(m) or math.isnan(t):
        test = claims.less if paper_side == "below" else claims.greater
        test(name, m, t, kind=kind, note=full, **extra)
        return bool(holds)
    test = claims.greater if paper_side == "below" else claims.less
    if m == t:  # on the threshold: neither strict inequality; record it as the paper's, which fails
        (claims.less if paper_side == "below" else claims.greater)(name, m, t, kind="paper", note=full, **extra)
        return False
    test(f"{name} (the paper's claim fails under this rule)", m, t, kind="finding", note=full, **extra)
    return False
