"""The one trainer (nqf.training.train) and the runs configured on it: numerics against hand-written
optax loops, divergence reported, and compile counts (a second call with new data of the same shapes,
or a new learning rate, compiles nothing)."""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf import architectures, training
from helpers import count_compilations
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class


class Quadratic(eqx.Module):
    """Least squares of a linear model: loss(w, (X, y), args) = mean((X w - y)^2)."""

    def __call__(self, w, batch, args):
        X, y = batch
        return jnp.mean((X @ w - y) ** 2)


class Norm(eqx.Module):
    def __call__(self, w, args):
        return jnp.sum(w**2)


def _problem(seed, m=20, p=3):
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.normal(size=(m, p))), jnp.asarray(rng.normal(size=m))


def _hand_loop(opt, w, X, y, steps):
    """Plain optax as a user runs it (JAX's default promotion: Adam's int32 count meets a float decay), the
    reference the trainer must reproduce under the tests' strict promotion (its float counters, bit-identical)."""
    with jax.numpy_dtype_promotion("standard"):
        state, losses = opt.init(w), []
        for _ in range(steps):
            value, g = jax.value_and_grad(lambda w: jnp.mean((X @ w - y) ** 2))(w)
            upd, state = opt.update(g, state, w)
            w = optax.apply_updates(w, upd)
            losses.append(value)
    return w, np.asarray(losses)


@pytest.mark.parametrize("name, kw", [("sgd", {}), ("sgd", {"momentum": 0.9}), ("adam", {})])
def test_train_equals_a_hand_written_optax_loop(name, kw):
    X, y = _problem(0)
    w0 = jnp.full(3, 0.1)
    res = training.train(Quadratic(), w0, nqf.optimizer(name, 0.05, **kw), num_steps=12, data=(X, y), record=Norm(),
                         runs=training.Runs(record_every=4))
    w, losses = _hand_loop(getattr(optax, name)(0.05, **kw), w0, X, y, 12)
    np.testing.assert_allclose(res.params, w, rtol=1e-12)
    np.testing.assert_allclose(res.batch_loss, losses, rtol=1e-12)
    np.testing.assert_array_equal(res.steps, [0, 4, 8, 12])
    assert res.record.shape == (4,) and not res.diverged and res.first_nonfinite == -1


def test_batches_select_rows_and_vmap_runs_independent_seeds():
    X, y = _problem(1)
    idx = jnp.asarray(np.random.default_rng(2).integers(0, 20, size=(6, 5)))
    res = training.train(Quadratic(), jnp.zeros(3), optax.sgd(0.1), num_steps=6, data=training.Minibatches((X, y), idx))
    w, state = jnp.zeros(3), None
    for k in range(6):
        g = jax.grad(lambda w: jnp.mean((X[idx[k]] @ w - y[idx[k]]) ** 2))(w)
        w = w - 0.1 * g
    np.testing.assert_allclose(res.params, w, rtol=1e-12)
    W0 = jnp.stack([jnp.zeros(3), jnp.ones(3)])
    both = training.train(Quadratic(), W0, optax.sgd(0.1), num_steps=6, data=training.Minibatches((X, y), idx),
                          runs=training.Runs(vmap=("params",)))
    one = training.train(Quadratic(), jnp.ones(3), optax.sgd(0.1), num_steps=6, data=training.Minibatches((X, y), idx))
    np.testing.assert_allclose(both.params[1], one.params, rtol=1e-12)
    assert both.batch_loss.shape == (2, 6)


def test_a_diverging_run_is_flagged_and_warns_with_the_learning_rate():
    X, y = _problem(3)
    with pytest.warns(RuntimeWarning, match="`learning_rate` = 100"):
        res = training.train(Quadratic(), jnp.ones(3), nqf.optimizer("sgd", 100.0), num_steps=200, data=(X, y))
    assert bool(res.diverged) and 0 < int(res.first_nonfinite) < 200
    with pytest.raises(RuntimeError, match="diverged"):
        training.train(Quadratic(), jnp.ones(3), nqf.optimizer("sgd", 100.0), num_steps=200, data=(X, y),
                       runs=training.Runs(on_divergence="raise"))



def test_a_climbing_run_is_flagged_in_each_lane_and_a_new_momentum_compiles_nothing():
    """``Training.climbed`` marks the lanes whose loss rose (issue 30: ``optax.sgd(-1.0)`` climbed without a
    word), one flag per lane of a vmapped run, and a descending run is not flagged. A momentum, traced like
    the learning rate, compiles nothing new, and one of 1 or more is refused before anything runs."""
    X, y = _problem(3)
    good = training.train(Quadratic(), jnp.ones(3), nqf.optimizer("sgd", 0.05, momentum=0.5), num_steps=40,
                          data=(X, y))
    assert not bool(good.climbed) and good.batch_loss[-1] < good.batch_loss[0]
    scales = jnp.stack([jnp.ones(3), 1e3 * jnp.ones(3)])
    with count_compilations() as seen:
        again = training.train(Quadratic(), jnp.ones(3), nqf.optimizer("sgd", 0.05, momentum=0.9), num_steps=40,
                               data=(X, y))
    assert seen == [] and not bool(again.climbed)
    with pytest.warns(RuntimeWarning, match="the first update points up the gradient"):
        res = training.train(Quadratic(), scales, optax.sgd(-0.05), num_steps=40, data=(X, y),
                             runs=training.Runs(vmap=("params",)))
    assert res.climbed.shape == (2,) and res.climbed.all() and not res.diverged.any()
    with pytest.raises(ValueError, match="`momentum` must be in \\[0, 1\\)"):
        nqf.optimizer("sgd", 0.05, momentum=1.0)

@pytest.mark.parametrize("bad, exc, word", [
    (jnp.array([1, 2, 3]), TypeError, "floating"),
    (jnp.array([1.0, jnp.nan, 0.0]), ValueError, "finite"),
])
def test_bad_initial_parameters_are_refused(bad, exc, word):
    X, y = _problem(0)
    with pytest.raises(exc, match=word):
        training.train(Quadratic(), bad, optax.sgd(0.1), num_steps=2, data=(X, y))


@pytest.mark.parametrize("bad, exc", [("adam", TypeError), (optax.sgd, TypeError), (None, TypeError)])
def test_bad_optimizers_name_the_argument(bad, exc):
    X, y = _problem(0)
    with pytest.raises(exc, match="optimizer"):
        training.train(Quadratic(), jnp.ones(3), bad, num_steps=2, data=(X, y))


def test_optimizer_refuses_a_bad_learning_rate_and_unknown_names():
    with pytest.raises(ValueError, match="learning_rate"):
        nqf.optimizer("sgd", -0.1)
    with pytest.raises(ValueError, match="name"):
        nqf.optimizer("not_an_optimizer", 0.1)


# ----------------------------------------------------------------------------- compile counts
def test_train_new_data_and_new_learning_rate_compile_nothing():
    X, y = _problem(0)
    training.train(Quadratic(), jnp.ones(3), nqf.optimizer("adam", 0.01), num_steps=5, data=(X, y), record=Norm())
    X2, y2 = _problem(1)
    w2 = 2 * jnp.ones(3)
    with count_compilations() as seen:
        training.train(Quadratic(), w2, nqf.optimizer("adam", 0.02), num_steps=5, data=(X2, y2), record=Norm())
    assert seen == []


def _mlp_data(seed, m=12):
    arch = architectures.two_layer_mlp(3)
    xs = jax.vmap(arch.sample_input)(jax.random.split(jax.random.PRNGKey(seed), m))
    return arch, xs, jnp.sin(xs[:, 0])


def test_compare_with_nqf_compiles_once_for_new_data_and_rate():
    arch, xs, ys = _mlp_data(0)
    W0 = 0.01 * normal(jax.random.PRNGKey(1), (arch.p, 4))
    nqf.compare_with_nqf(arch, (xs, ys), nqf.optimizer("sgd", 0.1), num_steps=10, params=W0,
                         track=nqf.training.Track(("loss", "outputs"), probe=xs))
    _, xs2, ys2 = _mlp_data(5)
    W2 = 2 * W0
    with count_compilations() as seen:
        nqf.compare_with_nqf(arch, (xs2, ys2), nqf.optimizer("sgd", 0.3), num_steps=10, params=W2,
                             track=nqf.training.Track(("loss", "outputs"), probe=xs2))
    assert seen == []
