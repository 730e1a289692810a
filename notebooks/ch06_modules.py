r"""Chapter 6's modules and data: the four modules of Fig. 2 (MLP, CNN, QK-only attention, MHA), their end-to-end
linear maps and low-rank NQF teachers (figure data, moved here from nqf.datasets in 1.0: no other chapter uses them). Each module's $A(x)$ is feed-forward (Eqs. 17-19), so its NQF output is linear in a feature of
the input through one matrix $L(W)$, built from $Z_2Z_1^\top$ (Eq. 18); Fig. 2's "recovered singular values"
$\hat s_k(t)/s_k$ are those of $L(W(t))$ (the chapter tabulates $L$ and the feature of each module).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from nqf.architectures import Architecture, cnn, multihead_attention, single_head_attention_logits, two_layer_mlp
from nqf.structure import nqf_output

FIG2_SINGULAR_VALUES = (1.0, 0.5, 0.25, 0.125)


def patch_index(height: int, width: int, kh: int, kw: int) -> np.ndarray:
    """Flat indices ``(P, kh*kw)`` of the valid stride-1 patches, row-major (as nqf's CNN takes them)."""
    rows = np.arange(height - kh + 1)[:, None, None, None] + np.arange(kh)[None, None, :, None]
    cols = np.arange(width - kw + 1)[None, :, None, None] + np.arange(kw)[None, None, None, :]
    return (rows * width + cols).reshape(-1, kh * kw)


class Fig2Module(NamedTuple):
    """One column of Fig. 2: the module, its width and how to read its end-to-end linear map."""

    key: str  #: "mlp", "cnn", "qk", "mha"
    label: str  #: panel title
    arch: Architecture  #: the module, as an nqf Architecture (its A(x) and forward)
    d: int  #: neurons (width) of the student
    linear_map: Callable[[Array], Array]  #: W -> L(W), the end-to-end linear map
    weights_from_map: Callable[[Array, int], Array]  #: (factors (P, s, Q), d) -> W with L(W) = P diag(s) Q^T
    map_shape: tuple[int, int]  #: shape of L
    describe: str  #: sizes, in words
    feature: Callable[[Any], Any]  #: x -> the feature the NQF output is linear in
    feature_output: Callable[[Array, Any], Array]  #: (W, x) -> NQF output minus f_x(0), from L(W) and the feature


def _ff_map(n1: int):
    """$L = Z_2Z_1^\\top$ with $Z_1 = W_{[:n_1]}$, $Z_2 = W_{[n_1:]}$ (Eq. 18)."""
    return lambda W: W[n1:] @ W[:n1].T


def _ff_weights(n1: int, n2: int):
    def build(factors, d):
        P, s, Q = factors  # P (n2, r), s (r,), Q (n1, r)
        r = s.shape[0]
        root = jnp.sqrt(s)
        W = jnp.zeros((n1 + n2, d), P.dtype)
        return W.at[:n1, :r].set(Q * root[None, :]).at[n1:, :r].set(P * root[None, :])

    return build


def _mha_parts(D: int, d_k: int, d_v: int, o: int):
    s, sv = d_k * D, d_v * D

    def linear_map(W):
        V = jnp.reshape(W[2 * s:2 * s + sv].T, (-1, D, d_v)).transpose(0, 2, 1)  # (d, d_v, D), column-major vec
        R = jnp.reshape(W[2 * s + sv:].T, (-1, o, d_v)).transpose(0, 2, 1)  # (d, d_v, o)
        return jnp.einsum("iao,iaj->oj", R, V)

    def build(factors, d):
        P, sv_, Q = factors  # P (o, r), Q (D, r)
        r = sv_.shape[0]
        if r > d:
            raise ValueError(f"`d` must be at least {r} heads for a rank-{r} MHA teacher; got d = {d}.")
        root = jnp.sqrt(sv_)
        V = jnp.zeros((d, d_v, D), P.dtype).at[:r, 0, :].set((Q * root[None, :]).T)
        R = jnp.zeros((d, d_v, o), P.dtype).at[:r, 0, :].set((P * root[None, :]).T)
        vecV = jnp.transpose(V, (0, 2, 1)).reshape(d, -1)  # column-major vec of each (d_v, D)
        vecR = jnp.transpose(R, (0, 2, 1)).reshape(d, -1)
        return jnp.concatenate([jnp.zeros((d, 2 * s), P.dtype), vecV, vecR], axis=1).T

    return linear_map, build


def _identity_feature(x):
    return x


def _patch_sum_feature(patches, x):
    return jnp.sum(jnp.reshape(x, (-1,))[patches], axis=0)


def _token_mean_feature(x):
    q, X = x
    return jnp.mean(X, axis=1)


def _qk_feature(c, x):
    q, X = x
    mean = jnp.mean(X, axis=1)
    return q, (X @ X.T / X.shape[1] - jnp.outer(mean, mean)) @ c


def _linear_feature_output(linear_map, feature, W, x):
    return linear_map(W) @ feature(x)


def _qk_feature_output(linear_map, feature, d_k, W, x):
    q, u = feature(x)
    return u.T @ linear_map(W) @ q / jnp.sqrt(d_k)


def fig2_modules(*, outputs: int = 8, key: Array) -> tuple[Fig2Module, ...]:
    r"""The four columns of Fig. 2 at the paper's sizes (App. C).

    * MLP $20\to64\to8$, tanh, no bias (:func:`nqf.architectures.two_layer_mlp`);
    * CNN: single-channel $5\times7$ input, 64 kernels $4\times5$, stride 1, no padding, tanh, global
      sum pooling, 8 outputs (:func:`nqf.architectures.cnn`);
    * QK-only attention: input dimension 20, $d_k = 8$, sequence 16, single head whose $d_k$ rows are
      the neurons (Prop. 4; :func:`nqf.architectures.single_head_attention_logits`), fixed readout
      $c\in\mathbb R^{20\times8}$ with $\mathcal N(0, 1/20)$ entries drawn from ``key`` (required: Fig. 2 of the
      book passes ``jax.random.PRNGKey(20)``);
    * MHA: 4 heads (the neurons), $d_k = 8$, $d_v = 20$, input dimension 20, sequence 16, readout
      $R_i\in\mathbb R^{d_v\times8}$ (:func:`nqf.architectures.multihead_attention`).
    """
    o = int(outputs)
    c = jax.random.normal(key, (20, o)) / np.sqrt(20.0)
    mha_map, mha_build = _mha_parts(20, 8, 20, o)
    ff = _ff_map(20)
    cnn_arch = cnn(5, 7, 4, 5, outputs=o)
    patches = patch_index(5, 7, 4, 5)
    feats = {"mlp": _identity_feature, "cnn": partial(_patch_sum_feature, patches), "mha": _token_mean_feature,
             "qk": partial(_qk_feature, c)}
    lin = lambda key, L: partial(_linear_feature_output, L, feats[key])  # noqa: E731
    return (
        Fig2Module("mlp", "MLP", two_layer_mlp(20, outputs=o), 64, ff, _ff_weights(20, o), (o, 20),
                   "20 -> 64 -> 8, tanh, no bias", feats["mlp"], lin("mlp", ff)),
        Fig2Module("cnn", "CNN", cnn_arch, 64, ff, _ff_weights(20, o), (o, 20),
                   "5x7 input, 64 kernels 4x5, stride 1, no padding, tanh, global sum pooling", feats["cnn"],
                   lin("cnn", ff)),
        Fig2Module("qk", "QK-only attention", single_head_attention_logits(20, 16, 8, c=c), 8, ff,
                   _ff_weights(20, 20), (20, 20), "D = 20, N = 16, one head, d_k = 8 rows = neurons, fixed readout",
                   feats["qk"], partial(_qk_feature_output, ff, feats["qk"], 8.0)),
        Fig2Module("mha", "MHA", multihead_attention(20, 16, 8, 20, outputs=o), 4, mha_map, mha_build, (o, 20),
                   "D = 20, N = 16, 4 heads, d_k = 8, d_v = 20", feats["mha"], lin("mha", mha_map)),
    )


class TeacherSet(NamedTuple):
    """Inputs, targets and the teacher of one Fig. 2 column (see :func:`low_rank_teacher`)."""

    xs: Any  #: inputs with a leading sample axis (``(q, X)`` pairs for attention)
    ys: Float[Array, "m o"]  #: targets
    W_teacher: Float[Array, "p d"]  #: teacher weights (rank-r linear map, zero columns beyond r)
    L_teacher: Array  #: its end-to-end linear map P diag(s) Q^T
    s: np.ndarray  #: the teacher's singular values


def _orthonormal(key, n: int, r: int) -> Array:
    return jnp.linalg.qr(jax.random.normal(key, (n, r)))[0]


def low_rank_teacher(
    module: Fig2Module, m: int, *, key: Array, s: tuple[float, ...] = FIG2_SINGULAR_VALUES,
) -> TeacherSet:
    r"""``m`` standard Gaussian inputs of ``module`` labelled by a low-rank NQF teacher (Fig. 2).

    The teacher's end-to-end linear map is $L^* = P\,\mathrm{diag}(s)\,Q^\top$ with random orthonormal
    $P, Q$; its weights $W^*$ (rank ``len(s)``, width ``module.d``) satisfy $L(W^*) = L^*$, and the
    targets are the NQF of the module at $W^*$ (Eq. 2): $y = f_x(0) + \mathrm{Tr}[W^*W^{*\top}A(x)]$.
    """
    s_arr = np.asarray(s, dtype=float)
    if s_arr.ndim != 1 or s_arr.size < 1 or np.any(s_arr <= 0):
        raise ValueError(f"`s` must be a non-empty sequence of positive singular values; got {s!r}.")
    kx, kp, kq = jax.random.split(key, 3)
    keys = jax.random.split(kx, m)
    xs = jax.vmap(module.arch.sample_input)(keys)
    n_out, n_in = module.map_shape
    P, Q = _orthonormal(kp, n_out, s_arr.size), _orthonormal(kq, n_in, s_arr.size)
    sj = jnp.asarray(s_arr, P.dtype)
    W = module.weights_from_map((P, sj, Q), module.d)
    ys = jax.jit(jax.vmap(lambda x: nqf_output(module.arch, W, x)))(xs)
    return TeacherSet(xs, ys, W, (P * sj[None, :]) @ Q.T, s_arr)
