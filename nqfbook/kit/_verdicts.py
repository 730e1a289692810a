r"""Verdicts on the paper's figure-level claims: one rule, three outcomes.

A figure's claim ("the NQF tracks the module for about 100 steps", "the 2-layer NQF is closer than the
1-layer one") is judged by a :class:`Rule` fixed *before* the runs that judge it: what is measured per
run (the statistic), on which side of a threshold the paper puts it, how the threshold is derived, the
declared ``z``, the exploration seeds the rule was tuned on, and the fresh confirmation seeds it is judged
on. :func:`judge` is the one decision function of the book:

* per option the paper leaves open (a readout draw, a learning-rate rule, a reading of the model, a
  metric), the runs that diverged are set aside (counted and named, never a window or an infinity), and
  the mean of the statistic over the remaining confirmation runs is compared with the threshold;
* the *margin* is how far the mean lies on the paper's side of the threshold (negative: on the other
  side); the *uncertainty* is ``z`` standard errors of that mean over runs plus the recording
  resolution of the statistic;
* the option's outcome is ``holds`` when the margin exceeds the uncertainty, ``against`` when it is
  below minus the uncertainty, and ``inconclusive`` otherwise (also when fewer than two runs are left
  and no standard error is given);
* the verdict is ``holds`` (``against``) only when *every* judged option holds (is against); an option
  whose every run diverged is not judged (named, and left out of the combination);
* an inconclusive verdict is one of two kinds (:attr:`Verdict.kind`): ``"depends on X"`` when conclusive
  options disagree (one holds, another is against; :attr:`Verdict.depends_on` names X), and ``"too few
  runs"`` otherwise (some option's margin lies inside its uncertainty); then :attr:`Verdict.runs_needed`
  is the number of runs that would resolve the rule's stated smallest margin (:attr:`Rule.margin`) at the
  measured spread, :func:`runs_needed` (the same function plans the runs from exploration seeds);
* a reading off the seed-mean curve the paper plots is an option like any other: :func:`seed_mean_reading`
  reads the statistic once off the mean curve and gives its jackknife standard error over runs.

Example::

    from nqfbook.kit import Rule, judge

    RULE = Rule("Fig. 6: the NQF tracks the module for about 100 steps",
                statistic="probe-loss window (steps)", paper_side="above", z=2.0,
                threshold="the lower end of 'about 100': 100 / sqrt(10)",
                fixed_at="0123abc", explore_seeds=(0, 1, 2), confirm_seeds=(100, 101, 102, 103, 104))
    ...                                                    # the runs, on RULE.confirm_seeds
    judge(claims, RULE, {"eta 0.02": w2, "eta 0.05": w5}, 31.6, seeds=RULE.confirm_seeds,
          resolution=1.0, diverged={"eta 0.02": d2, "eta 0.05": d5}, option="the learning rate")

A verdict never fails the build: all three outcomes are results. What the build checks is that a quick
verdict never contradicts the committed full-fidelity record (:func:`verdict_contradictions`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np

from nqf._checks import check_option
from nqf._checks import require_kind
from nqf._checks import require_value

__all__ = ["Rule", "RuleChange", "Verdict", "OptionVerdict", "SeedMean", "judge", "runs_needed", "seed_mean_reading",
           "verdict_contradictions", "outcome_counts", "kind_counts", "OUTCOMES", "KINDS"]

#: The three outcomes of a verdict, in the order the pages count them.
OUTCOMES = ("holds", "against", "inconclusive")
#: The four kinds of verdict the pages count: the conclusive outcomes and the two kinds of inconclusive.
KINDS = ("holds", "against", "depends on X", "too few runs")

_COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _check_text(what: str, value: Any, *, empty: bool = False) -> str:
    require_kind(what, isinstance(value, str), "a string", type(value).__name__)
    require_value(what, empty or bool(value.strip()), "a non-empty string", repr(value))
    return value


def _check_commit(what: str, value: Any) -> str:
    _check_text(what, value)
    require_value(what, bool(_COMMIT_RE.match(value)), "a git commit (7-40 lowercase hex digits)", repr(value))
    return value


def _check_seeds(what: str, seeds: Any) -> tuple[int, ...]:
    require_kind(what, isinstance(seeds, (tuple, list, range)), "a tuple of ints", type(seeds).__name__)
    out = tuple(seeds)
    require_kind(what, all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in out),
                 "a tuple of ints", repr(out))
    out = tuple(int(s) for s in out)
    require_value(what, len(set(out)) == len(out), "distinct seeds", repr(out))
    return out


@dataclasses.dataclass(frozen=True)
class RuleChange:
    """A change to a rule made after a run had been seen: when, in which commit, what and why.

    The page lists every one beside its rule; the git history is the record.
    """

    date: str
    commit: str
    what: str
    why: str

    def __post_init__(self):
        _check_text("date", self.date)
        require_value("date", bool(_DATE_RE.match(self.date)), "a date YYYY-MM-DD", repr(self.date))
        _check_commit("commit", self.commit)
        _check_text("what", self.what)
        _check_text("why", self.why)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Rule:
    """A verdict rule, fixed before the runs that judge it.

    Attributes:
        name: the paper's claim the rule judges (unique in a chapter).
        statistic: what one run measures (text; the page shows it).
        paper_side: ``"below"`` when the paper predicts ``statistic < threshold``, ``"above"`` for
            ``statistic > threshold``.
        threshold: how the threshold is derived (never from the value it judges).
        fixed_at: the commit that fixed the rule, its threshold derivation and its seeds.
        explore_seeds: the seeds the rule was explored and tuned on (never judged).
        confirm_seeds: the fresh seeds the verdict is judged on (disjoint from ``explore_seeds``; no
            earlier commit ran them). Empty for a deterministic statistic, judged with a given standard
            error.
        z: the declared number of standard errors a margin must clear.
        changes: every change made after a run (:class:`RuleChange`), oldest first.
        margin: the smallest margin that matters, in the statistic's units (``None``: not stated; the
            runs needed are then counted for the measured margin); the runs are planned to resolve it.
        margin_reason: why that margin (the recording resolution, a theory bound, the paper's precision).
    """

    name: str
    statistic: str
    paper_side: str
    threshold: str
    fixed_at: str
    explore_seeds: tuple[int, ...] = ()
    confirm_seeds: tuple[int, ...] = ()
    z: float = 2.0
    changes: tuple[RuleChange, ...] = ()
    margin: float | None = None
    margin_reason: str = ""

    def __post_init__(self):
        _check_text("name", self.name)
        _check_text("statistic", self.statistic)
        check_option("paper_side", self.paper_side, ("below", "above"))
        _check_text("threshold", self.threshold)
        _check_commit("fixed_at", self.fixed_at)
        explore = _check_seeds("explore_seeds", self.explore_seeds)
        confirm = _check_seeds("confirm_seeds", self.confirm_seeds)
        shared = sorted(set(explore) & set(confirm))
        require_value("confirm_seeds", not shared, "seeds disjoint from explore_seeds (fresh confirmation runs)",
                      f"{shared} in both")
        object.__setattr__(self, "explore_seeds", explore)
        object.__setattr__(self, "confirm_seeds", confirm)
        z = self.z
        require_kind("z", isinstance(z, (int, float)) and not isinstance(z, bool), "a number", type(z).__name__)
        require_value("z", math.isfinite(z) and z > 0, "a positive number of standard errors", repr(z))
        require_kind("changes", isinstance(self.changes, (tuple, list)), "a tuple of RuleChange",
                     type(self.changes).__name__)
        require_kind("changes", all(isinstance(c, RuleChange) for c in self.changes), "a tuple of RuleChange",
                     repr(self.changes))
        object.__setattr__(self, "changes", tuple(self.changes))
        if self.margin is not None:
            m = self.margin
            require_kind("margin", isinstance(m, (int, float)) and not isinstance(m, bool), "a number or None",
                         type(m).__name__)
            require_value("margin", math.isfinite(m) and m > 0, "a positive finite margin", repr(m))
            _check_text("margin_reason", self.margin_reason)
            object.__setattr__(self, "margin", float(m))

    def to_json(self) -> dict:
        return {
            "name": self.name, "statistic": self.statistic, "paper_side": self.paper_side,
            "threshold": self.threshold, "fixed_at": self.fixed_at, "explore_seeds": list(self.explore_seeds),
            "confirm_seeds": list(self.confirm_seeds), "z": self.z,
            "changes": [c.to_json() for c in self.changes],
            "margin": self.margin, "margin_reason": self.margin_reason,
        }


@dataclasses.dataclass(frozen=True)
class OptionVerdict:
    """The outcome of a rule under one option: its runs, mean, standard error, margin and uncertainty."""

    option: str
    outcome: str
    n: int                       # runs judged (finite, not diverged)
    diverged: tuple[int, ...]    # the seeds (or run indices) set aside as diverged
    mean: float
    se: float                    # standard error of the mean (nan when it cannot be estimated)
    threshold: float
    margin: float                # how far the mean lies on the paper's side of the threshold
    uncertainty: float           # z * se + resolution
    reason: str = ""             # why an option is inconclusive without a margin (no runs left, one run)
    runs_needed: float = math.nan  # runs that resolve the stated margin at this option's spread (inf: never)
    reading: str = "per run"     # "per run", or "seed mean" (read once off the mean curve, jackknife se)
    need_basis: str = ""         # the margin runs_needed resolves: "stated" (the rule's), or "measured" (when
                                 # the runs already resolve the stated margin and the measured margin is smaller)

    def describe(self, paper_side: str) -> str:
        """One line: the outcome, the mean (with its standard error) against the paper's side of the threshold, the
        margin against the uncertainty, the runs judged and those set aside as diverged."""
        head = f"{self.option}: " if self.option else ""
        if self.reason:
            return f"{head}{self.outcome} ({self.reason})"
        div = (f", {len(self.diverged)} diverged (seeds {', '.join(map(str, self.diverged))}) not judged"
               if self.diverged else "")
        se = f" ± {self.se:.2g}" if self.se == self.se else ""
        side = "<" if paper_side == "below" else ">"
        what = "seed-mean curve" if self.reading == "seed mean" else "mean"
        need = ""
        if self.outcome == "inconclusive" and self.runs_needed == self.runs_needed:
            what = ("the measured margin (smaller than the stated smallest margin that matters, which these runs "
                    "resolve)" if self.need_basis == "measured" else f"the {self.need_basis or 'stated'} margin")
            need = (f"; no number of runs resolves {what} (the resolution exceeds it)"
                    if math.isinf(self.runs_needed) else f"; {int(self.runs_needed)} runs would resolve {what}")
        return (f"{head}{self.outcome}: {what} {self.mean:.4g}{se} (paper: {side} {self.threshold:.4g}); "
                f"margin {self.margin:+.3g} vs uncertainty {self.uncertainty:.3g}; n = {self.n}{div}{need}")

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["diverged"] = list(self.diverged)
        return {k: (_json_number(v) if isinstance(v, float) else v) for k, v in d.items()}


def _json_number(x: float):
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A rule's verdict over every option (see the module docstring)."""

    rule: Rule
    outcome: str
    options: tuple[OptionVerdict, ...]
    seeds: tuple[int, ...]
    resolution: float
    depends_on: str = ""         # the open choice the outcome depends on ("" unless kind is "depends on X")
    inconclusive_kind: str = ""  # "depends on X" or "too few runs" for an inconclusive verdict, else ""
    runs_needed: float = math.nan  # too few runs: the runs per option that would resolve the stated margin
    need_basis: str = ""         # "stated" or "measured": the margin runs_needed resolves (see OptionVerdict)

    @property
    def name(self) -> str:
        return self.rule.name

    @property
    def kind(self) -> str:
        """One of ``KINDS`` ("holds", "against", "depends on X", "too few runs"): the outcome when conclusive,
        else the kind of inconclusive."""
        return self.inconclusive_kind if self.outcome == "inconclusive" else self.outcome

    @property
    def n_diverged(self) -> int:
        return sum(len(o.diverged) for o in self.options)

    def kind_text(self) -> str:
        """The verdict in words: "holds", "against", "depends on the metric", "too few runs (24 would resolve
        the stated margin)"."""
        if self.kind == "depends on X":
            return f"depends on {self.depends_on}"
        if self.kind == "too few runs":
            n = self.runs_needed
            what = ("the measured margin, smaller than the stated one" if self.need_basis == "measured"
                    else "the stated margin")
            need = ("" if n != n else f" (no number of runs resolves {what}: the resolution exceeds it)"
                    if math.isinf(n) else f" ({int(n)} per option would resolve {what})")
            return f"too few runs{need}"
        return self.outcome

    def describe(self) -> str:
        """One line: the verdict in words, and per option :meth:`OptionVerdict.describe`."""
        return (f"[{self.kind_text()}] {self.name}: "
                + "; ".join(o.describe(self.rule.paper_side) for o in self.options))

    def to_json(self) -> dict:
        return {
            "name": self.name, "outcome": self.outcome, "kind": self.kind, "depends_on": self.depends_on,
            "runs_needed": _json_number(self.runs_needed), "need_basis": self.need_basis,
            "seeds": list(self.seeds), "resolution": _json_number(self.resolution),
            "options": [o.to_json() for o in self.options], "rule": self.rule.to_json(),
        }


@dataclasses.dataclass(frozen=True)
class SeedMean:
    """A statistic read once off the seed-mean curve, with its jackknife standard error over the runs.

    Made by :func:`seed_mean_reading`; :func:`judge` takes it as one option's value (``n`` runs in the
    mean, ``diverged`` the runs left out of it).
    """

    value: float
    se: float
    n: int
    diverged: tuple[int, ...] = ()


def runs_needed(values: Any, margin: float, *, z: float = 2.0, resolution: float = 0.0) -> float:
    r"""The number of runs whose mean resolves ``margin``: the smallest ``n >= 2`` with
    :math:`z\,s/\sqrt n + \text{resolution} < \text{margin}`, ``s`` the standard deviation over runs.

    ``values`` is the statistic of the exploration runs (at least two finite values; the plan is made
    from them before any confirmation run), or, as a number, the standard deviation ``s`` itself.
    Returns ``inf`` when the resolution alone is at least the margin (no number of runs resolves it).
    """
    m, res, zz = float(margin), float(resolution), float(z)
    require_value("margin", math.isfinite(m) and m > 0, "a positive finite margin", repr(margin))
    require_value("resolution", math.isfinite(res) and res >= 0, "a finite number >= 0", repr(resolution))
    require_value("z", math.isfinite(zz) and zz > 0, "a positive number of standard errors", repr(z))
    if np.ndim(values) == 0:
        sd = float(values)
        require_value("values", math.isfinite(sd) and sd >= 0, "a standard deviation >= 0 or the runs' values",
                      repr(values))
    else:
        v = _as_vector("values", values)
        v = v[np.isfinite(v)]
        require_value("values", v.size >= 2, "at least two finite values (exploration runs)", f"{v.size}")
        sd = float(np.std(v, ddof=1))
    if res >= m:
        return math.inf
    return float(max(2, math.floor((zz * sd / (m - res)) ** 2) + 1))


def seed_mean_reading(curves: Any, read: Any, *, seeds: Sequence[int] = (), diverged: Any = None,
                      grid: int = 1) -> SeedMean:
    r"""Read a statistic off the seed-mean curve, as a figure of mean curves is read.

    Args:
        curves: the per-run curves, an array ``(runs, T, ...)`` (time on axis 1), or a tuple of such arrays (for
            a statistic of several curves, such as the gap between a module's and its NQF's mean losses).
        read: ``read(*mean_curves) -> float``, the statistic of the mean curve(s) (the same statistic as
            the per-run reading).
        seeds: the runs' seeds (to name the diverged ones); by default their indices.
        diverged: booleans per run: runs left out of the mean (named, not judged).
        grid: the reading's resolution: the curves are read on every ``grid``-th step (1: every step).

    Returns:
        :class:`SeedMean`: the statistic of the mean over the kept runs, and its jackknife standard
        error, :math:`\sqrt{(n-1)/n\,\sum_i(\theta_{(i)} - \bar\theta)^2}` over the leave-one-out
        means (``nan`` with fewer than two runs).
    """
    arrays = tuple(np.asarray(c, dtype=float) for c in (curves if isinstance(curves, (tuple, list)) else (curves,)))
    require_value("curves", all(a.ndim >= 2 for a in arrays), "arrays (runs, T, ...)", str([a.shape for a in arrays]))
    require_value("curves", len({a.shape[0] for a in arrays}) == 1, "the same runs in every array",
                  str([a.shape for a in arrays]))
    require_value("read", callable(read), "a callable on the mean curve(s)", type(read).__name__)
    require_value("grid", isinstance(grid, int) and grid >= 1, "a positive int", repr(grid))
    runs = arrays[0].shape[0]
    ids = _check_seeds("seeds", seeds) if len(seeds) else tuple(range(runs))
    require_value("seeds", len(ids) == runs, f"one seed per run ({runs})", f"{len(ids)}")
    d = np.zeros(runs, bool) if diverged is None else np.asarray(diverged, bool).reshape(-1)
    require_value("diverged", d.shape == (runs,), f"one flag per run ({runs})", f"shape {d.shape}")
    kept = [a[~d][:, ::grid] for a in arrays]
    n = int((~d).sum())
    gone = tuple(int(ids[i]) for i in np.flatnonzero(d))
    if n == 0:
        return SeedMean(math.nan, math.nan, 0, gone)
    value = float(read(*(a.mean(0) for a in kept)))
    if n < 2:
        return SeedMean(value, math.nan, 1, gone)
    loo = np.array([float(read(*((a.sum(0) - a[i]) / (n - 1) for a in kept))) for i in range(n)])
    if not np.all(np.isfinite(loo)):
        return SeedMean(value, math.inf, n, gone)
    se = float(np.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2)))
    return SeedMean(value, se, n, gone)


def _as_vector(what: str, value: Any) -> np.ndarray:
    try:
        v = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        require_kind(what, False, "real numbers, one per run", repr(value)[:80])
    require_value(what, v.ndim <= 1, "one number per run (a scalar or a 1-d array)", f"shape {v.shape}")
    return v.reshape(-1)


def _per_option(what: str, value: Any, options: Sequence[str]) -> dict[str, Any]:
    if isinstance(value, Mapping):
        keys = list(value)
        require_value(what, sorted(map(str, keys)) == sorted(options),
                      f"one entry per option {list(options)}", f"keys {keys}")
        return {str(k): value[k] for k in keys}
    return {o: value for o in options}


def _decide(margin: float, uncertainty: float) -> str:
    if margin > uncertainty:
        return "holds"
    if margin < -uncertainty:
        return "against"
    return "inconclusive"


def _option_se(given: Any, kept: np.ndarray) -> float:
    if given is not None:
        s = float(given)
        require_value("se", math.isfinite(s) and s >= 0, "a finite number >= 0", repr(given))
        return s
    return float(np.std(kept, ddof=1) / math.sqrt(kept.size)) if kept.size >= 2 else math.nan


def _judge_option(rule: Rule, lab: str, value: Any, thr: Any, div: Any, given: Any, seeds: tuple[int, ...],
                  res: float) -> OptionVerdict:
    """One option's outcome: its runs (or its seed-mean reading) against the threshold."""
    what = f"values[{lab!r}]" if lab else "values"
    t = float(_as_vector("threshold", thr).reshape(()) if np.ndim(thr) == 0 else math.nan)
    require_value("threshold", math.isfinite(t), "one finite number (per option)", repr(thr))
    if isinstance(value, SeedMean):
        n, gone, mean, reading = value.n, value.diverged, value.value, "seed mean"
        s = value.se if given is None else _option_se(given, np.zeros(0))
    else:
        v = _as_vector(what, value)
        if seeds:
            require_value(what, v.size == len(seeds), f"one value per seed ({len(seeds)})", f"{v.size} values")
        d = np.zeros(v.shape, bool) if div is None else np.asarray(div, dtype=bool).reshape(-1)
        require_value("diverged", d.shape == v.shape, f"one flag per run ({v.size})", f"shape {d.shape}")
        d = d | ~np.isfinite(v)
        ids = seeds if seeds else tuple(range(v.size))
        gone = tuple(int(ids[i]) for i in np.flatnonzero(d))
        kept = v[~d]
        n, reading = int(kept.size), "per run"
        s = _option_se(given, kept)
        mean = float(np.mean(kept)) if n else math.nan
    margin = (t - mean) if rule.paper_side == "below" else (mean - t)
    unc = rule.z * s + res if math.isfinite(s) else math.nan
    reason = ""
    if n == 0:
        reason = "not judged: every run diverged" if gone else "no runs"
    elif not math.isfinite(s):
        reason = "one run and no standard error" if n == 1 else "no finite standard error"
    outcome = "inconclusive" if reason else _decide(margin, unc)
    need, basis = math.nan, ""
    if math.isfinite(s) and n >= 1:
        sd = s * math.sqrt(n)
        if rule.margin is not None:
            need, basis = runs_needed(sd, rule.margin, z=rule.z, resolution=res), "stated"
        if (rule.margin is None or (outcome == "inconclusive" and need <= n)) and abs(margin) > 0:
            need, basis = runs_needed(sd, abs(margin), z=rule.z, resolution=res), "measured"
    return OptionVerdict(lab, outcome, n, gone, mean, s, t, margin, unc, reason, need, reading, basis)


def _combine(results: Sequence[OptionVerdict], option: str) -> tuple[str, str, str, float, str]:
    """(outcome, kind of inconclusive, depends_on, runs needed, their basis) over the options judged (an option
    whose every run diverged is not judged: it is named in its own line and left out)."""
    judged = [o for o in results if o.n > 0]
    outs = {o.outcome for o in judged}
    if outs in ({"holds"}, {"against"}):
        return outs.pop(), "", "", math.nan, ""
    if {"holds", "against"} <= outs:
        return "inconclusive", "depends on X", (option or "the option"), math.nan, ""
    open_ = [o for o in judged if o.outcome == "inconclusive"]
    if not open_ or any(o.runs_needed != o.runs_needed for o in open_):
        return "inconclusive", "too few runs", "", math.nan, ""
    worst = max(open_, key=lambda o: o.runs_needed)
    return "inconclusive", "too few runs", "", worst.runs_needed, worst.need_basis


def judge(claims: Any, rule: Rule, values: Any, threshold: Any, *, seeds: Sequence[int] = (),
          resolution: float = 0.0, diverged: Any = None, se: Any = None, option: str = "") -> Verdict:
    r"""Judge ``rule`` on the confirmation runs ``values`` and record the verdict on ``claims``.

    Args:
        claims: the chapter's :class:`~nqfbook.kit.Claims` (``None``: judge without recording).
        rule: the :class:`Rule`, fixed before the runs.
        values: the statistic, one value per run of ``seeds`` (a 1-d array), or a mapping from each
            option's label to such an array. A deterministic statistic (``rule.confirm_seeds`` empty)
            is one number per option, judged with ``se``. An option's value may also be a
            :class:`SeedMean` (the statistic read off the seed-mean curve, :func:`seed_mean_reading`).
        threshold: the threshold, or a mapping option -> threshold (derived as ``rule.threshold``
            says, never from ``values``).
        seeds: the seeds of the runs in ``values``; every one must be a confirmation seed of ``rule``.
        resolution: the recording resolution of the statistic (for a step read on a grid of
            ``every`` steps: ``every``), added to the uncertainty.
        diverged: booleans per run (or a mapping per option): the runs that diverged, set aside and
            named. Non-finite values are set aside as diverged too.
        se: the standard error of a deterministic statistic (or a mapping per option); by default the
            sample standard deviation over the runs divided by :math:`\sqrt{n}`.
        option: the name of the open choice the options label ("the readout draw"); required when
            ``values`` is a mapping with more than one option.

    Returns:
        The :class:`Verdict`; its ``outcome`` is one of ``"holds"``, ``"against"``, ``"inconclusive"``.
    """
    require_kind("rule", isinstance(rule, Rule), "a nqfbook.kit.Rule", type(rule).__name__)
    seeds = _check_seeds("seeds", seeds)
    foreign = [s for s in seeds if s not in rule.confirm_seeds]
    require_value("seeds", not foreign, f"confirmation seeds of the rule {rule.name!r} {rule.confirm_seeds}",
                  f"{foreign} (a verdict is judged only on its fresh confirmation seeds)")
    if rule.confirm_seeds:
        require_value("seeds", bool(seeds), f"the seeds of the runs (a subset of {rule.confirm_seeds})", "none")
    res = float(resolution)
    require_value("resolution", math.isfinite(res) and res >= 0, "a finite number >= 0", repr(resolution))
    labels = [str(k) for k in values] if isinstance(values, Mapping) else [""]
    require_value("values", bool(labels), "at least one option", "an empty mapping")
    if len(labels) > 1:
        _check_text("option", option)
    vals = _per_option("values", values, labels)
    thrs = _per_option("threshold", threshold, labels)
    divs = _per_option("diverged", diverged, labels)
    ses = _per_option("se", se, labels)

    results = [_judge_option(rule, lab, vals[lab], thrs[lab], divs[lab], ses[lab], seeds, res) for lab in labels]
    outcome, kind, depends, need, basis = _combine(results, option)
    verdict = Verdict(rule, outcome, tuple(results), seeds, res, depends, kind, need, basis)
    if claims is not None:
        claims.add_verdict(verdict)
    return verdict


def verdict_contradictions(quick: Mapping[str, Any], full: Mapping[str, Any]) -> list[str]:
    """The verdicts that a quick build decides conclusively and opposite to the full record.

    ``quick`` and ``full`` map a verdict's name to its outcome (or to a dict with an ``"outcome"``).
    An ``inconclusive`` quick verdict contradicts nothing; a quick verdict missing from the record is
    not a contradiction either (it is new). Returns one line per contradiction.
    """
    def outcome(x: Any) -> str:
        return x["outcome"] if isinstance(x, Mapping) else str(x)

    out = []
    for name, q in quick.items():
        if name not in full:
            continue
        a, b = outcome(q), outcome(full[name])
        if {a, b} == {"holds", "against"}:
            out.append(f"{name}: quick {a}, full {b}")
    return out


def _kind_of(v: Any) -> str:
    if not isinstance(v, Mapping):
        return v.kind
    if v["outcome"] != "inconclusive":
        return v["outcome"]
    return v.get("kind") or ("depends on X" if v.get("depends_on") else "too few runs")


def kind_counts(verdicts: Sequence[Any]) -> dict[str, int]:
    """``{"holds": N, "against": K, "depends on X": D, "too few runs": F}`` over ``verdicts`` (Verdicts or
    their JSON)."""
    counts = dict.fromkeys(KINDS, 0)
    for v in verdicts:
        counts[_kind_of(v)] += 1
    return counts


def outcome_counts(verdicts: Sequence[Any]) -> dict[str, int]:
    """``{"holds": N, "against": K, "inconclusive": J}`` over ``verdicts`` (Verdicts or their JSON)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for v in verdicts:
        counts[v["outcome"] if isinstance(v, Mapping) else v.outcome] += 1
    return counts
