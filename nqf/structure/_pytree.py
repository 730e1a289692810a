r"""Structure matrices of the modules researchers already have: parameter pytrees and equinox Modules.

nqf's own modules take weights $W = (w_1\dots w_d)\in\mathbb R^{p\times d}$, one column per neuron.
A flax-style parameter dict or an ``equinox.Module`` stores the same neurons spread over several
arrays: in an ``equinox.nn.MLP`` neuron $i$ is row $i$ of the first layer's weight and column $i$ of
the second's. Given the neuron axis of each leaf the way ``jax.vmap``'s ``in_axes`` are given (a
prefix pytree of ints; ``None`` for a leaf shared by all neurons, e.g. an output bias, which is held
fixed), :func:`neuron_weights` packs the neuron leaves into one $W$:

* the rows of $W$ run over the neuron leaves in pytree order, and inside a leaf over its non-neuron
  axes in C order;
* column $i$ of $W$ is neuron $i$.

For a two-layer MLP this is the packing ``w = [u; v]`` of :func:`nqf.architectures.two_layer_mlp` (Eq. 6). The
structure matrix $A(x)$ of Theorem 1 (Eq. 2) in these coordinates is then
:func:`nqf.structure_matrix` of $W\mapsto$ ``apply(unflatten(W), x)``: :func:`pytree_structure_matrix`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import check_float64
from .._types import Input
from ._autodiff import StructureReport, structure_matrix, structure_report
from ._models import model_function
from ._models import model_name
from ._neurons import neuron_leaves
from ._neurons import split_params


class NeuronPacking(eqx.Module):
    """THE neuron packing as a value (hashable, every field static): ``pack(params) -> W (p, d)`` and its
    inverse ``unpack(W, params)``, for the pytrees of one structure (``treedef``). Rows of ``W`` run over the
    neuron leaves in pytree order (flat positions ``index``, neuron axes ``axes``), inside a leaf over its other
    axes (``shapes``) in C order; column ``i`` is neuron ``i``. Called, it packs (a ``linear_map`` for the
    trainer's records)."""

    treedef: Any = eqx.field(static=True)
    index: tuple = eqx.field(static=True)
    axes: tuple = eqx.field(static=True)
    shapes: tuple = eqx.field(static=True)

    def pack(self, params) -> Float[Array, "p d"]:
        """The neuron leaves of ``params`` as one ``(p, d)`` matrix."""
        leaves = self.treedef.flatten_up_to(params)
        cols = [jnp.reshape(jnp.moveaxis(leaves[i], a, -1), (-1, leaves[i].shape[a]))
                for i, a in zip(self.index, self.axes)]
        return jnp.concatenate(cols, axis=0)

    def unpack(self, W: Float[Array, "p d"], params) -> Any:
        """``params`` with its neuron leaves taken from ``W`` (any width ``d``); other leaves unchanged."""
        leaves = list(self.treedef.flatten_up_to(params))
        r0, width = 0, W.shape[1]
        for i, a, shape in zip(self.index, self.axes, self.shapes):
            n = int(np.prod(shape, dtype=int))
            leaves[i] = jnp.moveaxis(jnp.reshape(W[r0:r0 + n], shape + (width,)), -1, a)
            r0 += n
        return jax.tree_util.tree_unflatten(self.treedef, leaves)

    def __call__(self, params) -> Float[Array, "p d"]:
        return self.pack(params)


class NeuronLayout(NamedTuple):
    """Where the neurons of a parameter pytree live (see :func:`neuron_weights`)."""

    params: Any  #: the original pytree (shared leaves and static fields are taken from it)
    treedef: Any  #: its tree structure
    index: tuple[int, ...]  #: flat positions of the neuron leaves
    axes: tuple[int, ...]  #: their neuron axes (non-negative)
    shapes: tuple[tuple[int, ...], ...]  #: their shapes without the neuron axis
    p: int  #: parameters per neuron
    d: int  #: neurons in ``params``

    @property
    def packing(self) -> NeuronPacking:
        """The packing as a hashable value (:class:`NeuronPacking`)."""
        return NeuronPacking(self.treedef, self.index, self.axes, self.shapes)

    def unflatten(self, W: Float[Array, "p d"]) -> Any:
        """The pytree with its neuron leaves taken from ``W`` (any width ``d``); other leaves unchanged."""
        return self.packing.unpack(W, self.params)


def neuron_weights(params: Any, neuron_axes: Any) -> tuple[Float[Array, "p d"], NeuronLayout]:
    r"""Pack the neuron leaves of ``params`` into $W\in\mathbb R^{p\times d}$ (one column per neuron).

    Args:
        params: a parameter pytree (dict of arrays, ``equinox.Module``, ...).
        neuron_axes: the neuron axis of each leaf, a prefix pytree of ``params`` as ``jax.vmap``'s
            ``in_axes``: an int, or ``None`` for a leaf that is not a neuron parameter.

    Returns:
        ``(W, layout)``; ``layout.unflatten(W)`` inverts the packing (at any width).
    """
    leaves, treedef, flat_axes, d = neuron_leaves(params, neuron_axes, "params")
    index, ax, shapes = [], [], []
    for i, (leaf, a) in enumerate(zip(leaves, flat_axes)):
        if a is not None:
            index.append(i)
            ax.append(a)
            shapes.append(tuple(n for k, n in enumerate(leaf.shape) if k != a))
    W = NeuronPacking(treedef, tuple(index), tuple(ax), tuple(shapes)).pack(params)
    layout = NeuronLayout(params, treedef, tuple(index), tuple(ax), tuple(shapes), int(W.shape[0]), d)
    return W, layout


def weight_apply(apply: Callable, layout: NeuronLayout) -> Callable:
    """``apply_W(W, x) = apply(layout.unflatten(W), x)``: the module in nqf's ``(p, d)`` convention."""

    def apply_W(W, x):
        return apply(layout.unflatten(W), x)

    return apply_W


def _prepare(apply, params, neuron_axes):
    apply = model_function(apply, params)
    _, layout = neuron_weights(params, neuron_axes)
    return weight_apply(apply, layout), layout


def pytree_structure_matrix(
    apply: Callable | None, params: Any, x: Input, neuron_axes: Any, **kwargs
) -> Float[Array, "*o p p"]:
    r"""$A(x)$ of Theorem 1 for a pytree module, in the coordinates of :func:`neuron_weights`.

    ``apply(params, x)`` is the module (``None`` for a callable equinox Module: ``params(x)``).
    Calls :func:`nqf.structure_matrix` on $W\mapsto$ ``apply(unflatten(W), x)``, so every check of
    Theorem 1 (smoothness, permutation symmetry, ZGZ) runs and a failure raises ``ValueError``;
    ``kwargs`` go to it (``d``, ``allow_general``, ``key``).
    """
    apply_W, layout = _prepare(apply, params, neuron_axes)
    return structure_matrix(apply_W, x, p=layout.p, **kwargs)


def pytree_structure_report(
    apply: Callable | None, params: Any, x: Input, neuron_axes: Any, **kwargs
) -> StructureReport:
    """:func:`nqf.structure_report` of a pytree module (see :func:`pytree_structure_matrix`)."""
    apply_W, layout = _prepare(apply, params, neuron_axes)
    return structure_report(apply_W, x, p=layout.p, **kwargs)


# ----------------------------------------------------------------- a user's model: A(x) in batch
@eqx.filter_jit
def _stack_jit(apply, packing, tr, frozen, xs, p, d):
    zero = jax.tree_util.tree_map(jnp.zeros_like, tr)
    dtype = jax.tree_util.tree_leaves(tr)[0].dtype

    def one(x):
        def f(w):  # neuron 1 = w (rows in the packing of neuron_weights), every other neuron 0
            return apply(eqx.combine(packing.unpack(jnp.zeros((p, d), dtype).at[:, 0].set(w), zero), frozen), x)
        H = jax.hessian(f)(jnp.zeros((p,), dtype))
        return 0.25 * (H + jnp.swapaxes(H, -1, -2))  # A = (1/2) d^2 f / dw_1^2 at 0, symmetrised

    return jax.vmap(one)(xs)


def pytree_structure_stack(
    apply: Callable | None, params: Any, xs: Any, neuron_axes: Any
) -> Float[Array, "m *o p p"]:
    r"""$A(x_\mu)$ of Theorem 1 at every input of ``xs`` (leading sample axis), for a pytree module.

    ``apply(params, x)`` is the module (``None`` for a callable equinox Module: ``params(x)``; a flax model
    is ``apply = model.apply`` with its parameter dict), ``neuron_axes`` as in :func:`nqf.structure.neuron_weights`, whose
    packing gives the coordinates. Under ZGZ (Property 1) the per-neuron Hessian blocks at $W = 0$ are all
    $2A(x)$ (Eq. 54), so $A(x) = \tfrac12\partial^2 f_x/\partial w_1^2\,(0)$: one Hessian in the $p$
    parameters of one neuron per sample, all samples in one ``vmap``, one $A^{(o)}$ per output (App. B.2).
    One compiled program per (module, shapes): a new ``params`` or ``xs`` of the same shapes compiles nothing.
    This does not check Theorem 1's hypotheses (see :func:`nqf.structure.check_hypotheses`); it refuses float32.

    Returns:
        ``(m, p, p)`` for scalar outputs, ``(m, o, p, p)`` for vector outputs (``(m, *out, p, p)`` in general),
        ready for :class:`nqf.NQFData` with targets ``(m,)`` or ``(m, o)``.
    """
    name = model_name(apply, params)
    apply = model_function(apply, params)
    check_float64("params", params, name)
    tr, frozen, ax_leaves, d = split_params(params, neuron_axes, name="params")
    leaves, treedef = jax.tree_util.tree_flatten(tr)
    shapes = tuple(tuple(n for k, n in enumerate(l.shape) if k != a) for l, a in zip(leaves, ax_leaves))
    packing = NeuronPacking(treedef, tuple(range(len(leaves))), tuple(ax_leaves), shapes)  # of the neuron leaves
    p = sum(int(np.prod(shape, dtype=int)) for shape in shapes)
    xs = jax.tree_util.tree_map(jnp.asarray, xs)
    return _stack_jit(apply, packing, tr, frozen, xs, int(p), int(d))
