r"""Permutation-symmetric ZGZ modules that couple their neurons *inside* the computation, so the cross
blocks of the Hessian at $W = 0$ (Eq. 54) vanish only because ZGZ holds (Property 1) and the diagonal blocks
are equal (Eq. 56) by symmetry: an output nonlinearity around the sum (remainder order 3), a layer normalised
over its neurons and a gate shared by all neurons (order 4).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import check_size, invalid
from .._random import normal
from .._types import ArrayLike
from ._base import Architecture, _zero_slope, check_input, check_weights, feedforward_structure


def _positive(name: str, value) -> float:
    v = float(value)
    if not v > 0 or v != v or v == float("inf"):
        raise invalid(name, 'be a finite number > 0', f'{value!r}')
    return v


class OutputNonlinearityMLP(Architecture):
    r"""$f_x(W) = g(\sum_i a_i\,\phi(u_i^\top x + b))$; see :func:`output_nonlinearity_mlp`."""

    k: int = eqx.field(static=True)
    outer: Callable = eqx.field(static=True)
    activation: Callable = eqx.field(static=True)
    bias: float = eqx.field(static=True, default=0.0)

    @property
    def name(self) -> str:
        return "output nonlinearity around the sum" + (f" (bias {self.bias:g})" if self.bias else "")

    @property
    def p(self) -> int:
        return self.k + 1

    def apply(self, W: Float[ArrayLike, "p d"], x: ArrayLike) -> Float[Array, ""]:
        check_weights(W, self.p, "output_nonlinearity_mlp")
        check_input("x", x, (self.k,), "one input vector")
        W = jnp.asarray(W)
        return self.outer(W[self.k] @ self.activation(W[: self.k].T @ x + self.bias))

    def structure(self, x: ArrayLike) -> Float[Array, "p p"]:
        check_input("x", x, (self.k,), "one input vector")
        x = jnp.asarray(x)
        # chain rule at W = 0 (ZGZ needs phi(b) = 0; with phi(b) != 0 this is the A of Eq. 20 only)
        slope = _zero_slope(self.outer, x) * jax.grad(self.activation)(jnp.asarray(self.bias, x.dtype))
        return feedforward_structure(slope * x[:, None])

    def sample_input(self, key: Array) -> Float[Array, " k"]:
        return normal(key, (self.k,))


class NormalisedMLP(Architecture):
    r"""$f_x(W) = \sum_i a_i\tanh(h_i/\sqrt{\delta + \|h\|^2})$, $h = U^\top x$; see :func:`normalised_mlp`."""

    k: int = eqx.field(static=True)
    delta: float = eqx.field(static=True, default=1.0)

    name = "layer normalised over its neurons"

    @property
    def p(self) -> int:
        return self.k + 1

    def apply(self, W: Float[ArrayLike, "p d"], x: ArrayLike) -> Float[Array, ""]:
        check_weights(W, self.p, "normalised_mlp")
        check_input("x", x, (self.k,), "one input vector")
        W = jnp.asarray(W)
        h = W[: self.k].T @ x
        return W[self.k] @ jnp.tanh(h / jnp.sqrt(self.delta + jnp.sum(h**2)))

    def structure(self, x: ArrayLike) -> Float[Array, "p p"]:
        check_input("x", x, (self.k,), "one input vector")
        x = jnp.asarray(x)
        return feedforward_structure(x[:, None] / jnp.sqrt(jnp.asarray(self.delta, x.dtype)))

    def sample_input(self, key: Array) -> Float[Array, " k"]:
        return normal(key, (self.k,))


class GatedMLP(Architecture):
    r"""$f_x(W) = \sigma(\sum_i (r_i^\top x)^2)\sum_i a_i\tanh(u_i^\top x)$; see :func:`gated_mlp`."""

    k: int = eqx.field(static=True)

    name = "MLP with a shared gate"

    @property
    def p(self) -> int:
        return 2 * self.k + 1

    def apply(self, W: Float[ArrayLike, "p d"], x: ArrayLike) -> Float[Array, ""]:
        check_weights(W, self.p, "gated_mlp")
        check_input("x", x, (self.k,), "one input vector")
        W = jnp.asarray(W)
        k = self.k
        gate = jax.nn.sigmoid(jnp.sum((W[k + 1:].T @ x) ** 2))
        return gate * (W[k] @ jnp.tanh(W[:k].T @ x))

    def structure(self, x: ArrayLike) -> Float[Array, "p p"]:
        check_input("x", x, (self.k,), "one input vector")
        x = jnp.asarray(x)
        k = self.k
        C = jnp.zeros((k, k + 1), x.dtype).at[:, 0].set(0.5 * x)  # sigma(0) = 1/2; the gate block is zero
        # split [u] | [a; r]: the off-diagonal block couples u with a only
        return feedforward_structure(C)

    def sample_input(self, key: Array) -> Float[Array, " k"]:
        return normal(key, (self.k,))


def output_nonlinearity_mlp(k: int, *, outer: Callable = jax.nn.softplus, activation: Callable = jax.nn.gelu,
                            bias: float = 0.0) -> Architecture:
    r"""$f_x(W) = g(\sum_i a_i\,\phi(u_i^\top x + b))$: one nonlinearity $g$ around the sum of neurons.

    Neuron ``w = [u; a]``. ZGZ holds when $\phi(b) = 0$ (default $b = 0$, $\phi$ = GELU);
    then $A(x) = g'(0)\,\phi'(0)/2\,[[0, x],[x^\top, 0]]$ and the cross blocks of the
    Hessian at 0 vanish although $g''(0) \ne 0$ couples the neurons. A ``bias`` with
    $\phi(b) \ne 0$ breaks ZGZ: the control whose cross blocks $g''(0)\phi(b)^2$ do not vanish.
    """
    return OutputNonlinearityMLP(check_size("k", k), outer, activation, float(bias))


def normalised_mlp(k: int, *, delta: float = 1.0) -> Architecture:
    r"""$f_x(W) = \sum_i a_i\tanh(h_i/\sqrt{\delta + \sum_j h_j^2})$, $h = U^\top x$: a normalised layer.

    Neuron ``w = [u; a]``; $\delta > 0$ keeps the module smooth at 0.
    $A(x) = \delta^{-1/2}/2\,[[0, x],[x^\top, 0]]$; the normaliser couples the
    neurons from fourth order on, and per-neuron $Z_2$ symmetry makes the remainder $O(\|W\|^4)$.
    """
    return NormalisedMLP(check_size("k", k), _positive("delta", delta))


def gated_mlp(k: int) -> Architecture:
    r"""$f_x(W) = \sigma(\sum_i (r_i^\top x)^2)\,\sum_i a_i\tanh(u_i^\top x)$: one gate shared by all neurons.

    Neuron ``w = [u; a; r]`` ($p = 2k + 1$). $A(x) = \sigma(0)/2\,[[0, x, 0],[x^\top, 0, 0],[0, 0, 0]]$:
    the gate weights $r$ are absent at quadratic order and enter at quartic order,
    multiplied by the readout; per-neuron $Z_2$ symmetry makes the remainder $O(\|W\|^4)$.
    """
    return GatedMLP(check_size("k", k))


def symmetric_examples(k: int) -> list[Architecture]:
    """The three coupled examples at input size ``k``, in the order of this module's docstring."""
    return [output_nonlinearity_mlp(k), normalised_mlp(k), gated_mlp(k)]
