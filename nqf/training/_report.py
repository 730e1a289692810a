r"""Everything the NQF says about a user's model, computed in one call that trains (Chapter 9).

For a model of interchangeable neurons (an equinox Module, or ``apply(params, x)`` on a parameter
pytree such as a flax parameter dict, with ``neuron_axes``), :func:`nqf.training.model_run`

1. measures Theorem 1's hypotheses on the model at the first input (:func:`nqf.structure.check_hypotheses`;
   float32 parameters are refused with an "enable float64" error; errors name the model's class);
2. builds $A(x_\mu)$ on the data in one batched program (:func:`nqf.structure.pytree_structure_stack`,
   one $A^{(o)}$ per output) and the :class:`~nqf.model.NQFData` from it, with the offsets $f_{x_\mu}(0)$;
3. **before training**, integrates the NQF's gradient flow (Eq. 28) from the model's own
   $M(0) = W(0)W(0)^\top$ (neuron packing of :func:`nqf.structure.neuron_weights`) on a log grid up to
   ``horizon`` times the run's flow time, and measures how far the flow can be trusted: at each saved
   time the weights $W_t$ with $W_tW_t^\top = M(t)$ closest in orientation to $W(0)$ (top eigenpairs of
   $M(t)$ times the polar factor of their overlap with $W(0)$) are fed to the model and to its NQF; the
   prediction is **valid** until their relative output gap first exceeds ``threshold``
   (:func:`nqf.first_exceedance`, the agreement rule of the book);
4. trains the model and its NQF side by side (:func:`nqf.compare_with_nqf`, one optimiser), recording the
   loss, the outputs on a probe set and the eigenvalues of $M = WW^\top$ of both runs.

Gradient descent at learning rate $\eta$ follows the flow at $t = \eta\cdot$step (momentum $\beta$:
$t = \eta\,\text{step}/(1-\beta)$ once the velocity has built up); for other optimisers (Adam, ...) there is
no such map and no prediction in steps is made. Reading plateau ends off these trajectories is the job
of :mod:`nqf.solutions` (:func:`nqf.diagnose` composes the two).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._checks import check_float64
from .._checks import check_int
from .._checks import check_record_every
from .._checks import invalid
from ..flow import gradient_flow
from ..flow import log_times
from ..model import NQFData
from ..model import h_matrix
from ..model import mse_loss
from ..structure import HypothesisCheck
from ..structure import NeuronLayout
from ..structure import check_hypotheses
from ..structure import model_function
from ..structure import model_name
from ..structure import model_neuron_axes
from ..structure import module_out
from ..structure import neuron_weights
from ..structure import nqf_out
from ..structure import pytree_structure_stack
from ..structure import require_hypotheses
from ..structure import split_params
from ._agreement import first_exceedance
from ._agreement import relative_gap
from ._compare import Comparison
from ._compare import compare_with_nqf
from ._trainer import Optimizer
from ._trainer import as_optimizer


class ModelRun(NamedTuple):
    """What :func:`nqf.training.model_run` computed (flow times ``t``; optimiser steps ``step``; ``t = eta * step``).

    A different question from :class:`~nqf.training.Comparison` (how far a trained module and its trained NQF
    agree): what the NQF *predicts before training* — its $A(x)$ and data, its flow from the model's own
    $W(0)$, how long that flow can be trusted (``valid_until``), the growth rate and the optimiser's lag —
    with the side-by-side run kept whole as ``comparison`` (never copied field by field)."""

    name: str  #: the model's class (or ``apply``'s) name
    hypotheses: HypothesisCheck  #: Theorem 1's probes at the first input
    As: Any  #: ``(m, p, p)`` or ``(m, o, p, p)``: A(x) on the data
    data: NQFData  #: the NQF data built from ``As``, the targets and the offsets f_x(0)
    W0: np.ndarray  #: ``(p, d)`` the model's initial weights in the neuron packing
    layout: NeuronLayout
    eta: float | None  #: flow time per optimiser step (None: the optimiser has no step <-> time map)
    num_steps: int
    flow_ts: np.ndarray  #: ``(T,)`` flow save times (empty without ``eta``)
    flow_loss: np.ndarray  #: ``(T,)`` NQF loss along the flow (nqf.model.mse convention)
    flow_eigs: np.ndarray  #: ``(T, r)`` eigenvalues of M(t), descending, r = min(p, d)
    validity_gap: np.ndarray  #: ``(T,)`` relative gap model vs NQF at the flow's weights W_t
    valid_until: float  #: flow time at which validity_gap first exceeds ``threshold`` (inf: never)
    comparison: Comparison  #: the model and its NQF trained side by side
    eigs_module: np.ndarray  #: ``(S, r)`` eigenvalues of M = W W^T of the trained model at comparison.steps
    eigs_nqf: np.ndarray  #: ``(S, r)`` the same for the NQF run
    threshold: float
    rate: float  #: growth rate a = -lambda_min(H(M = 0)) of the fastest mode (W grows as e^{a t} at first)
    lag: float  #: relative lag of the optimiser's exponential growth behind the flow's for that mode (steps)
    record_every: int  #: recording interval of the training runs (steps)


def flow_rate(optimizer: Any) -> float | None:
    r"""Flow time per optimiser step: $\eta$ for ``sgd``, $\eta/(1-\beta)$ with heavy-ball momentum $\beta$,
    ``None`` for any other optimiser (no step <-> time map)."""
    if not isinstance(optimizer, Optimizer) or optimizer.factory is not optax.sgd:
        return None
    opts = dict(optimizer.options)
    if opts.get("nesterov"):
        return None
    beta = float(optimizer.numeric.get("momentum", 0.0))
    return float(optimizer.learning_rate) / (1.0 - beta)


def growth_lag(optimizer: Any, rate: float) -> float:
    r"""How many more steps (relative) the optimiser needs than the flow to grow a mode of rate $a$ by a given
    factor: the flow grows it as $e^{a t}$ with $t = \eta_\text{eff}\,$step, gradient descent with momentum
    $\beta$ (0 for plain SGD) by the largest root $\rho$ of $\rho^2 - (1 + \beta + \eta a)\rho + \beta = 0$ per
    step, so the lag is $\eta_\text{eff}\,a/\ln\rho - 1$ ($\approx \eta a/2$ for plain SGD). ``nan`` without a
    step <-> time map."""
    eta_eff = flow_rate(optimizer)
    if eta_eff is None:
        return float("nan")
    beta = float(optimizer.numeric.get("momentum", 0.0))
    eta = float(optimizer.learning_rate)
    if rate <= 0:
        return 0.0
    b = 1.0 + beta + eta * rate
    rho = 0.5 * (b + np.sqrt(b * b - 4.0 * beta))
    return float(eta_eff * rate / np.log(rho) - 1.0)


def _default_every(num_steps: int, target: int = 200) -> int:
    lo = max(1, -(-num_steps // target))
    return next(k for k in range(lo, num_steps + 1) if num_steps % k == 0)


@eqx.filter_jit
def _offsets(apply, tr, frozen, xs):
    zero = jax.tree_util.tree_map(jnp.zeros_like, tr)
    return jax.vmap(lambda x: module_out(apply, zero, frozen, x))(xs)


def _flow_weights(Ms, W0):
    """Weights with W W^T = M (top r = min(p, d) eigenpairs), oriented like ``W0`` (polar factor of V^T W0)."""
    lam, V = jnp.linalg.eigh(Ms)
    r = min(W0.shape)
    lam, V = lam[..., ::-1][..., :r], V[..., ::-1][..., :r]
    B = jnp.einsum("tpr,pd->trd", V, W0)
    U, _, Vt = jnp.linalg.svd(B, full_matrices=False)
    R = U @ Vt  # (T, r, d), orthonormal rows
    return jnp.einsum("tpr,tr,trd->tpd", V, jnp.sqrt(jnp.clip(lam, 0.0)), R), lam


@eqx.filter_jit
def _validity(apply, layout_params, packing, Ms, W0, px, frozen_mask):
    Ws, lam = _flow_weights(Ms, W0)

    def outs(W):
        tr, frozen = eqx.partition(packing.unpack(W, layout_params), frozen_mask)
        f = jax.vmap(lambda x: module_out(apply, tr, frozen, x))(px)
        q = jax.vmap(lambda x: nqf_out(apply, tr, frozen, x))(px)
        return f, q

    f, q = jax.vmap(outs)(Ws)
    return f, q, lam


def model_run(
    model: Any,
    data: tuple[Any, Any],
    optimizer: Any,
    num_steps: int,
    *,
    apply: Callable | None = None,
    neuron_axes: Any = None,
    record_every: int | None = None,
    threshold: float = 0.1,
    n_probe: int = 64,
    horizon: float = 2.0,
    flow_points: int = 160,
) -> ModelRun:
    r"""Theorem 1's check, $A(x)$ and the NQF data, the NQF flow from the model's own $W(0)$ with its range
    of validity, and the model and its NQF trained side by side (module docstring).

    Args:
        model: a callable equinox Module (neurons along ``neuron_axes``, or its method ``neuron_axes()``), or
            the parameters of ``apply`` (e.g. a flax model's variables).
        data: ``(xs, ys)``: inputs with a leading sample axis, targets ``(m,)`` or ``(m, o)``.
        optimizer: :func:`nqf.training.optimizer` (``("sgd", eta)``: the flow is predicted in steps) or optax.
        num_steps: optimiser steps (full batch).
        apply: ``apply(params, x)``; ``None`` for an equinox Module called as ``model(x)``.
        neuron_axes: the neuron axis of each leaf (prefix pytree, as ``jax.vmap``'s ``in_axes``).
        record_every: recording interval of the training runs (default: about 200 records).
        threshold: relative output gap that ends the agreement window and the range of validity.
        n_probe: the first ``n_probe`` inputs are the probe set of both gaps.
        horizon: the flow runs to ``horizon * eta * num_steps`` (so that modes learned near the end of the
            run have settled levels).
        flow_points: save times of the flow (log-spaced from one step).
    """
    call = model_function(apply, model, params_name="model")
    name = model_name(apply, model)
    neuron_axes = model_neuron_axes(model, neuron_axes, name)
    check_float64("model", model, name)
    steps = check_int("num_steps", num_steps)
    every = _default_every(steps) if record_every is None else check_record_every(record_every, steps)
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise invalid("data", "be a pair (xs, ys)", type(data).__name__)
    xs = jax.tree_util.tree_map(jnp.asarray, data[0])
    ys = jnp.asarray(data[1], dtype=float)
    x_first = jax.tree_util.tree_map(lambda a: a[0], xs)
    chk = check_hypotheses(call, model, x_first, neuron_axes=neuron_axes)
    require_hypotheses(chk, name)
    As = pytree_structure_stack(apply, model, xs, neuron_axes)
    tr, frozen, _, d = split_params(model, neuron_axes, name="model")
    f0 = _offsets(call, tr, frozen, xs)
    if As.ndim > 4:
        raise invalid("model", "have one axis of outputs at most", f"{name} with outputs of shape {tuple(As.shape[1:-2])}")
    nqf_data = NQFData(As, ys, f0=f0)
    W0, layout = neuron_weights(model, neuron_axes)
    probe = jax.tree_util.tree_map(lambda a: a[:n_probe], xs)
    eta = flow_rate(as_optimizer("optimizer", optimizer))
    r = min(W0.shape)
    ts = loss = eigs = gap = np.zeros((0,))
    valid = np.inf
    if eta is not None:
        t_end = float(horizon) * eta * steps
        ts = log_times(t_end, int(flow_points), t_min=eta)
        sol = gradient_flow(W0 @ W0.T, nqf_data, ts, rtol=1e-6, atol=1e-12, solver="tsit5")
        Ms = sol.ys
        loss = np.asarray(jax.vmap(lambda M: mse_loss(M, nqf_data))(Ms))
        mask = jax.tree_util.tree_unflatten(layout.treedef,
                                            [i in layout.index for i in range(layout.treedef.num_leaves)])
        f, q, lam = _validity(call, layout.params, layout.packing, Ms, W0, probe, mask)
        gap = relative_gap(np.asarray(f), np.asarray(q), time_axis=0)
        valid = float(first_exceedance(np.asarray(ts), gap, threshold))
        eigs = np.asarray(lam)
        ts = np.asarray(ts)
    comp = compare_with_nqf(call, model, (xs, ys), optimizer, steps, neuron_axes=neuron_axes, probe=probe,
                            track=("loss", "outputs", "singular_values"), linear_map=layout.packing, record_every=every,
                            threshold=threshold, check=False)
    sv = lambda run: np.asarray(run["singular_values"])[..., :r] ** 2  # noqa: E731
    H0 = h_matrix(jnp.zeros((W0.shape[0],) * 2), nqf_data)
    rate = max(0.0, -float(jnp.linalg.eigvalsh(H0)[0]))
    lag = growth_lag(as_optimizer("optimizer", optimizer), rate)
    return ModelRun(name, chk, As, nqf_data, np.asarray(W0), layout, eta, steps, ts, loss, eigs, gap, valid, comp,
                    sv(comp.module), sv(comp.nqf), float(threshold), rate, lag, int(every))
