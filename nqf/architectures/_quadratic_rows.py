r"""The exactly quadratic rows of Table 3 (matrix sensing, completion, embeddings, bilinear sequence
regression, linear SSL): polynomials of degree two in the weights, so the NQF is exact and $A(x)$ is their
Hessian block. Neurons are the **columns** of ``W`` (:func:`nqf.architectures.to_nqf_weights`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int
from .._checks import check_shape, invalid, is_concrete
from .._random import normal
from .._types import ArrayLike, Input
from ._attention_rows import _check_rows_weights
from ._base import Architecture, _check_sizes, check_input, check_weights, feedforward_structure


class PSDMatrixSensing(Architecture):
    r"""PSD matrix sensing, $\hat y_a = \langle S_a, WW^\top\rangle$ (Table 3); see :func:`psd_matrix_sensing`."""

    n: int = eqx.field(static=True)

    name = "PSD matrix sensing"

    @property
    def p(self) -> int:
        return self.n

    def apply(self, W: Float[ArrayLike, "p d"], x: Float[ArrayLike, "n n"]) -> Float[Array, ""]:
        check_weights(W, self.n, "psd_matrix_sensing")
        check_input("x", x, (self.n, self.n), "one sensing matrix S_a")
        W = jnp.asarray(W)
        return jnp.sum(jnp.asarray(x) * (W @ W.T))

    def structure(self, x: Float[ArrayLike, "n n"]) -> Float[Array, "p p"]:
        check_input("x", x, (self.n, self.n), "one sensing matrix S_a")
        S = jnp.asarray(x)
        return 0.5 * (S + S.T)

    def sample_input(self, key: Array) -> Float[Array, "n n"]:
        return normal(key, (self.n, self.n))


def psd_matrix_sensing(n: int) -> Architecture:
    r"""PSD matrix sensing / factorisation, $\hat y_a = \langle S_a, WW^\top\rangle$, $A_a = \mathrm{Sym}(S_a)$
    (Table 3): input ``x = S_a`` (any $n\times n$ matrix), neuron $w_i\in\mathbb R^n$ (a column of $W$)."""
    _check_sizes(n=n)
    return PSDMatrixSensing(int(n))


class RectangularMatrixSensing(Architecture):
    r"""Rectangular matrix sensing, $\hat y_a = \mathrm{Tr}(U^\top S_a V)$ (Table 3); see
    :func:`rectangular_matrix_sensing`."""

    n1: int = eqx.field(static=True)
    n2: int = eqx.field(static=True)

    name = "rectangular matrix sensing"

    @property
    def p(self) -> int:
        return self.n1 + self.n2

    def apply(self, W: Float[ArrayLike, "p d"], x: Float[ArrayLike, "n1 n2"]) -> Float[Array, ""]:
        check_weights(W, self.p, "rectangular_matrix_sensing")
        check_input("x", x, (self.n1, self.n2), "one sensing matrix S_a")
        W = jnp.asarray(W)
        return jnp.sum(W[:self.n1] * (jnp.asarray(x) @ W[self.n1:]))

    def structure(self, x: Float[ArrayLike, "n1 n2"]) -> Float[Array, "p p"]:
        check_input("x", x, (self.n1, self.n2), "one sensing matrix S_a")
        return feedforward_structure(jnp.asarray(x))

    def sample_input(self, key: Array) -> Float[Array, "n1 n2"]:
        return normal(key, (self.n1, self.n2))


def rectangular_matrix_sensing(n1: int, n2: int) -> Architecture:
    r"""Rectangular matrix sensing, $\hat y_a = \langle S_a, UV^\top\rangle = \mathrm{Tr}(U^\top S_a V)$ (Table 3).

    Neuron ``w = [u (n1); v (n2)]`` (columns $i$ of $U$ and $V$), input ``x = S_a`` $\in\mathbb R^{n_1\times n_2}$;
    feed-forward (Eq. 17) with $C = S_a$.
    """
    _check_sizes(n1=n1, n2=n2)
    return RectangularMatrixSensing(int(n1), int(n2))


def _check_index_pair(x, n1: int, n2: int, names: str) -> Array:
    check_shape("x", x, (2,), f"an index pair ({names})")
    arr = jnp.asarray(x)
    if not jnp.issubdtype(arr.dtype, jnp.integer):
        raise invalid("x", f'hold integer indices ({names})', f'dtype {arr.dtype}')
    if is_concrete(x):
        i, j = (int(v) for v in np.asarray(x))
        if not (0 <= i < n1 and 0 <= j < n2):
            raise invalid("x", f"lie in [0, {n1}) x [0, {n2}) ({names})", f"({i}, {j}), out of range")
    return arr


_INDEX_PAIR = {"matrix_completion": "row i, column j", "word_context_embedding": "word w, context c"}


class IndexPairModel(Architecture):
    r"""$\hat y_{ij} = u_i^\top v_j$ at an integer pair $x = (i, j)$: matrix completion and
    word–context embeddings (Table 3); see :func:`matrix_completion`, :func:`word_context_embedding`."""

    n1: int = eqx.field(static=True)
    n2: int = eqx.field(static=True)
    kind: str = eqx.field(static=True)  #: "matrix_completion" or "word_context_embedding"

    @property
    def name(self) -> str:
        return self.kind.replace("_", " ")

    @property
    def p(self) -> int:
        return self.n1 + self.n2

    def apply(self, W: Float[ArrayLike, "p d"], x: Int[ArrayLike, "2"]) -> Float[Array, ""]:
        check_weights(W, self.p, self.kind)
        i, j = _check_index_pair(x, self.n1, self.n2, _INDEX_PAIR[self.kind])
        W = jnp.asarray(W)
        return W[i] @ W[self.n1 + j]

    def structure(self, x: Int[ArrayLike, "2"]) -> Float[Array, "p p"]:
        i, j = _check_index_pair(x, self.n1, self.n2, _INDEX_PAIR[self.kind])
        dtype = jnp.zeros(()).dtype  # float64 when x64 is on
        return feedforward_structure(jnp.outer(jax.nn.one_hot(i, self.n1, dtype=dtype),
                                               jax.nn.one_hot(j, self.n2, dtype=dtype)))

    def sample_input(self, key: Array) -> Int[Array, "2"]:
        ki, kj = jax.random.split(key)
        return jnp.stack([jax.random.randint(ki, (), 0, self.n1), jax.random.randint(kj, (), 0, self.n2)])


def matrix_completion(n_rows: int, n_cols: int) -> Architecture:
    r"""Matrix completion / recommender entry, $\hat R_{ij} = u_i^\top v_j$ (Table 3).

    $u_i$ is row $i$ of $U\in\mathbb R^{n_\text{rows}\times r}$, $v_j$ row $j$ of $V$;
    a *neuron* is one latent factor, ``w = [U[:, k]; V[:, k]]``, $p = n_\text{rows} + n_\text{cols}$.
    Input: the integer pair ``x = (i, j)``; feed-forward (Eq. 17) with $C = e_ie_j^\top$.
    """
    _check_sizes(n1=n_rows, n2=n_cols)
    return IndexPairModel(int(n_rows), int(n_cols), "matrix_completion")


def word_context_embedding(n_words: int, n_contexts: int) -> Architecture:
    r"""Word–context embedding score, $s_{wc} = u_w^\top v_c$ (Table 3).

    Word vectors are the rows of $U\in\mathbb R^{n_\text{words}\times r}$, context
    vectors the rows of $V$; a neuron is one embedding dimension. Input ``x = (w, c)``; $C = e_we_c^\top$.
    """
    _check_sizes(n1=n_words, n2=n_contexts)
    return IndexPairModel(int(n_words), int(n_contexts), "word_context_embedding")


class BilinearSequenceRegression(Architecture):
    r"""Bilinear sequence regression $f = x_s^\top UV^\top x_t$ (Table 3); see :func:`bilinear_sequence_regression`."""

    D: int = eqx.field(static=True)
    L: int = eqx.field(static=True)
    s: int = eqx.field(static=True, default=0)
    t: int = eqx.field(static=True, default=1)

    name = "bilinear sequence regression"

    @property
    def p(self) -> int:
        return 2 * self.D

    def apply(self, W: Float[ArrayLike, "p d"], x: Float[ArrayLike, "D L"]) -> Float[Array, ""]:
        D = self.D
        check_weights(W, self.p, "bilinear_sequence_regression")
        check_input("x", x, (D, self.L), "one token sequence X")
        W, X = jnp.asarray(W), jnp.asarray(x)
        return (X[:, self.s] @ W[:D]) @ (W[D:].T @ X[:, self.t])

    def structure(self, x: Float[ArrayLike, "D L"]) -> Float[Array, "p p"]:
        check_input("x", x, (self.D, self.L), "one token sequence X")
        X = jnp.asarray(x)
        return feedforward_structure(jnp.outer(X[:, self.s], X[:, self.t]))

    def sample_input(self, key: Array) -> Float[Array, "D L"]:
        return normal(key, (self.D, self.L))


def bilinear_sequence_regression(D: int, L: int, *, s: int = 0, t: int = 1) -> Architecture:
    r"""Bilinear sequence regression, $f = x_s^\top B x_t$ with $B = UV^\top$ (Table 3).

    Input: a sequence $X\in\mathbb R^{D\times L}$ of $L$ tokens; the output couples
    tokens ``s`` and ``t`` (fixed positions). Neuron ``w = [u (D); v (D)]`` (column $i$
    of $U$ and of $V$). Feed-forward (Eq. 17) with $C = x_s x_t^\top$.
    """
    _check_sizes(D=D, L=L)
    for name, pos in (("s", s), ("t", t)):
        if not isinstance(pos, (int, np.integer)) or not 0 <= pos < L:
            raise invalid(name, f'be a token position in [0, {L})', f'{pos!r}')
    return BilinearSequenceRegression(int(D), int(L), int(s), int(t))


class LinearSSLAugmentation(Architecture):
    r"""Linear SSL augmentation term $\lVert W\Delta\rVert^2$ (Table 3); see :func:`linear_ssl_augmentation`."""

    n: int = eqx.field(static=True)

    name = "linear SSL augmentation"

    @property
    def p(self) -> int:
        return self.n

    def _delta(self, x) -> Array:
        n = self.n
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise invalid("x", f'be a pair (x, chi) of two views of shape ({n},)', f'{type(x).__name__}')
        check_input("x[0] (sample x)", x[0], (n,), "one sample")
        check_input("x[1] (augmentation chi)", x[1], (n,), "its augmented view")
        return jnp.asarray(x[0]) - jnp.asarray(x[1])

    def apply(self, W: Float[ArrayLike, "p d"], x: Input) -> Float[Array, ""]:
        _check_rows_weights(W, self.n, "linear_ssl_augmentation", f"its encoder W (d x {self.n})")
        return jnp.sum((jnp.asarray(W).T @ self._delta(x)) ** 2)

    def structure(self, x: Input) -> Float[Array, "p p"]:
        delta = self._delta(x)
        return jnp.outer(delta, delta)

    def sample_input(self, key: Array) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
        k1, k2 = jax.random.split(key)
        base = normal(k1, (self.n,))
        return base, base + 0.5 * normal(k2, (self.n,))


def linear_ssl_augmentation(n: int) -> Architecture:
    r"""Linear SSL augmentation term $\lVert W\Delta\rVert^2 = \mathrm{Tr}(W^\top W\Delta\Delta^\top)$ (Table 3).

    The paper's encoder $W\in\mathbb R^{d\times n}$ has one neuron per **row**: nqf takes ``W.T``
    (:func:`~nqf.architectures.to_nqf_weights`). Input ``x = (x, chi)``, a sample and its augmentation;
    $A_\Delta = \Delta\Delta^\top$, $\Delta = x - \chi$.
    """
    _check_sizes(n=n)
    return LinearSSLAugmentation(int(n))
