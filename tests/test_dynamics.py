"""Exact discrete update (Thm 2), gradient flow (Eq. 28) and training of W."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import optax
import pytest


import nqf
from nqf.training import BatchLoss, Record
from nqf import NQFData
from nqf.datasets._solvable import orthogonal_features_dataset
from helpers import BAD_INPUT, general_nqf_data


def _flow(M0, data, ts):
    """M(t) of nqf.gradient_flow(M0, data, ts) (Eq. 28)."""
    return nqf.gradient_flow(M0, data, ts).ys


def test_discrete_update_equals_training_W_for_two_W_with_equal_order_parameters():
    As, Bs, gs, f0, ys = general_nqf_data(m=7)
    data = NQFData(As, ys, gs=gs, Bs=Bs, f0=f0)
    m, p = data.m, data.p
    d, eta, steps, b = 6, 0.02, 40, 3
    Wa = 0.3 * jnp.asarray(np.random.default_rng(2).normal(size=(p, d)))
    Wb = nqf.updates.same_statistics(Wa, seed=1)
    assert float(jnp.max(jnp.abs(Wa - Wb))) > 0.05  # genuinely different weights
    batches = jnp.asarray(np.random.default_rng(3).integers(0, m, size=(steps, b)))

    def loss(W, idx):
        return nqf.model.mse_loss(W @ W.T, data.subset(idx), mu=W.sum(axis=1))

    record = lambda W: (W @ W.T, W.sum(axis=1))
    ha, hb = (nqf.train(BatchLoss(loss), W, optax.sgd(eta), num_steps=steps,
                        data=nqf.training.Minibatches(jnp.arange(m), batches), record=Record(record)).record for W in (Wa, Wb))
    run = nqf.updates.nqf_sgd((Wa @ Wa.T, Wa.sum(axis=1)), data, batches, eta=eta, d=d)
    Ms, mus = run.M, run.mu
    scale = float(jnp.max(jnp.abs(Ms)))
    for h in (ha, hb):
        assert float(jnp.max(jnp.abs(h[0] - Ms))) < 1e-12 * scale * steps
        assert float(jnp.max(jnp.abs(h[1] - mus))) < 1e-12 * steps
    assert float(jnp.max(jnp.abs(Ms[-1] - Ms[0]))) > 1e-3


def test_eta_squared_terms_are_needed():
    As, Bs, gs, f0, ys = general_nqf_data(seed=4, m=7)
    batch = NQFData(As, ys, gs=gs, Bs=Bs, f0=f0).subset(jnp.arange(3))
    p, d, eta = batch.p, 5, 0.05
    W = 0.5 * jnp.asarray(np.random.default_rng(5).normal(size=(p, d)))
    M, mu = W @ W.T, W.sum(axis=1)

    def loss(W):
        return nqf.model.mse_loss(W @ W.T, batch, mu=W.sum(axis=1))

    W1 = W - eta * jax.grad(loss)(W)
    M1, mu1, *_ = (x[-1] for x in nqf.updates.nqf_sgd((M, mu), batch, jnp.arange(batch.m)[None], eta=eta, d=d))
    err = float(jnp.max(jnp.abs(M1 - W1 @ W1.T)))
    assert err < 1e-13
    assert float(jnp.max(jnp.abs(mu1 - W1.sum(axis=1)))) < 1e-13
    # first-order-only update misses by O(eta^2)
    H = 2 * jnp.einsum("b,bij->ij", 2 * nqf.model.residuals(M, batch, mu=mu) / 3, batch.As)
    assert float(jnp.max(jnp.abs(M1 - (M - eta * (H @ M + M @ H))))) > 1e3 * err


def test_model_functions_take_nqf_data():
    As, Bs, gs, f0, ys = general_nqf_data(seed=6)
    general = NQFData(As, ys, gs=gs, Bs=Bs, f0=f0)
    zgz = NQFData(As, ys)
    W = 0.5 * jnp.asarray(np.random.default_rng(7).normal(size=(4, 3)))
    M, mu = W @ W.T, W.sum(axis=1)
    want = f0 + gs @ mu + jnp.einsum("i,mij,j->m", mu, Bs, mu) + jnp.einsum("ij,mji->m", M, As)
    np.testing.assert_allclose(nqf.model.outputs(M, general, mu=mu), want, atol=1e-13)
    np.testing.assert_allclose(nqf.updates.weight_outputs(W, general), want, atol=1e-13)
    np.testing.assert_allclose(nqf.model.residuals(M, general, mu=mu), want - ys, atol=1e-13)
    delta = jnp.einsum("ij,mji->m", M, As) - ys
    np.testing.assert_allclose(nqf.model.h_matrix(M, zgz), 4 * jnp.einsum("m,mij->ij", delta, As) / 6, atol=1e-13)
    # Eq. (28) is the gradient flow of the loss: dM/dt = -HM - MH with dW/dt = -(1/2)... checked by autodiff
    H = nqf.model.h_matrix(M, zgz)
    gW = jax.grad(lambda W: nqf.model.mse_loss(W @ W.T, zgz))(W)
    np.testing.assert_allclose(gW, H @ W, atol=1e-12)  # dL/dW = H W (Eq. 27)
    with pytest.raises(ValueError, match="mu"):
        nqf.model.outputs(M, general)
    with pytest.raises(ValueError, match="ZGZ"):
        nqf.model.h_matrix(M, general)
    with pytest.raises(TypeError, match="NQFData"):
        nqf.model.mse_loss(M, As)


def test_flow_matches_logistic_solution_and_switch_on_time():
    r = jnp.array([1.0, 0.5, 0.25, 0.125, 0.0625])
    As, ys = orthogonal_features_dataset(r, C_kk=1.0, seed=0)
    data = NQFData(As, ys)
    lv = nqf.solutions.lv_coefficients(data)
    np.testing.assert_allclose(np.sort(np.asarray(lv.r)), np.sort(np.asarray(r)), rtol=1e-12)
    C = np.asarray(lv.C)
    assert np.max(np.abs(C - np.diag(np.diag(C)))) < 1e-12
    eps = 1e-5
    M0 = eps * jnp.eye(5)
    ts = nqf.flow.log_times(400.0, 120, t_min=1e-2)
    Ms = _flow(M0, data, ts)
    z_flow = jax.vmap(nqf.solutions.features, in_axes=(0, None))(Ms, lv.P)
    z0 = nqf.solutions.features(M0, lv.P)
    z_exact = nqf.solutions.logistic_solution(ts[:, None], lv.r, jnp.diag(lv.C), z0)
    rel = float(jnp.max(jnp.abs(z_flow - z_exact) / z_exact))
    assert rel < 1e-8
    # switch-on: at t*, z_k is half its final value r_k / C_kk
    tstar = nqf.solutions.switch_on_time(lv.r, jnp.diag(lv.C), z0)
    Ms_star = _flow(M0, data, jnp.concatenate([jnp.zeros(1), jnp.sort(jnp.asarray(tstar))]))
    order = np.argsort(np.asarray(tstar))
    z_star = jax.vmap(nqf.solutions.features, in_axes=(0, None))(Ms_star[1:], lv.P)
    half = np.asarray(lv.r / jnp.diag(lv.C) / 2)
    got = np.array([z_star[i, k] for i, k in enumerate(order)])
    np.testing.assert_allclose(got, half[order], rtol=1e-8)


def test_lv_flow_in_log_space_matches_logistic_at_tiny_init():
    r = jnp.array([1.0, 0.3])
    C = jnp.diag(jnp.array([2.0, 0.5]))
    z0 = jnp.array([1e-200, 1e-120])
    ts = jnp.array([0.0, 100.0, 460.0, 920.0, 2000.0])
    z = nqf.solutions.lv_flow(r, C, z0, ts).ys
    exact = nqf.solutions.logistic_solution(ts[:, None], r, jnp.diag(C), z0)
    assert float(jnp.max(jnp.abs(z - exact) / exact)) < 1e-8


def test_saxe_learning_time_and_factor_two():
    # Saxe et al. 2014: tau du/dt = 2u(s-u); time to u = s/2 from u0 = 1e-6 with s = 3.
    t_saxe = nqf.solutions.saxe_learning_time(3.0, 1e-6, 1.5)
    assert abs(t_saxe - 2.485687) < 5e-7
    # The same deep linear mode as an NQF: W = [a; b], A = 1/2 [[0, 1], [1, 0]], y = s.
    # The paper's loss (no 1/2) gives z' = z(4s - 2z) with z = 2u: the same curve at half the time.
    s, u0 = 3.0, 1e-6
    As = jnp.array([[[0.0, 0.5], [0.5, 0.0]]])
    ys = jnp.array([s])
    data = NQFData(As, ys)
    lv = nqf.solutions.lv_coefficients(data)
    a0 = np.sqrt(u0)
    M0 = jnp.array([[a0 * a0, a0 * a0], [a0 * a0, a0 * a0]])
    z0 = nqf.solutions.features(M0, lv.P)
    k = int(jnp.argmax(lv.r))
    t_nqf = nqf.solutions.switch_on_time(lv.r[k], lv.C[k, k], z0[k])
    assert abs(t_nqf - t_saxe / 2) < 1e-9
    Ms = _flow(M0, data, jnp.array([0.0, t_nqf]))
    u = float(Ms[-1, 0, 1])  # u = a b
    assert abs(u - s / 2) < 1e-8


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(As=np.ones((3, 2, 3))), "As"),
        (dict(As=np.array([[[0.0, 1.0], [0.0, 0.0]]] * 3)), "symmetric"),
        (dict(M0=-np.eye(2)), "positive semi-definite"),
        (dict(M0=np.eye(3)), "M"),
        (dict(ys=np.array([1.0, np.nan, 0.0])), "ys"),
        (dict(ys=np.ones(4)), "ys"),
    ],
)
def test_bad_input_is_named(kwargs, match):
    args = dict(As=np.stack([np.eye(2)] * 3), ys=np.ones(3), M0=1e-3 * np.eye(2))
    args.update(kwargs)
    with pytest.raises(BAD_INPUT, match=match):
        _flow(args["M0"], NQFData(args["As"], args["ys"]), jnp.array([0.0, 1.0]))


def test_non_commuting_data_rejected():
    As = jnp.array([[[1.0, 0.0], [0.0, -1.0]], [[0.0, 1.0], [1.0, 0.0]]])
    with pytest.raises(ValueError, match="Assumption 1"):
        nqf.solutions.lv_coefficients(NQFData(As, jnp.ones(2)))


def test_switch_on_time_rejects_mode_above_half():
    with pytest.raises(ValueError, match="r/\\(C_kk z0\\)"):
        nqf.solutions.switch_on_time(1.0, 1.0, 0.6)
