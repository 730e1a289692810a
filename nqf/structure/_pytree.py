r"""Structure matrices of parameter pytrees and equinox Modules: :func:`neuron_weights` packs the neurons into
one $W$ (``nqf.structure._neurons``), :func:`pytree_structure_matrix` is $A(x)$ (Theorem 1, Eq. 2) in those coordinates."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from jaxtyping import Array, Float

from .._types import Input
from ._autodiff import structure_matrix
from ._models import model_function
from ._neurons import NeuronPacking, axes_spec, flat_axes


class NeuronLayout(NamedTuple):
    """Where the neurons of a parameter pytree live (see :func:`neuron_weights`)."""

    params: Any  #: the original pytree (shared leaves and static fields are taken from it)
    packing: NeuronPacking  #: the packing of its neuron leaves
    p: int  #: parameters per neuron
    d: int  #: neurons in ``params``

    def unflatten(self, W: Float[Array, "p d"]) -> Any:
        """The pytree with its neuron leaves taken from ``W`` (any width ``d``); other leaves unchanged."""
        return self.packing.unpack(W, self.params)


def neuron_weights(params: Any, neuron_axes: Any) -> tuple[Float[Array, "p d"], NeuronLayout]:
    r"""Pack the neuron leaves of ``params`` into $W\in\mathbb R^{p\times d}$ (one column per neuron).

    Args:
        params: a parameter pytree (dict of arrays, ``equinox.Module``, ...).
        neuron_axes: the neuron axis of each leaf, a prefix pytree of ``params`` as ``jax.vmap``'s ``in_axes`` (an
            int, or ``None`` for a leaf that is not a neuron parameter), or the equinox way (``nqf.structure._neurons``).

    Returns:
        ``(W, layout)``; ``layout.unflatten(W)`` inverts the packing (at any width).
    """
    axes, d = flat_axes(params, axes_spec(neuron_axes), "params")
    packing = NeuronPacking.of(params, axes)
    W = packing.pack(params)
    return W, NeuronLayout(params, packing, int(W.shape[0]), d)


def _apply_W(apply, layout, W, x):
    return apply(layout.unflatten(W), x)


def pytree_structure_matrix(
    apply: Callable | None, params: Any, x: Input, neuron_axes: Any, **kwargs
) -> Float[Array, "*o p p"]:
    r"""$A(x)$ of Theorem 1 for a pytree module, in the coordinates of :func:`neuron_weights`.

    ``apply(params, x)`` is the module (``None`` for a callable equinox Module: ``params(x)``). Calls
    :func:`nqf.structure_matrix` on $W\mapsto$ ``apply(unflatten(W), x)``, so every check of Theorem 1
    (smoothness, permutation symmetry, ZGZ) runs and a failure raises ``ValueError``; ``kwargs`` go to it
    (``d``, ``allow_general``, ``key``).
    """
    _, layout = neuron_weights(params, neuron_axes)
    return structure_matrix(partial(_apply_W, model_function(apply, params), layout), x, p=layout.p, **kwargs)
