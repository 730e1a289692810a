r"""Table 3 of the paper as code: every row a module with its closed-form $A(x)$.

The constructors live in :mod:`nqf.modules`, :mod:`nqf.attention`,
:mod:`nqf.attention_rows` and :mod:`nqf.quadratic_rows`. :data:`TABLE3` lists
the 17 rows (the 16 printed rows of Table 3 plus the single-head attention
logits of Prop. 4), each with
the LaTeX of its module and of its printed structure matrix, so that a chapter
renders the table from this file and fills in only measured numbers.

**Neurons are columns of ``W`` everywhere in nqf.** The paper writes three
rows with neurons as the *rows* of its weight matrix (tied query–key
attention and linear SSL augmentation, caption of Table 3; the single-head
logits of Prop. 4, whose neurons are rows of $W^Q$ and $W^K$). Those
constructors take the transpose of the paper's matrix; :func:`to_nqf_weights`
does the conversion, and :attr:`Table3Row.neurons` records the convention.
Reading such a matrix column-wise would be a different module, one that is
not permutation-symmetric in its columns (Chapter 2 measures this).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._checks import check_finite
from ._types import ArrayLike, Input
from .attention import multihead_attention, qk_attention
from .attention_rows import single_head_attention_logits, tied_qk_attention
from .modules import (
    Architecture,
    cnn,
    diagonal_linear_network,
    mixture_of_experts,
    phase_retrieval,
    two_layer_mlp,
)
from .quadratic_rows import (
    _check_sizes,
    bilinear_sequence_regression,
    linear_ssl_augmentation,
    matrix_completion,
    psd_matrix_sensing,
    quadratic_network,
    rectangular_matrix_sensing,
    word_context_embedding,
)


def to_nqf_weights(W_paper: Float[ArrayLike, "a b"], neurons: str) -> Float[Array, "p d"]:
    """Convert a paper-convention weight matrix to nqf's (neurons as columns).

    ``neurons="columns"`` returns ``W_paper`` unchanged; ``neurons="rows"`` (tied
    query–key attention, linear SSL augmentation) returns its transpose, so that
    $M = W_\\text{nqf}W_\\text{nqf}^\\top = W_\\text{paper}^\\top W_\\text{paper}$.
    """
    if neurons not in ("columns", "rows"):
        raise ValueError(f"`neurons` must be 'columns' or 'rows'; got {neurons!r}.")
    if np.ndim(W_paper) != 2:
        raise ValueError(f"`W_paper` must be a matrix; got shape {np.shape(W_paper)}.")
    W = jnp.asarray(W_paper)
    return W.T if neurons == "rows" else W


# ------------------------------------------------------------------ the registry
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


_P = functools.partial
_FF = r"\tfrac12\begin{bmatrix}0 & %s\\ %s & 0\end{bmatrix}"
_SOFTMAX = r"\mathrm{softmax}\big(X^\top %s x/\sqrt{d_k}\big)"

TABLE3: tuple[Table3Row, ...] = (
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
              "Tables 1, 3", "columns", _P(phase_retrieval, 4), None, None, True),
    Table3Row("dln_square", "Diagonal linear network, square parametrisation", "DLN, square",
              r"f_x(u) = \sum_k x_k u_k^2/4", r"A_x = \tfrac14\mathrm{Diag}(x)",
              "Tables 1, 3", "columns", _P(diagonal_linear_network, 4), None, None, True),
    Table3Row("dln_two_factor", "Diagonal linear network, two-factor signed form", "DLN, two-factor",
              r"f_x(u, v) = u^\top\mathrm{Diag}(x)\,v", _FF % (r"\mathrm{Diag}(x)", r"\mathrm{Diag}(x)"),
              "Table 3", "columns", _P(diagonal_linear_network, 3, two_factor=True), (3, 3), 3, True),
    Table3Row("mlp", "Two-layer MLP", "two-layer MLP", r"f_x(W) = \sum_i v_i\,\phi(u_i^\top x)",
              r"\frac{\phi'(0)}{2}\begin{bmatrix}0_{k\times k} & x\\ x^\top & 0\end{bmatrix}",
              "Prop. 1, Eq. (6)", "columns", _P(two_layer_mlp, 4), (4, 1), 4, False),
    Table3Row("cnn", "Single-layer CNN (global sum pooling)", "CNN",
              r"f_x(W) = \sum_i v_i \sum_{p=1}^P \phi(k_i^\top x_p)",
              r"\frac{\phi'(0)}{2}\begin{bmatrix}0_{m\times m} & \sum_p x_p\\ \sum_p x_p^\top & 0\end{bmatrix}",
              "Prop. 6, Eq. (16)", "columns", _P(cnn, 4, 5, 2, 3), (6, 1), 6, False),
    Table3Row("moe", "Mixture of experts (independent gating)", "mixture of experts",
              r"f_x(W) = \sum_i \psi(r_i^\top x)\,E(x;\Theta_i)",
              r"\frac{\psi'(0)}{2}\begin{bmatrix}0 & x G^\top\\ G x^\top & 0\end{bmatrix},\ G = \nabla_\Theta E(x;0)",
              "Prop. 5, Eq. (14)", "columns", _P(mixture_of_experts, 3), (3, 3), 3, False),
    Table3Row("mha", "Multi-head attention", "multi-head attention",
              r"f_x(W) = \sum_i v_i^\top W_i^V X\," + _SOFTMAX % r"W_i^{K\top} W_i^Q",
              r"\tfrac12\begin{bmatrix}0 & 0 & 0 & 0\\ 0 & 0 & 0 & 0\\ 0 & 0 & 0 & x_{avg}\otimes I_{d_v}"
              r"\\ 0 & 0 & x_{avg}^\top\otimes I_{d_v} & 0\end{bmatrix}",
              "Prop. 2, Eq. (8)", "columns", _P(multihead_attention, 3, 4, 2, 2), (6, 6, 6, 2), 18, False),
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


# ------------------------------------------------------- closed form vs autodiff
class RowCheck(NamedTuple):
    """What :func:`check_row` measures for one architecture at one input."""

    A_closed: np.ndarray  #: (o?, p, p) the row's closed form
    A_autodiff: np.ndarray  #: (o?, p, p) half the diagonal Hessian block H_11 at W = 0
    rel_error: float  #: |A_closed - H_11/2|_F / |H_11/2|_F
    cross_block: float  #: max |H_12| / max |H| (ZGZ, Eq. 54: 0)
    diag_spread: float  #: max |H_11 - H_22| / max |H| (Eq. 56: 0)
    grad_norm: float  #: max |grad f| at 0 (ZGZ: 0)
    permutation_residual: float  #: max |f(W) - f(W sigma)| / |f(W)| at a random W (Def. 1: 0)
    scales: np.ndarray  #: (S,) ray scales s
    remainders: np.ndarray  #: (rays, S) |f(sW) - f(0) - s^2 Tr[W W^T A]| (norm over outputs)
    relative_remainder: float  #: max over rays and scales of remainder / |s^2 Tr[W W^T A]|
    slopes: np.ndarray  #: (rays,) log-log slope of the remainder (nan: at rounding, exactly quadratic)


# The checks run once per architecture on tiny arrays: compile time dominates, so ask
# XLA for its cheapest pipeline (as nqf.structure does).
_FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@functools.lru_cache(maxsize=64)
def _row_fn(apply, structure, p: int):
    def F(W, x):
        return jnp.reshape(apply(W, x), (-1,))

    def run(x, W_batch):
        """``W_batch``: every width-``width`` point at which f is needed, evaluated by one vmap."""
        W0 = jnp.zeros((p, 2), W_batch.dtype)
        def grad_twice(W):
            g = jax.jacrev(F)(W, x)
            return g, g  # differentiated, and returned as is

        H, J = jax.jacfwd(grad_twice, has_aux=True)(W0)  # (o, p, 2, p, 2), (o, p, 2)
        A = jnp.reshape(structure(x), (-1, p, p))
        return J, H, A, jax.vmap(F, in_axes=(0, None))(W_batch, x)

    # Random draws happen outside (numpy): threefry inside jit would dominate the compile time,
    # and one vmapped evaluation of f keeps a single copy of the module in the compiled program.
    return jax.jit(run, compiler_options=_FAST_COMPILE)


def check_row(
    arch: Architecture,
    x: Input,
    *,
    seed: int = 0,
    rays: int = 2,
    scales: ArrayLike | None = None,
    width: int = 3,
) -> RowCheck:
    r"""Closed form against autodiff, and the NQF remainder, for one architecture (one jit).

    * $A$: ``arch.structure(x)`` against $\tfrac12 H_{11}$, the autodiff Hessian
      block of one neuron at $W = 0$ of a width-2 module; the cross block
      $H_{12}$ (zero under ZGZ, Eq. 54), the spread $H_{11} - H_{22}$ (Eq. 56) and
      the gradient at 0 are measured as well.
    * Permutation symmetry (Def. 1): $f(W)$ against $f(W\sigma)$ at a random $W$
      of width ``width`` for two permutations $\sigma$.
    * Remainder: along ``rays`` random unit directions $W$ (width ``width``),
      $R(s) = |f_x(sW) - f_x(0) - s^2\,\mathrm{Tr}[WW^\top A]|$ for each $s$ in
      ``scales`` (default 10 values in $[10^{-3}, 10^{-1}]$) and its log-log
      slope: 3 in general (Thm 1), 4 with a per-neuron $Z_2$ symmetry; scales at
      rounding level are left out (slope ``nan`` if fewer than two remain).

    The random $W$ come from ``numpy.random.default_rng(seed)``. Value checks of
    the input beyond finiteness (e.g. index ranges) are the module's own and run
    when it is called outside jit.
    """
    if not isinstance(arch, Architecture):
        raise ValueError(f"`arch` must be an nqf Architecture; got {type(arch).__name__}.")
    _check_sizes(rays=rays)
    if not isinstance(width, (int, np.integer)) or width < 2:
        raise ValueError(f"`width` must be an int >= 2 (permutations need two neurons); got {width!r}.")
    scales = np.logspace(-3, -1, 10) if scales is None else np.asarray(scales, dtype=float)
    if scales.ndim != 1 or scales.size < 2 or np.any(scales <= 0) or not np.all(np.isfinite(scales)):
        raise ValueError(f"`scales` must be a 1-D array of at least 2 positive numbers; got {scales!r}.")
    leaves = jax.tree_util.tree_leaves(x)
    if not leaves:
        raise ValueError(f"`x` must contain at least one array; got {x!r}.")
    for leaf in leaves:
        check_finite("x", leaf)
    jax.eval_shape(arch.structure, x)  # the module's shape checks of the input (no compile)
    rng = np.random.default_rng(seed)
    width = int(width)
    W_perm = rng.standard_normal((arch.p, width))
    dirs = rng.standard_normal((int(rays), arch.p, width))
    dirs /= np.linalg.norm(dirs, axis=(1, 2), keepdims=True)
    rays_s = (scales[None, :, None, None] * dirs[:, None]).reshape(-1, arch.p, width)  # (rays * S, p, d)
    batch = np.concatenate([W_perm[None], W_perm[None][:, :, np.roll(np.arange(width), 1)],
                            W_perm[None][:, :, ::-1], np.zeros((1, arch.p, width)), rays_s])
    dtype = jnp.result_type(*leaves, float)
    out = _row_fn(arch.apply, arch.structure, arch.p)(x, jnp.asarray(batch, dtype))
    J, H, A, f = (np.asarray(a, np.float64) for a in out)
    f_perm, f0, f_rays = f[:3], f[3], f[4:].reshape(int(rays), scales.size, -1)
    quad = np.einsum("oij,rik,rjk->ro", A, dirs, dirs)  # (rays, o)
    pred = f0 + scales[None, :, None] ** 2 * quad[:, None, :]
    rem = np.linalg.norm(f_rays - pred, axis=2)  # (rays, S)
    size = np.maximum(np.max(np.abs(f_rays), axis=2), np.max(np.abs(pred), axis=2))
    floor = 100 * float(jnp.finfo(dtype).eps) * size  # remainders at rounding carry no order information
    quad = np.linalg.norm(quad, axis=1)[:, None] * scales[None, :] ** 2
    H11, H12, H22 = H[:, :, 0, :, 0], H[:, :, 0, :, 1], H[:, :, 1, :, 1]
    scale = max(float(np.max(np.abs(H))), 1e-300)
    squeeze = (lambda a: a[0]) if arch.outputs is None else (lambda a: a)  # noqa: E731
    auto, closed = squeeze(0.5 * H11), squeeze(A)
    ref, err = float(np.linalg.norm(auto)), float(np.linalg.norm(closed - auto))
    perm = float(np.max(np.abs(f_perm[1:] - f_perm[0]))) / max(float(np.max(np.abs(f_perm[0]))), 1e-300)
    slopes = []
    for r, fl in zip(rem, floor):
        keep = r > fl
        slopes.append(float(np.polyfit(np.log(scales[keep]), np.log(r[keep]), 1)[0]) if keep.sum() >= 2
                      else float("nan"))
    return RowCheck(
        A_closed=closed, A_autodiff=auto, rel_error=err / ref if ref > 0 else err,
        cross_block=float(np.max(np.abs(H12))) / scale, diag_spread=float(np.max(np.abs(H11 - H22))) / scale,
        grad_norm=float(np.max(np.abs(J))), permutation_residual=perm, scales=scales, remainders=rem,
        relative_remainder=float(np.max(rem / np.maximum(quad, 1e-300))), slopes=np.asarray(slopes),
    )


__all__ = [
    "TABLE3",
    "RowCheck",
    "Table3Row",
    "check_row",
    "to_nqf_weights",
]
