"""notebooks/ch07_fig5.py: the Fig. 5 verdict's recipe (thresholds from theory, runs per reading, options for judge)."""

import sys
from pathlib import Path

import numpy as np
import pytest

from nqf import datasets
from nqfbook.kit import Rule, judge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
import ch07_fig5 as F5  # noqa: E402
from ch07_runs import fourier_nqf_gd  # noqa: E402

READ = {R.name: R for R in F5.READINGS}


def test_the_nominal_init_is_the_geometric_mean_of_chi2_1():
    x = np.random.default_rng(0).chisquare(1, 2_000_000)
    assert F5.CHI2_GEOMEAN == pytest.approx(np.exp(np.mean(np.log(x))), rel=3e-3)


def test_readings_change_one_printed_setting_each():
    printed = READ["as printed"]
    assert (printed.learning_rate, printed.num_steps, printed.std, printed.normalise) == (0.02, 30_000, 1e-4, True)
    assert READ["summed loss"].learning_rate == pytest.approx(0.02 * 256)
    assert READ["8x steps"].num_steps == 240_000 and READ["8x steps"].times[-1] == pytest.approx(8 * 600)
    assert READ["eps as z(0) scale"].std == pytest.approx(1e-2)
    assert not READ["no P^-1/2"].normalise
    for R in F5.READINGS:
        assert R.times[-1] == pytest.approx(R.learning_rate * R.num_steps)


def test_bound_counts_the_switch_ons_of_the_printed_settings_and_flags_unstable_gd():
    # PAPER.md: as printed, 6 / 3 / 2 modes switch on by t = 600 for theta = 0 / 1/2 / 1
    assert [F5.bound(READ["as printed"], th).n for th in (0.0, 0.5, 1.0)] == [6, 3, 2]
    b = F5.bound(READ["as printed"], 1.0)
    assert np.isnan(b.threshold)  # fewer than 3 switch-ons: no window
    b = F5.bound(READ["no P^-1/2"], 0.5)
    assert b.eq298 == pytest.approx(1.0) and b.stable
    assert b.threshold == pytest.approx(abs(b.pred - b.eq298) + b.sharp)
    # summed loss: eta = 256 * 0.02 on the first mode's Hessian 4 c_1 b_1 = 4 / 8 at its solution: 2.56 > 2
    s = F5.bound(READ["summed loss"], 0.0)
    assert s.stability == pytest.approx(2.56) and not s.stable


def test_slopes_runs_every_seed_and_theta_as_its_own_run():
    R, thetas, seeds = READ["no P^-1/2"], [0.5, 1.0], [11, 12]
    bounds = [F5.bound(R, th) for th in thetas]
    out = F5.slopes(R, thetas, seeds, bounds)
    assert out.slopes.shape == (2, 2) and out.loss.shape == (2, 2, R.times.size)
    assert np.all(np.isfinite(out.slopes))
    i, j = 1, 0
    d = datasets.fourier_dataset(F5.P, F5.M, beta=F5.BETA, theta=thetas[j], normalise=R.normalise)
    L = fourier_nqf_gd(F5.init(seeds[i], R.std)[None], d.b[None], F5.couplings(R, thetas[j])[None], products=False,
                       learning_rate=R.learning_rate, num_steps=R.num_steps, record_every=R.record_every)
    np.testing.assert_allclose(out.loss[i, j], np.asarray(L)[0], rtol=1e-12)


def test_options_leave_out_readings_without_a_window_and_set_unstable_runs_aside():
    thetas = [1.0]
    bounds = {(R.name, th): F5.bound(R, th) for R in F5.READINGS for th in thetas}
    fake = {R.name: F5.Slopes(np.full((3, 1), 0.8), None, None) for R in F5.READINGS}
    values, thr, div, left = F5.options(fake, bounds, 1.0, 0)
    assert left == ["as printed"] and "as printed" not in values
    assert div["summed loss"].all() and not div["no P^-1/2"].any()
    np.testing.assert_allclose(values["no P^-1/2"], 0.0, atol=1e-12)  # |0.8 - Eq. (298)| at theta = 1


def test_reading_outcomes():
    rule = Rule("r", statistic="s", paper_side="below", threshold="t", fixed_at="50af022")
    v = judge(None, rule, {"as printed": 0.0, "no P^-1/2": 0.0, "summed loss": np.nan, "8x steps": 1.0,
                           "eps as z(0) scale": 0.99},
              {"as printed": 0.5, "no P^-1/2": 0.5, "summed loss": 0.5, "8x steps": 0.5, "eps as z(0) scale": 1.0},
              se=0.01, option="reading")
    w = judge(None, Rule("w", statistic="s", paper_side="below", threshold="t", fixed_at="50af022"),
              {"no P^-1/2": 0.0, "summed loss": np.nan, "8x steps": 0.0, "eps as z(0) scale": 0.0},
              0.5, se=0.01, option="reading")
    out = F5.reading_outcomes({0.0: v, 1.0: w}, [0.0, 1.0], {0.0: [], 1.0: ["as printed"]})
    assert out == {"as printed": "against", "no P^-1/2": "holds", "summed loss": "not judged", "8x steps": "against",
                   "eps as z(0) scale": "partly"}
    table = F5.verdict_rows({0.0: v, 1.0: w}, [0.0, 1.0], {0.0: [], 1.0: ["as printed"]})._repr_markdown_()
    assert "left out" in table and "not judged" in table
    assert table.splitlines()[0] == "| reading | $\\theta = 0$ | $\\theta = 1$ |" and len(table.splitlines()) == 2 + len(F5.READINGS)


def test_bounds_table_has_a_row_per_reading():
    thetas = [0.0, 1.0]
    bounds = {(R.name, th): F5.bound(R, th) for R in F5.READINGS for th in thetas}
    md = F5.bounds_table(bounds, thetas)._repr_markdown_().splitlines()
    assert len(md) == 2 + len(F5.READINGS) and md[0].count("$\\theta =") == 2
    assert md[2].startswith("| as printed | ")


def test_labels_typeset_every_reading_with_ascii_math():
    assert set(F5.LABELS) <= {R.name for R in F5.READINGS}
    assert F5.label("no P^-1/2") == "no $P^{-1/2}$" and F5.label("as printed") == "as printed"
