r"""The attention rows of Table 3 whose neuron is one row of the paper's $W^Q, W^K$ (Prop. 4; tied QK), taking
``W_nqf = W_paper.T`` so that $M = W_\text{paper}^\top W_\text{paper}$ (caption of Table 3), and the quartic
term of multi-head attention (Eq. 73). The temperature $\sqrt{d_k}$ is fixed when a module is built.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_finite, check_shape, invalid
from .._types import ArrayLike, Input
from ._attention import _PairInput, _readout_vector, _split_input, _unvec
from ._base import Architecture, _check_sizes, feedforward_structure


def _check_rows_weights(W, p: int, module: str, paper_shape: str) -> None:
    """Shape check that reminds the caller of the row convention of the paper."""
    shape = tuple(np.shape(W))
    if len(shape) != 2 or shape[0] != p or shape[1] < 1:
        raise invalid("W", f"have shape (p, d) = ({p}, *) for {module}: one column per neuron (the paper writes "
                      f"this module with neurons as the ROWS of {paper_shape}; pass the transpose, "
                      f"nqf.architectures.to_nqf_weights)", f"shape {shape}")


def _covariance_readout(X: Array, c: Array) -> Array:
    r"""$u = \Sigma_X c$ with $\Sigma_X = \frac1N XX^\top - x_{avg}x_{avg}^\top$ (Eq. 79)."""
    N = X.shape[1]
    x_avg = X.mean(axis=1)
    sigma = X @ X.T / N - jnp.outer(x_avg, x_avg)
    return sigma @ c.astype(X.dtype)


def stack_query_key(WQ: Float[ArrayLike, "k D"], WK: Float[ArrayLike, "k D"]) -> Float[Array, "twoD k"]:
    r"""The nqf weights ``[W^Q.T; W^K.T]`` of :func:`single_head_attention_logits`.

    Column $i$ is the neuron of Prop. 4, $w_i = [w_i^Q; w_i^K]$: row $i$ of the
    paper's $W^Q$ and row $i$ of its $W^K$ (both $d_k\times D$).
    """
    if np.ndim(WQ) != 2 or np.shape(WQ) != np.shape(WK):
        raise invalid("WQ", "be a matrix of the shape (d_k, D) of `WK`", f"{np.shape(WQ)} and {np.shape(WK)}")
    return jnp.concatenate([jnp.asarray(WQ).T, jnp.asarray(WK).T], axis=0)


class SingleHeadAttentionLogits(_PairInput):
    r"""Single-head attention logits, neurons = rows of $W^Q, W^K$ (Eq. 11, Prop. 4); see
    :func:`single_head_attention_logits`."""

    D: int = eqx.field(static=True)
    N: int = eqx.field(static=True)
    d_k: int = eqx.field(static=True)
    c: tuple = eqx.field(static=True)  #: the readout, a (nested) tuple of floats (hashable)
    outputs: int | None = eqx.field(static=True, default=None)

    name = "single-head attention logits"

    @property
    def p(self) -> int:
        return 2 * self.D

    def apply(self, W: Float[ArrayLike, "p d"], x: Input) -> Float[Array, "*o"]:
        D = self.D
        _check_rows_weights(W, self.p, "single_head_attention_logits", "W^Q and W^K (stack_query_key)")
        q, X = _split_input(x, D, self.N)
        W = jnp.asarray(W)
        WQ, WK = W[:D].T, W[D:].T  # (d, D): the paper's matrices, one row per neuron
        attn = jax.nn.softmax(X.T @ (WK.T @ (WQ @ q)) / np.sqrt(self.d_k))
        return self.readout(X.dtype).T @ (X @ attn)

    def structure(self, x: Input) -> Float[Array, "*o p p"]:
        q, X = _split_input(x, self.D, self.N)
        u = _covariance_readout(X, self.readout(X.dtype))  # (D,) or (D, o)
        block = lambda uu: jnp.outer(q, uu) / np.sqrt(self.d_k)  # noqa: E731
        C = block(u) if self.outputs is None else jax.vmap(block, in_axes=1)(u)
        return feedforward_structure(C)


def single_head_attention_logits(D: int, N: int, d_k: int, *, c: ArrayLike | None = None) -> Architecture:
    r"""Single-head attention with a fixed readout, neurons = rows of $W^Q, W^K$ (Eq. 11, Prop. 4).

    $$ f = c^\top X\,\mathrm{softmax}\!\Big(\frac{X^\top (W^K)^\top W^Q x}{\sqrt{d_k}}\Big),
       \qquad (W^K)^\top W^Q = \sum_i w_i^K (w_i^Q)^\top . $$

    nqf weights ``W`` of shape ``(2D, d)``, column $i$ = ``[w_i^Q; w_i^K]`` (use
    :func:`stack_query_key`); input ``x = (q, X)`` with the query token $q$ (the
    paper's $x$) and the context $X\in\mathbb R^{D\times N}$. Closed form (Eq. 12):

    $$ A(X) = \frac{1}{2\sqrt{d_k}}\begin{bmatrix}0 & x u^\top\\ u x^\top & 0\end{bmatrix},\quad u = \Sigma_X c . $$

    ``c`` of shape ``(D, o)`` gives one $A^{(m)}$ per output (App. B.2).
    """
    _check_sizes(D=D, N=N, d_k=d_k)
    c, outputs = _readout_vector(c, D)
    return SingleHeadAttentionLogits(int(D), int(N), int(d_k), c, outputs)


class TiedQKAttention(_PairInput):
    r"""Tied query–key attention, $W^Q = W^K = W$, neurons = rows of $W$ (Table 3); see :func:`tied_qk_attention`."""

    D: int = eqx.field(static=True)
    N: int = eqx.field(static=True)
    d_k: int = eqx.field(static=True)
    c: tuple = eqx.field(static=True)  #: the readout, a (nested) tuple of floats (hashable)
    outputs: int | None = eqx.field(static=True, default=None)

    name = "tied query-key attention"

    @property
    def p(self) -> int:
        return self.D

    def apply(self, W: Float[ArrayLike, "p d"], x: Input) -> Float[Array, "*o"]:
        _check_rows_weights(W, self.p, "tied_qk_attention", "W (d_k x D)")
        q, X = _split_input(x, self.D, self.N)
        W = jnp.asarray(W)
        attn = jax.nn.softmax(X.T @ (W @ (W.T @ q)) / np.sqrt(self.d_k))  # W W^T = W_paper^T W_paper
        return self.readout(X.dtype).T @ (X @ attn)

    def structure(self, x: Input) -> Float[Array, "*o p p"]:
        q, X = _split_input(x, self.D, self.N)
        u = _covariance_readout(X, self.readout(X.dtype))
        sym = lambda uu: (jnp.outer(q, uu) + jnp.outer(uu, q)) / (2.0 * np.sqrt(self.d_k))  # noqa: E731
        return sym(u) if self.outputs is None else jax.vmap(sym, in_axes=1)(u)


def tied_qk_attention(D: int, N: int, d_k: int, *, c: ArrayLike | None = None) -> Architecture:
    r"""Tied query–key attention, $W^Q = W^K = W$, neurons = rows of $W$ (Table 3).

    $$ \begin{aligned} f &= c^\top X\,\mathrm{softmax}\!\Big(\frac{X^\top W^\top W x}{\sqrt{d_k}}\Big) \\
       &= c^\top x_{avg} + \frac{1}{\sqrt{d_k}}\,u^\top W^\top W x + O(\|W\|^4), \quad u = \Sigma_X c . \end{aligned} $$

    nqf weights ``W.T`` of shape ``(D, d)`` (module docstring). Closed form (Table 3):

    $$ A^\text{tied}_{x, X, c} = \frac{1}{2\sqrt{d_k}}\,(x u^\top + u x^\top). $$

    Not feed-forward: $A$ is not of the block off-diagonal form of Eq. (17).
    """
    _check_sizes(D=D, N=N, d_k=d_k)
    c, outputs = _readout_vector(c, D)
    return TiedQKAttention(int(D), int(N), int(d_k), c, outputs)


# ------------------------------------------------------ multi-head attention, Eq. (73)
def mha_slices(D: int, d_k: int, d_v: int, *, outputs: int | None = None) -> dict[str, slice]:
    r"""Row ranges of one neuron of :func:`nqf.architectures.multihead_attention`.

    ``{"query", "key", "value", "readout"}`` for the packing
    ``[vec(W^Q); vec(W^K); vec(W^V); v]`` (column-major vec).
    """
    _check_sizes(D=D, d_k=d_k, d_v=d_v)
    s, sv, o = d_k * D, d_v * D, 1 if outputs is None else outputs
    return {"query": slice(0, s), "key": slice(s, 2 * s), "value": slice(2 * s, 2 * s + sv),
            "readout": slice(2 * s + sv, 2 * s + sv + d_v * o)}


def mha_quartic_term(W: Float[ArrayLike, "p d"], x: Input, *, D: int, N: int, d_k: int, d_v: int) -> Float[Array, ""]:
    r"""The first term of multi-head attention in which $W^Q, W^K$ appear (order 4, Eq. 73).

    Expanding the softmax one order further than Eq. (72),
    $\mathrm{softmax}(L) = \tfrac1N 1_N + J_S(0) L + O(\|L\|^2)$ with
    $X J_S(0) X^\top = \Sigma_X$ (Eq. 79), a head contributes

    $$ v_i^\top W_i^V x_{avg} \;+\; \frac{1}{\sqrt{d_k}}\, v_i^\top W_i^V \Sigma_X (W_i^K)^\top W_i^Q x \;+\; O(\|w_i\|^6). $$

    This returns the sum over heads of the second (quartic) term, so that
    $f_x(sW) = s^2\,\mathrm{Tr}[WW^\top A] + s^4\,T_4(W) + O(s^6)$. Scalar output only.
    """
    sl = mha_slices(D, d_k, d_v)
    p = sl["readout"].stop
    check_shape("W", W, (p, None), f"one column per head, p = {p} of multihead_attention")
    check_finite("W", W)
    q, X = _split_input(x, D, N)
    return _quartic_fn(D, N, d_k, d_v)(jnp.asarray(W), q, X)


@functools.lru_cache(maxsize=16)
def _quartic_fn(D: int, N: int, d_k: int, d_v: int):
    sl = mha_slices(D, d_k, d_v)

    def run(W, q, X):
        sigma = X @ X.T / N - jnp.outer(X.mean(axis=1), X.mean(axis=1))  # Sigma_X, Eq. (79)

        def head(w):
            Q, K = _unvec(w[sl["query"]], d_k, D), _unvec(w[sl["key"]], d_k, D)
            V, v = _unvec(w[sl["value"]], d_v, D), w[sl["readout"]]
            return v @ V @ sigma @ K.T @ Q @ q / np.sqrt(d_k)

        return jnp.sum(jax.vmap(head, in_axes=1)(W))

    return jax.jit(run)
