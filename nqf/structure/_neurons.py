r"""Neuron axes of a parameter pytree: which leaves hold the interchangeable neurons (Def. 1).

A parameter pytree (a dict of arrays, an ``equinox.Module``) stores neuron $i$ spread over several
arrays. Its **neuron axes** are given the way ``jax.vmap``'s ``in_axes`` are: a prefix pytree of
ints, ``None`` for a leaf shared by all neurons. One home for the parsing, used by the autodiff
structure matrices of pytrees (:mod:`nqf.structure`) and by the trainers of :mod:`nqf.training`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

from .._checks import invalid


def is_axis_leaf(a) -> bool:
    return a is None or isinstance(a, (int, np.integer))


def broadcast_axes(params, neuron_axes, name: str = "params"):
    """Neuron axis of every leaf of ``params`` (a prefix pytree, like vmap's ``in_axes``)."""
    if is_axis_leaf(neuron_axes):
        return jax.tree_util.tree_map(lambda _: neuron_axes, params)
    try:
        return jax.tree_util.tree_map(
            lambda a, sub: jax.tree_util.tree_map(lambda _: a, sub), neuron_axes, params, is_leaf=is_axis_leaf)
    except ValueError as err:
        raise invalid(
            "neuron_axes", f"be a prefix of the parameter pytree `{name}` (as vmap's in_axes are of its "
                           f"arguments), with ints or None at its leaves", f"a mismatch: {err}") from err


def neuron_leaves(params, neuron_axes, name: str = "params"):
    """Validated neuron leaves: ``(leaves, treedef, axes)`` with ``axes[i]`` the non-negative neuron
    axis of leaf ``i`` or ``None``, and ``d``, the common number of neurons."""
    axes = broadcast_axes(params, neuron_axes, name)
    leaves, treedef = jax.tree_util.tree_flatten(params)
    flat_a = treedef.flatten_up_to(axes)
    out, sizes = [], []
    for i, (leaf, a) in enumerate(zip(leaves, flat_a)):
        if a is None:
            out.append(None)
            continue
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise invalid("neuron_axes", f"hold an int or None at leaf {i}", repr(a))
        if not eqx.is_inexact_array(leaf):
            raise invalid("neuron_axes", f"give None to leaf {i} of `{name}`, which is not a float array "
                                         f"({type(leaf).__name__})", f"an axis ({a})")
        if not -leaf.ndim <= a < leaf.ndim:
            raise invalid("neuron_axes", f"give leaf {i} of `{name}` of shape {leaf.shape} a neuron axis in range", f"neuron axis {a}, which is out of range")
        out.append(int(a) % leaf.ndim)
        sizes.append(leaf.shape[a])
    if not sizes:
        raise invalid("neuron_axes", f"mark at least one leaf of `{name}` as a neuron leaf",
                      "no leaf marked (every axis None)")
    if len(set(sizes)) != 1:
        raise invalid(name, "have the same number of neurons d along the neuron axis of every neuron leaf",
                      f"sizes {sizes}")
    return leaves, treedef, tuple(out), int(sizes[0])


def split_params(params, neuron_axes, *, name: str = "W0"):
    """``(trainable, frozen, axes, d)``: the neuron leaves (inexact arrays with an int axis), the rest,
    the neuron axes of the trainable leaves in order, and the number of neurons."""
    leaves, treedef, axes, d = neuron_leaves(params, neuron_axes, name)
    mask_tree = jax.tree_util.tree_unflatten(treedef, [a is not None for a in axes])
    trainable, frozen = eqx.partition(params, mask_tree)
    return trainable, frozen, tuple(a for a in axes if a is not None), d

