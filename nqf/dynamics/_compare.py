r"""A module beside its NQF: train both from the same $W(0)$ with one optax optimiser (Sec. 7, Fig. 2).

Theorem 1 (Eq. 2) says that near small weights a module of interchangeable neurons is its neural
quadratic form,

$$ f_x(W) = f_x(0) + \mathrm{Tr}[WW^\top A(x)] + O(\|W\|^3), $$

with one $A^{(o)}(x)$ per output for vector outputs (App. B.2, Cor. 1). :func:`compare_with_nqf`
trains the module's weights and, from the same $W(0)$, the NQF with the same optimiser, learning
rate and steps (each run one jitted ``lax.scan``), records what the caller asks for and returns the
**agreement window**: the first recorded step at which the relative gap between the two runs exceeds
a threshold.

The NQF is evaluated *matrix-free*: under ZGZ (Property 1) the gradient at 0 and the cross-neuron
Hessian blocks vanish (Eq. 54), so $\mathrm{Tr}[WW^\top A(x)] = \sum_i w_i^\top A w_i
= \tfrac12 D^2 f_x(0)[W, W]$, the second directional derivative of the module at $0$ along $W$
(two nested ``jax.jvp``). No $p\times p$ matrix is ever built, which keeps multi-head attention
($p$ in the hundreds, 8 outputs, 600 samples) cheap. The hypotheses that make this identity true
(permutation symmetry, ZGZ, smoothness at 0) are checked first, matrix-free, with the same three
tests as :func:`nqf.structure.structure_report` (which builds the full Hessian).

Modules come in two forms:

* an :class:`~nqf.architectures.Architecture` (``apply(W, x)``, ``W`` of shape ``(p, d)``, neurons
  are the columns) with ``W0`` of shape ``(p, d)`` or ``(B, p, d)`` (``B`` runs vmapped at once:
  seeds, initial scales);
* any callable ``apply(params, x)`` on a parameter pytree (a dict of arrays, an ``equinox.Module``)
  with ``neuron_axes`` giving the neuron axis of each leaf the way ``jax.vmap``'s ``in_axes`` do
  (a prefix pytree of ints; ``None`` marks a leaf shared by all neurons, which is held fixed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array
from .._checks import check_key

from ..architectures._base import Architecture

TRACKABLE = ("loss", "probe_loss", "outputs", "singular_values")


class Comparison(NamedTuple):
    """Both trajectories of :func:`compare_with_nqf` and their agreement window.

    Arrays carry a leading batch axis ``B`` when ``W0`` was batched.
    """

    steps: np.ndarray  #: (T,) the optimiser steps at which quantities were recorded (0 ... steps)
    module: dict  #: tracked quantity -> ``(*B, T, ...)`` for the module
    nqf: dict  #: tracked quantity -> ``(*B, T, ...)`` for its NQF
    batch_loss: dict  #: ``{"module", "nqf"}`` -> ``(*B, steps)`` loss on each step's batch
    gap: np.ndarray  #: ``(*B, T)`` relative gap of ``gap_on`` between the two runs
    window: np.ndarray  #: ``(*B,)`` first recorded step with gap > threshold or non-finite (``inf``: never)
    threshold: float
    gap_on: str
    final: dict  #: ``{"module", "nqf"}`` -> final parameters


# ----------------------------------------------------------------- pytree helpers
def _is_axis_leaf(a) -> bool:
    return a is None or isinstance(a, (int, np.integer))


def _broadcast_axes(params, neuron_axes):
    """Neuron axis of every leaf of ``params`` (a prefix pytree, like vmap's ``in_axes``)."""
    if _is_axis_leaf(neuron_axes):
        return jax.tree_util.tree_map(lambda _: neuron_axes, params)
    try:
        return jax.tree_util.tree_map(
            lambda a, sub: jax.tree_util.tree_map(lambda _: a, sub), neuron_axes, params, is_leaf=_is_axis_leaf)
    except ValueError as err:
        raise ValueError(
            "`neuron_axes` must be a prefix of the parameter pytree `W0` (as vmap's in_axes are of its "
            f"arguments), with ints or None at its leaves; {err}") from err


def _split_params(params, neuron_axes):
    """``(trainable, frozen, axes)``: neuron leaves (inexact arrays with an int axis) and the rest."""
    axes = _broadcast_axes(params, neuron_axes)
    flat_p, treedef = jax.tree_util.tree_flatten(params)
    flat_a = treedef.flatten_up_to(axes)
    mask, sizes = [], []
    for i, (leaf, a) in enumerate(zip(flat_p, flat_a)):
        if a is None:
            mask.append(False)
            continue
        if not isinstance(a, (int, np.integer)):
            raise ValueError(f"`neuron_axes` leaf {i} must be an int or None; got {a!r}.")
        if not eqx.is_inexact_array(leaf):
            raise ValueError(f"`neuron_axes` gives an axis ({a}) to leaf {i}, which is not a float array "
                             f"({type(leaf).__name__}); give it None.")
        if not -leaf.ndim <= a < leaf.ndim:
            raise ValueError(f"neuron axis {a} is out of range for leaf {i} of shape {leaf.shape}.")
        sizes.append(leaf.shape[a])
        mask.append(True)
    if not sizes:
        raise ValueError("`neuron_axes` marks no leaf of `W0` as a neuron leaf (every axis is None).")
    if len(set(sizes)) != 1:
        raise ValueError(f"every neuron leaf must have the same number of neurons d along its neuron axis; "
                         f"got sizes {sizes}.")
    mask_tree = jax.tree_util.tree_unflatten(treedef, mask)
    trainable, frozen = eqx.partition(params, mask_tree)
    ax_tr = jax.tree_util.tree_unflatten(treedef, [a if m else None for a, m in zip(flat_a, mask)])
    ax_leaves = [a % leaf.ndim for leaf, a, m in zip(flat_p, flat_a, mask) if m]
    return trainable, frozen, tuple(ax_leaves), sizes[0]


def _map_neurons(tr, ax_leaves, fn):
    """Apply ``fn(leaf, axis)`` to every neuron leaf of ``tr``."""
    leaves, treedef = jax.tree_util.tree_flatten(tr)
    return jax.tree_util.tree_unflatten(treedef, [fn(l, a) for l, a in zip(leaves, ax_leaves)])


# ----------------------------------------------------------------- the two models
def _module_out(apply, tr, frozen, x):
    return apply(eqx.combine(tr, frozen), x)


def _nqf_out(apply, tr, frozen, x):
    r"""$f_x(0) + \tfrac12 D^2 f_x(0)[W, W]$ in the neuron leaves (frozen leaves fixed): the NQF (Eq. 2)."""
    g = lambda t: apply(eqx.combine(jax.tree_util.tree_map(lambda w: t * w, tr), frozen), x)  # noqa: E731
    first = lambda t: jax.jvp(g, (t,), (jnp.ones_like(t),))  # noqa: E731
    t0 = jnp.zeros((), jax.tree_util.tree_leaves(tr)[0].dtype)
    (f0, _), (_, d2) = jax.jvp(first, (t0,), (jnp.ones_like(t0),))
    return f0 + 0.5 * d2


def _loss(out_fn, apply, tr, frozen, xb, yb):
    """MSE of the paper (Eq. 26, no 1/2), summed over outputs: $\\frac1m\\sum_\\mu\\|f(x_\\mu) - y_\\mu\\|^2$."""
    pred = jax.vmap(lambda x: out_fn(apply, tr, frozen, x))(xb)
    r = jnp.reshape(pred - yb, (yb.shape[0], -1))
    return jnp.mean(jnp.sum(r**2, axis=1))


def nqf_output(module: Architecture | Callable, W: Any, x: Any, *, neuron_axes: Any = 1) -> Array:
    r"""The NQF of a module at weights ``W``, matrix-free: $f_x(0) + \mathrm{Tr}[WW^\top A(x)]$ (Eq. 2).

    Evaluated as $f_x(0) + \frac12 D^2f_x(0)[W, W]$ (two nested ``jax.jvp``), which equals Eq. (2) when ZGZ
    holds (Property 1: no gradient and no cross-neuron Hessian block at 0, Eq. 54); one value per output.
    ``module`` is an :class:`~nqf.architectures.Architecture` (``W`` of shape ``(p, d)``) or a callable
    ``apply(params, x)`` with ``neuron_axes`` as in :func:`compare_with_nqf`. Leaves with axis ``None``
    are not expanded (they keep their values).
    """
    apply = module.apply if isinstance(module, Architecture) else module
    tr, frozen, _, _ = _split_params(W, 1 if isinstance(module, Architecture) else neuron_axes)
    return _nqf_out(apply, tr, frozen, x)


# ----------------------------------------------------------------- hypotheses (matrix-free)
class HypothesisCheck(NamedTuple):
    """Matrix-free measurements of Theorem 1's hypotheses at one input."""

    permutation_residual: float  #: relative |f(W) - f(W sigma)| at a random W (Def. 1)
    zgz_residual: float  #: |grad wrt neuron 1| / |grad| at a random W with neuron 1 zeroed (Property 1)
    smooth_ratio: float  #: Taylor ratio |r(h)|/|r(h/2)| of the gradient at 0 (C^3: >= 4; kink: 2)
    finite: bool


@eqx.filter_jit
def _probe(apply, tr, frozen, x, key, ax_leaves, d):
    """One jitted pass of :func:`check_hypotheses` (``apply`` is an argument: compiled once per module)."""
    leaves, treedef = jax.tree_util.tree_flatten(tr)
    keys = jax.random.split(key, 2 * len(leaves) + 1)
    W = jax.tree_util.tree_unflatten(
        treedef, [0.5 * jax.random.normal(k, l.shape, l.dtype) for k, l in zip(keys, leaves)])
    V = jax.tree_util.tree_unflatten(
        treedef, [jax.random.normal(k, l.shape, l.dtype) for k, l in zip(keys[len(leaves):], leaves)])
    vn = jnp.sqrt(sum(jnp.sum(v**2) for v in jax.tree_util.tree_leaves(V)))
    V = jax.tree_util.tree_map(lambda v: v / vn, V)
    out0 = _module_out(apply, W, frozen, x)
    c = jax.random.normal(keys[-1], jnp.shape(out0), out0.dtype)
    F = lambda w: jnp.sum(c * _module_out(apply, w, frozen, x))  # noqa: E731
    perm = jnp.roll(jnp.arange(d), 1)
    Wp = _map_neurons(W, ax_leaves, lambda l, a: jnp.take(l, perm, axis=a))
    f, fp = _module_out(apply, W, frozen, x), _module_out(apply, Wp, frozen, x)
    perm_res = jnp.max(jnp.abs(f - fp)) / jnp.maximum(jnp.max(jnp.abs(f)), 1e-300)
    Wz = _map_neurons(W, ax_leaves, lambda l, a: jnp.moveaxis(jnp.moveaxis(l, a, 0).at[0].set(0.0), 0, a))
    gz = jax.grad(F)(Wz)
    g_first = jnp.sqrt(sum(jnp.sum(jnp.take(g, 0, axis=a) ** 2)
                           for g, a in zip(jax.tree_util.tree_leaves(gz), ax_leaves)))
    g_all = jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree_util.tree_leaves(gz)))
    zero = jax.tree_util.tree_map(jnp.zeros_like, W)
    g0, HV = jax.jvp(jax.grad(F), (zero,), (V,))
    norm = lambda t: jnp.sqrt(sum(jnp.sum(a**2) for a in jax.tree_util.tree_leaves(t)))  # noqa: E731

    def resid(h):
        gh = jax.grad(F)(jax.tree_util.tree_map(lambda v: h * v, V))
        return norm(jax.tree_util.tree_map(lambda a, b, c_: a - b - h * c_, gh, g0, HV)), norm(gh)

    h = jnp.asarray(1e-3 if jnp.finfo(out0.dtype).eps < 1e-10 else 3e-2, out0.dtype)
    rs = [resid(s * h) for s in (1.0, 0.5, -1.0, -0.5)]
    finite = jnp.isfinite(norm(g0)) & jnp.isfinite(norm(HV)) & jnp.isfinite(f).all()
    return perm_res, g_first / jnp.maximum(g_all, 1e-300), rs, norm(g0), norm(HV), h, finite


def check_hypotheses(apply: Callable, W, x, *, neuron_axes: Any = 1, key=None) -> HypothesisCheck:
    r"""Measure Theorem 1's hypotheses for ``apply(W, x)`` at one input, without building a Hessian.

    * permutation symmetry (Def. 1): $f(W)$ against $f(W\sigma)$ at a random $W$ (cyclic shift of the
      neurons along every neuron axis);
    * ZGZ (Property 1): the gradient with respect to a neuron whose weights are zero, at a random $W$;
    * smoothness at 0 ($C^3$): the Taylor residual of the gradient along a random direction,
      $r(t) = \nabla f(tV) - \nabla f(0) - tHV$, is $O(t^2)$ for a $C^3$ module (ratio
      $|r(h)|/|r(h/2)| \ge 4$) and $O(t)$ at a kink such as ReLU (ratio 2); autodiff returns a
      one-sided second derivative at a kink, so without this test a ReLU module would get a wrong $A$.

    The same tests as :func:`nqf.structure.structure_report`, here with Hessian-vector products only.
    """
    tr, frozen, ax_leaves, d = _split_params(W, neuron_axes)
    key = jax.random.PRNGKey(0) if key is None else key
    perm_res, zgz, rs, g0, hv, h, finite = _probe(apply, tr, frozen, x, key, ax_leaves, d)
    eps = float(jnp.finfo(jnp.asarray(h).dtype).eps)
    ratio = math.inf
    for i in (0, 2):
        r_h, n_h = float(rs[i][0]), float(rs[i][1])
        floor = 1e3 * eps * (n_h + float(g0) + float(h) * float(hv))
        if r_h > floor:
            ratio = min(ratio, r_h / max(float(rs[i + 1][0]), 1e-300))
    return HypothesisCheck(float(perm_res) if d > 1 else 0.0, float(zgz), float(ratio), bool(finite))


def _require_hypotheses(chk: HypothesisCheck, name: str) -> None:
    eps_tol = 1e-8
    if not chk.finite:
        raise ValueError(f"`module` {name}: derivatives at W = 0 are not finite; Theorem 1 needs a C^3 module.")
    if chk.smooth_ratio < 3.0:
        raise ValueError(
            f"`module` {name} is not smooth at W = 0 (Taylor ratio of the gradient {chk.smooth_ratio:.3g}; a kink "
            f"such as ReLU gives 2, a C^3 module >= 4): Theorem 1's hypotheses fail and no NQF exists.")
    if chk.permutation_residual > eps_tol:
        raise ValueError(
            f"`module` {name} is not permutation-symmetric in its neurons (relative |f(W) - f(W sigma)| = "
            f"{chk.permutation_residual:.3g} > {eps_tol:g}): Def. 1 / Theorem 1 do not apply. Check `neuron_axes`.")
    if chk.zgz_residual > eps_tol:
        raise ValueError(
            f"`module` {name} breaks ZGZ (Property 1): the gradient of a zero neuron is {chk.zgz_residual:.3g} of "
            f"the gradient at a random W (> {eps_tol:g}); its NQF has extra terms (Eq. 20) and this comparison "
            f"does not apply.")


# ----------------------------------------------------------------- the jitted runs
def _record(apply, out_fn, tr, frozen, spec, xs, ys, px, py, linear_map):
    rec = {}
    if "loss" in spec:
        rec["loss"] = _loss(out_fn, apply, tr, frozen, xs, ys)
    if "outputs" in spec or "probe_loss" in spec:
        pred = jax.vmap(lambda x: out_fn(apply, tr, frozen, x))(px)
        if "outputs" in spec:
            rec["outputs"] = pred
        if "probe_loss" in spec:
            r = jnp.reshape(pred - py, (py.shape[0], -1))
            rec["probe_loss"] = jnp.mean(jnp.sum(r**2, axis=1))
    if "singular_values" in spec:
        rec["singular_values"] = jnp.linalg.svd(linear_map(eqx.combine(tr, frozen)), compute_uv=False)
    return rec


def _run_one(out_fn, apply, optimizer, tr0, frozen, xs, ys, batches, keys, px, py, *,
             spec, every, sample, linear_map):
    opt_state = optimizer.init(tr0)

    def step(carry, inp):
        tr, st = carry
        if sample is not None:
            xb, yb = sample(inp)
        elif batches is not None:
            xb, yb = jax.tree_util.tree_map(lambda a: a[inp], xs), ys[inp]
        else:
            xb, yb = xs, ys
        loss, grads = jax.value_and_grad(lambda t: _loss(out_fn, apply, t, frozen, xb, yb))(tr)
        upd, st = optimizer.update(grads, st, tr)
        return (optax.apply_updates(tr, upd), st), loss

    def block(carry, inp):
        rec = _record(apply, out_fn, carry[0], frozen, spec, xs, ys, px, py, linear_map)
        carry, losses = jax.lax.scan(step, carry, inp)
        return carry, (rec, losses)

    stream = keys if sample is not None else batches
    if stream is None:
        stream = jnp.zeros((keys.shape[0],))
    n_blocks = stream.shape[0] // every
    stream = jax.tree_util.tree_map(lambda a: jnp.reshape(a, (n_blocks, every) + a.shape[1:]), stream)
    (tr, _), (recs, losses) = jax.lax.scan(block, (tr0, opt_state), stream)
    last = _record(apply, out_fn, tr, frozen, spec, xs, ys, px, py, linear_map)
    recs = jax.tree_util.tree_map(lambda r, l: jnp.concatenate([r, l[None]]), recs, last)
    return tr, recs, jnp.reshape(losses, (-1,))


@eqx.filter_jit
def _run_both(apply, optimizer, tr0, frozen, xs, ys, batches, keys, px, py, spec, every, sample, linear_map,
              batched):
    kw = dict(spec=spec, every=every, sample=sample, linear_map=linear_map)
    out = {}
    for name, fn in (("module", _module_out), ("nqf", _nqf_out)):
        one = lambda t: _run_one(fn, apply, optimizer, t, frozen, xs, ys, batches, keys, px, py, **kw)  # noqa: B023,E731
        out[name] = jax.vmap(one)(tr0) if batched else one(tr0)
    return out


# ----------------------------------------------------------------- the public function
def _relative_gap(a: np.ndarray, b: np.ndarray, batch_ndim: int) -> np.ndarray:
    """$\\|a - b\\| / \\|a\\|$ per recorded step (norms over everything after the time axis)."""
    axes = tuple(range(batch_ndim + 1, a.ndim))
    diff = np.sqrt(np.sum((a - b) ** 2, axis=axes)) if axes else np.abs(a - b)
    ref = np.sqrt(np.sum(a**2, axis=axes)) if axes else np.abs(a)
    return diff / np.maximum(ref, 1e-300)


def _leading(x) -> int:
    leaves = jax.tree_util.tree_leaves(x)
    if not leaves:
        raise ValueError("`data` inputs must contain at least one array.")
    sizes = {np.shape(l)[0] if np.ndim(l) else None for l in leaves}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"every input array of `data` must have the same leading (sample) axis; got leading "
                         f"sizes {sorted(map(str, sizes))}.")
    return sizes.pop()


def compare_with_nqf(
    module: Architecture | Callable | None,
    W0: Any,
    data: Any,
    optimizer: optax.GradientTransformation,
    steps: int,
    *,
    neuron_axes: Any = None,
    batches: Any = None,
    key: Any = None,
    probe: Any = None,
    probe_targets: Any = None,
    track: tuple[str, ...] = ("loss",),
    linear_map: Callable | None = None,
    record_every: int = 1,
    threshold: float = 0.1,
    gap_on: str | None = None,
    check: bool = True,
) -> Comparison:
    r"""Train a module and its NQF from the same $W(0)$ with the same optimiser; compare them.

    Both runs minimise the paper's MSE (Eq. 26, no $\frac12$), summed over outputs,
    $\mathcal L = \frac1m\sum_\mu\|f_{x_\mu} - y_\mu\|^2$, with ``optimizer`` for ``steps`` steps; each
    run is one jitted ``lax.scan``. The NQF is $f_x(0) + \mathrm{Tr}[WW^\top A(x)]$ (Theorem 1, Eq. 2;
    one $A^{(o)}$ per output, Cor. 1), evaluated as $f_x(0) + \frac12D^2f_x(0)[W, W]$ (module docstring).

    Args:
        module: an :class:`~nqf.architectures.Architecture`, or a callable ``apply(params, x)`` (``None``
            with an ``equinox.Module`` ``W0`` means ``W0(x)``).
        W0: initial weights: ``(p, d)`` (or ``(B, p, d)``: ``B`` runs vmapped) for an Architecture; any
            parameter pytree for a callable.
        data: ``(xs, ys)`` — inputs with a leading sample axis (a pytree, e.g. ``(q, X)`` for attention)
            and targets ``(m,)`` or ``(m, o)`` — or a function ``sample(key) -> (x_batch, y_batch)`` for
            online SGD with fresh samples each step (then ``key`` is required).
        optimizer: an optax ``GradientTransformation`` (``optax.sgd(eta)``, ``optax.sgd(eta, momentum=0.9)``,
            ``optax.adam(eta)``, ...). Both runs use the same one.
        steps: number of optimiser steps (> 0).
        neuron_axes: for a pytree ``W0``, the neuron axis of each leaf, a prefix pytree like ``jax.vmap``'s
            ``in_axes`` (``None`` = a leaf shared by all neurons: held fixed, not trained).
        batches: ``None`` (full batch) or an int array ``(steps, b)`` of sample indices, one row per step.
        key: PRNG key for ``sample``; the module and the NQF see the same batches.
        probe: inputs (leading sample axis) on which ``"outputs"`` are recorded.
        probe_targets: their targets, for ``"probe_loss"``.
        track: any of ``"loss"`` (full training set; needs array ``data``), ``"probe_loss"``,
            ``"outputs"``, ``"singular_values"`` (of ``linear_map(params)``, the end-to-end linear map).
        linear_map: ``params -> matrix``, required for ``"singular_values"``.
        record_every: record every this many steps (must divide ``steps``), and after the last.
        threshold: relative gap in (0, 1) that ends the agreement window.
        gap_on: the tracked quantity the gap is measured on (default ``"outputs"`` if tracked, else the
            first of ``track``). Relative gap at a recorded step: $\|q_\text{module} - q_\text{NQF}\| /
            \|q_\text{module}\|$.
        check: measure Theorem 1's hypotheses on the first input first (:func:`check_hypotheses`) and
            refuse the module if they fail.

    Returns:
        a :class:`Comparison`.
    """
    # ---- the module
    if isinstance(module, Architecture):
        apply, name = module.apply, repr(module.name)
        W0 = jnp.asarray(W0)
        if W0.ndim not in (2, 3) or W0.shape[-2] != module.p:
            raise ValueError(f"`W0` must have shape (p, d) = ({module.p}, *) or (B, {module.p}, *) for the "
                             f"architecture {module.name!r}; got shape {W0.shape}.")
        batched = W0.ndim == 3
        neuron_axes = 1
    else:
        if module is None and isinstance(W0, eqx.Module) and callable(W0):
            module = _call_module
        if not callable(module):
            raise TypeError(f"`module` must be an nqf Architecture or a callable apply(params, x); got "
                            f"{type(module).__name__}.")
        if neuron_axes is None:
            raise ValueError("`neuron_axes` is required with a callable module: give the neuron axis of each "
                             "leaf of `W0` as jax.vmap's in_axes (None for shared leaves).")
        apply, name, batched = module, getattr(module, "__name__", "apply"), False
    # ---- the optimiser and the options
    if not isinstance(optimizer, optax.GradientTransformation) or not (
            callable(getattr(optimizer, "init", None)) and callable(getattr(optimizer, "update", None))):
        raise TypeError(f"`optimizer` must be an optax GradientTransformation (e.g. optax.sgd(0.1)); got "
                        f"{type(optimizer).__name__}.")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps <= 0:
        raise ValueError(f"`steps` must be a positive int; got {steps!r}.")
    if key is not None:
        check_key("key", key)
    steps = int(steps)
    if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every <= 0 \
            or steps % record_every:
        raise ValueError(f"`record_every` must be a positive int dividing steps = {steps}; got {record_every!r}.")
    if not (isinstance(threshold, (float, int, np.floating)) and 0.0 < float(threshold) < 1.0):
        raise ValueError(f"`threshold` must be a number in (0, 1); got {threshold!r}.")
    track = (track,) if isinstance(track, str) else tuple(track)
    bad = [t for t in track if t not in TRACKABLE]
    if bad or not track:
        raise ValueError(f"`track` must be a non-empty subset of {TRACKABLE}; got {track!r}.")
    if "singular_values" in track and not callable(linear_map):
        raise ValueError("`linear_map` (params -> matrix) is required to track 'singular_values'.")
    gap_on = gap_on or ("outputs" if "outputs" in track else track[0])
    if gap_on not in track:
        raise ValueError(f"`gap_on` must be one of the tracked quantities {track}; got {gap_on!r}.")
    # ---- the data
    sample, keys = None, None
    if callable(data):
        if batches is not None:
            raise ValueError("give either a sampling function `data` or `batches`, not both.")
        if key is None:
            raise ValueError("`key` is required when `data` is a sampling function sample(key).")
        if "loss" in track:
            raise ValueError("'loss' (full training set) needs array data; track 'probe_loss' with a `probe`.")
        sample, keys = data, jax.random.split(key, steps)
        xs = ys = None
        x_first = jax.tree_util.tree_map(lambda a: a[0], sample(key)[0])
    else:
        if not isinstance(data, (tuple, list)) or len(data) != 2:
            raise ValueError(f"`data` must be a pair (xs, ys) or a function sample(key); got {type(data).__name__}.")
        xs, ys = data
        xs = jax.tree_util.tree_map(jnp.asarray, xs)
        ys = jnp.asarray(ys)
        m = _leading(xs)
        if ys.ndim not in (1, 2) or ys.shape[0] != m:
            raise ValueError(f"`data` targets ys must have shape (m,) or (m, o) with m = {m} (the inputs' "
                             f"leading axis); got shape {ys.shape}.")
        x_first = jax.tree_util.tree_map(lambda a: a[0], xs)
        if batches is not None:
            batches = jnp.asarray(batches)
            if batches.ndim != 2 or batches.shape[0] != steps or not jnp.issubdtype(batches.dtype, jnp.integer):
                raise ValueError(f"`batches` must be an int array (steps, b) = ({steps}, *) of sample indices; "
                                 f"got {batches.dtype} array of shape {batches.shape}.")
            if int(batches.min()) < 0 or int(batches.max()) >= m:
                raise ValueError(f"`batches` indices must lie in [0, {m}); got range [{int(batches.min())}, "
                                 f"{int(batches.max())}].")
        keys = jnp.zeros((steps,)) if batches is None else None
    px = None if probe is None else jax.tree_util.tree_map(jnp.asarray, probe)
    py = None if probe_targets is None else jnp.asarray(probe_targets)
    if px is not None and py is not None and _leading(px) != py.shape[0]:
        raise ValueError(f"`probe_targets` must have one row per probe input ({_leading(px)}); got shape {py.shape}.")
    if ("outputs" in track or "probe_loss" in track) and px is None:
        raise ValueError("tracking 'outputs' or 'probe_loss' needs `probe` (inputs with a leading sample axis).")
    if "probe_loss" in track and py is None:
        raise ValueError("tracking 'probe_loss' needs `probe_targets`.")
    # ---- shapes of module, data and probe agree
    W_one = W0[0] if batched else W0
    if batched and neuron_axes != 1:
        raise ValueError("a batch of initial weights (B, p, d) needs an Architecture.")
    tr, frozen, ax_leaves, d = _split_params(W_one, neuron_axes)
    try:
        out = jax.eval_shape(lambda t, x: _module_out(apply, t, frozen, x), tr, x_first)
    except (TypeError, IndexError, ValueError) as err:
        raise ValueError(f"`module` {name} cannot be applied to `W0` and one input of `data` (shapes "
                         f"{jax.tree_util.tree_map(np.shape, x_first)}): {err}") from err
    if ys is not None and tuple(ys.shape[1:]) != tuple(out.shape):
        raise ValueError(f"`data` targets must have shape (m, *out) with out = {tuple(out.shape)} (the module's "
                         f"output shape); got ys of shape {tuple(ys.shape)}.")
    if py is not None and tuple(py.shape[1:]) != tuple(out.shape):
        raise ValueError(f"`probe` targets must have shape (n, *out) with out = {tuple(out.shape)}; got "
                         f"{tuple(py.shape)}.")
    if check:
        _require_hypotheses(check_hypotheses(apply, W_one, x_first, neuron_axes=neuron_axes), name)
    # ---- run
    tr0 = W0 if batched else tr  # an Architecture's W is one array: nothing frozen
    res = _run_both(apply, optimizer, tr0, frozen, xs, ys, batches, keys, px, py, tuple(track),
                    int(record_every), sample, linear_map, batched)
    rec = {k: {q: np.asarray(v) for q, v in res[k][1].items()} for k in ("module", "nqf")}
    nb = 1 if batched else 0
    gap = _relative_gap(rec["module"][gap_on], rec["nqf"][gap_on], nb)
    rec_steps = np.arange(0, steps + 1, record_every)
    exceeded = ~(gap <= threshold)  # a non-finite gap (a diverged run) counts as parted
    first = np.argmax(exceeded, axis=-1)
    window = np.where(exceeded.any(axis=-1), rec_steps[first].astype(float), np.inf)
    final = {k: eqx.combine(res[k][0], frozen) if not batched else res[k][0] for k in ("module", "nqf")}
    return Comparison(rec_steps, rec["module"], rec["nqf"],
                      {k: np.asarray(res[k][2]) for k in ("module", "nqf")}, gap, window, float(threshold),
                      gap_on, final)


def _call_module(m, x):
    return m(x)
