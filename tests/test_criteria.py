"""Criteria fixed before the runs (nqf.pipeline._criteria)."""

import math

import numpy as np
import pytest

from nqf.pipeline import (Claims, about_band, interval_tolerance, mean_interval, record_verdict, seed_spread,
                          shift_gap)


def test_interval_tolerance():
    assert interval_tolerance(5, 1) == 5.0
    assert interval_tolerance(2, 3) == 6.0
    with pytest.raises(ValueError):
        interval_tolerance(0, 1)
    with pytest.raises(ValueError):
        interval_tolerance(1, -1)


def test_seed_spread_ignores_never_and_needs_two_seeds():
    v = np.array([[1.0, 10.0], [3.0, np.inf], [5.0, np.inf]])
    out = seed_spread(v, axis=0, k=1.0)
    assert out[0] == pytest.approx(2.0)
    assert math.isnan(out[1])
    with pytest.raises(ValueError):
        seed_spread(np.ones((1, 3)))


def test_mean_interval_matches_t_distribution():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(5, 3))
    m, h = mean_interval(v, axis=0)
    assert np.allclose(m, v.mean(0))
    assert np.allclose(h, 2.776445105 * v.std(0, ddof=1) / np.sqrt(5), rtol=1e-6)


def test_shift_gap_of_a_ramp():
    t = np.arange(11.0)
    curve = np.stack([t / 10, 2 * t / 10], axis=-1)  # (T, r): slopes 0.1 and 0.2 per recorded step
    assert shift_gap(curve, 2) == pytest.approx(0.4)
    assert shift_gap(np.stack([curve, curve / 2]), 1).tolist() == pytest.approx([0.2, 0.1])
    assert shift_gap(curve, 0) == 0.0
    with pytest.raises(ValueError):
        shift_gap(curve, 1.5)


def test_about_band():
    lo, hi = about_band(100)
    assert lo * hi == pytest.approx(1e4) and hi / lo == pytest.approx(10.0)
    with pytest.raises(ValueError):
        about_band(-1)


def test_record_verdict_keeps_the_threshold_and_flips_the_kind(tmp_path):
    c = Claims("chxx", "quick", tmp_path)
    assert record_verdict(c, "a", 1.0, 2.0, paper_side="below")
    assert not record_verdict(c, "b", 3.0, 2.0, paper_side="below")
    assert not record_verdict(c, "c", 1.0, 2.0, paper_side="above")
    kinds = [cl.kind for cl in c.claims]
    assert kinds == ["paper", "finding", "finding"]
    assert not c.failed
    assert "fails under this rule" in c.claims[1].name
    assert not record_verdict(c, "d", 2.0, 2.0, paper_side="below")  # on the threshold: a failing paper claim
    assert c.failed
    with pytest.raises(ValueError):
        record_verdict(c, "e", 1.0, 2.0, paper_side="left")
