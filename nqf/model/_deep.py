r"""The deep NQF on its per-layer order parameters (App. B.4: Def. 2, Theorems 14 and 15).

An $L$-layer NQF (Def. 2, Eq. 219) chains $h^{(0)} = x$, $h^{(l)}_k = C^{(l)}_k + g^{(l)\top}_k\mu^{(l)} +
\mu^{(l)\top}B^{(l)}_k\mu^{(l)} + \mathrm{Tr}[M^{(l)}A^{(l)}_k]$ with coefficients depending on $h^{(l-1)}$ only;
$f = h^{(L)}$. A layer is its *form* ``form(M, mu, h_prev) -> h`` (e.g. ``DeepArchitecture.forms``), so
everything here is written on $(M^{(l)}, \mu^{(l)})$ alone. Theorem 14 (Eqs. 222-225) is Theorem 2's update
per layer with $v^{(l)} = \partial\mathcal L/\partial\mu^{(l)}$ and $H^{(l)} = G + G^\top$,
$G = \partial\mathcal L/\partial M^{(l)}$ entry by entry: :func:`nqf.updates.deep_nqf_sgd` takes them by autodiff
through the forms and never sees a weight. The loss is the paper's MSE averaged over the minibatch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._types import ArrayLike
from .._checks import invalid, wrong_kind
from ._model import mse

Stats = tuple  # ((M_1, mu_1), ..., (M_L, mu_L))


def layer_statistics(Ws: Sequence[ArrayLike]) -> Stats:
    r"""Def. 2's order parameters of each layer, $(M^{(l)}, \mu^{(l)}) = (W^{(l)}W^{(l)\top}, W^{(l)}\mathbf 1)$."""
    if not isinstance(Ws, (tuple, list)) or not Ws:
        raise invalid("Ws", 'be a non-empty tuple of (p_l, d_l) weight matrices', f'{type(Ws).__name__}')
    out = []
    for l, W in enumerate(Ws):
        if np.ndim(W) != 2:
            raise invalid(f"Ws[{l}]", "have shape (p, d) (one column per neuron)", f"shape {np.shape(W)}")
        W = jnp.asarray(W)
        out.append((W @ W.T, W.sum(axis=1)))
    return tuple(out)


def check_forms(forms, stats) -> None:
    if not isinstance(forms, tuple) or not all(callable(f) for f in forms):
        raise wrong_kind("forms", "be a tuple of callables form(M, mu, h_prev) (one per layer)", type(forms).__name__)
    if len(forms) != len(stats):
        raise invalid("forms", f"have one entry per layer of the order parameters ({len(stats)})", f"{len(forms)} layers")


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
    r"""The package's loss (:data:`nqf.model.mse`, Eq. 26) $\frac1b\sum_x (f(x) - y)^2$ of the deep NQF on a batch
    (``xs`` with a leading batch axis)."""
    return mse(jax.vmap(lambda x: deep_nqf_output(stats, forms, x))(xs), ys)


def scale_forms(forms: tuple[Callable, ...], scales: Sequence[float]) -> tuple[Callable, ...]:
    r"""Forms multiplied by ``scales[l]``: $\tilde A^{(l)} = (d'_l/d_l)A^{(l)}$ of Thm 15 for purely
    quadratic layers ($C = 0$, $g = 0$, $B = 0$, the ZGZ case of both Fig. 8 modules)."""
    if len(scales) != len(forms):
        raise invalid("scales", f'hold one factor per layer ({len(forms)})', f'{len(scales)}')
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
        raise invalid("new_widths", "have one entry per layer, as `stats` and `widths` do",
                      f"{len(stats)}, {len(widths)} and {len(new_widths)} entries")
    return tuple((d / dn * jnp.asarray(M), jnp.asarray(mu)) for (M, mu), d, dn in zip(stats, widths, new_widths))
