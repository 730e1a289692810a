r"""Deep modules as stacks of NQF blocks (App. B.4, Def. 2; Fig. 8): Theorem 1 block by block gives the
deep NQF $h^{(l)}_k = \mathrm{Tr}[M^{(l)} A^{(l)}_k(h^{(l-1)})]$ (Eq. 219; ZGZ holds, so $C_k = g_k = B_k = 0$).
"""

from __future__ import annotations

import abc

from collections.abc import Callable
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import invalid
from .._random import normal
from .._types import ArrayLike
from ._attention import multihead_attention
from ._attention_rows import single_head_attention_logits
from ._base import (Architecture, _check_sizes, _zero_slope, check_activation, check_input, check_weights,
    feedforward_structure)
from ._modules import two_layer_mlp


def _check_deep_weights(Ws, ps: tuple[int, ...], name: str) -> None:
    if not isinstance(Ws, (tuple, list)) or len(Ws) != len(ps):
        got = f" of length {len(Ws)}" if isinstance(Ws, (tuple, list)) else ""
        raise invalid("Ws", f'be a tuple of {len(ps)} weight matrices (one per block) for {name}',
                      f'{type(Ws).__name__}{got}')
    for l, (W, p) in enumerate(zip(Ws, ps)):
        check_weights(W, p, f"{name}, block {l + 1}")


class DeepArchitecture(eqx.Module):
    """A deep module, its per-block NQF forms (Def. 2) and its 1-layer NQF (Fig. 8); static fields, hashable by
    value (``forms`` can be a static argument of a compiled function).

    Attributes:
        name, ps, widths: a label, parameters per neuron ``(p_1, ..., p_L)``, default neurons ``(d_1, ..., d_L)``.
        apply: ``apply(Ws, x)`` with ``Ws`` a tuple of ``(p_l, d_l)`` arrays; a scalar.
        forms: one ``form(M, mu, h_prev)`` per block, $h^{(l)}$ of Eq. (219) ($h^{(0)} = x$).
        structures: one ``structure(h_prev)`` per block, $A^{(l)}_k$ of shape ``h_l.shape + (p_l, p_l)``.
        sample_input: ``sample_input(key)`` draws one random input.
        one_layer, collapse: the 1-layer NQF of Fig. 8 (an :class:`Architecture` on the raw input) and
            ``collapse(Ws)``, its weights matched at step 0.
    """

    @property
    def forms(self) -> tuple[Callable, ...]:
        return (self.form1, self.form2)

    @property
    def structures(self) -> tuple[Callable, ...]:
        return (self.structure1, self.structure2)

    def deep_nqf(self, Ws, x) -> Array:
        r"""The 2-layer NQF (Def. 2) as a function of the weights: each block's form at
        $(W^{(l)}W^{(l)\top}, W^{(l)}\mathbf 1)$. Differentiable in ``Ws``."""
        h = x
        for W, form in zip(Ws, self.forms):
            W = jnp.asarray(W)
            h = form(W @ W.T, W.sum(axis=1), h)
        return h

    def one_layer_nqf(self, W, x) -> Array:
        r"""The 1-layer NQF $\mathrm{Tr}[WW^\top A(x)]$ of ``one_layer`` (closed form, no $p\times p$ matrix)."""
        W = jnp.asarray(W)
        return self.one_layer_form(W @ W.T, W.sum(axis=1), x)


class DeepMLP(DeepArchitecture):
    r"""The bias-free 4-layer MLP of Fig. 8 as two NQF blocks; see :func:`deep_mlp`."""

    k: int = eqx.field(static=True)
    hidden: tuple[int, int, int] = eqx.field(static=True)
    activation: Callable = eqx.field(static=True)

    name = "4-layer MLP"

    @property
    def ps(self) -> tuple[int, int]:
        return (self.k + self.hidden[1], self.hidden[1] + 1)

    @property
    def widths(self) -> tuple[int, int]:
        return (self.hidden[0], self.hidden[2])

    @property
    def one_layer(self) -> Architecture:
        return two_layer_mlp(self.k, activation=self.activation, check_smooth=False)

    def apply(self, Ws, x: Float[ArrayLike, " k"]) -> Float[Array, ""]:
        k, n2, phi = self.k, self.hidden[1], self.activation
        _check_deep_weights(Ws, self.ps, "deep_mlp")
        check_input("x", x, (k,), "one input vector")
        W1, W2 = Ws
        h1 = W1[k:] @ phi(W1[:k].T @ x)
        return W2[n2] @ phi(W2[:n2].T @ phi(h1))

    def form1(self, M, mu, x):
        return _zero_slope(self.activation, x) * (M[:self.k, self.k:].T @ x)

    def form2(self, M, mu, h1):
        n2 = self.hidden[1]
        return _zero_slope(self.activation, h1) * (M[:n2, n2] @ self.activation(h1))

    def structure1(self, x):
        x = jnp.asarray(x)
        C = jnp.einsum("i,aj->aij", x, jnp.eye(self.hidden[1], dtype=x.dtype))
        return feedforward_structure(_zero_slope(self.activation, x) * C)

    def structure2(self, h1):
        h1 = jnp.asarray(h1)
        return feedforward_structure(_zero_slope(self.activation, h1) * self.activation(h1)[:, None])

    def one_layer_form(self, M, mu, x):
        r"""$\\mathrm{Tr}[M A(x)]$ of the two-layer MLP NQF on $x$ (Prop. 1)."""
        return _zero_slope(self.activation, x) * (M[:self.k, self.k] @ x)

    def collapse(self, Ws):
        k, n2 = self.k, self.hidden[1]
        _check_deep_weights(Ws, self.ps, "deep_mlp")
        W1, W2 = (jnp.asarray(W) for W in Ws)
        s = _zero_slope(self.activation, W1)
        v = s**2 * (W1[k:].T @ (W2[:n2] @ W2[n2]))
        return jnp.concatenate([W1[:k], v[None]], axis=0)

    def sample_input(self, key):
        return normal(key, (self.k,))


def deep_mlp(*, k: int = 8, hidden: tuple[int, int, int] = (16, 16, 16), activation: Callable = jnp.tanh,
             check_smooth: bool = True) -> DeepArchitecture:
    r"""The bias-free 4-layer MLP $f(x) = w_4^\top\phi(W_3\,\phi(W_2\,\phi(W_1x)))$ of Fig. 8 as two NQF blocks.

    Sizes $k\to n_1\to n_2\to n_3\to1$ (Fig. 8: $8\to16\to16\to16\to1$). Block 1 is the two-layer MLP
    $h^{(1)} = W_2\phi(W_1x)$, neurons $w^{(1)}_i = [W_1[i,:];\ W_2[:,i]]$ ($p_1 = k + n_2$); block 2 the two-layer
    MLP $f = w_4^\top\phi(W_3 z)$ on $z = \phi(h^{(1)})$, neurons $w^{(2)}_j = [W_3[j,:];\ w_4[j]]$ ($p_2 = n_2 + 1$).
    By Prop. 1 (Eq. 6; vector output for block 1, App. B.2)

    $$ A^{(1)}_a(x) = \tfrac{\phi'(0)}2\begin{bmatrix}0 & x e_a^\top\\ e_a x^\top & 0\end{bmatrix},\qquad
       A^{(2)}(h^{(1)}) = \tfrac{\phi'(0)}2\begin{bmatrix}0 & \phi(h^{(1)})\\ \phi(h^{(1)})^\top & 0\end{bmatrix}. $$

    The 1-layer NQF is the two-layer MLP NQF on $x$ with neurons $[W_1[i,:];\ v_i]$,
    $v = \phi'(0)^2 W_2^\top W_3^\top w_4$: at step 0 the deep NQF with the middle $\phi$ replaced by its slope.
    """
    hidden = tuple(int(h) for h in hidden)
    if len(hidden) != 3 or min((int(k),) + hidden) < 1:
        raise invalid("hidden", "hold three positive sizes, and `k` must be positive", f"k={k}, hidden={hidden}")
    if check_smooth:
        check_activation(activation)
    return DeepMLP(int(k), hidden, activation)


def _mha_readout_form(M, xbar, D: int, d_k: int, d_v: int, o: int):
    r"""$\mathrm{Tr}[M A(x)]$ for :func:`multihead_attention` (Eq. 8) from the value/readout block of $M$:
    $\sum_{b,c} M_{(V_{bc}),(R_{ba})}\,\bar x_c$ for each output $a$; shape ``(o,)``."""
    s, sv = d_k * D, d_v * D
    block = M[2 * s:2 * s + sv, 2 * s + sv:2 * s + sv + d_v * o].reshape(D, d_v, o, d_v)
    return xbar @ jnp.trace(block, axis1=1, axis2=3)


class _MeanQuery(Architecture):
    """An attention module on a sequence $X$ alone, queried by its mean token: ``inner`` at $(\bar x, X)$.
    Subclasses name the module they wrap (``_inner``); the input check, structure and sampling are shared."""

    D: int = eqx.field(static=True)
    N: int = eqx.field(static=True)
    d_k: int = eqx.field(static=True)

    @property
    @abc.abstractmethod
    def _inner(self) -> Architecture:
        """The module wrapped (each subclass names it)."""

    @property
    def p(self) -> int:
        return self._inner.p

    def apply(self, W, x):
        check_input("x", x, (self.D, self.N), "one sequence of N tokens of dimension D (columns)")
        X = jnp.asarray(x)
        return self._inner.apply(W, (X.mean(axis=1), X))

    def structure(self, x):
        X = jnp.asarray(x)
        return self._inner.structure((X.mean(axis=1), X))

    def sample_input(self, key):
        return normal(key, (self.D, self.N))


class MeanQueryAttention(_MeanQuery):
    r"""Multi-head attention (Prop. 2, value dimension $D$) on a sequence $X$ alone, queried by its
    mean token: $f(X) = $ :func:`multihead_attention` at $(\bar x, X)$. The 1-layer NQF of Fig. 8."""

    name = "mean-query attention"

    @property
    def _inner(self):
        return multihead_attention(self.D, self.N, self.d_k, self.D)


class DeepAttention(DeepArchitecture):
    r"""Two single-head attention layers with a scalar readout (Fig. 8); see :func:`deep_attention`."""

    D: int = eqx.field(static=True)
    N: int = eqx.field(static=True)
    d_k: int = eqx.field(static=True)

    name = "2-layer attention"
    widths = (1, 1)

    @property
    def _mha1(self):
        return multihead_attention(self.D, self.N, self.d_k, self.D, outputs=self.D)

    @property
    def _mha2(self):
        return multihead_attention(self.D, self.N, self.d_k, self.D)

    @property
    def ps(self) -> tuple[int, int]:
        return (self._mha1.p, self._mha2.p)

    @property
    def one_layer(self) -> Architecture:
        return MeanQueryAttention(self.D, self.N, self.d_k)

    def layer1(self, W1, X):
        """Layer 1 of the module: token ``j`` of $H^{(1)}$ is the head sum at query $X_{:,j}$; shape ``(D, N)``."""
        mha1 = self._mha1
        return jax.vmap(lambda q: mha1.apply(W1, (q, X)), in_axes=1, out_axes=1)(X)

    def apply(self, Ws, x: Float[ArrayLike, "D N"]) -> Float[Array, ""]:
        _check_deep_weights(Ws, self.ps, "deep_attention")
        check_input("x", x, (self.D, self.N), "one sequence of N tokens of dimension D (columns)")
        H1 = self.layer1(Ws[0], jnp.asarray(x))
        return self._mha2.apply(Ws[1], (H1.mean(axis=1), H1))

    def form1(self, M, mu, X):
        h = _mha_readout_form(M, X.mean(axis=1), self.D, self.d_k, self.D, self.D)
        return jnp.broadcast_to(h[:, None], (self.D, self.N))  # every token carries R^T V x_avg at this order

    def form2(self, M, mu, H1):
        return _mha_readout_form(M, H1.mean(axis=1), self.D, self.d_k, self.D, 1)[0]

    def structure1(self, X):
        X = jnp.asarray(X)
        mha1 = self._mha1
        return jax.vmap(lambda q: mha1.structure((q, X)), in_axes=1, out_axes=1)(X)  # (D, N, p, p)

    def structure2(self, H1):
        H1 = jnp.asarray(H1)
        return self._mha2.structure((H1.mean(axis=1), H1))

    def one_layer_form(self, M, mu, X):
        r"""$\\mathrm{Tr}[M A(X)]$ of :class:`MeanQueryAttention` (Eq. 8 with the value dimension $D$)."""
        return _mha_readout_form(M, X.mean(axis=1), self.D, self.d_k, self.D, 1)[0]

    def collapse(self, Ws):
        D, s, sv = self.D, self.d_k * self.D, self.D * self.D
        _check_deep_weights(Ws, self.ps, "deep_attention")
        W1, W2 = (jnp.asarray(W) for W in Ws)
        # value maps of layer 2 (column-major vec) and readouts: u = sum_i V2_i^T r_i
        V2 = jnp.reshape(W2[2 * s:2 * s + sv].T, (-1, D, D)).transpose(0, 2, 1)  # (d2, D, D)
        u = jnp.einsum("iab,ia->b", V2, W2[2 * s + sv:].T)
        R1 = jnp.reshape(W1[2 * s + sv:].T, (-1, D, D)).transpose(0, 2, 1)  # (d1, d_v, o)
        r = jnp.einsum("jba,a->jb", R1, u)  # (d1, d_v)
        return jnp.concatenate([W1[:2 * s + sv], r.T], axis=0)

    def sample_input(self, key):
        return normal(key, (self.D, self.N))


def deep_attention(*, D: int = 8, N: int = 10, d_k: int = 8) -> DeepArchitecture:
    r"""Two single-head attention layers with a scalar readout (Fig. 8), as two NQF blocks.

    Input $X\in\mathbb R^{D\times N}$ (Fig. 8: $D = d_k = 8$, $N = 10$). Token $j$ of layer 1 is
    :func:`multihead_attention` ``(D, N, d_k, d_v=D, outputs=D)`` at $(X_{:,j}, X)$ (neuron = head,
    $p_1 = 2d_kD + 2D^2$); layer 2 is :func:`multihead_attention` ``(D, N, d_k, d_v=D)`` queried by the mean token
    ($p_2 = 2d_kD + D^2 + D$); one head per layer by default. By Prop. 2 (Eq. 8) per layer only the value/readout
    blocks enter, with $\bar x$: the 2-layer NQF is $f = \sum r^\top W^V_2(\sum R^\top W^V_1\bar x)$. The 1-layer NQF is
    mean-query attention on $X$ with readouts $r'_j = R_j\sum_i W^{V\top}_{2,i} r_i$ (equal at step 0).
    """
    _check_sizes(D=D, N=N, d_k=d_k)
    return DeepAttention(int(D), int(N), int(d_k))


# ----------------------------------------------------------------- single-head attention, Prop. 4 reading
def _covariance(X):
    xbar = X.mean(axis=1)
    return X @ X.T / X.shape[1] - jnp.outer(xbar, xbar), xbar


class MeanQueryLogits(_MeanQuery):
    r"""Single-head attention logits (Prop. 4) on a sequence $X$ alone, queried by its mean token, with a
    fixed readout $c$: $f(X) = c^\top X\,\mathrm{softmax}(X^\top W^{K\top}W^Q\bar x/\sqrt{d_k})$, neurons the
    rows of $W^Q, W^K$. The 1-layer NQF of Fig. 8 under the Prop. 4 reading."""

    c: tuple = eqx.field(static=True)

    name = "mean-query attention logits"

    @property
    def _inner(self):
        return single_head_attention_logits(self.D, self.N, self.d_k, c=jnp.asarray(self.c))


class DeepSingleHeadAttention(DeepArchitecture):
    r"""Two single-head attention layers, neurons = rows of $W^Q, W^K$ (Prop. 4 per layer; Fig. 8);
    see :func:`deep_single_head_attention`."""

    D: int = eqx.field(static=True)
    N: int = eqx.field(static=True)
    d_k: int = eqx.field(static=True)
    V: tuple = eqx.field(static=True)  #: the fixed value/output map of layer 1, (D, D) as nested tuples
    c: tuple = eqx.field(static=True)  #: the fixed readout of layer 2, (D,)

    name = "2-layer single-head attention"

    @property
    def ps(self) -> tuple[int, int]:
        return (2 * self.D, 2 * self.D)

    @property
    def widths(self) -> tuple[int, int]:
        return (self.d_k, self.d_k)

    def _consts(self, dtype):
        return jnp.asarray(self.V, dtype), jnp.asarray(self.c, dtype)

    @property
    def one_layer(self) -> Architecture:
        V, c = (np.asarray(a) for a in (self.V, self.c))
        return MeanQueryLogits(self.D, self.N, self.d_k, tuple(float(v) for v in V.T @ c))

    def _attend(self, W, X, Q):
        r"""$X\,\mathrm{softmax}(X^\top W^{K\top}W^QQ/\sqrt{d_k})$ for the queries ``Q`` (columns), over the keys."""
        D = self.D
        WQ, WK = W[:D].T, W[D:].T  # (d, D): the paper's matrices, one row per neuron
        return X @ jax.nn.softmax(X.T @ (WK.T @ (WQ @ Q)) / np.sqrt(self.d_k), axis=0)

    def apply(self, Ws, x: Float[ArrayLike, "D N"]) -> Float[Array, ""]:
        _check_deep_weights(Ws, self.ps, "deep_single_head_attention")
        check_input("x", x, (self.D, self.N), "one sequence of N tokens of dimension D (columns)")
        X = jnp.asarray(x)
        V, c = self._consts(X.dtype)
        W1, W2 = (jnp.asarray(W) for W in Ws)
        H1 = V @ self._attend(W1, X, X)
        return c @ self._attend(W2, H1, H1.mean(axis=1)[:, None])[:, 0]

    def form1(self, M, mu, X):
        r"""$H^{(1)} = V\bar x\,1^\top + V\Sigma_X M_{QK}^\top X/\sqrt{d_k}$: $f(0)$ plus Eq. (12) for every token."""
        V, _ = self._consts(X.dtype)
        S, xbar = _covariance(X)
        Mqk = M[:self.D, self.D:]
        return (V @ xbar)[:, None] + V @ S @ Mqk.T @ X / np.sqrt(self.d_k)

    def form2(self, M, mu, H1):
        r"""$f = c^\top\bar h + \bar h^\top M_{QK}\Sigma_{H}c/\sqrt{d_k}$ (Eq. 12 with the mean token as query)."""
        _, c = self._consts(H1.dtype)
        S, hbar = _covariance(H1)
        return c @ hbar + hbar @ M[:self.D, self.D:] @ S @ c / np.sqrt(self.d_k)

    def structure1(self, X):
        """$A^{(1)}_{a,j}(X)$ of Eq. (12), query $X_{:,j}$ and readout row $a$ of $V$: shape ``(D, N, 2D, 2D)``."""
        X = jnp.asarray(X)
        V, _ = self._consts(X.dtype)
        S, _ = _covariance(X)
        U = S @ V.T  # column a: u_a = Sigma_X V[a]
        C = jnp.einsum("kj,la->ajkl", X, U) / np.sqrt(self.d_k)
        return feedforward_structure(C)

    def structure2(self, H1):
        H1 = jnp.asarray(H1)
        _, c = self._consts(H1.dtype)
        S, hbar = _covariance(H1)
        return feedforward_structure(jnp.outer(hbar, S @ c) / np.sqrt(self.d_k))

    def one_layer_form(self, M, mu, X):
        r"""$\mathrm{Tr}[MA(X)]$ plus $f(0)$ of ``MeanQueryLogits`` with readout $V^\top c$."""
        V, c = self._consts(X.dtype)
        cc = V.T @ c
        S, xbar = _covariance(X)
        return cc @ xbar + xbar @ M[:self.D, self.D:] @ S @ cc / np.sqrt(self.d_k)

    def collapse(self, Ws):
        _check_deep_weights(Ws, self.ps, "deep_single_head_attention")
        return jnp.asarray(Ws[0])

    def sample_input(self, key):
        return normal(key, (self.D, self.N))


def deep_single_head_attention(*, D: int = 8, N: int = 10, d_k: int = 8, key: Array) -> DeepArchitecture:
    r"""Two single-head attention layers of Fig. 8 read with Prop. 4: the neurons are the rows of $W^Q, W^K$.

    Input $X\in\mathbb R^{D\times N}$. Layer 1 is self-attention with a fixed value/output map
    $V\in\mathbb R^{D\times D}$, $H^{(1)} = VX\,\mathrm{softmax}(X^\top W_1^{K\top}W_1^QX/\sqrt{d_k})$ (softmax over
    the keys, one column per query token); layer 2 is attention queried by the mean token with a fixed
    readout $c$, $f = c^\top H^{(1)}\mathrm{softmax}(H^{(1)\top}W_2^{K\top}W_2^Q\bar h^{(1)}/\sqrt{d_k})$. Only
    $W^Q_l, W^K_l$ ($d_k\times D$) are trained; row $i$ of both is neuron $i$ of layer $l$ (Prop. 4:
    $W^{K\top}W^Q = \sum_i w_i^Kw_i^{Q\top}$, $p_l = 2D$, ``widths = (d_k, d_k)``; nqf weights
    ``[W^Q.T; W^K.T]``, :func:`nqf.architectures.stack_query_key`). $V$ and $c$ have $\mathcal N(0, 1/D)$
    entries drawn from ``key`` (required: Fig. 8 of Chapter 9 passes ``PRNGKey(81)``).

    Both blocks satisfy ZGZ, and by Eq. (12) block by block (Def. 2), $M_{QK}$ the query-key block of $M$ and
    $\Sigma$ the token covariance,

    $$ H^{(1)} = V\bar x1^\top + V\Sigma_XM^{(1)\top}_{QK}X/\sqrt{d_k},\qquad
       f = c^\top\bar h + \bar h^\top M^{(2)}_{QK}\Sigma_{H^{(1)}}c/\sqrt{d_k}. $$

    The 1-layer NQF is ``MeanQueryLogits`` on $X$ with readout $V^\top c$ (``collapse`` keeps $W^{(1)}$): the deep
    NQF without the layer-2 term, $O(\|W^{(1)}\|^4\|W^{(2)}\|^2)$ at step 0.
    """
    _check_sizes(D=D, N=N, d_k=d_k)
    kV, kc = jax.random.split(key)
    V = np.asarray(normal(kV, (int(D), int(D)))) / np.sqrt(D)
    c = np.asarray(normal(kc, (int(D),))) / np.sqrt(D)
    return DeepSingleHeadAttention(int(D), int(N), int(d_k), tuple(tuple(float(v) for v in row) for row in V),
                                   tuple(float(v) for v in c))
