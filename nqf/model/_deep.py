r"""The deep NQF on its per-layer order parameters (App. B.4: Def. 2, Theorems 14 and 15).

An $L$-layer NQF (Def. 2, Eq. 219) is a chain of representations $h^{(0)} = x$,

$$ h^{(l)}_k = C^{(l)}_k + g^{(l)\top}_k\mu^{(l)} + \mu^{(l)\top}B^{(l)}_k\mu^{(l)} + \mathrm{Tr}\big[M^{(l)}A^{(l)}_k\big], $$

whose coefficients depend on $h^{(l-1)}$ only; $f = h^{(L)}$. Here a layer is given by
its *form*, a function ``form(M, mu, h_prev) -> h`` (for instance the ``forms`` of a
:class:`nqf.architectures.DeepArchitecture`), so that everything below is written on the
order parameters $(M^{(l)}, \mu^{(l)})$ alone.

Theorem 14 (Eqs. 222-225): under SGD on the weights of every layer,

$$ \Delta\mu^{(l)} = -\eta(d_l v^{(l)} + H^{(l)}\mu^{(l)}),\quad
   \Delta M^{(l)} = -\eta(v^{(l)}\mu^{(l)\top} + \mu^{(l)}v^{(l)\top} + H^{(l)}M^{(l)} + M^{(l)}H^{(l)})
   + \eta^2(d_l v^{(l)}v^{(l)\top} + v^{(l)}\mu^{(l)\top}H^{(l)} + H^{(l)}\mu^{(l)}v^{(l)\top} + H^{(l)}M^{(l)}H^{(l)}), $$

with $v^{(l)} = \sum_x\sum_k \partial\mathcal L/\partial h^{(l)}_k\,(g_k + 2B_k\mu)$ and
$H^{(l)} = \sum_x\sum_k 2\,\partial\mathcal L/\partial h^{(l)}_k A_k$. Both are gradients
of the loss written on the order parameters: $v^{(l)} = \partial\mathcal L/\partial\mu^{(l)}$
and $H^{(l)} = G + G^\top$ with $G = \partial\mathcal L/\partial M^{(l)}$ taken entry by
entry (so $G + G^\top = 2A$ for $\mathcal L = \mathrm{Tr}[MA]$, however the form reads $M$).
:func:`deep_nqf_sgd_step` computes them by autodiff through the forms and never sees a weight.

The loss is the paper's MSE averaged over the minibatch, $\frac1b\sum_x(f(x) - y)^2$
(the same convention as :func:`nqf.dynamics.nqf_sgd_step`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_positive
from .._types import ArrayLike
from ._update import moment_update

Stats = tuple  # ((M_1, mu_1), ..., (M_L, mu_L))


def layer_statistics(Ws: Sequence[ArrayLike]) -> Stats:
    r"""Def. 2's order parameters of each layer, $(M^{(l)}, \mu^{(l)}) = (W^{(l)}W^{(l)\top}, W^{(l)}\mathbf 1)$."""
    if not isinstance(Ws, (tuple, list)) or not Ws:
        raise ValueError(f"`Ws` must be a non-empty tuple of (p_l, d_l) weight matrices; got {type(Ws).__name__}.")
    out = []
    for l, W in enumerate(Ws):
        if np.ndim(W) != 2:
            raise ValueError(f"`Ws[{l}]` must have shape (p, d) (one column per neuron); got shape {np.shape(W)}.")
        W = jnp.asarray(W)
        out.append((W @ W.T, W.sum(axis=1)))
    return tuple(out)


def _check_forms(forms, stats) -> None:
    if not isinstance(forms, tuple) or not all(callable(f) for f in forms):
        raise ValueError("`forms` must be a tuple of callables form(M, mu, h_prev) (one per layer).")
    if len(forms) != len(stats):
        raise ValueError(f"`forms` has {len(forms)} layers but the order parameters have {len(stats)}.")


def deep_nqf_output(stats: Stats, forms: tuple[Callable, ...], x) -> Array:
    r"""$f(x) = h^{(L)}(x)$ of the deep NQF (Def. 2, Eq. 219) from the per-layer order parameters."""
    h = x
    for (M, mu), form in zip(stats, forms):
        h = form(M, mu, h)
    return h


def deep_nqf_apply(Ws, forms: tuple[Callable, ...], x) -> Array:
    """The deep NQF as a function of the weights (through :func:`layer_statistics`); differentiable in ``Ws``."""
    return deep_nqf_output(layer_statistics(Ws), forms, x)


def deep_nqf_loss(stats: Stats, forms: tuple[Callable, ...], xs, ys: Float[ArrayLike, " b"]) -> Array:
    r"""The MSE $\frac1b\sum_x (f(x) - y)^2$ of the deep NQF on a batch (``xs`` with a leading batch axis)."""
    f = jax.vmap(lambda x: deep_nqf_output(stats, forms, x))(xs)
    return jnp.mean((f - ys) ** 2)


def _layer_update(M, mu, G, v, eta, d):
    """Eqs. (222)-(225) for one layer: the update of Thm 2 with this layer's $v$ and $H = G + G^\top$."""
    z = jnp.zeros_like(M)
    M1, mu1, *_ = moment_update(M, mu, z, z, jnp.zeros_like(mu), v, G + G.T, eta, d, 0.0, 0.0)
    return M1, mu1


def _step(stats, forms, xs, ys, eta, widths):
    grads = jax.grad(deep_nqf_loss)(stats, forms, xs, ys)
    return tuple(_layer_update(M, mu, G, v, eta, d) for (M, mu), (G, v), d in zip(stats, grads, widths))


def deep_nqf_sgd_step(
    stats: Stats, forms: tuple[Callable, ...], xs, ys: Float[ArrayLike, " b"], *,
    eta: float, widths: Sequence[int],
) -> Stats:
    r"""One SGD step of the deep NQF written on the order parameters alone (Thm 14, Eqs. 222-225).

    Args:
        stats: ``((M_1, mu_1), ..., (M_L, mu_L))``.
        forms: one ``form(M, mu, h_prev)`` per layer (Def. 2).
        xs, ys: the minibatch (``xs`` has a leading batch axis; a pytree is allowed).
        eta: learning rate. widths: $(d_1, \dots, d_L)$, neurons per layer (they enter
            only through the $d_l v^{(l)}$ terms, i.e. when ZGZ fails).

    Equals, to rounding, one step $W^{(l)} \leftarrow W^{(l)} - \eta\nabla_{W^{(l)}}\mathcal L$ of
    any weights with these statistics (see the tests and chapter 8).
    """
    _check_forms(forms, stats)
    check_positive("eta", eta)
    widths = tuple(int(d) for d in widths)
    if len(widths) != len(stats) or min(widths) < 1:
        raise ValueError(f"`widths` must hold one positive width per layer ({len(stats)}); got {widths}.")
    return _step(stats, forms, xs, jnp.asarray(ys), eta, widths)


@partial(jax.jit, static_argnames=("forms", "widths"))
def _sgd_scan(stats0, xs, ys, batches, eta, forms, widths):
    def body(stats, idx):
        xb = jax.tree_util.tree_map(lambda a: a[idx], xs)
        new = _step(stats, forms, xb, ys[idx], eta, widths)
        return new, new

    _, traj = jax.lax.scan(body, stats0, batches)
    return traj


def deep_nqf_sgd(
    stats0: Stats, forms: tuple[Callable, ...], xs, ys: Float[ArrayLike, " m"], batches, *,
    eta: float, widths: Sequence[int],
) -> Stats:
    """Iterate :func:`deep_nqf_sgd_step` over the minibatch index rows ``batches`` (one ``lax.scan``,
    compiled once per shape and forms). Returns the trajectory of every ``(M_l, mu_l)`` with a
    leading axis ``steps + 1`` (step 0 included)."""
    _check_forms(forms, stats0)
    check_positive("eta", eta)
    widths = tuple(int(d) for d in widths)
    if len(widths) != len(stats0) or min(widths) < 1:
        raise ValueError(f"`widths` must hold one positive width per layer ({len(stats0)}); got {widths}.")
    batches = jnp.asarray(batches)
    if batches.ndim != 2:
        raise ValueError(f"`batches` must have shape (steps, b) (one row of sample indices per step); got {batches.shape}.")
    stats0 = tuple((jnp.asarray(M), jnp.asarray(mu)) for M, mu in stats0)
    traj = _sgd_scan(stats0, xs, jnp.asarray(ys), batches, jnp.asarray(eta, float), forms, widths)
    return jax.tree_util.tree_map(lambda a0, a: jnp.concatenate([a0[None], a]), stats0, traj)


def scale_forms(forms: tuple[Callable, ...], scales: Sequence[float]) -> tuple[Callable, ...]:
    r"""Forms multiplied by ``scales[l]``: $\tilde A^{(l)} = (d'_l/d_l)A^{(l)}$ of Thm 15 for purely
    quadratic layers ($C = 0$, $g = 0$, $B = 0$, the ZGZ case of both Fig. 8 modules)."""
    if len(scales) != len(forms):
        raise ValueError(f"`scales` must hold one factor per layer ({len(forms)}); got {len(scales)}.")
    return tuple(partial(_scaled, form, float(c)) for form, c in zip(forms, scales))


def _scaled(form, c, M, mu, h):
    return c * form(M, mu, h)


def compress_statistics(stats: Stats, widths: Sequence[int], new_widths: Sequence[int]) -> Stats:
    r"""Initial order parameters of the width-$d'_l$ deep NQF of Thm 15 with $V_l = I$ (the
    span of the structure is the whole $\mathbb R^{p_l}$, as for both Fig. 8 modules):
    $\tilde M^{(l)} = (d_l/d'_l)M^{(l)}$, $\tilde\mu^{(l)} = \mu^{(l)}$. With the forms scaled by
    $d'_l/d_l$ (:func:`scale_forms`) and learning rates $\eta\,d_l/d'_l$, its outputs equal the
    original model's at every step (Thm 15); weights of width $d'_l = p_l + 1$ with these statistics
    exist because $d_l M - \mu\mu^\top \succeq 0$."""
    if not (len(stats) == len(widths) == len(new_widths)):
        raise ValueError("`stats`, `widths` and `new_widths` must have one entry per layer.")
    return tuple((d / dn * jnp.asarray(M), jnp.asarray(mu)) for (M, mu), d, dn in zip(stats, widths, new_widths))
