"""Teacher-student runs beside the NQF with seeds vmapped (nqf.training._online; Figs. 6 and 8)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from nqf.architectures import deep_mlp, two_layer_mlp
from nqf.training import first_exceedance, log_loss_gap, online_teacher_student, relative_gap, relative_loss_gap, teacher_data, train_side_by_side
from nqf.structure import nqf_output

ARCH = two_layer_mlp(3)


def test_online_run_starts_together_and_matches_a_manual_run():
    S, d, steps = 2, 4, 12
    W0 = 1e-3 * jax.random.normal(jax.random.PRNGKey(0), (S, ARCH.p, d))
    Wt = jax.random.normal(jax.random.PRNGKey(1), (S, ARCH.p, 5))
    keys = jax.random.split(jax.random.PRNGKey(2), S)
    run = online_teacher_student(ARCH, ARCH, W0, Wt, keys, eta=0.1, batch=8, steps=steps, record_every=4,
                                 n_probe=16)
    assert run.probe_loss["module"].shape == (S, steps // 4 + 1) and run.batch_loss["nqf"].shape == (S, steps)
    np.testing.assert_allclose(run.probe_loss["module"][:, 0], run.probe_loss["nqf"][:, 0], rtol=1e-6)
    assert np.all(run.output_gap[:, 0] < 1e-6)
    assert abs(run.probe_loss["module"][0, 0] - run.probe_loss["module"][1, 0]) > 1e-6  # independent teachers
    # seed 0 by hand: same key splitting, SGD on the module and on its NQF
    kp, kd = jax.random.split(keys[0])
    draw = lambda k, n: jax.vmap(ARCH.sample_input)(jax.random.split(k, n))  # noqa: E731
    Wm = Wn = W0[0]
    for t, k in enumerate(jax.random.split(kd, steps)):
        xb = draw(k, 8)
        yb = jax.vmap(lambda x: ARCH.apply(Wt[0], x))(xb)
        lm = lambda W: jnp.mean((jax.vmap(lambda x: ARCH.apply(W, x))(xb) - yb) ** 2)  # noqa: E731
        ln = lambda W: jnp.mean((jax.vmap(lambda x: nqf_output(ARCH, W, x))(xb) - yb) ** 2)  # noqa: E731
        np.testing.assert_allclose(run.batch_loss["module"][0, t], lm(Wm), rtol=1e-10)
        np.testing.assert_allclose(run.batch_loss["nqf"][0, t], ln(Wn), rtol=1e-10)
        Wm, Wn = Wm - 0.1 * jax.grad(lm)(Wm), Wn - 0.1 * jax.grad(ln)(Wn)
    px = draw(kp, 16)
    py = jax.vmap(lambda x: ARCH.apply(Wt[0], x))(px)
    final = jnp.mean((jax.vmap(lambda x: ARCH.apply(Wm, x))(px) - py) ** 2)
    np.testing.assert_allclose(run.probe_loss["module"][0, -1], final, rtol=1e-10)


def test_online_bad_input():
    W0 = jnp.zeros((2, ARCH.p, 3))
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match="W0"):
        online_teacher_student(ARCH, ARCH, W0[0], W0, keys, eta=0.1, batch=4, steps=4)
    with pytest.raises(ValueError, match="teacher_W"):
        online_teacher_student(ARCH, ARCH, W0, W0[:1], keys, eta=0.1, batch=4, steps=4)
    with pytest.raises(ValueError, match="record_every"):
        online_teacher_student(ARCH, ARCH, W0, W0, keys, eta=0.1, batch=4, steps=5, record_every=2)
    with pytest.raises(ValueError, match="eta"):
        online_teacher_student(ARCH, ARCH, W0, W0, keys, eta=0.0, batch=4, steps=4, record_every=2)


def test_side_by_side_equals_separate_optax_runs():
    arch = deep_mlp(3, (4, 4, 4))
    S = 2
    Wt = tuple(jax.random.normal(k, (S, p, d)) for k, p, d in zip(jax.random.split(jax.random.PRNGKey(0), 2),
                                                                    arch.ps, arch.widths))
    train, test = teacher_data(arch, Wt, jax.random.split(jax.random.PRNGKey(1), S), 20, 30)
    assert train[0].shape == (S, 20, 3) and test[1].shape == (S, 30)
    np.testing.assert_allclose(np.std(np.asarray(train[1]), axis=1), 1.0, rtol=1e-12)
    Ws = tuple(0.3 * jax.random.normal(k, (S, p, d)) for k, p, d in zip(jax.random.split(jax.random.PRNGKey(2), 2),
                                                                         arch.ps, arch.widths))
    W1 = jax.vmap(lambda *W: arch.collapse(W))(*Ws)
    opt = optax.adam(1e-2)
    res = train_side_by_side((arch.apply, arch.deep_nqf, arch.one_layer_nqf), (Ws, Ws, W1), opt, train, test, 6,
                             record_every=2)
    assert res.train_loss[0].shape == (S, 4)
    # model 1 (the 2-layer NQF), seed 1, trained alone
    xs, ys = train[0][1], train[1][1]
    W = tuple(w[1] for w in Ws)
    state = opt.init(W)
    loss = lambda W: jnp.mean((jax.vmap(lambda x: arch.deep_nqf(W, x))(xs) - ys) ** 2)  # noqa: E731
    for _ in range(6):
        upd, state = opt.update(jax.grad(loss)(W), state, W)
        W = optax.apply_updates(W, upd)
    np.testing.assert_allclose(res.train_loss[1][1, -1], loss(W), rtol=1e-10)
    with pytest.raises(ValueError, match="seed axis"):
        train_side_by_side((arch.apply,), (Ws,), opt, train, (test[0][:1], test[1][:1]), 2)


def test_gap_helpers():
    steps = np.arange(0, 50, 10)
    gap = np.array([[0.0, 0.01, 0.2, 0.05, 0.3], [0.0, 0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(first_exceedance(steps, gap, 0.1), [20.0, np.inf])
    # one rule everywhere: a non-finite gap (a diverged run) counts as parted
    diverged = np.array([[0.0, 0.01, np.nan, np.nan, np.nan]])
    np.testing.assert_array_equal(first_exceedance(steps, diverged, 0.1), [20.0])
    a = np.array([[[3.0, 4.0], [3.0, 4.0]]])  # (S=1, T=2, o=2)
    b = np.array([[[3.0, 4.0], [0.0, 0.0]]])
    np.testing.assert_allclose(relative_gap(a, b, time_axis=1), [[0.0, 1.0]])
    np.testing.assert_allclose(relative_gap(a, b, time_axis=1, reference=np.array([[6.0, 8.0]])), [[0.0, 0.5]])
    np.testing.assert_allclose(relative_loss_gap([2.0, 4.0], [1.0, 5.0]), [0.5, 0.25])
    np.testing.assert_allclose(log_loss_gap([[1.0, np.e]], [[1.0, 1.0]]), [0.5])
    assert np.isinf(log_loss_gap([[1.0, 1.0]], [[1.0, np.nan]]))[0]
