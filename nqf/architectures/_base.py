r"""The base of every architecture (:class:`Architecture`), the input checks the constructors share and the
feed-forward structure matrix of Eq. (17). Matrices inside a neuron are vectorised **column-major**
(``vec`` stacks columns), the convention of the Kronecker identities in App. A.5-A.6.
"""


import abc
from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
from equinox import AbstractVar
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_callable, check_finite, check_shape, check_size, invalid, wrong_kind
from .._types import ArrayLike, Input


class Architecture(eqx.Module):
    r"""A module of interchangeable neurons together with its closed-form structure matrix.

    Near $W = 0$ (Theorem 1, Eq. 2) $f_x(W) = f_x(0) + \sum_i \mathrm{Tr}[w_i w_i^\top A(x)] + O(\|W\|^3)$; most
    layers are feed-forward (Eq. 17), $A = \tfrac12[[0, C], [C^\top, 0]]$. An ``equinox.Module`` whose fields are
    the module's static sizes and options, all hashable: two architectures built with the same arguments are
    equal and hash alike, so every compiled function of :mod:`nqf.structure` that takes one is cached **by
    value**. Callables stored in a field (an activation, an expert) are compared by identity and are assumed
    pure, as ``jax.jit`` assumes. Subclass it for a module of one's own whose $A(x)$ is known in closed form.

    Attributes:
        name: short human-readable name (used in figure labels).
        p: parameters per neuron (rows of ``W``).
        apply: ``apply(W, x)``, ``W`` of shape ``(p, d)`` for any width ``d``.
        structure: ``structure(x)``, the closed form $A(x)$, shape ``(p, p)``
            (``(o, p, p)`` for ``o`` outputs, one $A^{(o)}$ per output, App. B.2).
        sample_input: ``sample_input(key)`` draws one valid random input.
        outputs: ``None`` for a scalar module, else the output dimension ``o``.
    """

    name: AbstractVar[str]
    p: AbstractVar[int]

    #: whether compiled functions may be cached on this architecture's value (``False`` for a subclass whose
    #: callables read mutable state: then :mod:`nqf.structure` traces it afresh on every call).
    cache_by_value: ClassVar[bool] = True

    @property
    def outputs(self) -> int | None:
        return None

    @abc.abstractmethod
    def apply(self, W: Float[ArrayLike, "p d"], x: Input) -> Float[Array, "*o"]:
        """The module $f_x(W)$, neurons are the columns of ``W``."""

    @abc.abstractmethod
    def structure(self, x: Input) -> Float[Array, "*o p p"]:
        """The closed-form structure matrix $A(x)$ (Theorem 1, Eq. 2)."""

    @abc.abstractmethod
    def sample_input(self, key: Array) -> Input:
        """One valid random input."""

    def quadratic(self, W: Float[ArrayLike, "p d"], x: Input) -> Float[Array, "*o"]:
        r"""The NQF's quadratic term $\mathrm{Tr}[WW^\top A(x)]$ (Eq. 2), one value per output, from the
        closed-form :meth:`structure`; an architecture with a cheaper form (attention) overrides it. A callable
        ``nqf_form`` for :func:`nqf.compare_with_nqf`."""
        W = jnp.asarray(W)
        return jnp.einsum("...pq,pq->...", self.structure(x), W @ W.T)


# ----------------------------------------------------------------- helpers
def check_weights(W, p: int, module: str) -> None:
    """Raise unless ``W`` has shape ``(p, d)`` with ``d >= 1``."""
    shape = tuple(np.shape(W))
    if len(shape) != 2 or shape[0] != p or shape[1] < 1:
        raise invalid("W", f'have shape (p, d) = ({p}, *) for {module} (p parameters per neuron, one column per neuron)',
                      f'shape {shape}')


def _check_sizes(**sizes) -> None:
    """Each size a positive int (``TypeError`` for 2.5, "4", True; ``ValueError`` for 0, -1)."""
    for name, value in sizes.items():
        check_size(name, value)


def check_input(name: str, x, shape: tuple[int, ...], meaning: str) -> None:
    """Shape and finiteness check of one input array."""
    check_shape(name, x, shape, meaning)
    check_finite(name, x)


def require_function(phi, name: str = "activation") -> Callable:
    """``phi`` must be a function (``jnp.tanh``, ``jax.nn.gelu``, ...); a name as a string is a ``TypeError``."""
    if isinstance(phi, str):
        raise wrong_kind(name, 'be a function such as jnp.tanh or jax.nn.gelu, not a name',
                         f'the string {phi!r} (pass e.g. jnp.{phi} or jax.nn.{phi})')
    return check_callable(name, phi, "a function such as jnp.tanh or jax.nn.gelu")


def check_activation(phi: Callable, name: str = "activation", h: float = 1e-3) -> None:
    r"""Raise unless ``phi`` looks $C^3$ at 0 (Prop. 1 needs it).

    Compares the autodiff derivatives $\phi'$ and $\phi''$ at $\pm h$ and at 0;
    a kink (ReLU, leaky ReLU, $|z|$) or a jump in $\phi''$ shows as a jump of
    order one, whereas a smooth function changes by $O(h)$.
    """
    require_function(phi, name)
    d1, d2 = jax.grad(phi), jax.grad(jax.grad(phi))
    for order, fn in ((1, d1), (2, d2)):
        lo, mid, hi = (float(fn(jnp.asarray(t, jnp.float32))) for t in (-h, 0.0, h))
        tol = 0.05 * (1.0 + abs(mid))
        if not all(np.isfinite((lo, mid, hi))) or abs(hi - lo) > tol or abs(mid - 0.5 * (hi + lo)) > tol:
            raise invalid(name, "be smooth at 0 (Theorem 1 needs a C^3 module, so no structure matrix exists; autodiff "
                          "would silently return a one-sided value; pass check_smooth=False to build the module anyway "
                          "and inspect it with nqf.structure_report)",
                          f"`{name}` is not smooth at 0: its derivative of order {order} is {lo:.3g} at -{h:g}, "
                          f"{mid:.3g} at 0 and {hi:.3g} at +{h:g}")


def _zero_slope(phi: Callable, x) -> Array:
    """$\\phi'(0)$ in the dtype of ``x`` (so float64 closed forms stay exact)."""
    return jax.grad(phi)(jnp.zeros((), jnp.result_type(x, float)))


def feedforward_structure(C: Float[ArrayLike, "*o n1 n2"]) -> Float[Array, "*o p p"]:
    r"""Feed-forward structure matrix $A = \tfrac12\begin{bmatrix}0 & C\\ C^\top & 0\end{bmatrix}$ (Eq. 17).

    ``C`` may carry a leading output axis ``(o, n1, n2)``; then one $A^{(o)}$
    per output is returned, shape ``(o, n1 + n2, n1 + n2)``.
    """
    C = jnp.asarray(C)
    n1, n2 = C.shape[-2:]
    top = jnp.concatenate([jnp.zeros(C.shape[:-2] + (n1, n1), C.dtype), C], axis=-1)
    bot = jnp.concatenate([jnp.swapaxes(C, -1, -2), jnp.zeros(C.shape[:-2] + (n2, n2), C.dtype)], -1)
    return 0.5 * jnp.concatenate([top, bot], axis=-2)


def _readout_blocks(col: Float[Array, " n"], outputs: int | None) -> Array:
    """$C = c$ (scalar module) or the stack $C^{(m)} = c\\, e_m^\\top$ (``outputs = o``)."""
    if outputs is None:
        return col[:, None]
    return jnp.einsum("i,mj->mij", col, jnp.eye(outputs, dtype=col.dtype))


def _readout(W_read: ArrayLike, h: Array, outputs: int | None) -> Array:
    """$\\sum_i v_i h_i$ with $v_i$ scalar (row ``W_read[0]``) or in $\\mathbb R^o$."""
    return W_read[0] @ h if outputs is None else W_read @ h


def _check_outputs(outputs: int | None) -> int | None:
    """``outputs`` validated: ``None`` (a scalar module) or a positive int."""
    if outputs is not None and (not isinstance(outputs, (int, np.integer)) or outputs < 1):
        raise invalid("outputs", 'be None (scalar output) or a positive int', f'{outputs!r}')
    return None if outputs is None else int(outputs)
