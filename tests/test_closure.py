"""Closure on (M, mu) beyond plain SGD: momentum, weight decay (Cor. 2), weights from statistics."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf.dynamics import momentum_state, nqf_momentum, nqf_momentum_step, same_statistics, statistics, step_prediction_error, weight_outputs, weights_from_statistics
from helpers import BAD_INPUT, general_nqf_data


def test_weights_from_statistics_reproduce_M_and_mu():
    rng = np.random.default_rng(0)
    W = jnp.asarray(rng.normal(size=(5, 9)))
    M, mu = statistics(W)
    for seed in (None, 1, 2):
        W2 = weights_from_statistics(M, mu, 9, seed=seed)
        assert W2.shape == (5, 9)
        np.testing.assert_allclose(W2 @ W2.T, M, atol=1e-12)
        np.testing.assert_allclose(W2.sum(axis=1), mu, atol=1e-12)
    assert float(jnp.max(jnp.abs(weights_from_statistics(M, mu, 9, seed=1) - weights_from_statistics(M, mu, 9, seed=2)))) > 1e-2
    # a low-rank M needs only rank + 1 neurons (App. A.11, Eqs. 104-105)
    W3 = jnp.asarray(rng.normal(size=(5, 3)))
    M3, mu3 = statistics(W3)
    W4 = weights_from_statistics(M3, mu3, 3)
    np.testing.assert_allclose(W4 @ W4.T, M3, atol=1e-12)


def test_same_statistics_changes_neurons_not_statistics():
    W = jnp.asarray(np.random.default_rng(1).normal(size=(4, 7)))
    W2 = same_statistics(W, seed=3)
    assert float(jnp.max(jnp.abs(W - W2))) > 0.1
    np.testing.assert_allclose(W2 @ W2.T, W @ W.T, atol=1e-12)
    np.testing.assert_allclose(W2.sum(axis=1), W.sum(axis=1), atol=1e-12)


@pytest.mark.parametrize("beta, wd", [(0.0, 0.0), (0.9, 0.0), (0.0, 0.1), (0.8, 0.05)])
def test_momentum_and_weight_decay_close_on_joint_moments(beta, wd):
    As, Bs, gs, f0, ys = general_nqf_data()
    m, p = ys.shape[0], As.shape[1]
    d, eta, steps = 6, 0.004, 25
    Wa = 0.4 * jnp.asarray(np.random.default_rng(2).normal(size=(p, d)))
    Wb = same_statistics(Wa, seed=4)
    batches = jnp.asarray(np.random.default_rng(3).integers(0, m, size=(steps, 3)))

    def loss(Ws, idx):
        out = lambda W: weight_outputs(W, As[idx], gs=gs[idx], Bs=Bs[idx], f0=f0[idx])  # noqa: E731
        return jnp.mean((out(Ws[0]) - ys[idx]) ** 2) + jnp.mean((out(Ws[1]) - ys[idx]) ** 2)

    opt = optax.chain(optax.add_decayed_weights(wd), optax.sgd(eta, momentum=beta or None))
    _, hist = nqf.train_weights(loss, (Wa, Wb), opt, steps, batches=batches,
                                record=lambda Ws: (statistics(Ws[0]), statistics(Ws[1])))
    closed = nqf_momentum(Wa @ Wa.T, Wa.sum(axis=1), As, ys, batches, eta=eta, d=d, beta=beta,
                          weight_decay=wd, gs=gs, Bs=Bs, f0=f0)
    assert closed.M.shape == (steps + 1, p, p) and closed.nu.shape == (steps + 1, p)
    for M_run, mu_run in hist["record"]:
        assert float(jnp.max(jnp.abs(M_run - closed.M))) < 1e-12
        assert float(jnp.max(jnp.abs(mu_run - closed.mu))) < 1e-12
    assert float(jnp.max(jnp.abs(closed.M[-1] - closed.M[0]))) > 1e-3  # it did move
    if beta == 0.0 and wd == 0.0:  # Theorem 2 itself
        Ms, mus = nqf.nqf_sgd(Wa @ Wa.T, Wa.sum(axis=1), As, ys, batches, eta=eta, d=d, gs=gs, Bs=Bs, f0=f0)
        assert float(jnp.max(jnp.abs(Ms - closed.M))) < 1e-12


def test_single_momentum_step_tracks_the_buffer():
    As, Bs, gs, f0, ys = general_nqf_data(seed=5)
    p, d = As.shape[1], 5
    W = 0.5 * jnp.asarray(np.random.default_rng(6).normal(size=(p, d)))
    V = jnp.zeros_like(W)
    state = momentum_state(*statistics(W))
    idx = jnp.arange(3)
    loss = lambda W: jnp.mean((weight_outputs(W, As[idx], gs=gs[idx], Bs=Bs[idx], f0=f0[idx]) - ys[idx]) ** 2)  # noqa: E731
    eta, beta, wd = 0.01, 0.7, 0.2
    for _ in range(3):
        V = beta * V + jax.grad(loss)(W) + wd * W
        W = W - eta * V
        state = nqf_momentum_step(state, As[idx], ys[idx], eta=eta, d=d, beta=beta, weight_decay=wd,
                                  gs=gs[idx], Bs=Bs[idx], f0=f0[idx])
    for got, want in zip(state, (W @ W.T, W.sum(axis=1), W @ V.T, V @ V.T, V.sum(axis=1))):
        np.testing.assert_allclose(got, want, atol=1e-13)


def test_adam_breaks_the_closure():
    As, Bs, gs, f0, ys = general_nqf_data(seed=7)
    p, d, steps = As.shape[1], 6, 30
    Wa = 0.4 * jnp.asarray(np.random.default_rng(8).normal(size=(p, d)))
    Wb = same_statistics(Wa, seed=9)

    def loss(Ws, _):
        out = lambda W: weight_outputs(W, As, gs=gs, Bs=Bs, f0=f0)  # noqa: E731
        return jnp.mean((out(Ws[0]) - ys) ** 2) + jnp.mean((out(Ws[1]) - ys) ** 2)

    _, hist = nqf.train_weights(loss, (Wa, Wb), optax.adam(0.01), steps,
                                record=lambda Ws: (Ws[0] @ Ws[0].T, Ws[1] @ Ws[1].T))
    Ma, Mb = hist["record"]
    assert float(jnp.max(jnp.abs(Ma[0] - Mb[0]))) < 1e-12
    assert float(jnp.max(jnp.abs(Ma[-1] - Mb[-1]))) > 1e-3


def test_step_prediction_error_needs_eta_squared_terms():
    As, Bs, gs, f0, ys = general_nqf_data(seed=10)
    m, p, d, eta, steps = ys.shape[0], As.shape[1], 5, 0.02, 12
    W = 0.5 * jnp.asarray(np.random.default_rng(11).normal(size=(p, d)))
    batches = jnp.asarray(np.random.default_rng(12).integers(0, m, size=(steps, 2)))
    loss = lambda W, idx: jnp.mean((weight_outputs(W, As[idx], gs=gs[idx], Bs=Bs[idx], f0=f0[idx]) - ys[idx]) ** 2)  # noqa: E731
    _, hist = nqf.train_weights(loss, W, optax.sgd(eta), steps, batches=batches, record=statistics)
    Ms, mus = hist["record"]
    err, first = step_prediction_error(Ms, mus, As, ys, batches, eta=eta, d=d, gs=gs, Bs=Bs, f0=f0)
    assert err.shape == first.shape == (steps,)
    assert float(err.max()) < 1e-12
    assert float(first.min()) > 1e3 * float(err.max())


def _momentum_args(**over):
    As, Bs, gs, f0, ys = general_nqf_data()
    p = As.shape[1]
    args = dict(M0=np.eye(p), mu0=np.ones(p), As=np.asarray(As), ys=np.asarray(ys),
                batches=np.zeros((2, 2), dtype=int), eta=0.01, d=4, beta=0.9, weight_decay=0.0,
                gs=np.asarray(gs))
    args.update(over)
    return args


@pytest.mark.parametrize(
    "over, match",
    [
        (dict(beta=1.0), "beta"),
        (dict(beta=-0.1), "beta"),
        (dict(weight_decay=-1.0), "weight_decay"),
        (dict(eta=0.0), "eta"),
        (dict(d=0), "d"),
        (dict(batches=np.full((2, 2), 99)), "batches"),
        (dict(batches=np.zeros(3, dtype=int)), "batches"),
        (dict(gs=np.ones((6, 3))), "gs"),
        (dict(mu0=np.ones(3)), "mu0"),
        (dict(M0=-np.eye(4)), "positive semi-definite"),
        (dict(As=np.ones((6, 4, 3))), "As"),
    ],
)
def test_nqf_momentum_rejects_bad_input(over, match):
    a = _momentum_args(**over)
    with pytest.raises(BAD_INPUT, match=match):
        nqf_momentum(a["M0"], a["mu0"], a["As"], a["ys"], a["batches"], eta=a["eta"], d=a["d"],
                     beta=a["beta"], weight_decay=a["weight_decay"], gs=a["gs"])


@pytest.mark.parametrize(
    "M, mu, d, match",
    [
        (np.zeros((3, 3)), np.ones(3), 4, "PSD"),  # M - mu mu^T / d < 0
        (np.eye(3), np.zeros(3), 3, "d"),  # rank 3 needs 4 neurons
        (np.eye(3), np.zeros(2), 4, "mu"),
        (np.eye(3), np.zeros(3), 0, "d"),
        (np.ones((3, 2)), np.zeros(3), 4, "M"),
    ],
)
def test_weights_from_statistics_rejects_bad_input(M, mu, d, match):
    with pytest.raises(BAD_INPUT, match=match):
        weights_from_statistics(M, mu, d)


def test_same_statistics_and_prediction_reject_bad_input():
    with pytest.raises(BAD_INPUT, match="W"):
        same_statistics(np.ones((3, 2)))
    with pytest.raises(BAD_INPUT, match="W"):
        same_statistics(np.ones(3))
    As, Bs, gs, f0, ys = general_nqf_data()
    Ms, mus = np.stack([np.eye(4)] * 3), np.zeros((3, 4))
    with pytest.raises(BAD_INPUT, match="batches"):
        step_prediction_error(Ms, mus, As, ys, np.zeros((5, 2), dtype=int), eta=0.1, d=3)
    with pytest.raises(BAD_INPUT, match="mus"):
        step_prediction_error(Ms, np.zeros((2, 4)), As, ys, np.zeros((2, 2), dtype=int), eta=0.1, d=3)
