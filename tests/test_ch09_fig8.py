"""notebooks/ch09_fig8.py: a deep module, its 2-layer NQF and its 1-layer NQF trained side by side (Fig. 8)."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

import nqf
from nqf import architectures
from helpers import count_compilations
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch09_fig8 import (gd_momentum_adam, log_loss_gap, log_loss_gap_steps, pilot_learning_rate, seeded_inputs,  # noqa: E402
                       sharpness, teacher_data, train_side_by_side)


def test_side_by_side_equals_separate_optax_runs():
    arch = architectures.deep_mlp(k=3, hidden=(4, 4, 4))
    S = 2
    Wt = tuple(normal(k, (S, p, d)) for k, p, d in zip(jax.random.split(jax.random.PRNGKey(0), 2),
                                                            arch.ps, arch.widths))
    train, test = teacher_data(arch, Wt, key=jax.random.PRNGKey(1), n_train=20, n_test=30)
    assert train[0].shape == (S, 20, 3) and test[1].shape == (S, 30)
    np.testing.assert_allclose(np.std(np.asarray(train[1]), axis=1), 1.0, rtol=1e-12)
    Ws = tuple(0.3 * normal(k, (S, p, d)) for k, p, d in zip(jax.random.split(jax.random.PRNGKey(2), 2),
                                                                  arch.ps, arch.widths))
    W1 = jax.vmap(lambda *W: arch.collapse(W))(*Ws)
    opt = optax.adam(1e-2)
    res = train_side_by_side((arch.apply, arch.deep_nqf, arch.one_layer_nqf), (Ws, Ws, W1), opt, train_data=train,
                             test_data=test, num_steps=6, record_every=2)
    assert res.train_loss[0].shape == res.test_loss[2].shape == (S, 4)
    # model 1 (the 2-layer NQF), seed 1, trained alone
    xs, ys = train[0][1], train[1][1]
    W = tuple(w[1] for w in Ws)
    loss = lambda W, xs=xs, ys=ys: jnp.mean((jax.vmap(lambda x: arch.deep_nqf(W, x))(xs) - ys) ** 2)  # noqa: E731
    np.testing.assert_allclose(res.test_loss[1][1, 0], loss(W, test[0][1], test[1][1]), rtol=1e-10)
    with jax.numpy_dtype_promotion("standard"):  # plain optax Adam mixes its int32 step count with floats
        state = opt.init(W)
        for _ in range(6):
            upd, state = opt.update(jax.grad(loss)(W), state, W)
            W = optax.apply_updates(W, upd)
    np.testing.assert_allclose(res.train_loss[1][1, -1], loss(W), rtol=1e-10)


def test_side_by_side_compiles_once_for_new_rate():
    arch = architectures.two_layer_mlp(3)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    W0 = 0.01 * normal(keys[0], (2, arch.p, 4))
    Wt = normal(keys[1], (2, arch.p, 2))
    train, test = teacher_data(arch, Wt, key=keys[0], n_train=10, n_test=6)
    kw = dict(train_data=train, test_data=test, num_steps=10, record_every=5)
    W2 = 2 * W0
    # Fig. 8's optimiser (the program of the next test's runs: the two tests share one compilation)
    train_side_by_side((arch.apply,), (W0,), nqf.optimizer(gd_momentum_adam, 0.01, adam=1.0), **kw)
    with count_compilations() as seen:
        train_side_by_side((arch.apply,), (W2,), nqf.optimizer(gd_momentum_adam, 0.03, adam=1.0), **kw)
    assert seen == []


def test_log_loss_gap():
    np.testing.assert_allclose(log_loss_gap([[1.0, np.e]], [[1.0, 1.0]]), [0.5])
    assert np.isinf(log_loss_gap([[1.0, 1.0]], [[1.0, np.nan]]))[0]  # a diverged run
    assert np.isinf(log_loss_gap([[1.0, 1.0]], [[1.0, 0.0]]))[0]


def test_log_loss_gap_steps_sets_diverged_runs_aside():
    np.testing.assert_allclose(log_loss_gap_steps([[1.0, np.e]], [[1.0, 1.0]]), [0.5])
    assert np.isnan(log_loss_gap_steps([[1.0, 1.0]], [[1.0, np.inf]]))[0]  # a diverged run: nan, never +-inf
    assert np.isnan(log_loss_gap_steps([[1.0, np.nan]], [[1.0, 1.0]]))[0]


def test_seeded_inputs_per_seed_and_side_by_side_keeps_every_step():
    arch = architectures.deep_mlp(k=3, hidden=(4, 4, 4))
    train, test, Z = seeded_inputs(arch, (7, 8), tag=5, n_train=20, n_test=10)
    assert train[0].shape == (2, 20, 3) and test[1].shape == (2, 10) and Z[0].shape == (2, arch.ps[0], arch.widths[0])
    np.testing.assert_allclose(np.std(np.asarray(train[1]), axis=1), 1.0, rtol=1e-12)
    again, _, Z2 = seeded_inputs(arch, (8,), tag=5, n_train=20, n_test=10)  # a seed's draws do not depend on the others
    np.testing.assert_array_equal(np.asarray(again[0][0]), np.asarray(train[0][1]))
    np.testing.assert_array_equal(np.asarray(Z2[1][0]), np.asarray(Z[1][1]))
    _, _, kW = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(8), 5), 3)  # the documented draws, bit for bit
    for l, (k, p, d) in enumerate(zip(jax.random.split(kW, 2), arch.ps, arch.widths)):
        np.testing.assert_array_equal(np.asarray(Z[l][1]), np.asarray(jax.random.normal(k, (p, d))))
    Ws = tuple(0.3 * z for z in Z)
    res = train_side_by_side((arch.apply, arch.deep_nqf), (Ws, Ws), nqf.optimizer("sgd", 0.05), train_data=train,
                             test_data=test, num_steps=6, record_every=3)
    assert res.step_loss[0].shape == (2, 6) and res.diverged[1].shape == (2,) and not np.any(res.diverged)
    np.testing.assert_allclose(res.step_loss[1][:, 0], res.train_loss[1][:, 0], rtol=1e-12)  # the loss before step 0
    np.testing.assert_allclose(res.step_loss[0][:, 3], res.train_loss[0][:, 1], rtol=1e-12)


def test_sharpness_and_pilot_rate_on_a_linear_model():
    """A linear model's MSE has the constant Hessian 2 X^T X / m: the pilot rule stops at 1 / lambda in one round."""
    X = normal(jax.random.PRNGKey(0), (2, 30, 3))
    y = jnp.zeros((2, 30))
    apply = lambda w, x: x @ w  # noqa: E731
    lam = np.array([np.linalg.eigvalsh(2 * Xs.T @ Xs / 30).max() for Xs in np.asarray(X)])
    w0 = jnp.ones((2, 3))
    np.testing.assert_allclose(sharpness(apply, w0, (X, y), iters=200), lam, rtol=1e-6)
    eta, history = pilot_learning_rate((apply,), (w0,), (X, y), num_steps=10, check_every=5)
    np.testing.assert_allclose(eta, 1 / lam.max(), rtol=1e-6)
    assert len(history) == 1 and not history[0][2]


def test_gd_momentum_adam_is_each_optax_optimiser_and_compiles_once():
    """GD, heavy-ball momentum and Adam chosen by traced numbers: each equals its optax optimiser step by step, and
    the three runs of the trainer share one compiled program."""
    W = {"a": jnp.array([[0.3, -1.2], [0.5, 2.0]]), "b": jnp.array([0.7, -0.1])}
    loss = lambda p: jnp.sum(p["a"] ** 4) + jnp.sum(jnp.sin(p["b"])) + jnp.sum(p["a"] @ p["b"])  # noqa: E731
    for ours, ref in (((0.05, 0.0, 0.0), optax.sgd(0.05)), ((0.01, 0.9, 0.0), optax.sgd(0.01, momentum=0.9)),
                      ((0.02, 0.0, 1.0), optax.adam(0.02))):
        mine = gd_momentum_adam(ours[0], momentum=ours[1], adam=ours[2])
        with jax.numpy_dtype_promotion("standard"):  # plain optax Adam mixes its int32 step count with floats
            p, q, s, t = W, W, mine.init(W), ref.init(W)
            for _ in range(5):
                u, s = mine.update(jax.grad(loss)(p), s, p)
                v, t = ref.update(jax.grad(loss)(q), t, q)
                p, q = optax.apply_updates(p, u), optax.apply_updates(q, v)
        for x, y in zip(jax.tree_util.tree_leaves(p), jax.tree_util.tree_leaves(q)):
            np.testing.assert_allclose(x, y, rtol=1e-14, atol=1e-15)
    arch = architectures.two_layer_mlp(3)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    W0 = 0.1 * normal(keys[0], (2, arch.p, 4))
    train, test = teacher_data(arch, normal(keys[1], (2, arch.p, 2)), key=keys[0], n_train=10, n_test=6)
    kw = dict(train_data=train, test_data=test, num_steps=10, record_every=5)
    train_side_by_side((arch.apply,), (W0,), nqf.optimizer(gd_momentum_adam, 0.05, momentum=0.0, adam=0.0), **kw)
    with count_compilations() as seen:
        train_side_by_side((arch.apply,), (W0,), nqf.optimizer(gd_momentum_adam, 0.005, momentum=0.9, adam=0.0), **kw)
        train_side_by_side((arch.apply,), (W0,), nqf.optimizer(gd_momentum_adam, 0.01, momentum=0.0, adam=1.0), **kw)
    assert seen == []


def test_side_by_side_models_are_separate_runs():
    """Trained in one call on the sum of their losses, each model follows its own run (Adam acts leaf by leaf)."""
    arch = architectures.deep_mlp(k=3, hidden=(4, 4, 4))
    train, test, Z = seeded_inputs(arch, (3, 4), tag=9, n_train=20, n_test=10)
    Ws = tuple(0.3 * z for z in Z)
    W1 = jax.vmap(lambda *W: arch.collapse(W))(*Ws)
    opt = nqf.optimizer("adam", 0.02)
    kw = dict(train_data=train, test_data=test, num_steps=6, record_every=3)
    both = train_side_by_side((arch.apply, arch.one_layer_nqf), (Ws, W1), opt, **kw)
    alone = train_side_by_side((arch.one_layer_nqf,), (W1,), opt, **kw)
    np.testing.assert_allclose(both.step_loss[1], alone.step_loss[0], rtol=1e-12)
    np.testing.assert_allclose(both.test_loss[1], alone.test_loss[0], rtol=1e-12)
    assert both.steps.tolist() == [0, 3, 6] and both.step_loss[0].shape == (2, 6)
