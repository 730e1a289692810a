r"""One registry of every architecture the book builds (the 17 rows of Table 3, Prop. 4 included), of which
Table 1 is a view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import functools

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import invalid
from .._types import ArrayLike
from ._attention import multihead_attention, qk_attention
from ._attention_rows import single_head_attention_logits, tied_qk_attention
from ._base import Architecture
from ._modules import (cnn, diagonal_linear_network, mixture_of_experts, phase_retrieval, quadratic_network,
    two_layer_mlp)
from ._quadratic_rows import (bilinear_sequence_regression, linear_ssl_augmentation, matrix_completion,
    psd_matrix_sensing, rectangular_matrix_sensing, word_context_embedding)


def to_nqf_weights(W_paper: Float[ArrayLike, "a b"], neurons: str) -> Float[Array, "p d"]:
    """Convert a paper-convention weight matrix to nqf's (neurons as columns).

    ``neurons="columns"`` returns ``W_paper`` unchanged; ``neurons="rows"`` (tied
    query–key attention, linear SSL augmentation) returns its transpose, so that
    $M = W_\\text{nqf}W_\\text{nqf}^\\top = W_\\text{paper}^\\top W_\\text{paper}$.
    """
    if neurons not in ("columns", "rows"):
        raise invalid("neurons", "be 'columns' or 'rows'", f'{neurons!r}')
    if np.ndim(W_paper) != 2:
        raise invalid("W_paper", 'be a matrix', f'shape {np.shape(W_paper)}')
    W = jnp.asarray(W_paper)
    return W.T if neurons == "rows" else W


class Table3Row(NamedTuple):
    r"""One row of Table 3: what the paper prints, and how to build it in nqf.

    Attributes:
        key: short identifier.
        model: the row's name in Table 3.
        short: a short label (figure titles).
        formula: LaTeX of the module (the paper's "NQF notation" column).
        structure: LaTeX of the printed $A(x)$.
        reference: where in the paper the row is stated/derived.
        neurons: ``"columns"`` or ``"rows"`` — how the *paper* lays neurons out in its $W$.
        build: zero-argument constructor of the module at small sizes.
        groups: sizes of a neuron's parameter groups (for heat maps), or ``None``.
        split: $n_1$ of the feed-forward form (Eq. 17) ``A = ½[[0, C], [Cᵀ, 0]]``, or ``None``.
        exact: the module is exactly quadratic in $W$ (remainder zero).
        table1: position of the row in Table 1 (0-based), or ``None`` if Table 1 does not list it.
    """

    key: str
    model: str
    short: str
    formula: str
    structure: str
    reference: str
    neurons: str
    build: Callable[[], Architecture]
    groups: tuple[int, ...] | None
    split: int | None
    exact: bool
    table1: int | None = None


_P = functools.partial
_FF = r"\tfrac12\begin{bmatrix}0 & %s\\ %s & 0\end{bmatrix}"
_SOFTMAX = r"\mathrm{softmax}\big(X^\top %s x/\sqrt{d_k}\big)"

#: Table 3 as Chapter 2 renders it: the 16 printed rows and Prop. 4, one :class:`Table3Row` each.
REGISTRY: tuple[Table3Row, ...] = (
    Table3Row("psd_sensing", "PSD matrix sensing / PSD factorisation", "PSD sensing",
              r"\hat y_a = \langle S_a, W W^\top\rangle", r"A_a = \mathrm{Sym}(S_a)",
              "Table 3", "columns", _P(psd_matrix_sensing, 4), None, None, True),
    Table3Row("rect_sensing", "Rectangular matrix sensing / matrix factorisation", "rectangular sensing",
              r"\hat y_a = \langle S_a, U V^\top\rangle = \mathrm{Tr}(U^\top S_a V)", _FF % ("S_a", r"S_a^\top"),
              "Table 3", "columns", _P(rectangular_matrix_sensing, 3, 4), (3, 4), 3, True),
    Table3Row("completion", "Matrix completion / recommender entry", "matrix completion",
              r"\hat R_{ij} = u_i^\top v_j",
              _FF % (r"e_i e_j^\top", r"e_j e_i^\top"), "Table 3", "columns",
              _P(matrix_completion, 3, 4), (3, 4), 3, True),
    Table3Row("word_context", "Word–context embedding score", "word–context",
              r"s_{wc} = u_w^\top v_c",
              _FF % (r"e_w e_c^\top", r"e_c e_w^\top"), "Table 3", "columns",
              _P(word_context_embedding, 5, 3), (5, 3), 5, True),
    Table3Row("quadratic_net", "Quadratic network", "quadratic network",
              r"f_W(x) = \sum_r (w_r^\top x)^2", r"A_x = x x^\top",
              "Table 3", "columns", _P(quadratic_network, 4), None, None, True),
    Table3Row("phase", "Phase retrieval", "phase retrieval",
              r"\hat y_a = a^\top W W^\top a", r"A_a = a a^\top",
              "Tables 1, 3", "columns", _P(phase_retrieval, 4), None, None, True, table1=4),
    Table3Row("dln_square", "Diagonal linear network, square parametrisation", "DLN, square",
              r"f_x(u) = \sum_k x_k u_k^2/4", r"A_x = \tfrac14\mathrm{Diag}(x)",
              "Tables 1, 3", "columns", _P(diagonal_linear_network, 4), None, None, True, table1=5),
    Table3Row("dln_two_factor", "Diagonal linear network, two-factor signed form", "DLN, two-factor",
              r"f_x(u, v) = u^\top\mathrm{Diag}(x)\,v", _FF % (r"\mathrm{Diag}(x)", r"\mathrm{Diag}(x)"),
              "Table 3", "columns", _P(diagonal_linear_network, 3, two_factor=True), (3, 3), 3, True),
    Table3Row("mlp", "Two-layer MLP", "two-layer MLP", r"f_x(W) = \sum_i v_i\,\phi(u_i^\top x)",
              r"\frac{\phi'(0)}{2}\begin{bmatrix}0_{k\times k} & x\\ x^\top & 0\end{bmatrix}",
              "Prop. 1, Eq. (6)", "columns", _P(two_layer_mlp, 4), (4, 1), 4, False, table1=0),
    Table3Row("cnn", "Single-layer CNN (global sum pooling)", "CNN",
              r"f_x(W) = \sum_i v_i \sum_{p=1}^P \phi(k_i^\top x_p)",
              r"\frac{\phi'(0)}{2}\begin{bmatrix}0_{m\times m} & \sum_p x_p\\ \sum_p x_p^\top & 0\end{bmatrix}",
              "Prop. 6, Eq. (16)", "columns", _P(cnn, 4, 5, 2, 3), (6, 1), 6, False, table1=1),
    Table3Row("moe", "Mixture of experts (independent gating)", "mixture of experts",
              r"f_x(W) = \sum_i \psi(r_i^\top x)\,E(x;\Theta_i)",
              r"\frac{\psi'(0)}{2}\begin{bmatrix}0 & x G^\top\\ G x^\top & 0\end{bmatrix},\ G = \nabla_\Theta E(x;0)",
              "Prop. 5, Eq. (14)", "columns", _P(mixture_of_experts, 3), (3, 3), 3, False, table1=3),
    Table3Row("mha", "Multi-head attention", "multi-head attention",
              r"f_x(W) = \sum_i v_i^\top W_i^V X\," + _SOFTMAX % r"W_i^{K\top} W_i^Q",
              r"\tfrac12\begin{bmatrix}0 & 0 & 0 & 0\\ 0 & 0 & 0 & 0\\ 0 & 0 & 0 & x_{avg}\otimes I_{d_v}"
              r"\\ 0 & 0 & x_{avg}^\top\otimes I_{d_v} & 0\end{bmatrix}",
              "Prop. 2, Eq. (8)", "columns", _P(multihead_attention, 3, 4, 2, 2), (6, 6, 6, 2), 18, False, table1=2),
    Table3Row("qk_only", "Query–key-only attention", "QK-only attention",
              r"f_x(W) = \sum_i c^\top X\," + _SOFTMAX % r"W_i^{K\top} W_i^Q",
              r"\frac{1}{2\sqrt{d_k}}\begin{bmatrix}0 & x u^\top\otimes I_{d_k}\\ u x^\top\otimes I_{d_k} & 0"
              r"\end{bmatrix},\ u = \Sigma_X c", "Prop. 3, Eq. (10)", "columns",
              _P(qk_attention, 3, 5, 2), (6, 6), 6, False),
    Table3Row("sh_logits", "Single-head attention logits", "single-head logits",
              r"f_x(W) = c^\top X\," + _SOFTMAX % r"W^{K\top} W^Q",
              r"\frac{1}{2\sqrt{d_k}}\begin{bmatrix}0 & x u^\top\\ u x^\top & 0\end{bmatrix}",
              "Prop. 4, Eq. (12)", "rows", _P(single_head_attention_logits, 3, 5, 4), (3, 3), 3, False),
    Table3Row("tied_qk", "Tied query–key attention", "tied QK attention",
              r"c^\top X\," + _SOFTMAX % r"W^\top W" + r" \simeq \tfrac{1}{\sqrt{d_k}} u^\top W^\top W x",
              r"A^\mathrm{tied}_{x,X,c} = \frac{1}{2\sqrt{d_k}}(x u^\top + u x^\top)",
              "Table 3", "rows", _P(tied_qk_attention, 3, 5, 4), None, None, False),
    Table3Row("bsr", "Bilinear sequence regression", "bilinear sequence",
              r"x_s^\top B x_t,\ B = U V^\top",
              _FF % (r"x_s x_t^\top", r"x_t x_s^\top"), "Table 3", "columns",
              _P(bilinear_sequence_regression, 3, 5), (3, 3), 3, True),
    Table3Row("ssl", "Linear SSL augmentation", "linear SSL",
              r"\lVert W\Delta\rVert^2 = \mathrm{Tr}(W^\top W\Delta\Delta^\top)",
              r"A_\Delta = \Delta\Delta^\top,\ \Delta = x - \chi", "Table 3", "rows",
              _P(linear_ssl_augmentation, 4), None, None, True),
)

#: The six rows of Table 1, in the paper's order (a view of :data:`REGISTRY`).
TABLE1: tuple[Table3Row, ...] = tuple(sorted((r for r in REGISTRY if r.table1 is not None), key=lambda r: r.table1))
