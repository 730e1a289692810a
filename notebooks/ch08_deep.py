"""Chapter 8's recipe for Theorem 15: full-batch GD on the weights of a deep NQF with one learning rate per layer (a
compressed model runs at $\\eta\\,d_l/d'_l$), one run of :func:`nqf.training.train` recording its outputs."""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from nqf.model import deep_nqf_apply, deep_nqf_loss, layer_statistics
from nqf.training import Optimizer, train


def layerwise_sgd(learning_rate):
    """Plain GD with learning rate ``learning_rate[l]`` for the ``l``-th leaf of a tuple of weights."""

    def update(grads, state, params=None):
        return tuple(jax.tree_util.tree_map(lambda g, l=l: -learning_rate[l] * g, gl) for l, gl in enumerate(grads)), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


class DeepLoss(eqx.Module):
    forms: tuple = eqx.field(static=True)

    def __call__(self, Ws, batch, args):
        return deep_nqf_loss(layer_statistics(Ws), self.forms, *args)


class DeepOutputs(eqx.Module):
    forms: tuple = eqx.field(static=True)

    def __call__(self, Ws, args):
        return jax.vmap(lambda x: deep_nqf_apply(Ws, self.forms, x))(args[0])


def deep_nqf_gd(Ws0, forms, xs, ys, *, learning_rates, num_steps):
    """GD from the weights ``Ws0`` (one per layer) on the loss of the deep NQF of ``forms`` at ``(xs, ys)``, rate
    ``learning_rates[l]`` for layer l (traced: a new set compiles nothing); the outputs on ``xs`` before every step."""
    opt = Optimizer(layerwise_sgd, {"learning_rate": jnp.asarray([float(e) for e in learning_rates])}, ())
    res = train(DeepLoss(tuple(forms)), tuple(Ws0), opt, num_steps=num_steps, args=(xs, jnp.asarray(ys)),
                record=DeepOutputs(tuple(forms)))
    return jnp.asarray(res.record[:-1])
