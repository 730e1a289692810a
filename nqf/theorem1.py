r"""Theorem 1 checked on an architecture: one call, one row of numbers.

:func:`check_theorem1` gathers what Chapter 1 measures for each module:
the per-neuron Hessian structure at $W = 0$ (cross blocks vanish, Eq. 54;
diagonal blocks are equal, Eq. 56), the closed-form $A(x)$ against autodiff,
and the order of the remainder $f_x(sW) - f_x(0) - s^2\,\mathrm{Tr}[WW^\top A]$
along random rays (3 in general, 4 with a per-neuron $Z_2$ symmetry), which is
also the rate of the limit of Eq. (3): $\phi(f_x(\phi^{-1/2}W) - f_x(0))
- \mathrm{Tr}[WW^\top A] = \phi\,R(\phi^{-1/2}) = O(\phi^{-1/2})$ or $O(\phi^{-1})$.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from .expansion import remainder_scaling
from .modules import Architecture
from .structure import relative_error, structure_report


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
        arch: an :class:`~nqf.modules.Architecture`.
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


__all__ = ["Theorem1Check", "check_theorem1"]
