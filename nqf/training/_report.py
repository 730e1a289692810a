r"""Everything the NQF says about a user's model, computed in one call that trains (Chapter 10).

For a model of interchangeable neurons (an equinox Module, or ``apply(params, x)`` on a parameter pytree such
as a flax parameter dict, with ``neuron_axes``), :func:`nqf.training.model_run`

1. checks the inputs (widths, finiteness, the model's output dtype) and measures Theorem 1's hypotheses on the
   model at the first input (:func:`nqf.structure.check_hypotheses`; float32 parameters are refused with an
   "enable float64" error; errors name the model's class);
2. chooses how to evaluate the NQF $f_x(0) + \mathrm{Tr}[WW^\top A(x)]$ on the data without the
   $(m, o, p, p)$ stack of $A(x_\mu)$: through rank-two factors of $A(x)$ when the model has them (one hidden
   layer: :func:`nqf.structure.rank_two_form`, the cost of the model's first layer), else matrix-free (two
   nested ``jax.jvp``, about three model passes);
3. **the prediction**: trains the NQF from the model's own $W(0)$ with the user's own optimiser and loss, for
   ``horizon`` times the run's steps (the exact discrete NQF dynamics, for SGD, momentum and Adam alike), and
   records along it the **quadratic-regime error** $e(s) = \|f(W_s) - f_x(0) - Q(W_s)\| / \|Q(W_s)\|$, how far
   the model itself at the predicted weights $W_s$ is from its NQF (probe inputs; $Q$ the quadratic term);
4. **the measurement**: trains the model with the same optimiser and loss, recording its outputs on the probe
   set and the eigenvalues of $M = WW^\top$ (of the $r\times r$ Gram matrix, $r = \min(p, d)$);
5. the continuum reference, when the optimiser is of the SGD family (``optax.sgd`` with or without heavy-ball
   or Nesterov momentum, recognised by probing the transformation) and $A(x)$ is small enough to hold: the
   NQF's gradient flow (Eq. 28) from $M(0)$, at $t = \eta\,\text{step}/(1-\beta)$ (divided by $o$ for a loss
   averaged over outputs), so that the optimiser's lag behind the flow can be shown.

The loss is the package's (:func:`nqf.model.mse`, Eq. 26: mean over samples of the squared error **summed** over
outputs, no $\frac12$), or ``loss="mean"`` (averaged over outputs too), or the user's own ``loss(outputs,
targets)``. Reading plateau ends off these runs is the job of :mod:`nqf.solutions` (:func:`nqf.diagnose`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_float64
from .._checks import check_int
from .._checks import check_record_every
from .._checks import invalid
from .._checks import wrong_kind
from ..flow import gradient_flow
from ..flow import log_times
from ..model import NQFData
from ..model import mse
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
from ..structure import quasi_random
from ..structure import rank_two_form
from ..structure import require_hypotheses
from ..structure import split_params
from ..structure import tree_packing
from ._agreement import first_exceedance
from ._agreement import relative_gap
from ._compare import Comparison
from ._trainer import as_optimizer
from ._trainer import train

DENSE_LIMIT = 20_000_000  #: A(x) entries (m * o * p^2, 160 MB) up to which the (m, o, p, p) stack is formed
DIVERGED = 1e3  #: a run whose loss exceeds this many times its initial loss (or is not finite) has diverged
LOSSES = ("sum", "mean")


class StepMap(NamedTuple):
    """What probing the optimiser found: the SGD family (with the flow time per step) or not."""

    kind: str | None  #: ``"sgd"``, ``"heavy-ball momentum"``, ``"nesterov momentum"`` or ``None`` (Adam, ...)
    learning_rate: float  #: eta (nan outside the SGD family)
    momentum: float  #: beta (0 for plain SGD; nan outside the family)
    per_step: float | None  #: flow time per step of the summed loss, eta / (1 - beta) (None: no step <-> time map)

    def describe(self) -> str:
        """One line for the report."""
        if self.kind is None:
            return "not of the SGD family (e.g. Adam): no step <-> time map, no flow reference"
        mom = "" if self.kind == "sgd" else f", momentum {self.momentum:g}"
        return f"{self.kind}, learning rate {self.learning_rate:g}{mom}"


def step_map(name: str, optimizer: Any) -> StepMap:
    r"""Recognise an optimiser of the SGD family by what it does: feed its optax transformation four fixed generic
    gradients (twice, the second time doubled) at fixed parameters and fit the updates to
    $u_k = -\sum_j c_j g_{k-j}$. Plain SGD is $c = (\eta, 0, \dots)$, heavy-ball momentum
    $c_j = \eta\beta^j$, Nesterov $c_0 = \eta(1+\beta)$, $c_j = \eta\beta^{j+1}$ (``optax.sgd``'s ``trace``). Any
    other transformation (Adam: not linear in the gradients; weight decay: not homogeneous) gets
    ``kind=None``. ``ValueError`` (naming ``name``) for a member of the family that cannot descend: a
    learning rate <= 0 or a momentum outside [0, 1)."""
    opt = as_optimizer(name, optimizer)
    tx = opt.build()
    g = quasi_random((4, 5), 0.7)  # fixed generic gradients and parameters (no key to carry)
    p0 = quasi_random((5,), 1.9)
    none = StepMap(None, float("nan"), float("nan"), None)

    def updates(scale):
        state, out = tx.init(p0), []
        for k in range(4):
            u, state = tx.update(scale * g[k], state, p0)
            out.append(np.asarray(u, dtype=float))
        return np.stack(out)

    try:
        u, u2 = updates(1.0), updates(2.0)
    except Exception:  # noqa: BLE001  (a transformation that needs extra arguments: not plain SGD)
        return none
    gn = np.asarray(g)
    if not np.all(np.isfinite(u)) or not np.allclose(u2, 2.0 * u, rtol=1e-9, atol=1e-300):
        return none
    # -u_k = sum_j c_j g_{k-j} for every coordinate: 20 equations in the 4 coefficients (least squares)
    X = np.zeros((4, gn.shape[1], 4))
    for k in range(4):
        for j in range(k + 1):
            X[k, :, j] = gn[k - j]
    X, rhs = X.reshape(-1, 4), -u.reshape(-1)
    c, *_ = np.linalg.lstsq(X, rhs, rcond=None)
    if np.linalg.norm(X @ c - rhs) > 1e-9 * max(np.linalg.norm(rhs), 1e-300):
        return none  # a linear filter of the gradients, but not a time-invariant one of this length
    c = [float(v) for v in c]
    c0, c1, c2, c3 = c
    tol = 1e-8 * max(abs(c0), 1e-300)
    if abs(c1) <= tol and abs(c2) <= tol and abs(c3) <= tol:
        kind, eta, beta = "sgd", c0, 0.0
    elif abs(c1) > tol:
        beta = c2 / c1
        if abs(c3 - beta * c2) > 1e-6 * max(abs(c2), 1e-300):
            return none
        if abs(c1 - beta * c0) <= 1e-6 * abs(c1):
            kind, eta = "heavy-ball momentum", c0
        elif beta != 0 and abs(c0 - (c1 / beta**2) * (1 + beta)) <= 1e-6 * abs(c0):
            kind, eta = "nesterov momentum", c1 / beta**2
        else:
            return none
    else:
        return none
    if not eta > 0:
        raise invalid(name, "descend (a positive learning rate)", f"an SGD optimiser with learning rate {eta:g}")
    if not 0.0 <= beta < 1.0:
        raise invalid(name, "have a momentum in [0, 1) (at 1 or above the velocity never settles and the run "
                            "does not descend)", f"{kind} with momentum {beta:g}")
    return StepMap(kind, float(eta), float(beta), float(eta / (1.0 - beta)))


# ----------------------------------------------------------------- the loss conventions
def mean_mse(predictions, targets):
    """The squared error averaged over samples **and** outputs (``loss="mean"``): :func:`nqf.model.mse` / o."""
    r = jnp.reshape(jnp.asarray(predictions) - jnp.asarray(targets), (jnp.shape(targets)[0], -1))
    return jnp.mean(r**2)


def loss_convention(loss: Any, num_outputs: int) -> tuple[Callable, str, float | None]:
    """``(reduce, description, time factor)`` of a ``loss`` option: the flow time of the summed loss is
    multiplied by the factor (``None``: a user's loss, no flow reference)."""
    if isinstance(loss, str):
        if loss not in LOSSES:
            raise invalid("loss", f"be one of {LOSSES} or a callable loss(outputs, targets) -> scalar", repr(loss))
        outs = f"the {num_outputs} outputs" if num_outputs > 1 else "the output"
        if loss == "sum":
            return mse, (f"mean over samples of the squared error summed over {outs} (nqf.model.mse, Eq. 26, "
                         "no 1/2)"), 1.0
        return mean_mse, f"mean over samples and over {outs} of the squared error (no 1/2)", 1.0 / num_outputs
    if not callable(loss):
        raise wrong_kind("loss", f"be one of {LOSSES} or a callable loss(outputs, targets) -> scalar",
                         type(loss).__name__)
    return loss, f"the user's loss {getattr(loss, '__name__', type(loss).__name__)}(outputs, targets)", None


# ----------------------------------------------------------------- the runs as values
class Fit(eqx.Module):
    r"""The loss of the model (``kind="model"``) or of its NQF (``"matrix-free"``: nested jvp; ``"rank-two"``:
    $f_x(0) + a(x)^\top WW^\top B$) on a batch ``(xs, ys, f0, a)``; ``args`` carries the frozen leaves and
    ``B``. A value: compiled runs are cached on it."""

    apply: Callable
    kind: str = eqx.field(static=True)
    reduce: Callable = eqx.field(static=True)
    packing: Any = eqx.field(static=True)

    def predict(self, tr, args, xs, f0, a):
        frozen = args["frozen"]
        if self.kind == "model":
            return jax.vmap(lambda x: module_out(self.apply, tr, frozen, x))(xs)
        if self.kind == "matrix-free":
            return jax.vmap(lambda x: nqf_out(self.apply, tr, frozen, x))(xs)
        W = self.packing.pack(tr)
        Q = (a @ W) @ (W.T @ args["B"])
        return f0 + jnp.reshape(Q, f0.shape)

    def __call__(self, tr, batch, args):
        xs, ys, f0, a = batch
        return self.reduce(self.predict(tr, args, xs, f0, a), ys)


class StatsFit(eqx.Module):
    r"""The summed or averaged squared error of the rank-two NQF from statistics of the data computed once: with
    $Q = a(X)\,W C$, $C = W^\top B$, $\|f_0 + Q - Y\|^2 = c + 2\langle R, WC\rangle + \langle WC, G\,WC\rangle$,
    $G = a(X)^\top a(X)$ ($p\times p$), $R = a(X)^\top(f_0 - Y)$ ($p\times o$), $c = \|f_0 - Y\|^2$; a batch is
    ``(G, R, c, scale)``, ``scale`` $= 1/m$ (``"sum"``) or $1/(mo)$ (``"mean"``). A step costs $O(p^2o + pdo)$,
    not the $O(mpd)$ of the samples (the same loss, the same gradients up to rounding)."""

    packing: Any = eqx.field(static=True)

    def __call__(self, tr, batch, args):
        G, R, c, scale = batch
        W = self.packing.pack(tr)
        WC = W @ (W.T @ args["B"])
        return scale * (c + 2.0 * jnp.sum(R * WC) + jnp.sum(WC * (G @ WC)))


@jax.jit
def _statistics(a, f0, ys):
    r = jnp.reshape(f0 - ys, (ys.shape[0], -1))
    return a.T @ a, a.T @ r, jnp.sum(r**2)


class Recorder(eqx.Module):
    """What a run records: its outputs on the probe set, the Gram matrix of its packed weights (the eigenvalues
    of $M = WW^\\top$), and for the NQF run also the model's outputs at the NQF's weights."""

    fit: Fit
    model_too: bool = eqx.field(static=True)
    gram_side: str = eqx.field(static=True)

    def __call__(self, tr, args):
        px, pf0, pa = args["probe"]
        rec = {"outputs": self.fit.predict(tr, args, px, pf0, pa)}
        if self.model_too:
            rec["model_outputs"] = jax.vmap(lambda x: module_out(self.fit.apply, tr, args["frozen"], x))(px)
        W = self.fit.packing.pack(tr)
        rec["gram"] = W.T @ W if self.gram_side == "d" else W @ W.T
        return rec


# ----------------------------------------------------------------- the result
class ModelRun(NamedTuple):
    """What :func:`nqf.training.model_run` computed (optimiser steps ``step``; flow time ``t = eta * step``).

    A different question from :class:`~nqf.training.Comparison` (how far a trained module and its trained NQF
    agree): what the NQF *predicts* — the NQF trained by the user's optimiser from the model's own $W(0)$, how far
    the model is from it along that path (``divergence``), the flow as a continuum reference — with the
    side-by-side comparison of the predicted and measured runs kept whole as ``comparison``."""

    name: str  #: the model's class (or ``apply``'s) name
    hypotheses: HypothesisCheck  #: Theorem 1's probes at the first input
    As: Any  #: ``(m, p, p)`` or ``(m, o, p, p)``: A(x) on the data (None when too large to hold)
    data: Any  #: the :class:`~nqf.model.NQFData` built from ``As`` (None with ``As``)
    W0: np.ndarray  #: ``(p, d)`` the model's initial weights in the neuron packing
    layout: NeuronLayout  #: how the model's leaves pack into the neuron matrix W
    frozen: tuple  #: ``(path, shape)`` of every leaf shared by all neurons (held fixed in both runs)
    form: str  #: how the NQF was evaluated: ``"rank-two"`` or ``"matrix-free"``
    optimizer: Any  #: what probing the optimiser found (its kind, step size and momentum)
    loss: str  #: the loss convention, in words
    eta: float | None  #: flow time per optimiser step (None: no step <-> time map or a user's loss)
    num_steps: int  #: the model's training steps
    quadratic_error: float  #: e(0): |f(W0) - f_x(0) - Q(W0)| / |Q(W0)| on the probe set
    nqf_steps: np.ndarray  #: ``(S,)`` steps of the prediction's records (to horizon * num_steps)
    nqf_eigs: np.ndarray  #: ``(S, r)`` eigenvalues of M along the prediction, descending
    nqf_loss: np.ndarray  #: ``(S,)`` the prediction's loss (the user's convention)
    divergence: np.ndarray  #: ``(S,)`` e(s): the model at the predicted weights against the NQF there
    comparison: Comparison  #: the predicted (NQF) and measured (model) runs side by side on the model's steps
    eigs_module: np.ndarray  #: ``(T, r)`` eigenvalues of M = W W^T of the trained model at comparison.steps
    eigs_nqf: np.ndarray  #: ``(T, r)`` the same for the prediction (its first T records)
    flow_ts: np.ndarray  #: ``(F,)`` flow save times (empty without a flow)
    flow_loss: np.ndarray  #: ``(F,)`` NQF loss along the flow
    flow_eigs: np.ndarray  #: ``(F, r)`` eigenvalues of M(t), descending
    threshold: float  #: the relative gap that ends the measured agreement window
    record_every: int  #: recording interval of the runs (steps)
    diverged: str | None  #: why a run diverged (None: neither did)


def _default_every(num_steps: int, target: int = 200) -> int:
    lo = max(1, -(-num_steps // target))
    return next(k for k in range(lo, num_steps + 1) if num_steps % k == 0)


@eqx.filter_jit
def _offsets(apply, tr, frozen, xs):
    zero = jax.tree_util.tree_map(jnp.zeros_like, tr)
    return jax.vmap(lambda x: module_out(apply, zero, frozen, x))(xs)


@eqx.filter_jit
def _final_loss(fit, tr, batch, args):
    return fit(tr, batch, args)


def _frozen_leaves(params, neuron_axes) -> tuple:
    """``(path, shape)`` of every array leaf of ``params`` with no neuron axis (shared by all neurons)."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    _, _, flat_axes = _axes_of(params, neuron_axes)
    out = []
    for (path, leaf), a in zip(leaves, flat_axes):
        if a is None and eqx.is_array(leaf):
            out.append((jax.tree_util.keystr(path) or "(root)", tuple(np.shape(leaf))))
    return tuple(out)


def _axes_of(params, neuron_axes):
    _, layout = neuron_weights(params, neuron_axes)
    leaves, treedef = jax.tree_util.tree_flatten(params)
    flat = [None] * len(leaves)
    for i, a in zip(layout.index, layout.axes):
        flat[i] = a
    return leaves, treedef, flat


def _check_data(data, name):
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise invalid("data", "be a pair (xs, ys)", type(data).__name__)
    try:
        xs = jax.tree_util.tree_map(jnp.asarray, data[0])
        ys = jnp.asarray(data[1])
    except (TypeError, ValueError) as err:
        raise wrong_kind("data", "hold arrays (xs, ys)", f"{err}") from err
    leaves = jax.tree_util.tree_leaves(xs)
    if not leaves:
        raise invalid("data", "have inputs xs with at least one array", "no arrays")
    sizes = {np.shape(l)[0] if np.ndim(l) else None for l in leaves}
    if len(sizes) != 1 or None in sizes:
        raise invalid("data", "have the same leading (sample) axis on every input array", f"sizes {sorted(map(str, sizes))}")
    m = sizes.pop()
    if m == 0:
        raise invalid("data", "hold at least one sample", "inputs with 0 samples (a leading axis of length 0)")
    for l in leaves:
        if not jnp.issubdtype(l.dtype, jnp.number) or jnp.issubdtype(l.dtype, jnp.complexfloating):
            raise wrong_kind("data", "hold real inputs xs", f"inputs of dtype {l.dtype}")
        bad = int(np.size(l) - np.count_nonzero(np.isfinite(np.asarray(l))))
        if bad:
            raise invalid("data", "hold finite inputs xs", f"inputs with {bad} NaN or infinite entries")
    if not jnp.issubdtype(ys.dtype, jnp.number) or jnp.issubdtype(ys.dtype, jnp.complexfloating):
        raise wrong_kind("data", "hold real targets ys", f"targets of dtype {ys.dtype}")
    ys = ys.astype(jnp.result_type(float))
    if ys.ndim == 0 or ys.shape[0] != m:
        raise invalid("data", f"have one target per sample (ys of shape ({m},) or ({m}, o))", f"ys of shape {ys.shape}")
    bad = int(ys.size - np.count_nonzero(np.isfinite(np.asarray(ys))))
    if bad:
        raise invalid("data", "hold finite targets ys", f"targets with {bad} NaN or infinite entries")
    return xs, ys, m


def _eigs(grams):
    g = np.asarray(grams, dtype=float)
    with np.errstate(all="ignore"):
        ok = np.all(np.isfinite(g), axis=(-1, -2))
        e = np.full(g.shape[:-1], np.nan)
        if ok.any():
            e[ok] = np.linalg.eigvalsh(g[ok])[..., ::-1]
    return e


def _divergence(f, q, f0):
    """e(s) = |f - q| / |q - f0| over the probe set at each record (records on axis 0)."""
    f, q, f0 = (np.asarray(v, dtype=float) for v in (f, q, f0))
    T = f.shape[0]
    num = np.linalg.norm((f - q).reshape(T, -1), axis=1)
    den = np.linalg.norm((q - f0[None]).reshape(T, -1), axis=1)
    with np.errstate(all="ignore"):
        e = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, np.inf, 0.0))
    return e


def _run_diverged(label, batch_loss, final, lr_note):
    bl = np.asarray(batch_loss, dtype=float)
    allv = np.concatenate([bl, [float(final)]])
    L0 = allv[0]
    bad = ~np.isfinite(allv)
    big = np.abs(allv) > DIVERGED * max(abs(L0), 1e-300)
    if not (bad.any() or big.any()):
        return None
    k = int(np.argmax(bad | big))
    what = "became non-finite" if bad[k] else f"grew from {L0:.4g} to {allv[k]:.3g}"
    return f"the {label}'s loss {what} by step {k}: the optimiser diverges ({lr_note})"


def model_run(
    model: Any,
    data: tuple[Any, Any],
    optimizer: Any,
    num_steps: int,
    *,
    apply: Callable | None = None,
    neuron_axes: Any = None,
    loss: Any = "sum",
    record_every: int | None = None,
    threshold: float = 0.1,
    n_probe: int = 64,
    horizon: float = 2.0,
    flow_points: int = 160,
    nqf_form: str = "auto",
) -> ModelRun:
    r"""The prediction (the NQF trained by ``optimizer`` from the model's own $W(0)$), the measurement (the model
    trained the same way), the quadratic-regime error along the prediction, and the flow reference (module
    docstring).

    Args:
        model: a callable equinox Module (neurons along ``neuron_axes``, or its method ``neuron_axes()``), or
            the parameters of ``apply`` (e.g. a flax model's variables).
        data: ``(xs, ys)``: inputs with a leading sample axis, targets ``(m,)`` or ``(m, o)``; full batch.
        optimizer: any optax optimiser (``optax.sgd(0.05, momentum=0.9)``, ``optax.adam(1e-3)``) or
            :func:`nqf.training.optimizer`; both runs use it.
        num_steps: optimiser steps of the model's run.
        apply: ``apply(params, x)``; ``None`` for an equinox Module called as ``model(x)``.
        neuron_axes: the neuron axis of each leaf (prefix pytree, as ``jax.vmap``'s ``in_axes``; ``None`` at a
            leaf shared by all neurons, which is held fixed in both runs and listed in the report).
        loss: ``"sum"`` (the package's :func:`nqf.model.mse`: summed over outputs), ``"mean"`` (averaged over
            outputs) or ``loss(outputs, targets) -> scalar``; both runs minimise it.
        record_every: recording interval of the runs (default: about 1000 records of the model's run, 200 when
            ``min(p, d) > 64``).
        threshold: relative output gap that ends the measured agreement window, and the bound on the predicted
            deviation (twice the mean quadratic-regime error) inside the range of validity.
        n_probe: the first ``n_probe`` inputs are the probe set of both gaps (>= 1).
        horizon: the prediction runs ``horizon * num_steps`` steps (so that modes learned near the end of the
            run have settled levels); >= 1.
        flow_points: save times of the flow reference (log-spaced from one step).
        nqf_form: ``"auto"`` (rank-two factors when the model has them, else matrix-free), ``"matrix-free"``.
    """
    call = model_function(apply, model, params_name="model")
    name = model_name(apply, model)
    neuron_axes = model_neuron_axes(model, neuron_axes, name)
    check_float64("model", model, name, also="for a flax model, create its parameters in float64: "
                  "nn.Dense(..., param_dtype=jnp.float64) (linen) or nnx.Linear(..., param_dtype=jnp.float64, rngs=...)"
                  " (nnx)")
    steps = check_int("num_steps", num_steps)
    n_probe = check_int("n_probe", n_probe)
    if isinstance(horizon, bool) or not isinstance(horizon, (int, float, np.floating)) or not 1.0 <= float(horizon) < 1e3:
        raise invalid("horizon", "be a number in [1, 1000) (the prediction's length in units of num_steps)",
                      repr(horizon))
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)) or not 0 < threshold < 1:
        raise invalid("threshold", "be a number in (0, 1)", repr(threshold))
    if nqf_form not in ("auto", "matrix-free"):
        raise invalid("nqf_form", "be 'auto' or 'matrix-free'", repr(nqf_form))
    sm = step_map("optimizer", optimizer)
    opt = as_optimizer("optimizer", optimizer)
    xs, ys, m = _check_data(data, name)
    x_first = jax.tree_util.tree_map(lambda a: a[0], xs)
    tr, frozen, ax_leaves, d = split_params(model, neuron_axes, name="model")
    try:
        out = jax.eval_shape(lambda t, x: module_out(call, t, frozen, x), tr, x_first)
    except Exception as err:  # noqa: BLE001  (the user's model refuses one input: say which, with the shapes)
        raise invalid("data", f"hold inputs {name} accepts", f"inputs of shape "
                      f"{jax.tree_util.tree_map(np.shape, x_first)} per sample, which {name} refuses: "
                      f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from err
    if not hasattr(out, "dtype") or not jnp.issubdtype(out.dtype, jnp.floating):
        raise wrong_kind("model", f"return floating-point outputs (float64: the NQF is a second derivative)",
                         f"{name}, which returns {getattr(out, 'dtype', type(out).__name__)} outputs")
    if tuple(ys.shape[1:]) != tuple(out.shape):
        raise invalid("data", f"have targets of shape (m, *out) with out = {tuple(out.shape)} ({name}'s output "
                              "shape)", f"ys of shape {tuple(ys.shape)}")
    o = int(np.prod(out.shape, dtype=int))
    reduce, loss_text, time_factor = loss_convention(loss, o)
    if not isinstance(loss, str):
        try:
            lo = jax.eval_shape(reduce, jax.ShapeDtypeStruct(ys.shape, ys.dtype), ys)
        except Exception as err:  # noqa: BLE001
            raise wrong_kind("loss", "be a callable loss(outputs, targets) -> scalar", f"{loss!r}: {err}") from err
        if getattr(lo, "shape", None) != () or not jnp.issubdtype(lo.dtype, jnp.floating):
            raise wrong_kind("loss", "return a real scalar", f"{getattr(lo, 'dtype', '?')} of shape "
                                                           f"{getattr(lo, 'shape', '?')}")
    chk = check_hypotheses(call, model, x_first, neuron_axes=neuron_axes)
    require_hypotheses(chk, name)
    W0, layout = neuron_weights(model, neuron_axes)
    p = int(W0.shape[0])
    # records: about 1000 for a small model (the reading's resolution sets the tolerance), 200 for a large one
    # (each record holds an r x r Gram matrix, r = min(p, d))
    every = (_default_every(steps, 1000 if min(p, d) <= 64 else 200) if record_every is None
             else check_record_every(record_every, steps))
    frozen_list = _frozen_leaves(model, neuron_axes)
    packing = tree_packing(tr, ax_leaves)
    f0 = _offsets(call, tr, frozen, xs)
    # ---- how the NQF is evaluated
    lr = rank_two_form(call, packing, tr, frozen, xs) if nqf_form == "auto" else None
    form = "rank-two" if lr is not None else "matrix-free"
    a_all = lr.a if lr is not None else None
    B = lr.B if lr is not None else None
    probe_n = min(n_probe, m)
    px = jax.tree_util.tree_map(lambda v: v[:probe_n], xs)
    probe = (px, f0[:probe_n], None if a_all is None else a_all[:probe_n])
    args = {"frozen": frozen, "B": B, "probe": probe}
    gram_side = "d" if d <= p else "p"
    fit_m = Fit(call, "model", reduce, packing)
    fit_q = Fit(call, form, reduce, packing)
    batch = (xs, ys, f0, a_all)
    steps_pred = int(np.ceil(float(horizon) * steps / every)) * every
    loss_q, batch_q = fit_q, batch
    if form == "rank-two" and reduce in (mse, mean_mse):  # the loss from statistics of the data: O(p^2 o) a step
        G, R, c = _statistics(a_all, f0, ys)
        scale = 1.0 / (m * (o if reduce is mean_mse else 1))
        loss_q, batch_q = StatsFit(packing), (G, R, c, jnp.asarray(scale, G.dtype))
    lr_note = (f"learning rate {sm.learning_rate:g}: lower it" if sm.kind else "lower the learning rate")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # divergence is reported below, naming its cause
        pred = train(loss_q, tr, opt, num_steps=steps_pred, data=batch_q, record=Recorder(fit_q, True, gram_side),
                     args=args, record_every=every, on_divergence="ignore")
        meas = train(fit_m, tr, opt, num_steps=steps, data=batch, record=Recorder(fit_m, False, gram_side),
                     args=args, record_every=every, on_divergence="ignore")
    fin_q = float(_final_loss(loss_q, pred.params, batch_q, args))
    fin_m = float(_final_loss(fit_m, meas.params, batch, args))
    diverged = (_run_diverged("NQF", pred.batch_loss, fin_q, lr_note)
                or _run_diverged("model", meas.batch_loss, fin_m, lr_note))
    if diverged:
        warnings.warn(f"nqf.diagnose of {name}: {diverged}; no plateau prediction is made", RuntimeWarning,
                      stacklevel=3)
    rq, rm = pred.record, meas.record
    pf0 = np.asarray(probe[1])
    quiet = np.errstate(over="ignore", invalid="ignore")  # a diverged run was reported above, with its cause
    quiet.__enter__()
    div = _divergence(rq["model_outputs"], rq["outputs"], pf0)
    nqf_loss = np.concatenate([np.asarray(pred.batch_loss)[::every], [fin_q]])
    mod_loss = np.concatenate([np.asarray(meas.batch_loss)[::every], [fin_m]])
    T = len(meas.steps)
    eig_q = _eigs(rq["gram"])[:, : min(p, d)]
    eig_m = _eigs(rm["gram"])[:, : min(p, d)]
    gap = relative_gap(np.asarray(rm["outputs"]), np.asarray(rq["outputs"])[:T], time_axis=0)
    window = first_exceedance(meas.steps, gap, threshold)
    quiet.__exit__(None, None, None)
    comp = Comparison(np.asarray(meas.steps), {"loss": mod_loss, "outputs": np.asarray(rm["outputs"])},
                      {"loss": nqf_loss[:T], "outputs": np.asarray(rq["outputs"])[:T]},
                      {"module": np.asarray(meas.batch_loss), "nqf": np.asarray(pred.batch_loss)[:steps]},
                      gap, window, float(threshold), "outputs",
                      {"module": eqx.combine(meas.params, frozen), "nqf": eqx.combine(pred.params, frozen)})
    # ---- the dense A(x) and the flow reference, when small enough
    As = nqf_data = None
    fts = floss = feigs = np.zeros((0,))
    eta = None if (sm.per_step is None or time_factor is None) else sm.per_step * time_factor
    if m * o * p * p <= DENSE_LIMIT:
        As = pytree_structure_stack(apply, model, xs, neuron_axes)
        if As.ndim <= 4:
            nqf_data = NQFData(As, ys, f0=f0)
    if eta is not None and nqf_data is not None and not diverged:
        t_end = eta * steps_pred
        fts = log_times(t_end, int(flow_points), t_min=eta)
        sol = gradient_flow(W0 @ W0.T, nqf_data, fts, rtol=1e-6, atol=1e-12, solver="tsit5")
        Ms = np.asarray(sol.ys)
        floss = np.asarray(jax.vmap(lambda M: mse_loss(M, nqf_data))(jnp.asarray(Ms))) * time_factor
        feigs = _eigs(Ms)[:, : min(p, d)]
        fts = np.asarray(fts)
    return ModelRun(name, chk, As, nqf_data, np.asarray(W0), layout, frozen_list, form, sm, loss_text, eta, steps,
                    float(div[0]), np.asarray(pred.steps), eig_q, nqf_loss, div, comp, eig_m, eig_q[:T], fts, floss,
                    feigs, float(threshold), int(every), diverged)
