"""Switch-on times, the singular-limit sweep, Fig. 4's Eq. (36) and GD on W (Sec. 6)."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import pytest

import nqf
from nqf import datasets
from nqf import training
from nqfbook import kit
from nqf import solutions
from helpers import BAD_INPUT

R3 = np.array([1.0, 0.5, 0.25, 0.125, 0.0625])


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9])
def test_switch_on_time_is_where_the_logistic_reaches_rho(rho):
    z0 = np.array([1e-5, 1e-12, 3e-3, 1e-30, 1e-9])
    t1 = solutions.switch_on_time(R3, 1.0, z0, a=1.0, rho=rho)
    np.testing.assert_allclose(nqf.solutions.logistic_solution(t1, R3, 1.0, z0), rho * R3, rtol=1e-10)
    gam, c = np.array([1.0, 0.5, 0.25, 0.125, 0.0625]), 0.25
    t2 = solutions.switch_on_time(gam, 4 * c, z0, a=2.0, rho=rho)
    z = np.array([solutions.riccati_eigenvalues(np.array([t]), gam[k:k + 1], c, z0[k:k + 1])[0, 0] for k, t in enumerate(t2)])
    np.testing.assert_allclose(z, rho * gam / (4 * c), rtol=1e-10)


def test_switch_on_time_equals_eq158():
    eps, c_k, C = 1e-7, np.array([1.0, 2.0, 0.5, 1.0, 3.0]), np.full(5, 1.3)
    for a in (1.0, 2.0):
        eq158 = (np.log(1 / eps) - np.log(C * c_k / (R3 - C * c_k * eps))) / (a * R3)
        np.testing.assert_allclose(solutions.switch_on_time(R3, C, c_k * eps, a=a), eq158, rtol=1e-13)


def test_step_limits():
    tau = np.array([0.5, 1.5, 3.0, 20.0])
    np.testing.assert_allclose(solutions.feature_step_loss(tau, np.ones(3), np.array([1.0, 0.5, 0.25]), a=1.0), [3, 2, 1, 0])
    np.testing.assert_allclose(solutions.feature_step_loss(tau, np.ones(3), np.array([1.0, 0.5, 0.25]), a=2.0), [2, 1, 0, 0])
    np.testing.assert_allclose(solutions.sample_step_loss(tau, np.array([2.0, 1.0]), np.array([1.0, 0.5])), [2.5, 0.5, 0.0, 0.0])


def test_crossing_time_intercept_fit_and_step_deviation():
    t = np.linspace(0, 10, 11)
    x = np.stack([2 * t, t - 20], axis=1)
    np.testing.assert_allclose(kit.crossing_time(t, x, 5.0), [2.5, np.inf])  # never: inf (first_crossing)
    np.testing.assert_allclose(kit.crossing_time(t, x, -5.0), [0.0, np.inf])  # reached at t[0]: t[0]
    assert kit.intercept_fit(np.array([0.1, 0.2, 0.3]), np.array([1.1, 1.2, 1.3])) == pytest.approx((1.0, 1.0))
    dev = kit.step_deviation(np.linspace(0, 2, 201), np.zeros((2, 201)), np.ones(201), np.array([1.0]), 0.5)
    np.testing.assert_allclose(dev, [1.0, 1.0])
    with pytest.raises(ValueError, match="margin"):
        kit.step_deviation(np.linspace(0, 2, 3), np.zeros(3), np.zeros(3), np.array([1.0]), 5.0)
    with pytest.raises(ValueError, match="two finite"):
        kit.intercept_fit(np.array([1.0]), np.array([1.0]))


def test_fig4_rk_quadrature_and_exact_switch_on_times():
    d = datasets.fig4_dataset()
    assert np.asarray(d.As).shape == (4, 12, 12)
    np.testing.assert_allclose(solutions.sample_growth_rates(d.lambdas, d.ys), [4.0, 2.0, 1.0, 0.5])
    z0 = np.full(12, 1e-5)
    t = np.linspace(0.0, 40.0, 201)
    xi_rk, res_rk, _ = solutions.sample_xi_flow(t, d.lambdas, d.ys, z0)
    sol = solutions.orthogonal_samples_solution(t, d.lambdas, d.ys, z0)
    np.testing.assert_allclose(res_rk, sol.residuals, atol=1e-9)
    np.testing.assert_allclose(xi_rk, sol.xi, atol=1e-9)
    # exact switch-on times (one batched call per level, rows = initial scales): the Runge-Kutta
    # residual there is -(1 - rho) y
    z0s = np.array([1e-5, 1e-4, 1e-8, 1e-16])[:, None] * np.ones(12)
    rhos = np.array([0.2, 0.5])
    exact = np.stack([np.asarray(solutions.sample_switch_on_times(d.lambdas, d.ys, z0s, rho=r)) for r in rhos])  # (2, 4, m)
    ts = exact[:, 0]  # eps = 1e-5
    order = np.argsort(ts.ravel())
    _, r, _ = solutions.sample_xi_flow(np.concatenate([[0.0], ts.ravel()[order]]), d.lambdas, d.ys, z0)
    at = np.empty((8, 4))
    at[order] = np.asarray(r)[1:]
    got = at.reshape(2, 4, 4)[:, np.arange(4), np.arange(4)]  # residual of sample mu at its own t*
    np.testing.assert_allclose(got, -(1 - rhos)[:, None] * np.asarray(d.ys)[None], rtol=1e-8)
    # the logistic estimate (no sub-dominant directions) becomes exact as eps -> 0
    err = np.abs(np.asarray(solutions.sample_switch_on_times(d.lambdas, d.ys, z0s[1:], logistic=True)) / exact[1, 1:] - 1)
    assert np.all(np.diff(err, axis=0) < 0)


def test_singular_limit_sweep_matches_closed_forms():
    d3 = datasets.orthogonal_features_data(R3, 1.0, seed=0)
    eps = np.array([1e-3, 1e-10, 1e-30])
    taus = np.linspace(0.0, 1.2 / R3.min(), 120)
    padded = solutions.SweepOptions(pad_to=(5, 12))  # padding is exact
    sw = solutions.singular_limit_sweep(nqf.NQFData(d3.As, d3.ys), eps, taus, z_final=R3, options=padded)
    pred = solutions.switch_on_time(R3[None], 1.0, eps[:, None], rho=0.5) / np.log(1 / eps)[:, None]
    np.testing.assert_allclose(sw.tau_star[:, 1], pred, rtol=1e-7)
    t = taus[None, :] * np.log(1 / eps)[:, None]
    z = nqf.solutions.logistic_solution(t[..., None], R3, 1.0, eps[:, None, None])
    np.testing.assert_allclose(sw.loss, solutions.feature_excess_loss(z, R3**2 / 8, R3), rtol=1e-7, atol=1e-14)
    np.testing.assert_allclose(sw.log_z, np.log(z), rtol=0, atol=1e-8)
    # sample-wise crossings on the Fig. 4 data (same padded shape: no recompilation)
    d4 = datasets.fig4_dataset()
    zeta = np.asarray(solutions.sample_growth_rates(d4.lambdas, d4.ys))
    sw4 = solutions.singular_limit_sweep(nqf.NQFData(d4.As, d4.ys), eps, np.linspace(0.0, 1.2 / zeta.min(), 120),
                                         options=padded)
    exact = np.asarray(solutions.sample_switch_on_times(d4.lambdas, d4.ys, eps[:, None] * np.ones(12)))
    np.testing.assert_allclose(sw4.tau_star_samples[:, 1] * np.log(1 / eps)[:, None], exact, rtol=1e-7)
    # the ends of THE first-crossing rule: z_5(0) = 1e-2 is above 10 % of z_5(inf) = 0.0625 (reached at taus[0] = 0),
    # and by tau = 2 the modes with 1/r_k > 2 never reach 90 % (inf), as nqf.training.first_crossing reads them
    short = solutions.singular_limit_sweep(nqf.NQFData(d3.As, d3.ys), np.array([1e-2]), np.linspace(0.0, 2.0, 120),
                                           z_final=R3, options=padded)
    assert float(short.tau_star[0, 0, 4]) == 0.0 and np.all(np.isinf(short.tau_star[0, 2, 2:]))
    assert np.all(np.isfinite(short.tau_star[0, :, 0])) and np.all(short.tau_star[0, :, 0] > 0)


def test_gaussian_init_scale():
    W = datasets.gaussian_init(5, 4000, 1e-3, seed=0)
    np.testing.assert_allclose(np.diag(W @ W.T), 4000 * 1e-6, rtol=0.1)


def test_sudden_bad_inputs():
    d = datasets.fig4_dataset()
    with pytest.raises(ValueError, match="rho"):
        solutions.sample_switch_on_times(d.lambdas, d.ys, np.ones(12), rho=1.5)
    with pytest.raises(BAD_INPUT, match="z0"):
        solutions.sample_switch_on_times(d.lambdas, d.ys, np.ones(5))
    with pytest.raises(ValueError, match="grow"):
        solutions.switch_on_time(R3, 1.0, np.ones(5))
    with pytest.raises(ValueError, match="eps"):
        solutions.singular_limit_sweep(nqf.NQFData(d.As, d.ys), np.array([1e-3, 2.0]), np.linspace(0, 1, 5))
    with pytest.raises(ValueError, match="taus"):
        solutions.singular_limit_sweep(nqf.NQFData(d.As, d.ys), np.array([1e-3]), np.linspace(0.1, 1, 5))
    with pytest.raises(ValueError, match="pad_to"):
        solutions.singular_limit_sweep(nqf.NQFData(d.As, d.ys), np.array([1e-3]), np.linspace(0, 1, 5),
                                       options=solutions.SweepOptions(pad_to=(2, 2)))
    with pytest.raises(BAD_INPUT):
        solutions.singular_limit_sweep(nqf.NQFData(d.As, d.ys), np.array([1e-3]), np.linspace(0, 1, 5), P=np.eye(3))
    with pytest.raises(ValueError, match="sigma"):
        datasets.gaussian_init(2, 2, 0.0, seed=0)
