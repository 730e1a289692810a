r"""Attention modules (Props. 2 and 3). The input is ``x = (q, X)``: a query $q \in \mathbb R^D$ (the paper's
$x$) and a context $X \in \mathbb R^{D\times N}$. Matrices inside a head are vectorised **column-major**, under
which the Kronecker identities of App. A.5-A.6 (Eqs. 74, 81) give Eqs. (8) and (10) verbatim.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_finite, check_shape, invalid
from .._random import normal
from .._types import ArrayLike, Input
from ._base import Architecture, _check_outputs, _check_sizes, check_weights, feedforward_structure


def _split_input(x: Input, D: int, N: int) -> tuple[Array, Array]:
    """Validate ``x = (q, X)`` and return it as two arrays."""
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise invalid("x", f'be a pair (q, X): a query token of shape ({D},) and a context of shape ({D}, {N})',
                      f'{type(x).__name__}')
    q, X = x
    check_shape("x[0] (query token q)", q, (D,))
    check_shape("x[1] (context X)", X, (D, N))
    check_finite("x[0] (query token q)", q)
    check_finite("x[1] (context X)", X)
    return jnp.asarray(q), jnp.asarray(X)


def _unvec(w: Array, rows: int, cols: int) -> Array:
    """Inverse of the column-major ``vec`` of a ``(rows, cols)`` matrix."""
    return jnp.reshape(w, (cols, rows)).T


def _pad_front(A: Array, n0: int) -> Array:
    """Embed ``A`` (``(..., n, n)``) after ``n0`` leading zero rows and columns."""
    pad = [(0, 0)] * (A.ndim - 2) + [(n0, 0), (n0, 0)]
    return jnp.pad(A, pad)


def _readout_vector(c, D: int) -> tuple[tuple, int | None]:
    r"""Validate a fixed readout ``c`` (``(D,)`` or ``(D, o)``, default $1_D/\\sqrt D$).

    Returns it as a (nested) tuple of floats, hashable so that the module stays
    hashable by value, and its number of outputs (``None`` for ``(D,)``).
    """
    c = np.ones(D) / np.sqrt(D) if c is None else np.asarray(c, dtype=np.float64)
    if c.ndim not in (1, 2) or c.shape[0] != D:
        raise invalid("c", f'have shape ({D},) or ({D}, o)', f'shape {c.shape}')
    check_finite("c", c)
    as_tuple = tuple(float(v) for v in c) if c.ndim == 1 else tuple(tuple(float(v) for v in row) for row in c)
    return as_tuple, (None if c.ndim == 1 else int(c.shape[1]))


class _PairInput(Architecture):
    """Shared by the attention modules: input ``x = (q, X)``, sizes ``D``, ``N``."""

    def sample_input(self, key: Array) -> tuple[Float[Array, " D"], Float[Array, "D N"]]:
        kq, kX = jax.random.split(key)
        return normal(kq, (self.D,)), normal(kX, (self.D, self.N))

    def readout(self, dtype) -> Array:
        """The fixed readout $c$ as an array of ``dtype`` (``(D,)`` or ``(D, o)``)."""
        return jnp.asarray(self.c, dtype)


class MultiHeadAttention(_PairInput):
    r"""Multi-head attention, one head per neuron (Eq. 7, Prop. 2); see :func:`multihead_attention`."""

    D: int = eqx.field(static=True)
    N: int = eqx.field(static=True)
    d_k: int = eqx.field(static=True)
    d_v: int = eqx.field(static=True)
    outputs: int | None = eqx.field(static=True, default=None)

    name = "multi-head attention"

    @property
    def p(self) -> int:
        return (2 * self.d_k + self.d_v) * self.D + self.d_v * (1 if self.outputs is None else self.outputs)

    def _head(self, w: Array, q: Array, X: Array) -> Array:
        D, d_k, d_v = self.D, self.d_k, self.d_v
        s, sv = d_k * D, d_v * D
        Q, K, V = _unvec(w[:s], d_k, D), _unvec(w[s:2 * s], d_k, D), _unvec(w[2 * s:2 * s + sv], d_v, D)
        attn = jax.nn.softmax(X.T @ (K.T @ (Q @ q)) / jnp.sqrt(d_k))
        value = V @ (X @ attn)  # (d_v,)
        R = _unvec(w[2 * s + sv:], d_v, 1 if self.outputs is None else self.outputs)
        return (R.T @ value)[0] if self.outputs is None else R.T @ value

    def apply(self, W: Float[ArrayLike, "p d"], x: Input) -> Float[Array, "*o"]:
        check_weights(W, self.p, "multihead_attention")
        q, X = _split_input(x, self.D, self.N)
        return jnp.sum(jax.vmap(self._head, in_axes=(1, None, None))(jnp.asarray(W), q, X), axis=0)

    def structure(self, x: Input) -> Float[Array, "*o p p"]:
        _, X = _split_input(x, self.D, self.N)
        x_avg = X.mean(axis=1)
        eye = jnp.eye(self.d_v, dtype=X.dtype)
        if self.outputs is None:
            C = jnp.kron(x_avg[:, None], eye)  # (D d_v, d_v)
        else:
            E = jnp.eye(self.outputs, dtype=X.dtype)
            C = jax.vmap(lambda e: jnp.kron(jnp.outer(x_avg, e), eye))(E)  # (o, D d_v, o d_v)
        return _pad_front(feedforward_structure(C), 2 * self.d_k * self.D)


def multihead_attention(D: int, N: int, d_k: int, d_v: int, *, outputs: int | None = None) -> Architecture:
    r"""Multi-head attention, one head per neuron (Eq. 7, Prop. 2).

    $$ f = \sum_i v_i^\top W_i^V X\, \mathrm{softmax}\!\Big(\frac{X^\top (W_i^K)^\top W_i^Q q}{\sqrt{d_k}}\Big). $$

    Neuron packing ``w = [vec(W^Q); vec(W^K); vec(W^V); v]`` (column-major vec),
    $W^Q, W^K \in \mathbb R^{d_k\times D}$, $W^V \in \mathbb R^{d_v\times D}$,
    $v \in \mathbb R^{d_v}$ (with ``outputs = o``, $v$ is a $d_v\times o$ readout
    $R$, stored as ``vec(R)``), so $p = 2 d_k D + d_v D + d_v o$. Closed form
    (Eq. 8): only the value/readout block is non-zero,

    $$ A(X) = \tfrac12\begin{bmatrix}0_{2d_kD} & 0 & 0\\ 0 & 0 & x_{avg}\otimes I_{d_v}\\ 0 & x_{avg}^\top\otimes I_{d_v} & 0\end{bmatrix}, \quad x_{avg} = \tfrac1N X 1_N, $$

    and $x_{avg}e_m^\top \otimes I_{d_v}$ in place of $x_{avg}\otimes I_{d_v}$ for output $m$.
    Query and key weights first enter at quartic order (Eq. 73).
    """
    _check_sizes(D=D, N=N, d_k=d_k, d_v=d_v)
    return MultiHeadAttention(int(D), int(N), int(d_k), int(d_v), _check_outputs(outputs))


class QKAttention(_PairInput):
    r"""Query-key-only attention with a fixed readout $c$ (Eq. 9, Prop. 3); see :func:`qk_attention`."""

    D: int = eqx.field(static=True)
    N: int = eqx.field(static=True)
    d_k: int = eqx.field(static=True)
    c: tuple = eqx.field(static=True)  #: the readout, a (nested) tuple of floats (hashable)
    outputs: int | None = eqx.field(static=True, default=None)

    name = "query-key-only attention"

    @property
    def p(self) -> int:
        return 2 * self.d_k * self.D

    def _head(self, w: Array, q: Array, X: Array) -> Array:
        s = self.d_k * self.D
        Q, K = _unvec(w[:s], self.d_k, self.D), _unvec(w[s:], self.d_k, self.D)
        attn = jax.nn.softmax(X.T @ (K.T @ (Q @ q)) / jnp.sqrt(self.d_k))
        return self.readout(X.dtype).T @ (X @ attn)

    def apply(self, W: Float[ArrayLike, "p d"], x: Input) -> Float[Array, "*o"]:
        check_weights(W, self.p, "qk_attention")
        q, X = _split_input(x, self.D, self.N)
        return jnp.sum(jax.vmap(self._head, in_axes=(1, None, None))(jnp.asarray(W), q, X), axis=0)

    def quadratic(self, W: Float[ArrayLike, "p d"], x: Input) -> Float[Array, "*o"]:
        r"""The NQF's quadratic term $\mathrm{Tr}[WW^\top A(x)] = q^\top\big(\sum_i W_i^{Q\top}W^K_i\big)u/\sqrt{d_k}$,
        $u = \Sigma_Xc$, in $O(d\,d_kD^2)$ without the $p\times p$ matrix (for
        :func:`nqf.compare_with_nqf`'s ``nqf_form``)."""
        q, X = _split_input(x, self.D, self.N)
        x_avg = X.mean(axis=1)
        u = (X @ X.T / self.N - jnp.outer(x_avg, x_avg)) @ self.readout(X.dtype)
        s = self.d_k * self.D
        W = jnp.asarray(W)
        Q = W[:s].reshape(self.D, self.d_k, -1)  # Q[a, k, i] = (W^Q_i)[k, a] (column-major vec)
        K = W[s:].reshape(self.D, self.d_k, -1)
        return q @ jnp.einsum("aki,bki->ab", Q, K) @ u / jnp.sqrt(self.d_k)

    def structure(self, x: Input) -> Float[Array, "*o p p"]:
        q, X = _split_input(x, self.D, self.N)
        x_avg = X.mean(axis=1)
        sigma = X @ X.T / self.N - jnp.outer(x_avg, x_avg)
        u = sigma @ self.readout(X.dtype)  # (D,) or (D, o)
        eye = jnp.eye(self.d_k, dtype=X.dtype)
        block = lambda uu: jnp.kron(jnp.outer(q, uu), eye) / jnp.sqrt(self.d_k)  # noqa: E731
        C = block(u) if self.outputs is None else jax.vmap(block, in_axes=1)(u)
        return feedforward_structure(C)


def qk_attention(D: int, N: int, d_k: int, *, c: ArrayLike | None = None) -> Architecture:
    r"""Query-key-only attention with a fixed readout $c$ (Eq. 9, Prop. 3).

    $$ f = \sum_i c^\top X\, \mathrm{softmax}\!\Big(\frac{X^\top (W_i^K)^\top W_i^Q q}{\sqrt{d_k}}\Big). $$

    Neuron packing ``w = [vec(W^Q); vec(W^K)]`` (column-major), $p = 2 d_k D$.
    ``c`` has shape ``(D,)`` (scalar output) or ``(D, o)`` (one output per
    column); default $c = 1_D/\sqrt D$. Closed form (Eq. 10):

    $$ A(X) = \frac{1}{2\sqrt{d_k}}\begin{bmatrix}0 & q u^\top\otimes I_{d_k}\\ u q^\top\otimes I_{d_k} & 0\end{bmatrix},
       \quad u = \Sigma_X c,\ \Sigma_X = \tfrac1N X X^\top - x_{avg}x_{avg}^\top. $$

    Note $f_x(0) = d\, c^\top x_{avg}$ depends on the width $d$; $A$ does not.
    """
    _check_sizes(D=D, N=N, d_k=d_k)
    c, outputs = _readout_vector(c, D)
    return QKAttention(int(D), int(N), int(d_k), c, outputs)
