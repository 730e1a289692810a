"""Closed forms of Sec. 5 (Prop. 7, Thms 4-7, Thm 16, Cor. 4, Eq. 288) against the numerical flow."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import pytest

import nqf
from nqf import datasets
from nqf import flow
from nqf import solutions
from nqf.datasets import random_orthogonal
from helpers import BAD_INPUT

TOL = 1e-8  # closed form vs Tsit5 at rtol 1e-10 (relative trajectory error)


def _ts(t_max, n=40):
    return np.concatenate([[0.0], np.geomspace(1e-2, t_max, n - 1)])


def _flow(As, ys, M0, ts):
    """Reference numerical flow (rtol 1e-10), :func:`nqf.gradient_flow` on the data ``(As, ys)``."""
    return nqf.gradient_flow(np.asarray(M0), nqf.NQFData(As, ys), ts).ys


def _dense_M0(p, scale, seed):
    W = scale * np.random.default_rng(seed).normal(size=(p, p))
    return W @ W.T


# ----------------------------------------------------------------------------- implicit quadrature
@pytest.mark.parametrize(
    "a, b, c",
    [
        ([1e-6, 2e-6, -1e-6], [2.0, 4.0, -1.0], 1.0),  # xi decreases to a root (learning from a tiny start)
        ([0.5, -0.8], [1.0, -2.0], -0.3),  # xi increases (output above target)
        ([1e-12, 3e-12], [0.5, 1.5], 2.0),  # very small start: root far away
    ],
)
def test_implicit_xi_matches_runge_kutta(a, b, c):
    a, b = np.array(a), np.array(b)
    t = _ts(60.0, 50)
    xi, rate = solutions.implicit_xi(t, a, b, np.array(c))
    g = lambda s: jnp.sum(a * jnp.exp(-b * s)) - c
    ref = nqf.flow.solve_ode(lambda t, x, args: g(x), jnp.asarray(0.0), t, options=flow.ODEOptions(rtol=1e-12, atol=1e-14)).ys
    scale = max(1.0, float(np.max(np.abs(ref))))
    np.testing.assert_allclose(xi, ref, atol=1e-9 * scale, rtol=0)
    np.testing.assert_allclose(rate, jax.vmap(g)(ref), atol=1e-9 * (abs(c) + np.abs(a).sum()), rtol=0)
    # t(xi) inverts xi(t)
    back = solutions._implicit.implicit_time(np.asarray(xi)[1:30], np.tile(a, (29, 1)), np.tile(b, (29, 1)), np.full(29, c))
    np.testing.assert_allclose(back, t[1:30], rtol=1e-9, atol=1e-12)


def test_fixed_point_and_degenerate_cases():
    # g(s) = e^{-s} - 1/2 has its root at ln 2
    assert float(solutions._implicit.fixed_point(np.array([1.0]), np.array([1.0]), np.array(0.5))) == pytest.approx(np.log(2), rel=1e-14)
    # no root in the direction of motion: g(s) = -1 - e^{-s}... (a*b >= 0 with a = 0 here): nan
    assert np.isnan(float(solutions._implicit.fixed_point(np.array([0.0]), np.array([1.0]), np.array(1.0))))
    # already at the fixed point: xi stays 0
    xi, rate = solutions.implicit_xi(np.array([0.0, 1.0]), np.array([0.5]), np.array([1.0]), np.array(0.5))
    np.testing.assert_array_equal(xi, [0.0, 0.0])
    np.testing.assert_array_equal(rate, [0.0, 0.0])


def test_implicit_bad_inputs():
    with pytest.raises(BAD_INPUT, match="a\\*b|a_j \\* b_j"):
        solutions.implicit_xi(np.array([0.0, 1.0]), np.array([1.0]), np.array([-1.0]), np.array(1.0))
    with pytest.raises(BAD_INPUT):
        solutions.implicit_xi(np.array([0.0, 1.0]), np.array([1.0, 2.0]), np.array([1.0]), np.array(1.0))
    with pytest.raises(BAD_INPUT, match="t"):
        solutions.implicit_xi(np.array([-1.0, 1.0]), np.array([1.0]), np.array([1.0]), np.array(1.0))


# ----------------------------------------------------------------------------- Prop. 7, Thms 4-6
def test_prop7_slaved_offdiagonals_rebuild_the_flow():
    rng = np.random.default_rng(0)
    d = datasets.commuting_dataset(rng.normal(size=(6, 4)), rng.normal(size=6), seed=1)
    M0 = _dense_M0(4, 0.1, 2)
    ts = _ts(20.0)
    Ms = _flow(d.As, d.ys, M0, ts)
    r, C = solutions.growth_and_competition(d.lambdas, d.ys)
    z = nqf.solutions.lv_flow(r, C, np.diag(np.asarray(d.P).T @ M0 @ np.asarray(d.P)), ts).ys
    assert flow.trajectory_error(solutions.slaved_M(d.P, M0, z), Ms) < TOL


def test_thm4_proportional_samples_matches_flow():
    rng = np.random.default_rng(1)
    lam, cs, ys = np.array([1.0, 0.6, 0.3, -0.4]), rng.uniform(0.5, 1.5, 6), rng.uniform(0.5, 1.5, 6)
    d = datasets.proportional_dataset(lam, cs, ys, seed=2)
    np.testing.assert_allclose(np.asarray(d.As), cs[:, None, None] * np.asarray(d.As)[0] / cs[0], atol=1e-14)
    M0 = _dense_M0(4, 0.01, 3)
    ts = _ts(40.0)
    Ms = _flow(d.As, d.ys, M0, ts)
    assert flow.trajectory_error(solutions.proportional_M(ts, d.P, lam, cs, ys, M0), Ms) < TOL
    sol = solutions.proportional_solution(ts, lam, cs, ys, np.diag(np.asarray(d.P).T @ M0 @ np.asarray(d.P)))
    assert sol.alpha == pytest.approx(4 / 6 * np.sum(cs**2))
    assert sol.beta == pytest.approx(4 / 6 * np.sum(cs * ys))


def test_thm5_orthogonal_samples_matches_flow_and_rejects_overlap():
    blocks = np.array([[1.0, 0.5, -0.5], [0.8, -0.6, 0.3], [-1.0, 0.7, 0.4]])
    ys = np.array([1.0, 0.4, -0.6])
    d = datasets.orthogonal_samples_dataset(blocks, ys, seed=4)
    A = np.asarray(d.As)
    assert max(np.abs(A[i] @ A[j]).max() for i in range(3) for j in range(3) if i != j) < 1e-14
    M0 = _dense_M0(9, 0.05, 5)
    ts = _ts(50.0)
    Ms = _flow(d.As, d.ys, M0, ts)
    assert flow.trajectory_error(solutions.orthogonal_samples_M(ts, d.P, d.lambdas, ys, M0), Ms) < TOL
    lam = np.asarray(d.lambdas).copy()
    lam[0, 3] = 0.1  # sample 0 now touches sample 1's block
    with pytest.raises(ValueError, match="orthogonal samples"):
        solutions.orthogonal_samples_solution(ts, lam, ys, np.ones(9))


def test_thm6_orthogonal_features_matches_flow():
    r = np.array([1.0, 0.5, 0.25, 0.125, 0.0625])
    d = datasets.orthogonal_features_data(r, 1.0, seed=0, rotate_seed=3)
    rr, C = solutions.growth_and_competition(d.lambdas, d.ys)
    np.testing.assert_allclose(rr, r, atol=1e-13)
    np.testing.assert_allclose(C, np.eye(5), atol=1e-13)
    M0 = _dense_M0(5, 0.01, 6)
    ts = _ts(200.0)
    Ms = _flow(d.As, d.ys, M0, ts)
    assert flow.trajectory_error(solutions.orthogonal_features_M(ts, d.P, rr, np.diag(C), M0), Ms) < TOL


def test_batched_flow_with_one_dataset_per_lane_equals_single_runs():
    rng = np.random.default_rng(2)
    d = datasets.commuting_dataset(rng.normal(size=(5, 3)), rng.normal(size=5), seed=0)
    broken = datasets.broken_datasets("commuting", d.data, np.array([0.0, 0.1]), seed=1)
    M0 = _dense_M0(3, 0.1, 1)
    ts = _ts(10.0, 20)
    Mb = nqf.gradient_flow(np.tile(M0, (2, 1, 1)), broken, ts, options=flow.ODEOptions(solver="tsit5")).ys
    Ms = nqf.gradient_flow(jnp.asarray(M0), broken[1], ts, options=flow.ODEOptions(solver="tsit5")).ys
    np.testing.assert_allclose(Mb[1], Ms, rtol=1e-12, atol=1e-15)
    # the default (Dopri8 at rtol 1e-10) agrees to its tolerance: diffrax's Dopri8 under vmap is not bitwise
    Md = nqf.gradient_flow(np.tile(M0, (2, 1, 1)), broken, ts).ys
    assert flow.trajectory_error(Md[1], Ms) < 1e-8


def test_breaking_directions_break_what_they_say():
    rng = np.random.default_rng(3)
    d = datasets.orthogonal_samples_dataset(rng.uniform(0.5, 1.5, (3, 2)), np.ones(3), seed=2)
    for kind in ("proportional", "orthogonal_samples", "orthogonal_features"):
        E = datasets.breaking_direction(kind, d.As, P=d.P, lambdas=d.lambdas, seed=0)
        np.testing.assert_allclose(np.linalg.norm(E, axis=(1, 2)), np.mean(np.linalg.norm(np.asarray(d.As), axis=(1, 2))))
        nqf.solutions._lotka_volterra.commuting_eigenbasis(np.asarray(d.As) + 0.1 * E, seed=0)  # Assumption 1 survives
    E = datasets.breaking_direction("orthogonal_samples", d.As, P=d.P, lambdas=d.lambdas, seed=0)
    A = np.asarray(d.As) + 0.1 * E
    assert np.abs(A[0] @ A[1]).max() > 1e-3
    with pytest.raises(ValueError, match="share an eigenbasis"):
        nqf.solutions._lotka_volterra.commuting_eigenbasis(np.asarray(d.As) + 0.1 * datasets.breaking_direction("commuting", d.As, seed=0), seed=0)
    with pytest.raises(ValueError, match="kind"):
        datasets.breaking_direction("nonsense", d.As, seed=0)
    with pytest.raises(ValueError, match="lambdas"):
        datasets.breaking_direction("orthogonal_samples", d.As, seed=0)
    with pytest.raises(ValueError, match="n_out"):
        datasets.breaking_direction("feedforward", d.As, seed=0)


def test_broken_datasets_and_data_views():
    rng = np.random.default_rng(4)
    d = datasets.commuting_dataset(rng.normal(size=(5, 3)), rng.normal(size=5), seed=0)
    assert isinstance(d.data, nqf.NQFData) and d.data.m == 5
    np.testing.assert_array_equal(d.data.ys, d.ys)
    etas = np.array([0.0, 1e-2, 1e-1])
    broken = datasets.broken_datasets("commuting", d.data, etas, seed=1)
    E = datasets.breaking_direction("commuting", d.As, seed=1)
    assert len(broken) == 3 and all(isinstance(b, nqf.NQFData) for b in broken)
    np.testing.assert_array_equal(broken[0].As, np.asarray(d.As))
    np.testing.assert_allclose(broken[2].As, np.asarray(d.As) + 0.1 * E, atol=1e-15)
    np.testing.assert_array_equal(broken[2].ys, d.ys)
    with pytest.raises(BAD_INPUT, match="etas"):
        datasets.broken_datasets("commuting", d.data, np.ones((2, 2)), seed=0)
    with pytest.raises(TypeError, match="data"):
        datasets.broken_datasets("commuting", d.As, etas, seed=0)


def test_solvable_bad_inputs():
    with pytest.raises(BAD_INPUT):
        datasets.commuting_dataset(np.ones((3, 2)), np.ones(4))
    with pytest.raises(ValueError, match="orthogonal"):
        datasets.commuting_dataset(np.ones((3, 2)), np.ones(3), P=np.ones((2, 2)))
    with pytest.raises(BAD_INPUT):
        flow.trajectory_error(np.zeros((3, 2, 2)), np.zeros((4, 2, 2)))
    with pytest.raises(BAD_INPUT):
        nqf.gradient_flow(np.zeros((1, 2, 2)), [nqf.NQFData(np.zeros((3, 2, 2)), np.zeros(3))] * 2,
                          np.array([0.0, 1.0]))


# ----------------------------------------------------------------------------- Thm 7, Thm 16, Cor. 4
@pytest.fixture(scope="module")
def iso():
    Q = random_orthogonal(4, seed=9)
    return Q, datasets.isotropic_dataset(Q @ np.diag([1.0, 0.5, -0.25, 0.125]) @ Q.T, 0.25, seed=2)


def test_isotropic_dataset_satisfies_assumption2(iso):
    Q, data = iso
    assert solutions.isotropy_residual(data.As, 0.25) < 1e-13
    A = np.asarray(data.As)
    assert np.abs(A[0] @ A[1] - A[1] @ A[0]).max() > 1e-2  # not commuting


@pytest.mark.parametrize("rank", [4, 2])
def test_thm7_riccati_matches_flow(iso, rank):
    Q, data = iso
    W0 = 0.05 * np.random.default_rng(rank).normal(size=(4, rank))
    M0 = W0 @ W0.T
    ts = _ts(20.0)
    Ms = _flow(data.As, data.ys, M0, ts)
    assert flow.trajectory_error(solutions.riccati_solution(ts, data.Y, M0, 0.25), Ms) < TOL


def test_thm7_eigenvalues_and_thm16_projectors(iso):
    Q, data = iso
    z0 = np.full(4, 1e-3)
    ts = _ts(20.0)
    Ms = _flow(data.As, data.ys, Q @ np.diag(z0) @ Q.T, ts)
    z = solutions.riccati_eigenvalues(ts, np.array([1.0, 0.5, -0.25, 0.125]), 0.25, z0)
    np.testing.assert_allclose(np.einsum("ik,tij,jk->tk", Q, np.asarray(Ms), Q), z, rtol=1e-8, atol=1e-13)
    Pi = np.einsum("ia,ja->aij", Q, Q)
    pc = solutions.projector_coefficients(data.data, Pi)
    assert max(pc.residual_253, pc.residual_254) < 1e-13
    np.testing.assert_allclose(pc.gammas, [1.0, 0.5, -0.25, 0.125], atol=1e-13)
    np.testing.assert_allclose(pc.kappas, 1.0, atol=1e-13)  # 4c
    broken = solutions.projector_coefficients(datasets.broken_datasets("commuting", data.data, np.array([0.1]), seed=0)[0], Pi)
    assert broken.residual_254 > 1e-3


def test_cor4_linear_network_and_saxe_time():
    lin = datasets.linear_network_dataset(np.array([3.0, 1.5, 0.5]), n_in=4, n_out=3, seed=0)
    pc = solutions.projector_coefficients(lin.data, lin.projectors)
    assert max(pc.residual_253, pc.residual_254) < 1e-13
    np.testing.assert_allclose(pc.gammas, 2 * np.asarray(lin.s), atol=1e-13)  # gamma = 2 tau
    rho0 = np.full(3, 1e-3)
    ts = np.linspace(0.0, 6.0, 601)
    Ms = _flow(lin.As, lin.ys, datasets.balanced_init(lin, rho0), ts)
    rho = np.asarray(datasets.mode_strengths(Ms, lin))
    np.testing.assert_allclose(rho, solutions.linear_network_modes(ts, lin.s, 1.0, rho0), atol=1e-9)
    assert flow.trajectory_error(solutions.projector_M(ts, lin.projectors, pc.gammas, pc.kappas, 2 * rho0), Ms) < TOL
    # Saxe et al.'s clock runs at half speed: their solution at 2t is the NQF mode at t
    for a, s in enumerate(np.asarray(lin.s)):
        np.testing.assert_allclose(solutions.saxe_mode_strength(2 * ts, s, 1e-3), rho[:, a], atol=1e-9)
        t_half = solutions.saxe_learning_time(s, 1e-3, s / 2) / 2  # in the NQF clock of Eq. (288)
        with np.errstate(divide="ignore", invalid="ignore"):
            logit = np.log(rho[1:, a] / (s - rho[1:, a]))  # increasing while rho < s
        ok = np.isfinite(logit)
        assert np.interp(0.0, logit[ok], ts[1:][ok]) == pytest.approx(t_half, rel=1e-7)


def test_riccati_bad_inputs():
    with pytest.raises(ValueError, match="symmetric"):
        datasets.isotropic_dataset(np.array([[1.0, 2.0], [0.0, 1.0]]), 0.25, seed=0)
    with pytest.raises(ValueError, match="c"):
        solutions.riccati_solution(np.array([0.0, 1.0]), np.eye(2), np.eye(2), -1.0)
    with pytest.raises(ValueError, match="min"):
        datasets.linear_network_dataset(np.ones(4), n_in=3, n_out=5, seed=0)
    with pytest.raises(ValueError, match="Pi_a Pi_b"):
        solutions.projector_coefficients(nqf.NQFData(np.eye(2)[None], np.ones(1)), np.ones((1, 2, 2)))
    lin = datasets.linear_network_dataset(np.array([1.0]), n_in=2, n_out=2, seed=0)
    with pytest.raises(BAD_INPUT):
        datasets.balanced_init(lin, np.ones(2))
