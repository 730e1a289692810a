r"""Theorem 1, checked by :func:`check_theorem1` at one input from one compiled pass of the module: the hypotheses
(Def. 1, Property 1, Eqs. 54 and 56, smoothness), the closed form against the autodiff $A$ (Eq. 20), and the order
of the remainder along random rays: 3 in general (Eq. 2), 4 with a per-neuron $Z_2$ symmetry, rounding level for
an exactly quadratic module.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from .._checks import invalid
from .._fit import loglog_slope
from .._types import ArrayLike, Input
from ..architectures import Architecture
from ._autodiff import _input_dtype, _report, relative_error, StructureReport


class Theorem1Check(NamedTuple):
    """What :func:`check_theorem1` measures for one architecture at one input."""

    name: str  #: the architecture's name
    p: int  #: parameters per neuron
    A: np.ndarray  #: (o?, p, p) the closed-form structure matrix at this input
    A_autodiff: np.ndarray  #: (o?, p, p) the autodiff A of Eq. (20) (half the diagonal block under ZGZ)
    closed_form_error: float  #: |A_closed - A_autodiff|_F / |A_autodiff|_F
    cross_block: float  #: max |H_ij| (i != j) relative to the derivative scale (Eq. 54: 0)
    diag_spread: float  #: max |H_ii - H_11| relative to the derivative scale (Eq. 56: 0)
    grad_norm: float  #: |grad_{w_i} f| at 0 (ZGZ: 0)
    permutation_residual: float  #: max relative |f(W) - f(W sigma)| at a random W (Def. 1: 0)
    exactly_quadratic: bool  #: the remainder is at rounding level at every scale
    scales: np.ndarray  #: (S,) the ray scales s
    remainders: np.ndarray  #: (rays, S) |f(sW) - NQF(sW)| (Euclidean norm over outputs)
    relative_remainder: float  #: max over rays and scales of R(s) / |s^2 Tr[W W^T A]|
    slopes: np.ndarray  #: (rays,) log-log slope of R (nan: exactly quadratic, or at rounding)
    report: StructureReport  #: every autodiff diagnostic (smoothness, Property 1, g, B, f0, ...)


def _check_int(name: str, value, low: int, why: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise invalid(name, f"be an int >= {low}{why}", repr(value))
    return int(value)


def check_theorem1(
    arch: Architecture,
    *,
    x: Input | None = None,
    seed: int,
    rays: int = 2,
    width: int = 3,
    scales: ArrayLike | None = None,
) -> Theorem1Check:
    r"""Measure Theorem 1 for ``arch`` at one input: hypotheses, closed form, remainder order.

    Args:
        arch: an :class:`~nqf.architectures.Architecture` (it carries the closed form).
        x: the input; default ``arch.sample_input(k)`` with ``k`` the first key of
            ``jax.random.split(PRNGKey(seed))``.
        seed: (required) seeds the default input, the random points of the autodiff report
            (``PRNGKey(seed)``) and the rays (``numpy.random.default_rng(seed)``).
        rays: number of random unit directions $W$ (shape ``(p, width)``, unit Frobenius norm).
        width: the number of neurons $d$ of the autodiff report and of the rays (>= 2).
        scales: ray scales $s$ (default 10 values log-spaced in $[10^{-3}, 10^{-1}]$).

    The Hessian identities (Eqs. 54, 56) and the comparison with the closed form
    come from :func:`nqf.structure_report` at width ``width``; the module's
    values along the rays come from the same compiled pass. Remainders at
    rounding level ($\le 100\epsilon|f|$) carry no order information and are
    left out of the slope fit; a module whose relative remainder stays below
    $10^{-12}$ is reported as exactly quadratic (slopes ``nan``). Value checks of
    the input beyond finiteness (e.g. index ranges) are the module's own and run
    when ``arch.structure(x)`` is evaluated, before anything is compiled.
    """
    if not isinstance(arch, Architecture):
        raise invalid("arch", "be an nqf Architecture (it carries the closed form)", type(arch).__name__)
    rays = _check_int("rays", rays, 1, "")
    width = _check_int("width", width, 2, " (permutations and cross blocks need two neurons)")
    scales = np.logspace(-3, -1, 10) if scales is None else np.asarray(scales, dtype=float)
    if scales.ndim != 1 or scales.size < 2 or np.any(scales <= 0) or not np.all(np.isfinite(scales)):
        raise invalid("scales", "be a 1-D array of at least 2 positive numbers", repr(scales))
    key = jax.random.PRNGKey(seed)
    if x is None:
        x = arch.sample_input(jax.random.split(key)[0])
    dtype = _input_dtype("x", x)
    A = np.asarray(arch.structure(x), np.float64)  # the module's own input checks run here
    rng = np.random.default_rng(seed)
    dirs = rng.standard_normal((rays, arch.p, width))
    dirs /= np.linalg.norm(dirs, axis=(1, 2), keepdims=True)
    points = (scales[None, :, None, None] * dirs[:, None]).reshape(-1, arch.p, width)  # (rays * S, p, d)
    rep, f_rays = _report(arch, x, arch.p, d=width, key=key, rtol=None, W_extra=points)

    f0 = np.reshape(np.asarray(rep.f0, np.float64), (-1,))
    A_out = np.reshape(A, (-1, arch.p, arch.p))
    f_rays = f_rays.reshape(rays, scales.size, -1)
    quad = np.einsum("oij,rik,rjk->ro", A_out, dirs, dirs)  # (rays, o): Tr[W W^T A] per output
    pred = f0 + scales[None, :, None] ** 2 * quad[:, None, :]
    rem = np.linalg.norm(f_rays - pred, axis=2)  # (rays, S)
    size = np.maximum(np.max(np.abs(f_rays), axis=2), np.max(np.abs(pred), axis=2))
    floor = 100 * float(np.finfo(dtype).eps) * size
    quad_size = np.linalg.norm(quad, axis=1)[:, None] * scales[None, :] ** 2
    relative = float(np.max(rem / np.maximum(quad_size, 1e-300)))
    exact = bool(relative < 1e-12)
    slopes = []
    for r, fl in zip(rem, floor):
        keep = r > fl
        slopes.append(loglog_slope(scales, r, keep=keep) if not exact else float("nan"))
    return Theorem1Check(
        name=arch.name, p=arch.p, A=A, A_autodiff=np.asarray(rep.A, np.float64),
        closed_form_error=relative_error(A, rep.A),
        cross_block=rep.max_cross_block / max(rep.scale, 1e-300),
        diag_spread=rep.diag_block_spread / max(rep.scale, 1e-300),
        grad_norm=rep.grad_norm, permutation_residual=rep.permutation_residual,
        exactly_quadratic=exact, scales=scales, remainders=rem, relative_remainder=relative,
        slopes=np.asarray(slopes), report=rep,
    )
