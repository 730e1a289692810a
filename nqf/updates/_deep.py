r"""Training of deep NQFs (App. B.4): the exact update on the per-layer order parameters (Theorem 14,
Eqs. 222-225) and gradient descent on the weights of a deep NQF with per-layer learning rates
(Theorem 15), the latter a configuration of the one trainer :func:`nqf.training.train`.

The forms, outputs and loss of a deep NQF live in :mod:`nqf.model` (:func:`nqf.model.deep_nqf_loss`:
the paper's MSE averaged over the minibatch, :data:`nqf.model.mse`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import jax
import jax.numpy as jnp
from jaxtyping import Float

from .._checks import check_positive, invalid
from .._types import ArrayLike
from ..model._deep import Stats, check_forms, deep_nqf_loss
from ..model._update import moment_update


def _layer_update(M, mu, G, v, eta, d):
    """Eqs. (222)-(225) for one layer: the update of Thm 2 with this layer's $v$ and $H = G + G^\top$."""
    z = jnp.zeros_like(M)
    M1, mu1, *_ = moment_update((M, mu, z, z, jnp.zeros_like(mu)), v, G + G.T, eta, d, 0.0, 0.0)
    return M1, mu1


def _check(stats, forms, eta, widths) -> tuple[int, ...]:
    check_forms(forms, stats)
    check_positive("eta", eta)
    widths = tuple(int(d) for d in widths)
    if len(widths) != len(stats) or min(widths) < 1:
        raise invalid("widths", f'hold one positive width per layer ({len(stats)})', f'{widths}')
    return widths


def _step(stats, forms, xs, ys, eta, widths):
    grads = jax.grad(deep_nqf_loss)(stats, forms, xs, ys)
    return tuple(_layer_update(M, mu, G, v, eta, d) for (M, mu), (G, v), d in zip(stats, grads, widths))


@partial(jax.jit, static_argnames=("forms", "widths"))
def _sgd_scan(stats0, xs, ys, batches, eta, forms, widths):
    def body(stats, idx):
        xb = jax.tree_util.tree_map(lambda a: a[idx], xs)
        new = _step(stats, forms, xb, ys[idx], eta, widths)
        return new, new

    _, traj = jax.lax.scan(body, stats0, batches)
    return traj


def deep_nqf_sgd(stats0: Stats, forms: tuple[Callable, ...], xs, ys: Float[ArrayLike, " m"], batches, *, eta: float,
                 widths: Sequence[int]) -> Stats:
    r"""SGD on a deep NQF written on the order parameters alone (Thm 14, Eqs. 222-225), one step per row of
    sample indices in ``batches`` (one ``lax.scan``, compiled once per shape and forms). Each step equals, to
    rounding, $W^{(l)} \leftarrow W^{(l)} - \eta\nabla_{W^{(l)}}\mathcal L$ on any weights with these
    statistics (chapter 9).

    Args:
        stats0: ``((M_1, mu_1), ..., (M_L, mu_L))`` at step 0.
        forms: one ``form(M, mu, h_prev)`` per layer (Def. 2, e.g. ``deep_mlp().forms``).
        xs, ys: the training set (``xs`` has a leading sample axis; a pytree is allowed).
        batches: sample indices, shape ``(steps, b)``.
        eta: learning rate. widths: $(d_1, \dots, d_L)$, neurons per layer (they enter only through the
            $d_l v^{(l)}$ terms, i.e. when ZGZ fails).

    Returns:
        The trajectory of every ``(M_l, mu_l)``, with a leading axis ``steps + 1`` (step 0 included).
    """
    widths = _check(stats0, forms, eta, widths)
    batches = jnp.asarray(batches)
    if batches.ndim != 2:
        raise invalid("batches", 'have shape (steps, b) (one row of sample indices per step)', f'{batches.shape}')
    stats0 = tuple((jnp.asarray(M), jnp.asarray(mu)) for M, mu in stats0)
    traj = _sgd_scan(stats0, xs, jnp.asarray(ys), batches, jnp.asarray(eta, float), forms, widths)
    return jax.tree_util.tree_map(lambda a0, a: jnp.concatenate([a0[None], a]), stats0, traj)
