r"""Table 3 of the paper as code: every row a module with its closed-form $A(x)$.

The constructors live in :mod:`nqf.architectures`, :mod:`nqf.architectures`,
:mod:`nqf.architectures` and :mod:`nqf.architectures`. :data:`TABLE3` lists
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
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from .._checks import check_finite
from .._types import ArrayLike
from .._types import Input
from ..architectures._base import Architecture
from ..architectures._quadratic_rows import _check_sizes
from ._autodiff import relative_error
from ._autodiff import structure_report
from ._expansion import remainder_scaling



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


class Theorem1Check(NamedTuple):
    """Measured quantities of Theorem 1 for one architecture and one input."""

    name: str
    p: int
    cross_block: float  #: max |H_ij| (i != j) relative to the Hessian scale (Eq. 54: 0)
    diag_spread: float  #: max |H_ii - H_11| relative to the Hessian scale (Eq. 56: 0)
    grad_norm: float  #: |grad_{w_i} f| at 0 (ZGZ: 0)
    closed_form_error: float  #: |A_closed - A_autodiff| / |A_autodiff|
    exactly_quadratic: bool  #: the remainder is at rounding level at every scale
    slopes: np.ndarray  #: fitted log-log remainder slope along each random ray
    scales: np.ndarray  #: the ray scales s
    remainders: np.ndarray  #: (rays, scales) |f(sW) - NQF(sW)|
    relative_remainder: float  #: max remainder / max |Tr[(sW)(sW)^T A]| over all rays and scales
    A: np.ndarray  #: the closed-form structure matrix at this input


def check_theorem1(
    arch: Architecture,
    *,
    seed: int = 0,
    rays: int = 3,
    width: int = 4,
    scales: np.ndarray | None = None,
) -> Theorem1Check:
    r"""Measure Theorem 1 for ``arch`` at one random input.

    Args:
        arch: an :class:`~nqf.architectures.Architecture`.
        seed: seeds the input and the rays.
        rays: number of random directions $W$ (shape ``(p, width)``, unit Frobenius norm).
        width: the number of neurons $d$ of the rays.
        scales: ray scales $s$ (default 12 values log-spaced in $[10^{-3}, 10^{-1}]$).
    """
    if not isinstance(arch, Architecture):
        raise ValueError(f"`arch` must be an nqf Architecture; got {type(arch).__name__}.")
    if int(rays) < 1 or int(width) < 1:
        raise ValueError(f"`rays` and `width` must be >= 1; got rays={rays!r}, width={width!r}.")
    scales = np.logspace(-3, -1, 12) if scales is None else np.asarray(scales, dtype=float)
    key_x, key_w = jax.random.split(jax.random.PRNGKey(seed))
    x = arch.sample_input(key_x)
    rep = structure_report(arch, x)
    A = arch.structure(x)
    # the report's A is the autodiff Hessian block: compare with it instead of differentiating again
    err = relative_error(A, rep.A)
    rems, slopes, quad = [], [], []
    for k in jax.random.split(key_w, rays):
        W = jax.random.normal(k, (arch.p, width), dtype=A.dtype)
        W = W / np.linalg.norm(np.asarray(W))
        rs = remainder_scaling(arch, x, W, A, scales)
        rems.append(rs.remainders)
        slopes.append(rs.slope)
        WWt = np.asarray(W @ W.T)
        quad.append(np.abs(np.einsum("ij,...ji->...", WWt, np.asarray(A))).max() * scales**2)
    rems, quad = np.asarray(rems), np.asarray(quad)
    rel = float(np.max(rems / np.maximum(quad, 1e-300)))
    exact = bool(rel < 1e-12)
    return Theorem1Check(
        name=arch.name, p=arch.p,
        cross_block=rep.max_cross_block / rep.scale,
        diag_spread=rep.diag_block_spread / rep.scale,
        grad_norm=rep.grad_norm, closed_form_error=err,
        exactly_quadratic=exact,
        slopes=np.full(rays, np.nan) if exact else np.asarray(slopes),
        scales=scales, remainders=rems, relative_remainder=rel, A=np.asarray(A),
    )
