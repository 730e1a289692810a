"""The one decision function of the book's verdicts (nqfbook.kit.judge, BOOK.md rule 10)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from nqfbook.kit import Claims, Rule, RuleChange, judge
from nqfbook.kit._verdicts import verdict_contradictions

SEEDS = (100, 101, 102, 103, 104)


def rule(**kw):
    base = dict(name="Fig. X: the window is above 30 steps", statistic="window (steps)", paper_side="above",
                threshold="the lower end of 'about 100'", fixed_at="b819097", explore_seeds=(0, 1, 2),
                confirm_seeds=SEEDS, z=2.0)
    base.update(kw)
    return Rule(**base)


def test_three_outcomes_from_margin_against_uncertainty():
    r = rule()
    spread = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])        # sd = 1.58, se = 0.707, 2 se = 1.41
    assert judge(None, r, 40 + spread, 30.0, seeds=SEEDS).outcome == "holds"
    assert judge(None, r, 20 + spread, 30.0, seeds=SEEDS).outcome == "against"
    assert judge(None, r, 31 + spread, 30.0, seeds=SEEDS).outcome == "inconclusive"
    # the recording resolution widens the uncertainty: 40 clears 30 by 10 < 1.41 + 10
    assert judge(None, r, 40 + spread, 30.0, seeds=SEEDS, resolution=10.0).outcome == "inconclusive"
    below = rule(paper_side="below")
    assert judge(None, below, 20 + spread, 30.0, seeds=SEEDS).outcome == "holds"


def test_margin_and_uncertainty_are_reported():
    v = judge(None, rule(), [38.0, 40.0, 42.0, 40.0, 40.0], 30.0, seeds=SEEDS, resolution=1.0)
    (o,) = v.options
    assert o.mean == pytest.approx(40.0)
    assert o.margin == pytest.approx(10.0)
    assert o.se == pytest.approx(np.std([38, 40, 42, 40, 40], ddof=1) / np.sqrt(5))
    assert o.uncertainty == pytest.approx(2 * o.se + 1.0)


def test_diverged_runs_are_named_and_not_judged():
    v = judge(None, rule(), [40.0, np.inf, 41.0, 39.0, 40.0], 30.0, seeds=SEEDS,
              diverged=[False, True, False, False, False])
    (o,) = v.options
    assert o.diverged == (101,) and o.n == 4 and v.outcome == "holds"
    every = judge(None, rule(), [np.nan] * 5, 30.0, seeds=SEEDS, diverged=[True] * 5)
    assert every.outcome == "inconclusive" and "diverged" in every.options[0].reason
    # a non-finite value is set aside even when not flagged
    assert judge(None, rule(), [40.0, -np.inf, 41.0, 39.0, 40.0], 30.0, seeds=SEEDS).options[0].diverged == (101,)


def test_against_only_when_every_option_is_against():
    r = rule()
    low = [20.0, 21.0, 19.0, 20.0, 20.0]
    high = [40.0, 41.0, 39.0, 40.0, 40.0]
    both = judge(None, r, {"eta 0.02": low, "eta 0.05": low}, 30.0, seeds=SEEDS, option="the learning rate")
    assert both.outcome == "against" and not both.depends_on
    mixed = judge(None, r, {"eta 0.02": low, "eta 0.05": high}, 30.0, seeds=SEEDS, option="the learning rate")
    assert mixed.outcome == "inconclusive" and mixed.depends_on == "the learning rate"
    assert [o.outcome for o in mixed.options] == ["against", "holds"]
    with pytest.raises(ValueError, match="option"):
        judge(None, r, {"a": low, "b": high}, 30.0, seeds=SEEDS)


def test_judged_only_on_confirmation_seeds():
    with pytest.raises(ValueError, match="confirmation seeds"):
        judge(None, rule(), [40.0, 41.0, 39.0], 30.0, seeds=(0, 1, 2))
    with pytest.raises(ValueError, match="disjoint"):
        rule(explore_seeds=(0, 100))
    with pytest.raises(ValueError, match="one value per seed"):
        judge(None, rule(), [40.0, 41.0], 30.0, seeds=SEEDS)


def test_one_run_without_se_is_inconclusive_and_a_deterministic_rule_uses_its_se():
    r = rule()
    assert judge(None, r, [90.0], 30.0, seeds=(100,)).outcome == "inconclusive"
    det = rule(confirm_seeds=(), explore_seeds=())
    assert judge(None, det, 1.02, 1.0, se=0.005).outcome == "holds"     # 0.02 above 1 clears 2 x 0.005
    v = judge(None, rule(confirm_seeds=(), explore_seeds=(), paper_side="below"), 0.01, 0.05, se=0.01)
    assert v.outcome == "holds" and v.options[0].uncertainty == pytest.approx(0.02)


def test_recorded_in_the_claims_json_and_counted(tmp_path):
    claims = Claims("ch99", "quick", tmp_path)
    claims.less("a check", 1.0, 2.0, kind="paper")
    judge(claims, rule(), [40.0, 41.0, 39.0, 40.0, 40.0], 30.0, seeds=SEEDS)
    judge(claims, rule(name="Fig. Y", changes=(RuleChange("2026-12-02", "bec655c", "band", "after a run"),)),
          [20.0, 21.0, 19.0, 20.0, 20.0], 30.0, seeds=SEEDS)
    summary = claims.finish()
    data = json.loads(claims.path.read_text())
    assert data["verdict_counts"] == {"holds": 1, "against": 1, "inconclusive": 0}
    assert data["verdict_kinds"] == {"holds": 1, "against": 1, "depends on X": 0, "too few runs": 0}
    assert [v["outcome"] for v in data["verdicts"]] == ["holds", "against"]
    assert data["verdicts"][1]["rule"]["changes"][0]["commit"] == "bec655c"
    text = str(summary)
    assert "2 rules: 1 holds, 1 against, 0 depend on an open choice, 0 too few runs" in text
    assert "all" not in text.split(";")[0]
    html = claims.table()._repr_html_()
    assert "Rules changed after a run" in html and "bec655c" in html


def test_quick_never_contradicts_full():
    full = {"a": "holds", "b": "against", "c": "inconclusive"}
    assert verdict_contradictions({"a": "inconclusive", "b": "against", "c": "holds", "new": "holds"}, full) == []
    assert verdict_contradictions({"a": "against"}, full) == ["a: quick against, full holds"]
    assert verdict_contradictions({"b": {"outcome": "holds"}}, full) == ["b: quick holds, full against"]


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="paper_side"):
        rule(paper_side="left")
    with pytest.raises(ValueError, match="fixed_at"):
        rule(fixed_at="HEAD")
    with pytest.raises(ValueError, match="z"):
        rule(z=0.0)
    with pytest.raises(ValueError, match="threshold"):
        judge(None, rule(), [40.0] * 5, np.nan, seeds=SEEDS)


def test_the_introduction_tallies_the_verdicts_of_the_published_build(tmp_path):
    from nqfbook.verdicts import verdicts_markdown

    out = tmp_path / "_build" / "output" / "full"
    claims = Claims("ch98", "full", out)
    claims.less("a check", 1.0, 2.0, kind="paper")
    judge(claims, rule(), [40.0, 41.0, 39.0, 40.0, 40.0], 30.0, seeds=SEEDS)
    judge(claims, rule(name="Fig. Z"), {"a": [20.0, 21.0, 19.0, 20.0, 20.0], "b": [40.0, 41.0, 39.0, 40.0, 40.0]},
          30.0, seeds=SEEDS, option="the learning rate")
    claims.finish()
    (out / "claims" / "ch98_side.json").write_text('{"x": 1}')      # a side file is not a chapter
    text = verdicts_markdown(tmp_path, "full")
    assert "| ch98 | 1 | 0 | 1 | 0 | 1 |" in text
    assert "2 figure-level rules: 1 hold, 0 against the paper, 1 depend on a choice" in text
    assert "*Fig. Z*: **depends on the learning rate** (a: against; b: holds)" in text


def test_a_rules_math_is_typeset_in_its_table(tmp_path):
    claims = Claims("ch99", "quick", tmp_path)
    judge(claims, rule(statistic=r"per run, $|\ln(t_{0.05} / t_{0.02})|$ (steps)", threshold="0 at sigma = 0.01"),
          [40.0, 41.0, 39.0, 40.0, 40.0], 30.0, seeds=SEEDS)
    html = claims.table()._repr_html_()
    assert r'<span class="math notranslate nohighlight">\(|\ln(t_{0.05} / t_{0.02})|\)</span> (steps)' in html
    assert "0 at σ = 0.01" in html and "$" not in html.split("how it is judged")[1]


def test_two_kinds_of_inconclusive():
    r = rule(margin=5.0, margin_reason="half the band")
    low = [20.0, 21.0, 19.0, 20.0, 20.0]
    high = [40.0, 41.0, 39.0, 40.0, 40.0]
    noisy = [10.0, 50.0, 30.0, 60.0, 5.0]                   # mean 31: margin 1 inside 2 SE = 21.5
    dep = judge(None, r, {"a": low, "b": high}, 30.0, seeds=SEEDS, option="the metric")
    assert (dep.outcome, dep.kind, dep.depends_on) == ("inconclusive", "depends on X", "the metric")
    assert dep.kind_text() == "depends on the metric"
    few = judge(None, r, {"a": high, "b": noisy}, 30.0, seeds=SEEDS, option="the metric")
    assert (few.outcome, few.kind, few.depends_on) == ("inconclusive", "too few runs", "")
    sd = np.std(noisy, ddof=1)
    assert few.runs_needed == math.floor((2 * sd / 5.0) ** 2) + 1      # z sd / sqrt(n) < the stated margin
    assert few.options[1].runs_needed == few.runs_needed
    assert f"{int(few.runs_needed)} per option would resolve" in few.describe()
    data = few.to_json()
    assert data["kind"] == "too few runs" and data["runs_needed"] == few.runs_needed
    assert data["rule"]["margin"] == 5.0 and data["rule"]["margin_reason"] == "half the band"
    assert judge(None, r, high, 30.0, seeds=SEEDS).kind == "holds"


def test_an_option_whose_every_run_diverged_is_named_not_combined():
    r = rule()
    high = [40.0, 41.0, 39.0, 40.0, 40.0]
    v = judge(None, r, {"a": high, "b": [np.nan] * 5}, 30.0, seeds=SEEDS, diverged={"a": None, "b": [True] * 5},
              option="the loss")
    assert v.outcome == "holds" and v.options[1].reason == "not judged: every run diverged"
    assert "not judged" in v.describe()
    none = judge(None, r, [np.nan] * 5, 30.0, seeds=SEEDS)
    assert none.kind == "too few runs"


def test_runs_needed_plans_from_exploration_runs():
    from nqfbook.kit import runs_needed

    explore = np.array([1.0, 3.0, 2.0, 4.0, 0.0])           # sd 1.58
    n = runs_needed(explore, 1.0, z=2.0)
    assert n == math.floor((2 * np.std(explore, ddof=1)) ** 2) + 1
    assert 2 * np.std(explore, ddof=1) / math.sqrt(n) < 1.0 <= 2 * np.std(explore, ddof=1) / math.sqrt(n - 1)
    assert runs_needed(0.0, 1.0) == 2                        # no spread: two runs still give a standard error
    assert runs_needed(explore, 1.0, resolution=1.0) == math.inf
    assert runs_needed(1.0, 2.0, z=2.0, resolution=1.0) == 5  # 2 / sqrt(n) < 1 from n = 5
    with pytest.raises(ValueError, match="margin"):
        runs_needed(explore, -1.0)
    with pytest.raises(ValueError, match="values"):
        runs_needed([1.0], 1.0)


def test_seed_mean_reading_reads_the_mean_curve_with_a_jackknife_error():
    from nqfbook.kit import SeedMean, seed_mean_reading

    t = np.arange(100.0)
    # each run crosses 0.5 at its own step; the mean curve crosses where the average ramp does
    ramps = np.array([np.clip((t - s) / 20, 0, 1) for s in (10.0, 20.0, 30.0, 40.0)])

    def first(curve):
        return float(t[np.argmax(curve >= 0.5)])

    m = seed_mean_reading(ramps, first, seeds=(100, 101, 102, 103))
    assert isinstance(m, SeedMean) and m.n == 4 and m.value == first(ramps.mean(0))
    loo = np.array([first(np.delete(ramps, i, 0).mean(0)) for i in range(4)])
    assert m.se == pytest.approx(np.sqrt(3 / 4 * np.sum((loo - loo.mean()) ** 2)))
    gone = seed_mean_reading(ramps, first, seeds=(100, 101, 102, 103), diverged=[False, True, False, False])
    assert gone.n == 3 and gone.diverged == (101,) and gone.value == first(ramps[[0, 2, 3]].mean(0))
    coarse = seed_mean_reading(ramps, lambda c: float(np.argmax(c >= 0.5)), grid=10)
    assert coarse.value == float(np.argmax(ramps.mean(0)[::10] >= 0.5))
    two = seed_mean_reading((ramps, 2 * ramps), lambda a, b: float(np.max(b - a)))
    assert two.value == pytest.approx(1.0)
    v = judge(None, rule(), {"per run": [first(r) for r in ramps], "seed mean": m}, 10.0, seeds=(100, 101, 102, 103),
              option="the reading")
    assert v.options[1].reading == "seed mean" and v.options[1].n == 4 and v.options[1].se == m.se
    assert "seed-mean curve" in v.describe()
    with pytest.raises(ValueError, match="diverged"):
        seed_mean_reading(ramps, first, diverged=[True])


def test_runs_needed_for_a_margin_smaller_than_the_stated_one():
    # the runs resolve the stated margin (uncertainty 1.41 < 5) but the mean lies 1 from the threshold: the runs that
    # would resolve the measured margin are reported, and said to be for the measured margin
    r = rule(margin=5.0, margin_reason="x")
    v = judge(None, r, 31 + np.array([-2.0, -1.0, 0.0, 1.0, 2.0]), 30.0, seeds=SEEDS)
    (o,) = v.options
    assert v.kind == "too few runs" and o.need_basis == "measured"
    assert o.runs_needed == math.floor((2 * np.std([-2, -1, 0, 1, 2], ddof=1) / 1.0) ** 2) + 1
    assert "the measured margin (smaller than the stated" in o.describe("above")


def test_the_verdict_says_which_margin_its_runs_would_resolve():
    # one option resolves the stated margin but not its own, smaller, measured margin (below the resolution: never)
    r = rule(margin=5.0, margin_reason="x")
    v = judge(None, r, {"a": [40.0, 41.0, 39.0, 40.0, 40.0], "b": [30.5, 30.4, 30.6, 30.5, 30.5]}, 30.0, seeds=SEEDS,
              resolution=1.0, option="the metric")
    assert v.kind == "too few runs" and v.need_basis == "measured" and v.runs_needed == math.inf
    assert "the measured margin, smaller than the stated one" in v.kind_text()
    assert v.to_json()["need_basis"] == "measured"
