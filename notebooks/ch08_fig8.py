"""Chapter 8's recipe for Fig. 8: several models (a deep module, its 2-layer NQF, its 1-layer NQF) trained full batch
with one optimiser on a teacher's data, seeds vmapped (one dataset per seed): one :func:`nqf.training.train` per model,
recording training and test loss (Eq. 26)."""

from typing import Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from nqf.model import mse
from nqf.training import train


def teacher_data(arch, teacher_Ws, *, key, n_train: int, n_test: int):
    """Per seed (the leading axis of ``teacher_Ws``; key ``split(key, S)[s]``): inputs ``arch.sample_input`` and the
    teacher's targets over their std on the training set. Returns ``((x_train, y_train), (x_test, y_test))``."""
    n = n_train + n_test

    @jax.jit
    def one(Wt, k):
        xs = jax.vmap(arch.sample_input)(jax.random.split(k, n))
        ys = jax.vmap(lambda x: arch.apply(Wt, x))(xs)
        return xs, ys / jnp.std(ys[:n_train])

    S = jax.tree_util.tree_leaves(teacher_Ws)[0].shape[0]
    xs, ys = jax.vmap(one)(teacher_Ws, jax.random.split(key, S))
    return (xs[:, :n_train], ys[:, :n_train]), (xs[:, n_train:], ys[:, n_train:])


class ModelLoss(eqx.Module):
    apply: Callable

    def __call__(self, params, batch, args):
        return mse(jax.vmap(lambda x: self.apply(params, x))(batch[0]), batch[1])


class TrainTest(eqx.Module):
    loss: ModelLoss

    def __call__(self, params, args):
        return self.loss(params, args["train"], None), self.loss(params, args["test"], None)


class SideBySide(NamedTuple):
    steps: np.ndarray  #: (T,) recorded steps
    train_loss: tuple  #: one (S, T) array per model
    test_loss: tuple  #: one (S, T) array per model


def train_side_by_side(applies, params0, optimizer, *, train_data, test_data, num_steps, record_every) -> SideBySide:
    """Model i is ``applies[i](params, x)`` from ``params0[i]``; every leaf and both datasets carry the seed axis."""
    runs = [train(ModelLoss(apply), p0, optimizer, num_steps=num_steps, data=train_data, record=TrainTest(ModelLoss(apply)),
                  args={"train": train_data, "test": test_data}, record_every=record_every,
                  vmap=("params", "data", "args"), on_divergence="ignore") for apply, p0 in zip(applies, params0)]
    return SideBySide(runs[0].steps, tuple(r.record[0] for r in runs), tuple(r.record[1] for r in runs))


def log_loss_gap(reference, other):
    """Mean over recorded steps (last axis) of |ln L_other - ln L_reference|; inf where a loss is not finite and > 0."""
    a, b = np.asarray(reference, dtype=float), np.asarray(other, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    gap = np.mean(np.abs(np.log(np.where(ok, b, 1.0)) - np.log(np.where(ok, a, 1.0))), axis=-1)
    return np.where(ok.all(axis=-1), gap, np.inf)
