r"""The quadratic surrogate of a module (Eqs. 2, 20) and the order of its remainder along a ray: 3 in general,
4 with a per-neuron $Z_2$ symmetry (Theorem 1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_finite, check_shape, invalid
from .._fit import loglog_slope
from .._types import ArrayLike, Input
from ..architectures import Architecture



def nqf_expansion(
    A: Float[ArrayLike, "*o p p"],
    W: Float[ArrayLike, "p d"],
    *,
    f0: Float[ArrayLike, "*o"] | float = 0.0,
    g: Float[ArrayLike, "*o p"] | None = None,
    B: Float[ArrayLike, "*o p p"] | None = None,
) -> Float[Array, "*o"]:
    r"""Neural quadratic form of one input (Eqs. 2 and 20).

    $$ f_0 + g^\top\mu + \mu^\top B\mu + \mathrm{Tr}[W W^\top A], \qquad \mu = \textstyle\sum_i w_i = W 1_d. $$

    ``A`` (and ``g``, ``B``) may carry a leading output axis ``o`` (App. B.2);
    the result then has shape ``(o,)``.
    """
    A, W = jnp.asarray(A), jnp.asarray(W)
    if A.ndim not in (2, 3) or A.shape[-1] != A.shape[-2]:
        raise invalid("A", "have shape (p, p) or (o, p, p)", f"shape {A.shape}")
    lead, p = A.shape[:-2], A.shape[-1]
    check_shape("W", W, (p, None), "one column per neuron, p rows to match `A`")
    check_finite("W", W)
    mu = W.sum(axis=1)
    out = jnp.einsum("...ij,ik,jk->...", A, W, W) + jnp.asarray(f0)
    if g is not None:
        check_shape("g", g, lead + (p,), "the gradient of one neuron at 0")
        out = out + jnp.asarray(g) @ mu
    if B is not None:
        check_shape("B", B, lead + (p, p), "the cross-neuron coupling of Eq. (20)")
        out = out + jnp.einsum("i,...ij,j->...", mu, jnp.asarray(B), mu)
    return out


class RemainderScaling(NamedTuple):
    """Remainders $|f(sW) - \\text{NQF}(sW)|$ at each scale and their log-log slope."""

    scales: np.ndarray  # the scales s of W
    remainders: np.ndarray  # the gap between f(sW) and its NQF, in absolute value, at each scale
    slope: float  # the log-log slope of the remainders against the scale (3, or 4 with a Z2 symmetry)


def remainder_scaling(
    module: Architecture | Callable,
    x: Input,
    W_direction: Float[ArrayLike, "p d"],
    A: Float[ArrayLike, "*o p p"],
    *,
    scales: ArrayLike | None = None,
    g: Float[ArrayLike, "*o p"] | None = None,
    B: Float[ArrayLike, "*o p p"] | None = None,
) -> RemainderScaling:
    r"""Remainder of the NQF along the ray $sW$ and its fitted order.

    $$ R(s) = \big| f_x(sW) - f_x(0) - s\, g^\top\mu - s^2 (\mu^\top B\mu + \mathrm{Tr}[W W^\top A]) \big| $$

    (Euclidean norm over outputs), for each ``s`` in ``scales`` (default
    10 log-spaced values in $[10^{-3}, 10^{-1}]$). The slope of
    $\log R$ against $\log s$ is 3 for a generic $C^3$ module (Eq. 2) and 4
    with a per-neuron $Z_2$ symmetry; 2 means $A$ is wrong (e.g. a kink).
    Use float64: at $s = 10^{-3}$ the remainder is $\sim 10^{-12}$.
    Scales where $R$ is at round-off ($\le 100\epsilon|f|$) are left out of the
    fit (slope ``nan`` if fewer than two remain: the module is exactly quadratic).
    """
    apply = module.apply if isinstance(module, Architecture) else module
    if not callable(apply):
        raise invalid("module", "be an Architecture or a callable apply(W, x)", type(module).__name__)
    scales = np.logspace(-3, -1, 10) if scales is None else np.asarray(scales, dtype=float)
    if scales.ndim != 1 or scales.size < 2 or np.any(scales <= 0):
        raise invalid("scales", "be a 1-D array of at least 2 positive numbers", repr(scales))
    W = jnp.asarray(W_direction)
    f0 = apply(jnp.zeros_like(W), x)
    eps = float(jnp.finfo(jnp.result_type(W, float)).eps)
    rem, floor = [], []
    for s in scales:
        f, pred = apply(s * W, x), nqf_expansion(A, s * W, f0=f0, g=g, B=B)
        rem.append(float(jnp.linalg.norm(jnp.atleast_1d(f - pred))))
        floor.append(100 * eps * float(jnp.max(jnp.abs(jnp.stack([f, pred, jnp.broadcast_to(f0, f.shape)])))))
    rem = np.asarray(rem)
    keep = rem > np.asarray(floor)  # remainders at round-off carry no order information
    slope = loglog_slope(scales, rem, keep=keep)
    return RemainderScaling(scales, rem, slope)
