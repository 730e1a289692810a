"""Scaling laws (chapter 7): exponents and their conditions, the closed-form excess loss, the
sample-wise solver, the power-law fit, the spectra and the Fourier MLP."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nqf
from nqf import architectures, datasets, solutions, training
from nqfbook import kit
from helpers import BAD_INPUT


# ------------------------------------------------------------------ exponents
def test_exponent_values():
    assert solutions.feature_exponent(2.0, 0.8) == pytest.approx(1.25)
    assert solutions.feature_exponent(2.0, 0.8, beta=1.2) == pytest.approx(1.25)
    assert solutions.sample_exponent(1.0, 0.5) == pytest.approx(2.0)
    assert solutions.feature_exponent(2 * 1.5, 1.0 + 1.5) == pytest.approx(0.8)  # Eq. (298)
    assert solutions.feature_exponent(2 * 1.5, 0.0 + 1.5) == pytest.approx(4 / 3)
    assert solutions.feature_exponent(1.0 + 1.0, 1.0 + 1.0) == pytest.approx(0.5)  # Nam et al.'s alpha/(alpha+1)


@pytest.mark.parametrize("call, word", [
    (lambda: solutions.feature_exponent(1.0, 0.8), "alpha1"),
    (lambda: solutions.feature_exponent(2.0, 0.0), "alpha2"),
    (lambda: solutions.feature_exponent(2.0, 0.8, beta=1.0), "beta"),
    (lambda: solutions.sample_exponent(0.5, 1.0), "gamma1"),
    (lambda: solutions.sample_exponent(1.0, -1.0), "gamma2"),
    (lambda: solutions.effective_exponent(2.0, 0.8, 1.0), "292"),
    (lambda: solutions.effective_exponent(2.0, 0.8, -1.0), "log_ratio"),
])
def test_exponents_refuse_outside_conditions(call, word):
    with pytest.raises(ValueError, match=word):
        call()


def test_exponent_type_error():
    with pytest.raises(TypeError, match="alpha1"):
        solutions.feature_exponent("two", 0.8)


def test_effective_exponent_limits():
    # Eq. (292) tends to (alpha1 - 1)/alpha2 as ln(zeta/(C eps)) grows, from above when alpha2 < alpha1
    big = solutions.effective_exponent(2.0, 0.8, 1e8)
    assert big == pytest.approx(1.25, rel=1e-6)
    assert solutions.effective_exponent(2.0, 0.8, 10.0) > solutions.effective_exponent(2.0, 0.8, 20.0) > 1.25
    # equal alphas: no correction at any eps
    assert solutions.effective_exponent(1.5, 1.5, 3.0) == pytest.approx(1 / 3)
    # the window version with a constant log ratio is exactly the limit
    assert solutions.effective_exponent_window(2.0, 0.8, np.geomspace(10, 100, 20), 7.0) == pytest.approx(1.25)


def test_effective_exponent_window_matches_local_formula():
    # for a slowly varying log ratio the window slope equals Eq. (292) at the window centre
    k = np.geomspace(90, 110, 21)
    L = np.log(8e12 * k ** -1.2)
    assert solutions.effective_exponent_window(2.0, 0.8, k, L) == pytest.approx(
        solutions.effective_exponent(2.0, 0.8, np.log(8e12 * 100 ** -1.2)), rel=1e-3)


# ------------------------------------------------------------------ closed-form excess loss
def test_logistic_excess_loss_matches_direct_sum():
    sp = datasets.fig3_right_spectrum(50)
    t = np.array([0.0, 10.0, 100.0, 300.0])
    z = np.asarray(nqf.solutions.logistic_solution(t[:, None], sp.r[None], sp.C[None], sp.z0[None]))
    direct = np.asarray(solutions.feature_excess_loss(z, sp.V, sp.r / sp.C))
    E = np.asarray(solutions.logistic_excess_loss(t, sp.r, sp.C, sp.z0))
    np.testing.assert_allclose(E, direct, rtol=1e-10)
    assert E[0] == pytest.approx(sp.V.sum() * (1 - sp.z0[0] * sp.C[0] / sp.r[0]) ** 2, rel=1e-3)


def test_logistic_excess_loss_tiny_eps_and_checks():
    sp = datasets.fig3_right_spectrum(20, eps=1e-200, beta=0.0)
    E = np.asarray(solutions.logistic_excess_loss(np.array([0.0, 1e4]), sp.r, sp.C, sp.z0))
    assert E[0] == pytest.approx(sp.V.sum())
    assert np.all(np.isfinite(E))
    with pytest.raises(BAD_INPUT, match="C_kk"):
        solutions.logistic_excess_loss(np.array([0.0]), sp.r, sp.C[:3], sp.z0)
    with pytest.raises(ValueError, match="saturation"):
        solutions.logistic_excess_loss(np.array([0.0]), sp.r, sp.C, sp.r / sp.C)


def test_lv_flow_matches_closed_form_on_subset():
    sp = datasets.fig3_right_spectrum(1000)
    modes = np.array([1, 7, 40, 200])
    t = np.concatenate([[0.0], np.geomspace(1.0, 3000.0, 40)])
    z = np.asarray(nqf.solutions.lv_flow(sp.r[modes - 1], np.diag(sp.C[modes - 1]), sp.z0[modes - 1], t).ys)
    zc = np.asarray(nqf.solutions.logistic_solution(t[:, None], sp.r[modes - 1][None], sp.C[modes - 1][None], sp.z0[modes - 1][None]))
    np.testing.assert_allclose(z, zc, rtol=1e-6, atol=1e-12)


# ------------------------------------------------------------------ spectra
def test_fig3_right_spectrum_and_one_hot_dataset():
    sp = datasets.fig3_right_spectrum(1000)
    np.testing.assert_allclose(sp.r, sp.k ** -0.8)
    np.testing.assert_allclose(sp.V, sp.k ** -2.0)
    np.testing.assert_allclose(sp.log_ratio, np.log(8e6))  # the same for every k (erratum 5)
    d = datasets.one_hot_dataset(sp, [1, 10, 100])
    lv = nqf.solutions.lv_coefficients(d.data)
    order = np.argsort(-np.asarray(lv.r))
    np.testing.assert_allclose(np.sort(np.asarray(lv.r))[::-1], sp.r[[0, 9, 99]], rtol=1e-12)
    np.testing.assert_allclose(np.diag(np.asarray(lv.C))[order], sp.C[[0, 9, 99]], rtol=1e-12)
    with pytest.raises(ValueError, match="modes"):
        datasets.one_hot_dataset(sp, [0, 1])
    with pytest.raises(ValueError, match="half its final value"):
        datasets._spectra.power_law_spectrum(10, 2.0, 0.8, eps=1.0)


def test_nam_spectrum():
    sp = datasets.nam_emergence_spectrum(1.0, 100, eps=1e-8)
    np.testing.assert_allclose(sp.r, sp.C)
    np.testing.assert_allclose(sp.V.sum(), 1.0)
    np.testing.assert_allclose(np.diff(np.log(sp.r)) / np.diff(np.log(sp.k)), -2.0, rtol=1e-12)
    with pytest.raises(ValueError, match="alpha"):
        datasets.nam_emergence_spectrum(-1.0, 10, eps=1e-8)


# ------------------------------------------------------------------ sample-wise
def test_sample_wise_loss_against_quadrature_of_eq36():
    sp = datasets.sample_power_law(6, 1.0, 1.0, eps=1e-8)
    ys, lamf = (lambda d: (d.ys, d.lambdas))(datasets.orthogonal_samples_dataset(sp.lambdas, sp.ys))
    np.testing.assert_allclose(np.asarray(solutions.sample_growth_rates(lamf, ys)), sp.zeta, rtol=1e-12)
    for rho in (0.1, 0.5, 0.9):
        tq = np.asarray(solutions.sample_switch_on_times(lamf, ys, np.full(lamf.shape[1], 1e-8), rho=rho))
        fr = np.asarray(solutions.sample_wise_loss(tq, sp.lambdas, sp.ys, sp.z0))
        np.testing.assert_allclose(np.diag(fr), -(1 - rho), atol=1e-7)


def test_sample_wise_loss_checks():
    sp = datasets.sample_power_law(4, 1.0, 1.0, eps=1e-8)
    with pytest.raises(BAD_INPUT, match="ys"):
        solutions.sample_wise_loss(np.array([1.0]), sp.lambdas, sp.ys[:2], sp.z0)
    with pytest.raises(ValueError, match="y_mu > 0"):
        solutions.sample_wise_loss(np.array([1.0]), sp.lambdas, -sp.ys, sp.z0)


# ------------------------------------------------------------------ power-law fit
def test_one_line_fit_gives_polyfit_bit_for_bit():
    """The one least-squares line (``nqf._fit``): the numbers the callers' own ``np.polyfit`` lines gave,
    bit for bit, with each caller's points kept; and no other ``polyfit`` in the package."""
    from pathlib import Path

    from nqf._fit import fit_line, loglog_slope

    rng = np.random.default_rng(0)
    scales = np.logspace(-3, -1, 10)
    rem = scales ** 3 * (1 + 0.1 * rng.standard_normal(10))
    floor = np.full(10, 2e-9)  # the three smallest scales at round-off: left out
    keep = rem > floor
    assert 2 <= keep.sum() < 10
    assert loglog_slope(scales, rem, keep=keep) == float(np.polyfit(np.log(scales[keep]), np.log(rem[keep]), 1)[0])
    assert np.isnan(loglog_slope(scales, rem, keep=rem > 1.0))  # fewer than two kept
    x, y = rng.standard_normal(7), rng.standard_normal(7)
    assert fit_line(x, y) == tuple(float(v) for v in np.polyfit(x, y, 1))
    mixed = np.array([-1.0, 0.0, 2.0, 3.0, 5.0])  # default keep: the positive points only
    vals = np.array([1.0, 2.0, 0.0, 4.0, 7.0])
    ok = (mixed > 0) & (vals > 0)
    assert loglog_slope(mixed, vals) == float(np.polyfit(np.log(mixed[ok]), np.log(vals[ok]), 1)[0])
    assert np.isnan(loglog_slope([1.0, 2.0], [1.0, -1.0]))
    assert kit.loglog_slope is loglog_slope
    assert kit.intercept_fit(x, y) == tuple(float(v) for v in np.polyfit(x, y, 1)[::-1])
    root = Path(nqf.__file__).parent
    assert [p.relative_to(root).as_posix() for p in root.rglob("*.py") if "polyfit" in p.read_text()] == ["_fit.py"]


def test_power_law_fit_exact_and_window_checks():
    t = np.geomspace(1, 1e4, 300)
    f = kit.power_law_fit(t, 3 * t ** -1.7, 10.0, 1000.0)
    assert f.exponent == pytest.approx(1.7, rel=1e-10)
    assert f.rms < 1e-10
    with pytest.raises(ValueError, match="window"):
        kit.power_law_fit(t, t ** -1.0, 0.5, 10.0)
    with pytest.raises(ValueError, match="t_lo < t_hi"):
        kit.power_law_fit(t, t ** -1.0, 10.0, 5.0)
    tstar = np.geomspace(1, 1e4, 100)
    assert kit.switch_on_window(tstar, 1, 100) == (1.0, pytest.approx(1e4))
    with pytest.raises(ValueError, match="k_lo"):
        kit.switch_on_window(tstar, 0, 10)
    s = kit.window_sensitivity(t, t ** -1.7, tstar, 10, 40)
    assert s.lo == pytest.approx(1.7) and s.hi == pytest.approx(1.7)
    assert len(s.exponents) == 8  # (20, 20) is not a window


# ------------------------------------------------------------------ the Fourier MLP
def test_fourier_structure_is_the_hessian_of_the_module():
    arch = architectures._fourier.FourierMLP(5, 0.5)
    x = 0.137
    A = np.asarray(arch.structure(x))
    H = np.asarray(jax.hessian(lambda w: arch.apply(w[:, None], x))(jnp.zeros(10)))
    np.testing.assert_allclose(A, 0.5 * H, atol=1e-14)
    W = 1e-3 * np.arange(1, 11, dtype=float)[:, None]
    assert float(arch.apply_nqf(W, x)) == pytest.approx(float(np.sum(W[:, 0] @ A @ W[:, 0])), rel=1e-12)
    with pytest.raises(ValueError, match="W"):
        arch.apply(np.zeros((3, 1)), x)


def test_fourier_dataset_coefficients_eq297():
    for normalise in (True, False):
        d = datasets.fourier_dataset(16, 64, beta=1.5, theta=1.0, normalise=normalise)
        c = np.arange(1, 17) ** -1.0 / (4.0 if normalise else 1.0)
        np.testing.assert_allclose(d.r, 4 * c * d.b, rtol=1e-10)
        np.testing.assert_allclose(d.C, 2 * c**2, rtol=1e-10)
    with pytest.raises(ValueError, match="M > 2P"):
        datasets.fourier_dataset(16, 32)


def test_sharp_switch_tolerance():
    # width term: 0.25 (ln 81 / L)^2 * exponent, plus the floor
    L = np.log(81.0) * 10
    assert kit.sharp_switch_tolerance(L, 2.0, floor=0.0) == pytest.approx(0.25 * 0.01 * 2.0)
    # discreteness term of the window (Euler-Maclaurin), vanishing for a very wide window far out
    t = kit.sharp_switch_tolerance(1e12, 1.0, k_lo=10, k_hi=250, floor=0.0)
    assert t == pytest.approx((0.1 - 0.004) / (4 * np.log(25.0)), rel=1e-6)
    with pytest.raises(ValueError, match="k_lo"):
        kit.sharp_switch_tolerance(10.0, 1.0, k_lo=10)
    with pytest.raises(ValueError, match="log_ratio_min"):
        kit.sharp_switch_tolerance(0.0, 1.0)
