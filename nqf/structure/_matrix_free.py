r"""The NQF matrix-free: under ZGZ (Eq. 54) $\mathrm{Tr}[WW^\top A(x)] = \tfrac12D^2f_x(0)[W, W]$ (two nested
``jax.jvp``), and Theorem 1's hypotheses by Hessian-vector products."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._checks import check_key, invalid, theorem1_tolerance
from .._random import normal, split
from ..architectures import Architecture
from ._neurons import split_params, take_neurons
from ._probes import (fast_filter_jit, permute_neurons, taylor_ratio, taylor_residuals, taylor_step, taylor_steps,
                      zero_neuron)


def module_out(apply, tr, frozen, x):
    """The module at the weights split into neuron leaves ``tr`` and the rest ``frozen``: ``apply(tr + frozen, x)``."""
    return apply(eqx.combine(tr, frozen), x)


def nqf_out(apply, tr, frozen, x):
    r"""$f_x(0) + \tfrac12 D^2 f_x(0)[W, W]$ in the neuron leaves (frozen leaves fixed): the NQF (Eq. 2)."""
    g = lambda t: apply(eqx.combine(jax.tree_util.tree_map(lambda w: t * w, tr), frozen), x)  # noqa: E731
    first = lambda t: jax.jvp(g, (t,), (jnp.ones_like(t),))  # noqa: E731
    t0 = jnp.zeros((), jax.tree_util.tree_leaves(tr)[0].dtype)
    (f0, _), (_, d2) = jax.jvp(first, (t0,), (jnp.ones_like(t0),))
    return f0 + 0.5 * d2


def nqf_output(module: Architecture | Callable, W: Any, x: Any, *, neuron_axes: Any = 1) -> Array:
    r"""The NQF of a module at weights ``W``, matrix-free: $f_x(0) + \mathrm{Tr}[WW^\top A(x)]$ (Eq. 2).

    Evaluated as $f_x(0) + \frac12 D^2f_x(0)[W, W]$ (two nested ``jax.jvp``), which equals Eq. (2) when ZGZ
    holds (Property 1: no gradient and no cross-neuron Hessian block at 0, Eq. 54); one value per output.
    ``module`` is an :class:`~nqf.architectures.Architecture` (``W`` of shape ``(p, d)``) or a callable
    ``apply(params, x)`` with ``neuron_axes`` as in :func:`compare_with_nqf`. Leaves with axis ``None``
    are not expanded (they keep their values).
    """
    apply = module.apply if isinstance(module, Architecture) else module
    tr, frozen, _, _ = split_params(W, 1 if isinstance(module, Architecture) else neuron_axes)
    return nqf_out(apply, tr, frozen, x)


class HypothesisCheck(NamedTuple):
    """Matrix-free measurements of Theorem 1's hypotheses at one input."""

    permutation_residual: float  #: relative |f(W) - f(W sigma)| at a random W (Def. 1)
    zgz_residual: float  #: |grad wrt neuron 1| / |grad| at a random W with neuron 1 zeroed (Property 1)
    smooth_ratio: float  #: Taylor ratio |r(h)|/|r(h/2)| of the gradient at 0 (C^3: >= 4; kink: 2)
    finite: bool  #: every probe output finite


def _draws(key, tr, out):
    """The probe's random numbers, drawn by the caller: unit normals for the random point ``W`` and the direction
    ``V`` (one per neuron leaf, ``2 L`` keys) and for the output weights ``c`` (the last key), as
    ``jax.random.normal`` would draw them inside the probe, bit for bit (:func:`nqf._random.normal`)."""
    leaves = jax.tree_util.tree_leaves(tr)
    keys = split(key, 2 * len(leaves) + 1)
    W = [normal(k, l.shape, l.dtype) for k, l in zip(keys, leaves)]
    V = [normal(k, l.shape, l.dtype) for k, l in zip(keys[len(leaves):], leaves)]
    return W, V, normal(keys[-1], out.shape, out.dtype)


@fast_filter_jit
def _probe(apply, tr, frozen, x, draws, ax_leaves, d):
    """One jitted pass of :func:`check_hypotheses` (``apply`` is an argument: compiled once per module), at the
    random numbers ``draws`` of :func:`_draws`."""
    treedef = jax.tree_util.tree_structure(tr)
    W_unit, V, c = draws
    W = jax.tree_util.tree_unflatten(treedef, [0.5 * w for w in W_unit])
    V = jax.tree_util.tree_unflatten(treedef, V)
    vn = jnp.sqrt(sum(jnp.sum(v**2) for v in jax.tree_util.tree_leaves(V)))
    V = jax.tree_util.tree_map(lambda v: v / vn, V)
    F = lambda w: jnp.sum(c * module_out(apply, w, frozen, x))  # noqa: E731
    Wp = permute_neurons(W, ax_leaves, jnp.roll(jnp.arange(d), 1))
    f, fp = module_out(apply, W, frozen, x), module_out(apply, Wp, frozen, x)
    perm_res = jnp.max(jnp.abs(f - fp)) / jnp.maximum(jnp.max(jnp.abs(f)), 1e-300)
    Wz = zero_neuron(W, ax_leaves)
    gz = jax.grad(F)(Wz)
    g_first = jnp.sqrt(sum(jnp.sum(take_neurons(g, 0, a) ** 2)
                           for g, a in zip(jax.tree_util.tree_leaves(gz), ax_leaves)))
    g_all = jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree_util.tree_leaves(gz)))
    zero = jax.tree_util.tree_map(jnp.zeros_like, W)
    g0, HV = jax.jvp(jax.grad(F), (zero,), (V,))
    norm = lambda t: jnp.sqrt(sum(jnp.sum(a**2) for a in jax.tree_util.tree_leaves(t)))  # noqa: E731

    h = jnp.asarray(taylor_step(f.dtype), f.dtype)
    steps = [jnp.asarray(t, f.dtype) for t in taylor_steps(f.dtype)]
    grads = [jax.grad(F)(jax.tree_util.tree_map(lambda v, t=t: t * v, V)) for t in steps]
    rs = list(zip(taylor_residuals(grads, g0, HV, steps, norm), [norm(g) for g in grads]))
    finite = jnp.isfinite(norm(g0)) & jnp.isfinite(norm(HV)) & jnp.isfinite(f).all()
    return perm_res, g_first / jnp.maximum(g_all, 1e-300), rs, norm(g0), norm(HV), h, finite


def check_hypotheses(apply: Callable, W, x, *, neuron_axes: Any = 1, key=None) -> HypothesisCheck:
    r"""Measure Theorem 1's hypotheses for ``apply(W, x)`` at one input, without building a Hessian.

    Permutation symmetry (Def. 1), ZGZ (Property 1) and smoothness at 0 (the gradient's Taylor residual: ratio
    $|r(h)|/|r(h/2)| \ge 4$ for $C^3$, 2 at a ReLU kink), the probes of :func:`nqf.structure_report` with
    Hessian-vector products only, at a point and direction drawn from ``key`` (default ``PRNGKey(0)``).
    """
    tr, frozen, ax_leaves, d = split_params(W, neuron_axes)
    if key is None:
        key = jax.random.PRNGKey(0)  # the probe directions are fixed unless a key is given (documented)
    else:
        check_key("key", key)
    try:
        out = eqx.filter_eval_shape(module_out, apply, tr, frozen, x)
    except (TypeError, ValueError, IndexError) as err:  # e.g. dot_general's shapes: W of another p, x of another width
        shapes = jax.tree_util.tree_map(np.shape, (W, x))
        raise invalid("W", f"be parameters `apply` accepts with the input x (check the parameters per neuron p "
                           f"and the width of x)", f"W and x of shapes {shapes[0]} and {shapes[1]}, on which "
                           f"apply(W, x) fails: {type(err).__name__}: {str(err).splitlines()[0].rstrip('.')}") from err
    draws = _draws(key, tr, out)
    perm_res, zgz, rs, g0, hv, h, finite = _probe(apply, tr, frozen, x, draws, ax_leaves, d)
    rounding = theorem1_tolerance(jnp.asarray(h).dtype).rounding  # THE tolerance set (nqf._checks)
    ratio = taylor_ratio([r[0] for r in rs], [r[1] for r in rs], g0, hv, h, rounding)
    return HypothesisCheck(float(perm_res) if d > 1 else 0.0, float(zgz), float(ratio), bool(finite))


def require_hypotheses(chk: HypothesisCheck, name: str) -> None:
    tols = theorem1_tolerance(jnp.float64)  # THE tolerance set (nqf._checks); the callers refuse float32 models
    eps_tol = tols.residual
    if not chk.finite:
        raise invalid("module", "be C^3 (Theorem 1)", f"{name}, whose derivatives at W = 0 are not finite")
    if chk.smooth_ratio < tols.smooth_ratio:
        raise invalid(
            "module", "be C^3 at W = 0 (else Theorem 1's hypotheses fail and no NQF exists)",
            f"{name} is not smooth at W = 0 (Taylor ratio of the gradient {chk.smooth_ratio:.3g}; a kink "
            f"such as ReLU gives 2, a C^3 module >= 4)")
    if chk.permutation_residual > eps_tol:
        raise invalid(
            "module", "be permutation-symmetric in its neurons (Def. 1 / Theorem 1; check `neuron_axes`)",
            f"{name} is not permutation-symmetric in its neurons (relative |f(W) - f(W sigma)| = "
            f"{chk.permutation_residual:.3g} > {eps_tol:.2g})")
    if chk.zgz_residual > eps_tol:
        raise invalid(
            "module", "satisfy ZGZ (Property 1; otherwise its NQF has extra terms, Eq. 20, and this comparison "
                      "does not apply)",
            f"{name} breaks ZGZ (Property 1): the gradient of a zero neuron is {chk.zgz_residual:.3g} of "
            f"the gradient at a random W (> {eps_tol:.2g})")

