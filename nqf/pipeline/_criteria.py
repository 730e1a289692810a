r"""Criteria fixed before the runs (BOOK.md rule 10).

A figure's verdict is one rule, the same for every architecture and optimiser, whose threshold is
derived from something other than the value it judges: the recording interval, the spread over seeds,
or a theory bound. These helpers compute such thresholds and record the verdict of a fixed rule as a
claim, so that a chapter writes its criteria as constants in a cell before any run and reads them
here afterwards.

Example::

    from nqf.pipeline import interval_tolerance, seed_spread, record_verdict

    TOL = interval_tolerance(EVERY)            # one recording interval, in steps
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

__all__ = ["interval_tolerance", "seed_spread", "mean_interval", "shift_gap", "about_band",
           "record_verdict"]


def interval_tolerance(record_every: Any, intervals: Any = 1) -> float:
    r"""The resolution of a recorded step: ``intervals`` recording intervals of ``record_every`` steps.

    Two events recorded every ``record_every`` steps that happen at the same true step can be read
    up to one interval apart (each is read at the first recorded step after it), so a difference of
    recorded steps is only resolved beyond ``record_every``.
    """
    every = float(record_every)
    n = float(intervals)
    if not (math.isfinite(every) and every > 0):
        raise ValueError(f"`record_every` must be a positive number of steps; got {record_every!r}.")
    if not (math.isfinite(n) and n >= 0):
        raise ValueError(f"`intervals` must be a non-negative number; got {intervals!r}.")
    return every * n


def seed_spread(values: Any, *, axis: int = 0, k: float = 2.0) -> np.ndarray:
    r"""``k`` sample standard deviations (``ddof = 1``) of ``values`` over the seed axis ``axis``.

    The spread of a quantity over independent seeds measures how far one run's value can fall from
    another's by chance; a difference inside it is not a difference a figure of one seed can show.
    Non-finite entries are ignored (a quantity that is never reached has no spread); fewer than two
    finite seeds give ``nan``.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim == 0 or v.shape[axis] < 2:
        raise ValueError(f"`values` needs at least 2 seeds along axis {axis}; got shape {v.shape}.")
    if not (math.isfinite(k) and k >= 0):
        raise ValueError(f"`k` must be a non-negative number; got {k!r}.")
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
    if v.ndim == 0 or v.shape[axis] < 2:
        raise ValueError(f"`values` needs at least 2 seeds along axis {axis}; got shape {v.shape}.")
    if not (0 < level < 1):
        raise ValueError(f"`level` must lie in (0, 1); got {level!r}.")
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
    if s != shift or s < 0:
        raise ValueError(f"`shift` must be a non-negative whole number of recorded steps; got {shift!r}.")
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
    if not (math.isfinite(v) and v > 0 and math.isfinite(f) and f > 1):
        raise ValueError(f"`value` must be positive and `factor` > 1; got {value!r}, {factor!r}.")
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
    if kind not in ("paper", "finding"):
        raise ValueError(f"`kind` must be 'paper' or 'finding'; got {kind!r}.")
    if paper_side not in ("below", "above"):
        raise ValueError(f"`paper_side` must be 'below' or 'above'; got {paper_side!r}.")
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
