"""Closure on (M, mu) beyond plain SGD: momentum, weight decay (Cor. 2), weights from statistics."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf.training import BatchLoss, Record
from nqf.updates._discrete import SGDState, sgd_state
from nqf.updates import nqf_sgd, same_statistics, statistics, step_prediction_error, weight_outputs, weights_from_statistics
from nqf.model import NQFData
from helpers import BAD_INPUT, general_nqf_data


def _data(seed=0, **kw):
    As, Bs, gs, f0, ys = general_nqf_data(seed=seed, **kw)
    return NQFData(As, ys, gs=gs, Bs=Bs, f0=f0)


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
    data = _data()
    m, p = data.m, data.p
    d, eta, steps = 6, 0.004, 25
    Wa = 0.4 * jnp.asarray(np.random.default_rng(2).normal(size=(p, d)))
    Wb = same_statistics(Wa, seed=4)
    batches = jnp.asarray(np.random.default_rng(3).integers(0, m, size=(steps, 3)))

    def loss(Ws, idx):
        batch = data.subset(idx)
        return jnp.mean((weight_outputs(Ws[0], batch) - batch.ys) ** 2) + jnp.mean((weight_outputs(Ws[1], batch) - batch.ys) ** 2)

    opt = optax.chain(optax.add_decayed_weights(wd), optax.sgd(eta, momentum=beta or None))
    hist = nqf.train(BatchLoss(loss), (Wa, Wb), opt, num_steps=steps,
                     data=nqf.training.Minibatches(jnp.arange(m), batches),
                     record=Record(lambda Ws: (statistics(Ws[0]), statistics(Ws[1]))))
    closed = nqf_sgd(statistics(Wa), data, batches, eta=eta, d=d, momentum=beta, weight_decay=wd)
    assert isinstance(closed, SGDState)
    assert closed.M.shape == (steps + 1, p, p) and closed.nu.shape == (steps + 1, p)
    for M_run, mu_run in hist.record:
        assert float(jnp.max(jnp.abs(M_run - closed.M))) < 1e-12
        assert float(jnp.max(jnp.abs(mu_run - closed.mu))) < 1e-12
    assert float(jnp.max(jnp.abs(closed.M[-1] - closed.M[0]))) > 1e-3  # it did move


def _step(state, batch, **options):
    """One exact step on the whole of ``batch``: nqf_sgd with one row of indices, its last state."""
    return SGDState(*(x[-1] for x in nqf_sgd(state, batch, jnp.arange(batch.m)[None], **options)))


def test_one_update_serves_step_scan_and_state_forms():
    """nqf_sgd over T rows is T one-step runs; (M, mu) and an empty SGDState are the same start."""
    data = _data(seed=13)
    p, d, eta = data.p, 5, 0.01
    W = 0.4 * jnp.asarray(np.random.default_rng(14).normal(size=(p, d)))
    batches = jnp.asarray(np.random.default_rng(15).integers(0, data.m, size=(4, 2)))
    run = nqf_sgd(sgd_state(*statistics(W)), data, batches, eta=eta, d=d, momentum=0.5, weight_decay=0.1)
    state = statistics(W)
    for t, idx in enumerate(batches):
        state = _step(state, data.subset(idx), eta=eta, d=d, momentum=0.5, weight_decay=0.1)
        for got, want in zip(state, run):
            np.testing.assert_allclose(got, want[t + 1], atol=1e-14)


def test_nqf_sgd_compiles_once_per_shape():
    from nqf.updates._discrete import _sgd_scan

    data = _data(seed=16)
    p, d = data.p, 4
    batches = jnp.zeros((3, 2), dtype=int)
    W = 0.3 * jnp.asarray(np.random.default_rng(17).normal(size=(p, d)))
    nqf_sgd(statistics(W), data, batches, eta=0.01, d=d)
    before = _sgd_scan._cache_size()
    other = _data(seed=18)  # new data, same shapes; new learning rate, width and options
    nqf_sgd(statistics(W), other, batches + 1, eta=0.02, d=d + 3, momentum=0.9, weight_decay=0.1)
    assert _sgd_scan._cache_size() == before


def test_single_momentum_step_tracks_the_buffer():
    data = _data(seed=5)
    p, d = data.p, 5
    W = 0.5 * jnp.asarray(np.random.default_rng(6).normal(size=(p, d)))
    V = jnp.zeros_like(W)
    state = sgd_state(*statistics(W))
    batch = data.subset(jnp.arange(3))
    loss = lambda W: jnp.mean((weight_outputs(W, batch) - batch.ys) ** 2)  # noqa: E731
    eta, beta, wd = 0.01, 0.7, 0.2
    for _ in range(3):
        V = beta * V + jax.grad(loss)(W) + wd * W
        W = W - eta * V
        state = _step(state, batch, eta=eta, d=d, momentum=beta, weight_decay=wd)
    for got, want in zip(state, (W @ W.T, W.sum(axis=1), W @ V.T, V @ V.T, V.sum(axis=1))):
        np.testing.assert_allclose(got, want, atol=1e-13)


def test_adam_breaks_the_closure():
    data = _data(seed=7)
    p, d, steps = data.p, 6, 30
    Wa = 0.4 * jnp.asarray(np.random.default_rng(8).normal(size=(p, d)))
    Wb = same_statistics(Wa, seed=9)

    def loss(Ws, _):
        return jnp.mean((weight_outputs(Ws[0], data) - data.ys) ** 2) + jnp.mean((weight_outputs(Ws[1], data) - data.ys) ** 2)

    Ma, Mb = nqf.train(BatchLoss(loss), (Wa, Wb), optax.adam(0.01), num_steps=steps,
                       record=Record(lambda Ws: (Ws[0] @ Ws[0].T, Ws[1] @ Ws[1].T))).record
    assert float(jnp.max(jnp.abs(Ma[0] - Mb[0]))) < 1e-12
    assert float(jnp.max(jnp.abs(Ma[-1] - Mb[-1]))) > 1e-3


def test_step_prediction_error_needs_eta_squared_terms():
    data = _data(seed=10)
    m, p, d, eta, steps = data.m, data.p, 5, 0.02, 12
    W = 0.5 * jnp.asarray(np.random.default_rng(11).normal(size=(p, d)))
    batches = jnp.asarray(np.random.default_rng(12).integers(0, m, size=(steps, 2)))
    loss = lambda W, idx: jnp.mean((weight_outputs(W, data.subset(idx)) - data.ys[idx]) ** 2)  # noqa: E731
    rec = nqf.train(BatchLoss(loss), W, optax.sgd(eta), num_steps=steps,
                    data=nqf.training.Minibatches(jnp.arange(m), batches), record=Record(statistics)).record
    err, first = step_prediction_error(rec, data, batches, eta=eta, d=d)
    assert err.shape == first.shape == (steps,)
    assert float(err.max()) < 1e-12
    assert float(first.min()) > 1e3 * float(err.max())


def _sgd_args(**over):
    As, Bs, gs, f0, ys = general_nqf_data()
    p = As.shape[1]
    args = dict(M0=np.eye(p), mu0=np.ones(p), batches=np.zeros((2, 2), dtype=int), eta=0.01, d=4, momentum=0.9,
                weight_decay=0.0)
    args.update(over)
    return NQFData(As, ys, gs=gs), args


@pytest.mark.parametrize(
    "over, match",
    [
        (dict(momentum=1.0), "momentum"),
        (dict(momentum=-0.1), "momentum"),
        (dict(weight_decay=-1.0), "weight_decay"),
        (dict(eta=0.0), "eta"),
        (dict(d=0), "d"),
        (dict(batches=np.full((2, 2), 99)), "batches"),
        (dict(batches=np.zeros(3, dtype=int)), "batches"),
        (dict(batches=np.zeros((2, 2))), "batches"),
        (dict(mu0=np.ones(3)), "mu"),
        (dict(M0=-np.eye(4)), "positive semi-definite"),
        (dict(M0=np.eye(3)), "M"),
    ],
)
def test_nqf_sgd_rejects_bad_input(over, match):
    data, a = _sgd_args(**over)
    with pytest.raises((*BAD_INPUT, TypeError), match=match):
        nqf_sgd((a["M0"], a["mu0"]), data, a["batches"], eta=a["eta"], d=a["d"],
                momentum=a["momentum"], weight_decay=a["weight_decay"])


def test_state_and_data_types_are_named():
    data, a = _sgd_args()
    with pytest.raises(TypeError, match="state"):
        nqf_sgd(a["M0"], data, a["batches"], eta=0.1, d=4)
    with pytest.raises(TypeError, match="data"):
        nqf_sgd((a["M0"], a["mu0"]), (data.As, data.ys), a["batches"], eta=0.1, d=4)


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
        same_statistics(np.ones((3, 2)), seed=0)
    with pytest.raises(BAD_INPUT, match="W"):
        same_statistics(np.ones(3), seed=0)
    data = _data()
    Ms, mus = np.stack([np.eye(4)] * 3), np.zeros((3, 4))
    with pytest.raises(BAD_INPUT, match="batches"):
        step_prediction_error((Ms, mus), data, np.zeros((5, 2), dtype=int), eta=0.1, d=3)
    with pytest.raises(BAD_INPUT, match="mus"):
        step_prediction_error((Ms, np.zeros((2, 4))), data, np.zeros((2, 2), dtype=int), eta=0.1, d=3)


def test_trajectory_functions_compile_once_per_shape():
    from nqf.updates._compression import _lipschitz_on_segments
    from nqf.updates._discrete import _prediction_errors
    from nqf.model._ntk import _ntk_traj
    from nqf.updates import update_lipschitz
    from nqf.model import ntk_trajectory

    batches = jnp.zeros((3, 2), dtype=int)
    fns = (_prediction_errors, _lipschitz_on_segments, _ntk_traj)
    sizes = []
    for seed, eta, d in ((19, 0.01, 4), (20, 0.02, 6)):  # new data, learning rate and width, same shapes
        data = _data(seed=seed)
        W = 0.3 * jnp.asarray(np.random.default_rng(seed).normal(size=(data.p, d)))
        run = nqf_sgd(statistics(W), data, batches, eta=eta, d=d)
        step_prediction_error(run, data, batches, eta=eta, d=d)
        update_lipschitz(run, run, data, batches, eta=eta, d=d, n_points=2)
        ntk_trajectory(run, data, d=d)
        sizes.append([f._cache_size() for f in fns])
    assert sizes[0] == sizes[1]
