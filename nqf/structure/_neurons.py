r"""Neuron axes of a parameter pytree (Def. 1) and THE packing. Axes are given like ``jax.vmap``'s ``in_axes``
(``None``: shared by all neurons), or as a copy of the model with ints at the neuron leaves; non-array leaves
are ignored. An axis that packs the neurons as consecutive blocks (the heads of an attention layer in the rows of one
matrix) is :class:`Blocks`. :class:`NeuronPacking` packs them into $W\in\mathbb R^{p\times d}$: rows over the neuron
leaves in pytree order (C order inside a leaf, a block's own axis in the neuron axis's place), column $i$ neuron
$i$."""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import invalid


def _is_none(a) -> bool:
    return a is None


@dataclasses.dataclass(frozen=True)
class Blocks:
    """A neuron axis that holds the neurons as consecutive blocks of ``size`` entries: neuron ``i`` is entries
    ``[i * size, (i + 1) * size)`` of ``axis`` (equinox's ``MultiheadAttention``: ``query_proj.weight`` is
    ``(heads * qk_size, in)``, its heads are ``Blocks(0, qk_size)``). Give it in ``neuron_axes`` where an int
    would go; the axis's length must be a multiple of ``size``."""

    axis: Any  #: the axis (an int, negative counts from the end)
    size: Any  #: entries per neuron along it (an int >= 1)

    def __post_init__(self):
        for name in ("axis", "size"):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise invalid(name, "be an int", repr(v))
        if self.size < 1:
            raise invalid("size", "be >= 1 (entries per neuron along the axis)", repr(self.size))


def axis_of(a) -> int:
    return a.axis if isinstance(a, Blocks) else a


def neuron_view(leaf, a):
    """``leaf`` with its neurons on axis ``axis_of(a)`` alone (a :class:`Blocks` axis split into (neurons, size))."""
    if not isinstance(a, Blocks):
        return leaf
    shape = jnp.shape(leaf)
    return jnp.reshape(leaf, shape[:a.axis] + (shape[a.axis] // a.size, a.size) + shape[a.axis + 1:])


def merge_view(view, a):
    """The inverse of :func:`neuron_view`."""
    if not isinstance(a, Blocks):
        return view
    shape = jnp.shape(view)
    return jnp.reshape(view, shape[:a.axis] + (shape[a.axis] * a.size,) + shape[a.axis + 2:])


def take_neurons(leaf, index, a):
    """``jnp.take(leaf, index, axis)`` over neurons (``index`` an int or an index array), :class:`Blocks` included."""
    out = jnp.take(neuron_view(leaf, a), index, axis=axis_of(a))
    return out if np.ndim(index) == 0 else merge_view(out, a)


def axes_spec(neuron_axes) -> tuple:
    """``neuron_axes`` as a hashable value ``(treedef, leaves)``: ints kept, ``None``, a model array or a model's
    non-array leaf (an activation) as ``None``; anything else refused."""
    leaves, treedef = jax.tree_util.tree_flatten(neuron_axes, is_leaf=_is_none)
    out = []
    for i, a in enumerate(leaves):
        if isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
            out.append(int(a))
        elif isinstance(a, Blocks):
            out.append(a)
        elif a is None or eqx.is_array(a) or callable(a):
            out.append(None)
        else:
            raise invalid("neuron_axes", f"hold an int, a nqf.structure.Blocks or None at leaf {i}", repr(a))
    return treedef, tuple(out)


def flat_axes(params, spec: tuple, name: str = "params") -> tuple[tuple, int]:
    """The neuron axis (non-negative) or ``None`` of every leaf of ``params``, and ``d``, the number of neurons."""
    treedef, spec_leaves = spec
    try:
        subtrees = treedef.flatten_up_to(params)
    except (ValueError, TypeError) as err:
        raise invalid("neuron_axes", f"be a prefix of the parameter pytree `{name}` (as vmap's in_axes are of its "
                                     f"arguments), with ints or None at its leaves", f"a mismatch: {err}") from err
    out, sizes = [], []
    for a, sub in zip(spec_leaves, subtrees):
        for leaf in jax.tree_util.tree_leaves(sub):
            i = len(out)
            if a is None or not eqx.is_array(leaf):  # shared, or not an array (ignored, as eqx.filter does)
                out.append(None)
                continue
            if not eqx.is_inexact_array(leaf):
                raise invalid("neuron_axes", f"give None to leaf {i} of `{name}`, which is not a float array "
                                             f"({leaf.dtype})", f"an axis ({a})")
            ax = axis_of(a)
            if not -leaf.ndim <= ax < leaf.ndim:
                raise invalid("neuron_axes", f"give leaf {i} of `{name}` of shape {leaf.shape} a neuron axis in "
                                             "range", f"neuron axis {ax}, which is out of range")
            if isinstance(a, Blocks):
                if leaf.shape[ax] % a.size:
                    raise invalid("neuron_axes", f"give leaf {i} of `{name}` of shape {leaf.shape} blocks whose size "
                                                 f"divides its axis {ax} (length {leaf.shape[ax]})",
                                  f"Blocks(axis={a.axis}, size={a.size})")
                out.append(Blocks(ax % leaf.ndim, a.size))
                sizes.append(leaf.shape[ax] // a.size)
                continue
            out.append(a % leaf.ndim)
            sizes.append(leaf.shape[a])
    if not sizes:
        raise invalid("neuron_axes", f"mark at least one leaf of `{name}` as a neuron leaf",
                      "no leaf marked (every axis None)")
    if len(set(sizes)) != 1:
        raise invalid(name, "have the same number of neurons d along the neuron axis of every neuron leaf",
                      f"sizes {sizes}")
    return tuple(out), int(sizes[0])


def split_params(params, neuron_axes, *, name: str = "W0"):
    """``(trainable, frozen, axes, d)``: the neuron leaves, the rest (shared leaves and non-arrays), the neuron
    axes of the trainable leaves in order, and the number of neurons."""
    axes, d = flat_axes(params, axes_spec(neuron_axes), name)
    treedef = jax.tree_util.tree_structure(params)
    trainable, frozen = eqx.partition(params, jax.tree_util.tree_unflatten(treedef, [a is not None for a in axes]))
    return trainable, frozen, tuple(a for a in axes if a is not None), d


class NeuronPacking(eqx.Module):
    """THE neuron packing as a value (hashable, every field static): ``pack(params) -> W (p, d)`` and its inverse
    ``unpack(W, params)``, for the pytrees of one structure (``treedef``). Rows of ``W`` run over the neuron leaves
    (flat positions ``index``, neuron axes ``axes``), inside a leaf over its other axes (``shapes``) in C order;
    column ``i`` is neuron ``i``. Called, it packs (a ``linear_map`` for the trainer's records)."""

    treedef: Any = eqx.field(static=True)
    index: tuple = eqx.field(static=True)
    axes: tuple = eqx.field(static=True)
    shapes: tuple = eqx.field(static=True)

    @classmethod
    def of(cls, params, axes) -> "NeuronPacking":
        """The packing of ``params`` whose leaf ``i`` has neuron axis ``axes[i]`` (``None``: not a neuron leaf)."""
        leaves, treedef = jax.tree_util.tree_flatten(params)
        keep = [(i, a, tuple(n for k, n in enumerate(jnp.shape(neuron_view(leaves[i], a))) if k != axis_of(a)))
                for i, a in enumerate(axes) if a is not None]
        return cls(treedef, *(tuple(c) for c in zip(*keep)))

    @property
    def p(self) -> int:
        """Parameters per neuron."""
        return sum(int(np.prod(s, dtype=int)) for s in self.shapes)

    def pack(self, params) -> Float[Array, "p d"]:
        """The neuron leaves of ``params`` as one ``(p, d)`` matrix."""
        leaves = self.treedef.flatten_up_to(params)
        views = [(neuron_view(leaves[i], a), axis_of(a)) for i, a in zip(self.index, self.axes)]
        cols = [jnp.reshape(jnp.moveaxis(v, a, -1), (-1, v.shape[a])) for v, a in views]
        return jnp.concatenate(cols, axis=0)

    def unpack(self, W: Float[Array, "p d"], params) -> Any:
        """``params`` with its neuron leaves taken from ``W`` (any width ``d``); other leaves unchanged."""
        leaves = list(self.treedef.flatten_up_to(params))
        r0, width = 0, W.shape[1]
        for i, a, shape in zip(self.index, self.axes, self.shapes):
            n = int(np.prod(shape, dtype=int))
            leaves[i] = merge_view(jnp.moveaxis(jnp.reshape(W[r0:r0 + n], shape + (width,)), -1, axis_of(a)), a)
            r0 += n
        return jax.tree_util.tree_unflatten(self.treedef, leaves)

    def __call__(self, params) -> Float[Array, "p d"]:
        return self.pack(params)


def deep_stack(model) -> str | None:
    """A description of ``model`` when it is a deep stack of neuron layers (an ``equinox.nn.MLP`` of depth >= 2, an
    ``equinox.nn.Sequential`` of three or more ``Linear`` layers), else None: such a model is not one layer of
    interchangeable neurons (the weights between two hidden layers carry a neuron index of each), so it has no
    single NQF of Theorem 1. The text names the ways to describe it."""
    if isinstance(model, eqx.nn.MLP):
        hidden, where = len(model.layers) - 1, "layers"
    elif isinstance(model, eqx.nn.Sequential):
        hidden = sum(isinstance(layer, eqx.nn.Linear) for layer in model.layers) - 1
        where = "layers"
    else:
        return None
    if hidden < 2:
        return None
    return (f"{type(model).__name__} is a deep stack of {hidden} hidden layers, not one layer of interchangeable "
            "neurons (the weights between two hidden layers carry a neuron index of each, so no single neuron axis "
            "makes Theorem 1 hold). Describe it by the deep NQF of Def. 2 (nqf.model.deep_nqf_apply, "
            "nqf.updates.deep_nqf_sgd; chapter 9), or diagnose one hidden layer at a time: neuron axes on that layer only "
            f"(e.g. {where}[0].weight 0, {where}[0].bias 0, {where}[1].weight 1) and None on every other leaf, "
            "which then stays fixed")
