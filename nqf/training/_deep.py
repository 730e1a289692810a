r"""Gradient descent on the weights of a deep NQF with per-layer learning rates (Theorem 15),
a configuration of the one trainer :func:`nqf.training.train`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Float

from .._checks import check_int
from .._checks import check_positive
from .._types import ArrayLike
from ..model._deep import _check_forms
from ..model._deep import deep_nqf_apply
from ..model._deep import deep_nqf_loss
from ..model._deep import layer_statistics
from ._trainer import Optimizer
from ._trainer import train


def _layerwise_sgd(learning_rate):
    """Plain GD with one learning rate per layer (``learning_rate[l]`` for the ``l``-th leaf of a tuple)."""

    def update(grads, state, params=None):
        return tuple(jax.tree_util.tree_map(lambda g, l=l: -learning_rate[l] * g, gl) for l, gl in enumerate(grads)), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


class _DeepLoss(eqx.Module):
    forms: tuple = eqx.field(static=True)

    def __call__(self, Ws, batch, args):
        return deep_nqf_loss(layer_statistics(Ws), self.forms, *args)


class _DeepOutputs(eqx.Module):
    forms: tuple = eqx.field(static=True)

    def __call__(self, Ws, args):
        return jax.vmap(lambda x: deep_nqf_apply(Ws, self.forms, x))(args[0])


def deep_nqf_gd(
    Ws0: tuple, forms: tuple[Callable, ...], xs, ys: Float[ArrayLike, " m"], *,
    eta: Sequence[float], num_steps: int,
):
    r"""Full-batch GD on the weights of a deep NQF with learning rate ``eta[l]`` for layer ``l``
    (Theorem 15 runs a compressed model at $\eta\,d_l/d'_l$), recording its outputs on ``xs`` before
    every step: returns an array ``(num_steps, m, ...)``. The rates are traced (a new set compiles
    nothing); a configuration of :func:`nqf.training.train`."""
    _check_forms(forms, tuple((None, None) for _ in Ws0))
    etas = tuple(float(e) for e in eta)
    if len(etas) != len(Ws0):
        raise ValueError(f"`eta` must hold one learning rate per layer ({len(Ws0)}); got {len(etas)}.")
    for e in etas:
        check_positive("eta", e)
    num_steps = check_int("num_steps", num_steps)
    opt = Optimizer(_layerwise_sgd, {"learning_rate": jnp.asarray(etas)}, ())
    res = train(_DeepLoss(tuple(forms)), tuple(Ws0), opt, num_steps=num_steps, args=(xs, jnp.asarray(ys)),
                record=_DeepOutputs(tuple(forms)))
    return jnp.asarray(res.record[:-1])
