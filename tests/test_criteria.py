"""Criteria fixed before the runs (nqfbook.kit._criteria)."""

import numpy as np
import pytest

from nqfbook.kit import about_band, mean_interval


def test_mean_interval_matches_t_distribution():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(5, 3))
    m, h = mean_interval(v, axis=0)
    assert np.allclose(m, v.mean(0))
    assert np.allclose(h, 2.776445105 * v.std(0, ddof=1) / np.sqrt(5), rtol=1e-6)


def test_about_band():
    lo, hi = about_band(100)
    assert lo * hi == pytest.approx(1e4) and hi / lo == pytest.approx(10.0)
    with pytest.raises(ValueError):
        about_band(-1)
