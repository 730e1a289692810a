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
* the verdict is ``holds`` (``against``) only when *every* option holds (is against); when the options'
  outcomes differ the verdict is ``inconclusive`` and :attr:`Verdict.depends_on` names the choice.

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

__all__ = ["Rule", "RuleChange", "Verdict", "OptionVerdict", "judge", "verdict_contradictions", "outcome_counts",
           "OUTCOMES"]

#: The three outcomes of a verdict, in the order the pages count them.
OUTCOMES = ("holds", "against", "inconclusive")

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

    def to_json(self) -> dict:
        return {
            "name": self.name, "statistic": self.statistic, "paper_side": self.paper_side,
            "threshold": self.threshold, "fixed_at": self.fixed_at, "explore_seeds": list(self.explore_seeds),
            "confirm_seeds": list(self.confirm_seeds), "z": self.z,
            "changes": [c.to_json() for c in self.changes],
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
        return (f"{head}{self.outcome}: mean {self.mean:.4g}{se} (paper: {side} {self.threshold:.4g}); "
                f"margin {self.margin:+.3g} vs uncertainty {self.uncertainty:.3g}; n = {self.n}{div}")

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
    depends_on: str = ""         # the open choice the outcome depends on ("" when the options agree)

    @property
    def name(self) -> str:
        return self.rule.name

    @property
    def n_diverged(self) -> int:
        return sum(len(o.diverged) for o in self.options)

    def describe(self) -> str:
        """One line: the outcome, and per option :meth:`OptionVerdict.describe`."""
        dep = f"; depends on {self.depends_on}" if self.depends_on else ""
        return (f"[{self.outcome}] {self.name}{dep}: "
                + "; ".join(o.describe(self.rule.paper_side) for o in self.options))

    def to_json(self) -> dict:
        return {
            "name": self.name, "outcome": self.outcome, "depends_on": self.depends_on,
            "seeds": list(self.seeds), "resolution": _json_number(self.resolution),
            "options": [o.to_json() for o in self.options], "rule": self.rule.to_json(),
        }


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


def judge(claims: Any, rule: Rule, values: Any, threshold: Any, *, seeds: Sequence[int] = (),
          resolution: float = 0.0, diverged: Any = None, se: Any = None, option: str = "") -> Verdict:
    r"""Judge ``rule`` on the confirmation runs ``values`` and record the verdict on ``claims``.

    Args:
        claims: the chapter's :class:`~nqfbook.kit.Claims` (``None``: judge without recording).
        rule: the :class:`Rule`, fixed before the runs.
        values: the statistic, one value per run of ``seeds`` (a 1-d array), or a mapping from each
            option's label to such an array. A deterministic statistic (``rule.confirm_seeds`` empty)
            is one number per option, judged with ``se``.
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

    results = []
    for lab in labels:
        v = _as_vector(f"values[{lab!r}]" if lab else "values", vals[lab])
        if seeds:
            require_value(f"values[{lab!r}]" if lab else "values", v.size == len(seeds),
                          f"one value per seed ({len(seeds)})", f"{v.size} values")
        t = float(_as_vector("threshold", thrs[lab]).reshape(()) if np.ndim(thrs[lab]) == 0 else math.nan)
        require_value("threshold", math.isfinite(t), "one finite number (per option)", repr(thrs[lab]))
        d = np.zeros(v.shape, bool) if divs[lab] is None else np.asarray(divs[lab], dtype=bool).reshape(-1)
        require_value("diverged", d.shape == v.shape, f"one flag per run ({v.size})", f"shape {d.shape}")
        d = d | ~np.isfinite(v)
        ids = seeds if seeds else tuple(range(v.size))
        gone = tuple(int(ids[i]) for i in np.flatnonzero(d))
        kept = v[~d]
        n = int(kept.size)
        given = ses[lab]
        if given is not None:
            s = float(given)
            require_value("se", math.isfinite(s) and s >= 0, "a finite number >= 0", repr(given))
        elif n >= 2:
            s = float(np.std(kept, ddof=1) / math.sqrt(n))
        else:
            s = math.nan
        mean = float(np.mean(kept)) if n else math.nan
        margin = (t - mean) if rule.paper_side == "below" else (mean - t)
        unc = rule.z * s + res if math.isfinite(s) else math.nan
        reason = ""
        if n == 0:
            reason = "not judged: every run diverged" if gone else "no runs"
        elif not math.isfinite(s):
            reason = "one run and no standard error"
        outcome = "inconclusive" if reason else _decide(margin, unc)
        results.append(OptionVerdict(lab, outcome, n, gone, mean, s, t, margin, unc, reason))

    outs = {o.outcome for o in results}
    if len(outs) == 1:
        outcome, depends = outs.pop(), ""
    else:
        outcome, depends = "inconclusive", (option or "the option")
    verdict = Verdict(rule, outcome, tuple(results), seeds, res, depends)
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


def outcome_counts(verdicts: Sequence[Any]) -> dict[str, int]:
    """``{"holds": N, "against": K, "inconclusive": J}`` over ``verdicts`` (Verdicts or their JSON)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for v in verdicts:
        counts[v["outcome"] if isinstance(v, Mapping) else v.outcome] += 1
    return counts
