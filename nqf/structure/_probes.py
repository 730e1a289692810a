r"""THE Theorem-1 probes of the dense and matrix-free checks: $W\sigma$ (Def. 1), neuron 1 zeroed (Property 1),
the gradient's Taylor residual at $t = \pm h, \pm h/2$ (ratio 4 for $C^3$, 8 with a $\mathbb Z_2$ symmetry, 2 at a
kink); steps and tolerances are ``nqf._checks.theorem1_tolerance``'s."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import theorem1_tolerance
from ._neurons import axis_of, merge_view, neuron_view, take_neurons

SMOOTH_RATIO = theorem1_tolerance(np.float64).smooth_ratio  #: the tolerance set's, for the readers of this room

#: The probes run once per call on small arrays, so compile time dominates: both ask XLA for its cheapest
#: backend pipeline (the matrix-free probe: 1.1-1.3 s to 0.7-0.8 s per compilation for an MLP, a CNN and
#: attention). Their readings move at rounding level only.
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


class _Static:
    """The non-array part of a call's arguments, hashed and compared by its tree and leaves (as in
    ``equinox.filter_jit``: a function leaf by identity, so one module compiles once)."""

    __slots__ = ("tree",)

    def __init__(self, tree):
        self.tree = tree

    def _key(self) -> tuple:
        leaves, treedef = jax.tree_util.tree_flatten(self.tree)
        return treedef, tuple(leaves)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other) -> bool:
        return isinstance(other, _Static) and self._key() == other._key()


def fast_filter_jit(fun: Callable) -> Callable:
    """``equinox.filter_jit(fun)`` compiled with :data:`FAST_COMPILE`: array leaves of the arguments traced,
    everything else static."""

    @functools.partial(jax.jit, static_argnums=0, compiler_options=FAST_COMPILE)
    def compiled(static, dynamic):
        return fun(*eqx.combine(dynamic, static.tree))

    @functools.wraps(fun)
    def call(*args):
        dynamic, static = eqx.partition(args, eqx.is_array)
        return compiled(_Static(static), dynamic)

    return call


def taylor_step(dtype) -> float:
    """The smoothness probe's step $h$ for ``dtype`` (the tolerance set's ``step``)."""
    return theorem1_tolerance(dtype).step


def taylor_steps(dtype) -> np.ndarray:
    r"""The four steps $h, h/2, -h, -h/2$ of the smoothness probe (residuals ``0, 1`` and ``2, 3`` pair up)."""
    h = taylor_step(dtype)
    return np.array([h, h / 2, -h, -h / 2])


def permute_neurons(W, ax_leaves: Sequence[Any], perm):
    """``W`` with its neurons permuted by ``perm`` along every neuron axis (``W[:, perm]`` for ``(p, d)``)."""
    leaves, treedef = jax.tree_util.tree_flatten(W)
    return jax.tree_util.tree_unflatten(treedef, [take_neurons(l, perm, a) for l, a in zip(leaves, ax_leaves)])


def zero_neuron(W, ax_leaves: Sequence[Any]):
    """``W`` with neuron 1 (index 0 along every neuron axis) set to zero (``W.at[:, 0].set(0)`` for ``(p, d)``)."""
    leaves, treedef = jax.tree_util.tree_flatten(W)
    return jax.tree_util.tree_unflatten(
        treedef, [merge_view(jnp.moveaxis(jnp.moveaxis(neuron_view(l, a), axis_of(a), 0).at[0].set(0.0), 0,
                                          axis_of(a)), a) for l, a in zip(leaves, ax_leaves)])


def taylor_residuals(grads: Any, g0: Any, hv: Any, steps: Any, norm: Any) -> list:
    r"""$|r(t)| = |\nabla f(tV) - \nabla f(0) - tHV|$ at each step $t$ of :func:`taylor_steps`, from the gradients
    ``grads`` at $tV$ (pytrees, or arrays), $\nabla f(0)$ and $HV$, with the norm of the caller's check."""
    return [norm(jax.tree_util.tree_map(lambda a, b, c: a - b - t * c, g, g0, hv)) for g, t in zip(grads, steps)]


def taylor_ratio(residuals: Sequence[Any], grad_norms: Sequence[Any], g0_norm: Any, hv_norm: Any, h: Any,
                 rtol: Any) -> float:
    r"""THE smoothness reading: $\min |r(\pm h)|/|r(\pm h/2)|$ over the two sides of 0, skipping a side whose
    $|r(\pm h)|$ is at rounding level, ``rtol`` $\cdot(|\nabla f(\pm hV)| + |\nabla f(0)| + h|HV|)$.

    ``residuals`` and ``grad_norms`` are $|r(t)|$ and $|\nabla f(tV)|$ at the steps of :func:`taylor_steps`;
    ``inf`` when both sides are at rounding level (a quadratic module)."""
    ratio = math.inf
    for i in (0, 2):
        floor = rtol * (float(grad_norms[i]) + float(g0_norm) + float(h) * float(hv_norm))
        if float(residuals[i]) > floor:
            ratio = min(ratio, float(residuals[i]) / max(float(residuals[i + 1]), 1e-300))
    return ratio
