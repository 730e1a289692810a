r"""Structure matrices by autodiff, with Theorem 1's checks: the Hessian blocks at $W = 0$ give Eq. (20)'s
$g$, $B = \tfrac12H_{ij}$, $A = \tfrac12(H_{ii} - H_{ij})$; under ZGZ $A = \tfrac12H_{ii}$ (Thm 1, Eqs. 54-56)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import check_finite, check_key, check_real_output, check_tolerance, invalid, theorem1_tolerance
from .._random import normal, split
from .._types import Input
from ..architectures import Architecture
from ._models import module_function
from ._probes import FAST_COMPILE, permute_neurons, taylor_ratio, taylor_residuals, taylor_steps, zero_neuron


class StructureReport(NamedTuple):
    """What autodiff finds at $W = 0$ (:func:`structure_report`); a leading output axis ``o`` for vector outputs;
    ``tol = rtol * scale`` (``scale``: the largest entry of the gradient and Hessian at 0)."""

    A: Array  #: (o?, p, p) structure matrix of Eq. (20)
    g: Array  #: (o?, p) gradient of one neuron at 0 (zero under ZGZ)
    B: Array  #: (o?, p, p) half cross block (zero under ZGZ)
    f0: Array  #: (o?) f_x(0)
    max_cross_block: float  #: max |H_ij|, i != j
    diag_block_spread: float  #: max |H_ii - H_11|
    cross_block_spread: float  #: max |H_ij - H_12| over i != j
    grad_norm: float  #: |g| (Frobenius over outputs)
    grad_spread: float  #: max |grad_i - grad_1| at 0
    permutation_residual: float  #: max relative |f(W) - f(W sigma)| at a random W
    zgz_residual: float  #: relative |grad wrt w_1| at a random W with w_1 = 0 (Property 1)
    smooth_ratio: float  #: |r(h)| / |r(h/2)| of the gradient Taylor residual (>= 3 smooth, 2 kink)
    zgz: bool  #: g = 0 and cross blocks = 0 at W = 0 (what Theorem 1 uses)
    zgz_property: bool  #: Property 1 holds at a random W
    permutation_symmetric: bool  #: value check and equal blocks at 0
    finite: bool  #: gradient and Hessian at 0 are finite
    smooth_at_zero: bool  #: autodiff Hessian predicts the gradient near 0 from both sides
    scale: float  #: the largest entry of the Hessian blocks and gradients at 0
    tol: float  #: rtol times scale: what counts as zero
    p: int  #: parameters per neuron
    d: int  #: neurons

    def summary(self) -> str:
        """One line per check, for notebooks and error messages."""
        flag = lambda b: "yes" if b else "NO"  # noqa: E731
        return "\n".join([
            f"p = {self.p}, d = {self.d}, A shape {tuple(self.A.shape)}, scale {self.scale:.3g}",
            f"finite: {flag(self.finite)}",
            f"smooth at 0: {flag(self.smooth_at_zero)} (Taylor ratio {self.smooth_ratio:.3g}; 2 = kink)",
            f"permutation symmetric: {flag(self.permutation_symmetric)} (value residual "
            f"{self.permutation_residual:.2g}, diag spread {self.diag_block_spread:.2g}, "
            f"cross spread {self.cross_block_spread:.2g})",
            f"ZGZ at 0: {flag(self.zgz)} (|g| = {self.grad_norm:.3g}, max |H_ij| = {self.max_cross_block:.3g}); "
            f"Property 1 at a random W: {flag(self.zgz_property)}",
        ])


def _input_dtype(name: str, x) -> jnp.dtype:
    leaves = jax.tree_util.tree_leaves(x)
    if not leaves:
        raise invalid(name, "contain at least one array", repr(x))
    for i, leaf in enumerate(leaves):
        dt = leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
        if not np.issubdtype(dt, np.number):
            raise invalid(name, "hold numeric arrays", f"leaf {i} of dtype {dt}")
        check_finite(name if len(leaves) == 1 else f"{name} (leaf {i})", leaf)
    return _float_dtype(x)


def _float_dtype(x) -> jnp.dtype:
    """The float dtype the derivatives at ``x`` are computed in: that of its float leaves, integer leaves (token
    ids) ignored, the default float if none (explicit, so it holds under strict dtype promotion)."""
    floats = [leaf for leaf in jax.tree_util.tree_leaves(x) if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)]
    return jnp.result_type(*floats, float)


def _apply_of(module) -> Callable:
    """The module function ``apply(W, x)`` of an Architecture or a plain callable."""
    return module.apply if isinstance(module, Architecture) else module


def _cacheable(module) -> bool:
    """True for an Architecture that may be cached by value (hashable, ``cache_by_value``)."""
    if not (isinstance(module, Architecture) and module.cache_by_value):
        return False
    try:
        hash(module)
    except TypeError:
        return False
    return True


@functools.cache
def _jit_by_value(impl: Callable, n_static: int, fast: bool) -> Callable:
    return jax.jit(impl, static_argnums=tuple(range(1 + n_static)), compiler_options=FAST_COMPILE if fast else None)


def _compiled(impl: Callable, module, *static, fast: bool = True) -> Callable:
    """``impl(module, *static, *args)`` compiled, as a function of ``args``: cached on an Architecture's value,
    traced afresh for a plain callable (which may read mutable state: a cache would return a stale $A$)."""
    if _cacheable(module):
        fn = _jit_by_value(impl, len(static), fast)
        return lambda *args: fn(module, *static, *args)
    return jax.jit(functools.partial(impl, module, *static), compiler_options=FAST_COMPILE if fast else None)


def _check_call(apply, x, p: int, d: int, dtype):
    """The output size of ``apply`` on ``(p, d)`` weights (``None``: scalar); its errors re-raised naming ``p``, ``x``."""
    try:
        out = jax.eval_shape(apply, jax.ShapeDtypeStruct((p, d), dtype), x)
    except ValueError:
        raise
    except (TypeError, IndexError) as err:
        shapes = jax.tree_util.tree_map(np.shape, x)
        raise invalid("module", f"accept W of shape (p, d) = ({p}, {d}) and x of shape {shapes} (check `p` "
                                f"(parameters per neuron) and the shape of `x`)",
                      f"module(W, x) failed with: {err}") from err
    if not hasattr(out, "shape") or len(out.shape) > 1:
        got = (f"an output of shape {tuple(out.shape)}" if hasattr(out, "shape") else
               f"a {type(out).__name__} of outputs" if isinstance(out, (tuple, list, dict)) else type(out).__name__)
        raise invalid("module", "return a scalar or an (o,) vector", got)
    check_real_output("module", out)  # not jacrev's "requires real-valued outputs"
    return None if len(out.shape) == 0 else out.shape[0]


def _probe(module, W0, W_unit, V_unit, x, W_extra):
    """One compiled pass over the quantities of :func:`structure_report` (the probes of :mod:`._probes`) and the
    values at ``W_extra`` ``(n, p, d)`` (the rays of :func:`nqf.structure.check_theorem1`)."""
    apply = _apply_of(module)

    def F(W, x):
        return jnp.reshape(apply(W, x), (-1,))

    p, d = W0.shape
    W = 0.5 * W_unit
    V = V_unit / jnp.linalg.norm(V_unit)
    perms = (np.roll(np.arange(d), 1), np.r_[1, 0, np.arange(2, d)])
    W_values = jnp.concatenate([jnp.stack([W0, W] + [permute_neurons(W, (1,), q) for q in perms]),
                                W_extra.astype(W0.dtype)])
    steps = jnp.asarray(taylor_steps(W0.dtype), W0.dtype)
    W_grads = jnp.concatenate([W0[None], steps[:, None, None] * V[None], zero_neuron(W, (1,))[None]])
    jac = jax.jacrev(F)
    f_pts = jax.vmap(F, in_axes=(0, None))(W_values, x)
    J_pts = jax.vmap(jac, in_axes=(0, None))(W_grads, x)
    return f_pts[0], J_pts[0], jax.jacfwd(jac)(W0, x), f_pts[1:4], J_pts[1:], V, f_pts[4:]


def structure_report(
    module: Architecture | Callable,
    x: Input,
    *,
    p: int | None = None,
    d: int = 3,
    key: Array | None = None,
    rtol: float | None = None,
) -> StructureReport:
    r"""Autodiff expansion of a module at $W = 0$ and the checks of Theorem 1.

    Returns $A = \tfrac12(\overline{H_{ii}} - \overline{H_{ij}})$, $B = \tfrac12\overline{H_{ij}}$,
    $g = \overline{\nabla_{w_i} f}$ of Eq. (20) (bars: averages over neurons and pairs), $f_x(0)$, and the checks:
    permutation symmetry (Def. 1), ZGZ (Property 1, Eq. 54), finiteness, and smoothness (the gradient's Taylor
    expansion from both sides of 0: autodiff gives one-sided derivatives at kinks).

    Args:
        module: an :class:`~nqf.architectures.Architecture` or a callable ``apply(W, x)``.
        x: one input (an array or a pytree, e.g. ``(q, X)`` for attention).
        p: parameters per neuron (optional for an Architecture).
        d: width used for the test (at least 2, so that cross blocks exist).
        key: PRNG key for the random points (default ``PRNGKey(0)``).
        rtol: the largest relative break of a hypothesis read as rounding (default: the ``residual`` of THE
            tolerance set, ``nqf._checks.theorem1_tolerance``, $\sqrt\epsilon$, which
            :func:`nqf.check_hypotheses` uses too): of the value residuals at a random $W$, and of the gradient,
            the cross blocks and the spread of the blocks at 0 relative to the derivative scale.
    """
    return _report(module, x, p, d=d, key=key, rtol=rtol)[0]


def structure_reports(module, xs, *, p=None, d: int = 3, key=None, rtol=None) -> list[StructureReport]:
    """:func:`structure_report` at every input of ``xs`` (a sequence), one compiled program for the call."""
    inputs = list(xs)
    if not inputs:
        raise invalid("xs", "hold at least one input", "an empty sequence")
    probe = _compiled(_probe, module)
    return [_report(module, x, p, d=d, key=key, rtol=rtol, probe=probe)[0] for x in inputs]


def _report(module, x, p, *, d, key, rtol, W_extra=None, probe=None) -> tuple[StructureReport, np.ndarray]:
    """:func:`structure_report`, and the module's values at ``W_extra`` from the same compiled pass."""
    apply, p = module_function(module, p=p)
    if not isinstance(d, (int, np.integer)) or d < 2:
        raise invalid("d", "be an int >= 2 (cross-neuron blocks need two neurons)", repr(d))
    d = int(d)
    dtype = _input_dtype("x", x)
    outputs = _check_call(apply, x, p, d, dtype)
    W_extra = np.zeros((0, p, d)) if W_extra is None else W_extra
    tols = theorem1_tolerance(dtype)  # THE tolerance set of every hypothesis check (nqf._checks)
    rtol = tols.residual if rtol is None else check_tolerance("rtol", rtol)
    if key is not None:
        check_key("key", key)
    key = jax.random.PRNGKey(0) if key is None else key
    probe = _compiled(_probe, module) if probe is None else probe
    k_w, k_v = split(key)  # the random point and direction, jax.random.normal's draws bit for bit
    out = probe(jnp.zeros((p, d), dtype), normal(k_w, (p, d), dtype), normal(k_v, (p, d), dtype), x,
                jnp.asarray(W_extra, dtype))
    f0, J0, H0, f_pts, J_pts, V, f_extra = (np.asarray(a, np.float64) for a in out)
    if not (np.all(np.isfinite(f0)) and np.all(np.isfinite(f_pts))):
        where = "at W = 0" if not np.all(np.isfinite(f0)) else "at the random probe weights"
        raise invalid("module", "be finite (and C^3) near W = 0 (Theorem 1)",
                      f"non-finite values (NaN/inf) {where} on this `x`")
    steps = taylor_steps(dtype)

    blocks = np.transpose(H0, (0, 2, 4, 1, 3))  # (o, d, d, p, p): blocks[:, i, j] = H_ij
    grads = np.moveaxis(J0, -1, 1)  # (o, d, p)
    finite = bool(np.all(np.isfinite(blocks)) and np.all(np.isfinite(grads)))
    off = ~np.eye(d, dtype=bool)
    diag, cross = blocks[:, np.arange(d), np.arange(d)], blocks[:, off]  # (o, d, p, p), (o, d(d-1), p, p)
    scale = float(max(np.nanmax(np.abs(blocks)), np.nanmax(np.abs(grads)))) if finite else float("nan")
    tol = rtol * scale

    A = 0.5 * (diag.mean(1) - cross.mean(1))
    B = 0.5 * cross.mean(1)
    A, B, g = 0.5 * (A + np.swapaxes(A, -1, -2)), 0.5 * (B + np.swapaxes(B, -1, -2)), grads.mean(1)
    mx = lambda a: float(np.max(np.abs(a))) if np.size(a) else 0.0  # noqa: E731
    max_cross, grad_max = mx(cross), mx(grads)
    diag_spread, cross_spread = mx(diag - diag[:, :1]), mx(cross - blocks[:, 0, 1][:, None])
    grad_spread = mx(grads - grads[:, :1])

    perm_res = max(mx(f_pts[0] - f_pts[i]) / max(mx(f_pts[0]), mx(f_pts[i]), 1e-300) for i in (1, 2))
    symmetric = bool(perm_res <= rtol and max(diag_spread, cross_spread, grad_spread) <= tol)

    zgz_res = mx(J_pts[-1][..., 0]) / max(mx(J_pts[-1]), 1e-300)

    # Taylor residual of the gradient, r(t) = grad f(tV) - grad f(0) - t H V:
    # O(t^2) for a C^3 module (ratio r(h)/r(h/2) = 4, or 8 with Z2), O(t) at a kink (ratio 2).
    HV = np.einsum("opdqe,qe->opd", H0, V)
    res = taylor_residuals(J_pts[:4], J0, HV, steps, np.linalg.norm)
    ratio = taylor_ratio(res, [np.linalg.norm(J_pts[i]) for i in range(4)], np.linalg.norm(J0),
                         np.linalg.norm(HV), steps[0], tols.rounding)
    ratio = ratio if finite else float("nan")
    squeeze = (lambda a: jnp.asarray(a[0], dtype)) if outputs is None else (lambda a: jnp.asarray(a, dtype))
    report = StructureReport(
        A=squeeze(A), g=squeeze(g), B=squeeze(B), f0=squeeze(np.asarray(f0)),
        max_cross_block=max_cross, diag_block_spread=diag_spread, cross_block_spread=cross_spread,
        grad_norm=float(np.linalg.norm(g)), grad_spread=grad_spread,
        permutation_residual=perm_res, zgz_residual=float(zgz_res), smooth_ratio=float(ratio),
        zgz=bool(finite and grad_max <= tol and max_cross <= tol), zgz_property=bool(zgz_res <= rtol),
        permutation_symmetric=symmetric, finite=finite, smooth_at_zero=bool(finite and ratio >= tols.smooth_ratio),
        scale=scale, tol=float(tol), p=p, d=int(d),
    )
    return report, f_extra


def structure_matrix(
    module: Architecture | Callable,
    x: Input,
    *,
    p: int | None = None,
    d: int = 3,
    allow_general: bool = False,
    key: Array | None = None,
    batch: bool = False,
) -> Float[Array, "*m *o p p"]:
    r"""The structure matrix $A(x) = \tfrac12 H_{ii}$ of Theorem 1, by autodiff, or a clear error.

    Raises ``ValueError`` naming the failed hypothesis and the measured numbers. With ``allow_general=True`` a
    module without ZGZ gets the $A$ of Eq. (20) (its $g$, $B$: :func:`structure_report`). With ``batch=True``, ``x`` carries a leading sample axis on every leaf
    and the stack $A(x_\mu)$, shape ``(m, *o, p, p)``, is returned, compiled once: the hypotheses are checked
    on the first input, then an Architecture's closed form (else the Hessian at 0) is mapped over the batch.
    """
    if batch:
        return structure_stack(module, x, p=p, d=d, allow_general=allow_general)
    rep = structure_report(module, x, p=p, d=d, key=key)
    if not rep.finite:
        raise invalid("module", "be C^3 near W = 0 (Theorem 1)",
                      "module derivatives at W = 0 that are not finite (NaN/inf gradient or Hessian)")
    if not rep.smooth_at_zero:
        raise invalid(
            "module", "be C^3 (Theorem 1; autodiff's A would be silently wrong)",
            f"a module that is not smooth at W = 0: the autodiff Hessian does not predict the gradient near 0 "
            f"(Taylor residual ratio {rep.smooth_ratio:.3g}; a kink such as ReLU gives 2, a C^3 module >= 4)")
    if not rep.permutation_symmetric:
        raise invalid(
            "module", "be permutation-symmetric in its neurons, the columns of W (Def. 1 / Theorem 1)",
            f"a module that is not permutation-symmetric in its neurons: relative "
            f"|f(W) - f(W sigma)| = {rep.permutation_residual:.3g} at a random W; at W = 0 max |H_ii - H_11| = "
            f"{rep.diag_block_spread:.3g}, max |H_ij - H_12| = {rep.cross_block_spread:.3g}, max |grad_i - grad_1| "
            f"= {rep.grad_spread:.3g} (tolerance {rep.tol:.3g})")
    if not rep.zgz and not allow_general:
        raise invalid(
            "module", "satisfy ZGZ (use structure_report(...) for the general form of Eq. (20), or "
                      "allow_general=True to get its A)",
            f"a module that breaks ZGZ (Property 1): |g(x)| = {rep.grad_norm:.3g}, |B(x)| = "
            f"{float(jnp.linalg.norm(rep.B)):.3g} (max cross block {rep.max_cross_block:.3g}, tolerance "
            f"{rep.tol:.3g})")
    return rep.A


def _autodiff_structure(module, p: int, d: int, batched: bool, x) -> Array:
    """$A = \\tfrac12(H_{11} - H_{12})$ from the first two neurons only (traceable; vmapped over ``x`` if batched)."""
    if batched:
        return jax.vmap(lambda xi: _autodiff_structure(module, p, d, False, xi))(x)
    apply = _apply_of(module)
    dtype = _float_dtype(x)
    rest = jnp.zeros((p, d - 2), dtype)
    F = lambda w12: apply(jnp.concatenate([w12, rest], axis=1), x)  # noqa: E731
    H = jax.hessian(F)(jnp.zeros((p, 2), dtype))  # (o?, p, 2, p, 2)
    A = 0.5 * (H[..., :, 0, :, 0] - H[..., :, 0, :, 1])
    return 0.5 * (A + jnp.swapaxes(A, -1, -2))


def _closed_structure(arch, batched: bool, x) -> Array:
    """The architecture's closed form $A(x)$ (vmapped over ``x`` if batched)."""
    return jax.vmap(arch.structure)(x) if batched else arch.structure(x)


def structure_stack(
    module: Architecture | Callable,
    xs: Input,
    *,
    p: int | None = None,
    d: int = 3,
    method: str = "auto",
    check: bool = True,
    allow_general: bool = False,
) -> Float[Array, "m *o p p"]:
    """:func:`structure_matrix` with ``batch=True``; ``method`` ``"closed"`` (the closed form), ``"autodiff"`` or
    ``"auto"`` (closed when available); ``check=False`` skips Theorem 1's check on the first input."""
    apply, p = module_function(module, p=p, name="module")
    if not isinstance(d, (int, np.integer)) or d < 2:
        raise invalid("d", "be an int >= 2", repr(d))
    if method not in ("auto", "closed", "autodiff"):
        raise invalid("method", "be 'auto', 'closed' or 'autodiff'", repr(method))
    _input_dtype("xs", xs)
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in jax.tree_util.tree_leaves(xs)}
    if len(sizes) != 1 or None in sizes:
        raise invalid("xs", "have the same leading batch axis on every leaf", f"leading sizes {sizes}")
    if isinstance(module, Architecture):
        one = jax.eval_shape(module.sample_input, jax.ShapeDtypeStruct((2,), jnp.uint32))  # shapes only: no key
        got, want = jax.tree_util.tree_leaves(xs), jax.tree_util.tree_leaves(one)
        ok = jax.tree_util.tree_structure(xs) == jax.tree_util.tree_structure(one) and all(
            np.ndim(g) == len(w.shape) + 1 and tuple(np.shape(g)[1:]) == tuple(w.shape) for g, w in zip(got, want))
        got = jax.tree_util.tree_map(np.shape, xs)
        if not ok:
            one_shapes = jax.tree_util.tree_map(lambda s: tuple(s.shape), one)
            raise invalid("xs", f"be a batch of inputs of {module.name!r}: a leading sample axis on "
                                f"inputs of shape {one_shapes} (for one input use structure_matrix, or add the axis "
                                f"with x[None])", f"shapes {got}")
    if sizes == {0}:
        raise invalid("xs", "hold at least one input", "an empty batch (leading axis of length 0)")
    first = jax.tree_util.tree_map(lambda leaf: leaf[0], xs)
    if check:
        structure_matrix(module, first, p=p, d=d, allow_general=allow_general)
    if method == "closed" and not isinstance(module, Architecture):
        raise invalid("method", "not be 'closed' for a plain module (method='closed' needs an Architecture: a plain "
                             "module has no closed form)", "'closed'")
    if method in ("closed", "auto") and isinstance(module, Architecture):
        return _compiled(_closed_structure, module, True, fast=False)(xs)
    return _compiled(_autodiff_structure, module, p, int(d), True)(xs)


def relative_error(closed, auto) -> float:
    r"""$\|A_\text{closed} - A_\text{autodiff}\|_F / \|A_\text{autodiff}\|_F$ (absolute if the latter is 0)."""
    closed, auto = np.asarray(closed, np.float64), np.asarray(auto, np.float64)
    err, ref = float(np.linalg.norm(closed - auto)), float(np.linalg.norm(auto))
    return err / ref if ref > 0 else err
