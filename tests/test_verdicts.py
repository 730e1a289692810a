"""The one decision function of the book's verdicts (nqfbook.kit.judge, BOOK.md rule 10)."""

from __future__ import annotations

import json

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
    assert [v["outcome"] for v in data["verdicts"]] == ["holds", "against"]
    assert data["verdicts"][1]["rule"]["changes"][0]["commit"] == "bec655c"
    text = str(summary)
    assert "1 rule holds, 1 against, 0 inconclusive" in text and "all" not in text.split(";")[0]
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
    assert "| ch98 | 1 | 0 | 1 | 1 |" in text
    assert "2 figure-level rules: 1 hold, 0 against the paper, 1 inconclusive" in text
    assert "*Fig. Z*: **inconclusive** (depends on the learning rate)" in text


def test_a_rules_math_is_typeset_in_its_table(tmp_path):
    claims = Claims("ch99", "quick", tmp_path)
    judge(claims, rule(statistic=r"per run, $|\ln(t_{0.05} / t_{0.02})|$ (steps)", threshold="0 at sigma = 0.01"),
          [40.0, 41.0, 39.0, 40.0, 40.0], 30.0, seeds=SEEDS)
    html = claims.table()._repr_html_()
    assert r'<span class="math notranslate nohighlight">\(|\ln(t_{0.05} / t_{0.02})|\)</span> (steps)' in html
    assert "0 at σ = 0.01" in html and "$" not in html.split("how it is judged")[1]
