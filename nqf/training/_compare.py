r"""THE side-by-side runner: a model and its NQF trained from the same $W(0)$ by one optimiser (Sec. 7, Fig. 2;
Theorem 1, Eq. 2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_float64, check_int, check_key, check_record_every, invalid, wrong_kind
from ..model import MSE, mse
from ..structure import HypothesisCheck, QuadraticForm, quadratic_form
from ._agreement import _reals, _times, first_crossing, relative_gap
from ._trainer import Minibatches, Runs, Stream, as_optimizer, train

TRACKABLE = ("loss", "step_loss", "probe_loss", "outputs", "singular_values", "model_outputs", "gram")


class Agreement(eqx.Module):
    """THE agreement rule as an option: the window ends at the first recorded step at which the relative gap
    (:func:`relative_gap`) between the two runs' quantity ``on`` reaches ``threshold`` or is not finite (a run that
    blew up does not agree; never: ``inf``). ``on=None``: ``"outputs"`` when tracked, else the first tracked."""

    threshold: float = eqx.field(static=True, default=0.1)
    on: str | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, (float, int, np.floating)) or not 0.0 < float(t) < 1.0:
            raise invalid("threshold", "be a number in (0, 1)", repr(t))

    def window(self, times, gap) -> np.ndarray:
        """The agreement window of a ``gap`` ``(*B, T)`` (time last) recorded at ``times`` ``(T,)`` (the recorded
        steps): shape ``(*B,)``, the first recorded step (no interpolation) of :func:`first_crossing` at
        ``threshold``, a NaN gap counting as crossed; ``inf``: never."""
        t, gap = _times(_reals("times", times)), _reals("gap", gap)
        if gap.ndim < 1 or gap.shape[-1] != t.size:
            raise invalid("gap", f"have the {t.size} records of `times` on its last axis", f"shape {gap.shape}")
        return first_crossing(t, gap, float(self.threshold), axis=-1, interpolate=False, nan_crosses=True)


class Track(eqx.Module):
    r"""What a side-by-side run records, every ``record_every`` steps and after the last: any of ``"loss"`` (the
    training set's loss, evaluated), ``"step_loss"`` (the loss before each recorded step, read off the trainer, and
    at the end), ``"probe_loss"``, ``"outputs"`` (on ``probe``), ``"singular_values"`` (of ``linear_map(params)``),
    ``"gram"`` ($W^\top W$ or $WW^\top$ of the packed weights, the smaller), ``"model_outputs"`` (the model at the
    NQF's weights, on ``probe``). ``probe``: inputs, or an int $n$ (the first $n$ training inputs); ``horizon``: the
    NQF's run lasts ``horizon`` times the model's (its records continue at the same interval); ``agreement``: the
    rule read off the records."""

    quantities: tuple = eqx.field(static=True, default=("loss",))
    probe: Any = None
    probe_targets: Any = None
    linear_map: Callable | None = eqx.field(static=True, default=None)
    record_every: int = eqx.field(static=True, default=1)
    horizon: float = eqx.field(static=True, default=1.0)
    agreement: Agreement = Agreement()

    def __check_init__(self):
        q = self.quantities
        if isinstance(q, str) or not q or any(t not in TRACKABLE for t in q):
            raise invalid("track", f"be a non-empty tuple of quantities among {TRACKABLE}", repr(q))
        if "singular_values" in q and not callable(self.linear_map):
            raise invalid("linear_map", "be a callable params -> matrix to track 'singular_values'",
                          repr(self.linear_map))
        if isinstance(self.probe, (int, np.integer, float)) and not (isinstance(self.probe, (int, np.integer))
                                                                     and self.probe >= 1):
            raise invalid("probe", "be inputs with a leading sample axis, or a number >= 1 of training inputs",
                          repr(self.probe))
        if {"outputs", "probe_loss", "model_outputs"} & set(q) and self.probe is None:
            raise invalid("probe", "be given (inputs with a leading sample axis, or a number of training inputs) to "
                                   "track 'outputs', 'probe_loss' or 'model_outputs'", "None")
        if "probe_loss" in q and self.probe_targets is None:
            raise invalid("probe_targets", "be given to track 'probe_loss'", "None")
        on = self.agreement.on or ("outputs" if "outputs" in q else q[0])
        if on not in q:
            raise invalid("on", f"(Agreement's quantity) be one of the tracked quantities {q}", repr(on))
        h = self.horizon
        if isinstance(h, bool) or not isinstance(h, (int, float, np.floating)) or not 1.0 <= float(h) < 1e3:
            raise invalid("horizon", "be a number in [1, 1000) (the NQF's run in units of num_steps)", repr(h))


class Comparison(NamedTuple):
    """Both trajectories of :func:`compare_with_nqf` and their agreement window (a leading lane axis ``B`` when
    the weights carry one)."""

    steps: np.ndarray  #: (T,) the model's recorded steps (the NQF's continue at the same interval to its horizon)
    module: dict  #: tracked quantity -> ``(*B, T, ...)`` for the model
    nqf: dict  #: tracked quantity -> ``(*B, T', ...)`` for its NQF (T' = T without a horizon)
    batch_loss: dict  #: ``{"module", "nqf"}`` -> ``(*B, num_steps)`` loss on each step's batch
    gap: np.ndarray  #: ``(*B, T)`` relative gap of ``gap_on`` between the two runs
    window: np.ndarray  #: ``(*B,)`` first recorded step with gap >= threshold or non-finite (``inf``: never)
    threshold: float  #: the gap that ends the window
    gap_on: str  #: the tracked quantity the gap is measured on
    final: dict  #: ``{"module", "nqf"}`` -> final parameters
    form_gap: float | None = None  #: a fast form's largest relative distance from the matrix-free NQF at the checks
    form: str = "matrix-free"  #: how the NQF was evaluated
    hypotheses: HypothesisCheck | None = None  #: Theorem 1's probes at the first input
    offsets: tuple = (None, None)  #: $f_x(0)$ on the training and on the probe inputs (None: not computed)
    factors: tuple = (None, None)  #: a factored form's per-sample and fixed factors on the training inputs


class Fit(eqx.Module):
    """THE loss of a run: ``loss`` (:class:`nqf.model.MSE`, or the user's ``loss(outputs, targets)``) of the
    outputs ``evaluation`` computes on a batch ``(xs, ys, f0, A)``."""

    evaluation: Any  #: how the outputs are computed (the model, or its NQF in one form: QuadraticForm.parts)
    loss: Callable = eqx.field(static=True, default=mse)

    def __call__(self, tr, batch, args):
        xs, ys, f0, A = batch
        return self.loss(self.evaluation(tr, args, (xs, f0, A)), ys)


class StatsFit(eqx.Module):
    r""":class:`Fit` of the rank-two NQF under :class:`~nqf.model.MSE`, from statistics of the data computed once:
    with $Q = a(X)\,WC$, $C = W^\top B$, $\|f_0 + Q - Y\|^2 = c + 2\langle R, WC\rangle + \langle WC, G\,WC\rangle$,
    $G = a^\top a$, $R = a^\top(f_0 - Y)$, $c = \|f_0 - Y\|^2$; a batch is ``(G, R, c, scale)``. A step costs
    $O(p^2o + pdo)$, not $O(mpd)$: the same loss, the same gradients up to rounding."""

    evaluation: Any

    def __call__(self, tr, batch, args):
        G, R, c, scale = batch
        W = self.evaluation.packing.pack(tr)
        WC = W @ (W.T @ self.evaluation.B)
        return scale * (c + 2.0 * jnp.sum(R * WC) + jnp.sum(WC * (G @ WC)))


@jax.jit
def _statistics(a, f0, ys):
    r = jnp.reshape(f0 - ys, (ys.shape[0], -1))
    return a.T @ a, a.T @ r, jnp.sum(r**2)


class Recorder(eqx.Module):
    """THE record of a run (:class:`Track`'s quantities); ``args`` holds ``"train"``, ``"probe"`` ``(px, f0, A)``,
    ``"py"`` and ``"frozen"``."""

    fit: Fit
    quantities: tuple = eqx.field(static=True)
    linear_map: Any = eqx.field(static=True, default=None)
    gram_side: str = eqx.field(static=True, default="p")

    def __call__(self, tr, args):
        q, rec = self.quantities, {}
        if "loss" in q:
            rec["loss"] = self.fit(tr, args["train"], args)
        if {"outputs", "probe_loss"} & set(q):
            pred = self.fit.evaluation(tr, args, args["probe"])
            if "outputs" in q:
                rec["outputs"] = pred
            if "probe_loss" in q:
                rec["probe_loss"] = self.fit.loss(pred, args["py"])
        if "model_outputs" in q and self.fit.evaluation.kind != "model":
            rec["model_outputs"] = self.fit.evaluation.as_model()(tr, args, args["probe"])
        if "singular_values" in q:
            L = self.linear_map(eqx.combine(tr, args["frozen"]))
            ok = jnp.all(jnp.isfinite(L))  # a diverged run: NaN singular values, and no LAPACK error on stdout
            rec["singular_values"] = jnp.where(ok, jnp.linalg.svd(jnp.where(ok, L, 0.0), compute_uv=False), jnp.nan)
        if "gram" in q:
            W = self.fit.evaluation.packing.pack(tr)
            rec["gram"] = W.T @ W if self.gram_side == "d" else W @ W.T
        return rec


class _KeyOnly(eqx.Module):
    sample: Callable = eqx.field(static=True)

    def __call__(self, key, args):
        xs, ys = self.sample(key)
        return xs, ys, None, None


@eqx.filter_jit
def _final_loss(fit, tr, batch, args):
    return fit(tr, batch, args)


def _leading(name, x) -> int:
    sizes = {np.shape(l)[0] if np.ndim(l) else None for l in jax.tree_util.tree_leaves(x)}
    if len(sizes) != 1 or None in sizes or 0 in sizes:
        raise invalid(name, "have inputs with the same, non-zero leading (sample) axis on every array",
                      f"leading sizes {sorted(map(str, sizes))}")
    return sizes.pop()


def _data(data, num_steps, key):
    """``(xs, ys, batches, sample, x_first)`` of ``data``: ``(xs, ys)``, ``(xs, ys, batches)`` or ``sample(key)``."""
    if callable(data):
        if key is None:
            raise invalid("key", "be given (a PRNG key) when `data` is a sampling function sample(key)", "None")
        return None, None, None, data, jax.tree_util.tree_map(lambda a: np.asarray(a)[0], data(key)[0])
    if not isinstance(data, (tuple, list)) or len(data) not in (2, 3):
        raise invalid("data", "be a pair (xs, ys), a triple (xs, ys, batches) or a function sample(key)",
                      type(data).__name__)
    try:
        xs, ys = jax.tree_util.tree_map(jnp.asarray, data[0]), jnp.asarray(data[1])
    except (TypeError, ValueError) as err:
        raise wrong_kind("data", "hold arrays (xs, ys)", f"{err}") from err
    if 0 in {np.shape(l)[0] for l in jax.tree_util.tree_leaves(xs) if np.ndim(l)}:
        raise invalid("data", "hold at least one sample", "inputs with 0 samples (a leading axis of length 0)")
    m = _leading("data", xs)
    for what, leaf in [("inputs xs", l) for l in jax.tree_util.tree_leaves(xs)] + [("targets ys", ys)]:
        if not jnp.issubdtype(leaf.dtype, jnp.number) or jnp.issubdtype(leaf.dtype, jnp.complexfloating):
            raise wrong_kind("data", f"hold real {what}", f"{what.split()[0]} of dtype {leaf.dtype}")
        bad = int(np.size(leaf) - np.count_nonzero(np.isfinite(np.asarray(leaf))))
        if bad:
            raise invalid("data", f"hold finite {what}", f"{what.split()[0]} with {bad} NaN or infinite entries")
    if ys.ndim == 0 or ys.shape[0] != m:
        raise invalid("data", f"have targets ys of shape ({m},) or ({m}, o), one per sample", f"ys of shape {ys.shape}")
    batches = None
    if len(data) == 3:  # on the host: a jax array's min and max would each compile an eager program per shape
        host = np.asarray(data[2])
        if host.ndim != 2 or host.shape[0] != num_steps or not np.issubdtype(host.dtype, np.integer):
            raise invalid("batches", f"be an int array (num_steps, b) = ({num_steps}, *) of sample indices",
                          f"{host.dtype} array of shape {host.shape}")
        if int(host.min()) < 0 or int(host.max()) >= m:
            raise invalid("batches", f"hold indices in [0, {m})", f"range [{int(host.min())}, {int(host.max())}]")
        batches = jnp.asarray(host)
    return xs, ys.astype(jnp.result_type(float)), batches, None, jax.tree_util.tree_map(lambda a: np.asarray(a)[0], xs)


def _model(model, params):
    """``(q, params, batched)``: the quadratic form, the (possibly lane-batched) weights, whether they carry lanes."""
    q = model if isinstance(model, QuadraticForm) else quadratic_form(model, form="matrix-free")
    if q.model is not None:
        if params is not None:
            raise invalid("params", "be None for an equinox model (its parameters are the model's own leaves)",
                          f"a {type(params).__name__}")
        return q, q.model, False
    if params is None:
        raise invalid("params", f"be given: the parameters of {q.name}", "None")
    if q.arch is None:
        return q, params, False
    W = jnp.asarray(params)
    if W.ndim not in (2, 3) or W.shape[-2] != q.arch.p:
        raise invalid("W0", f"have shape (p, d) = ({q.arch.p}, *) or (B, {q.arch.p}, *) for the architecture "
                            f"{q.name}", f"shape {W.shape}")
    return q, W, W.ndim == 3


def _probe_parts(track, parts, xs):
    """``(px, f0, A)`` of the probe, and its targets."""
    if isinstance(track.probe, (int, np.integer)) and not isinstance(track.probe, bool):
        n = min(int(track.probe), _leading("data", xs))
        f0, A = parts[0]
        return (jax.tree_util.tree_map(lambda v: v[:n], xs), None if f0 is None else f0[:n],
                None if A is None else A[:n]), track.probe_targets
    px = jax.tree_util.tree_map(jnp.asarray, track.probe)
    py = None if track.probe_targets is None else jnp.asarray(track.probe_targets)
    if py is not None and _leading("probe", px) != py.shape[0]:
        raise invalid("probe_targets", f"have one row per probe input ({_leading('probe', px)})", f"shape {py.shape}")
    return (px, *parts[-1]), py


def _check_probe(probe, x_first):
    """The probe inputs: finite, one leading sample axis, each sample of the training inputs' shape."""
    try:
        px = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype=float), probe)
    except (TypeError, ValueError) as err:
        raise wrong_kind("probe", "hold arrays of real inputs", f"{type(probe).__name__} ({err})") from err
    want = jax.tree_util.tree_map(np.shape, x_first)
    got = jax.tree_util.tree_map(lambda a: a.shape[1:] if a.ndim else None, px)
    if jax.tree_util.tree_structure(got) != jax.tree_util.tree_structure(want) or got != want:
        each = f"(n, {', '.join(map(str, want))})" if isinstance(want, tuple) else f"n samples of shapes {want}"
        raise invalid("probe", f"hold inputs of the training data's shape: {each} (n probe samples)",
                      f"probe inputs of shape {jax.tree_util.tree_map(np.shape, px)}")
    bad = sum(int(a.size - np.count_nonzero(np.isfinite(a))) for a in jax.tree_util.tree_leaves(px))
    if bad:
        raise invalid("probe", "hold finite inputs", f"probe inputs with {bad} NaN or infinite entries")
    return probe


def _check_shapes(q, tr, frozen, x_first, ys, py):
    """The model applies to one input; targets and probe targets have its output shape. Returns the output shape."""
    try:
        out = jax.eval_shape(lambda t, x: jax.vmap(lambda x: q.apply(eqx.combine(t, frozen), x))(x),
                             tr, jax.tree_util.tree_map(lambda a: jnp.asarray(a)[None], x_first))
    except Exception as err:  # noqa: BLE001  (the user's model refuses one input: say which, with the shapes)
        raise invalid("data", f"hold inputs {q.name} accepts", f"inputs of shape "
                      f"{jax.tree_util.tree_map(np.shape, x_first)} per sample, which {q.name} refuses: "
                      f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from err
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise wrong_kind("model", "return floating-point outputs (float64: the NQF is a second derivative)",
                         f"{q.name}, which returns {out.dtype} outputs")
    out = out.shape[1:]
    for name, y in (("data", ys), ("probe_targets", py)):
        if y is not None and tuple(y.shape[1:]) != tuple(out):
            raise invalid(name, f"have targets of shape (m, *out) with out = {tuple(out)} ({q.name}'s output shape)",
                          f"targets of shape {tuple(y.shape)}")
    return tuple(out)


def _fits(evaluation, loss, xs, ys, f0, A, batches):
    """The model's and the NQF's loss and data: the NQF's from statistics when its form allows (:class:`StatsFit`)."""
    model, nqf = Fit(evaluation.as_model(), loss), Fit(evaluation, loss)
    data = (xs, ys, f0, A)
    if evaluation.kind == "rank-two" and isinstance(loss, MSE) and batches is None:
        G, R, c = _statistics(A, f0, ys)
        o = int(np.prod(ys.shape[1:], dtype=int))
        scale = 1.0 / ((1 if loss.samples == "sum" else ys.shape[0]) * (o if loss.outputs == "mean" else 1))
        return (model, data), (StatsFit(evaluation), (G, R, c, jnp.asarray(scale, G.dtype)))
    return (model, data), (nqf, data)


def compare_with_nqf(model: Any, data: Any, optimizer: Any, *, num_steps: int, params: Any = None, key: Any = None,
                     loss: Callable = mse, track: Track = Track()) -> Comparison:
    r"""Train a model and its NQF from the same $W(0)$ with the same optimiser and loss; compare them.

    Both runs minimise ``loss`` (default :data:`nqf.model.mse`, Eq. 26: summed over outputs, averaged over
    samples, no $\frac12$) with ``optimizer`` for ``num_steps`` steps, each one jitted :func:`train` over the
    model's neuron leaves (shared leaves held fixed). The NQF is $f_x(0) + \mathrm{Tr}[WW^\top A(x)]$ (Theorem 1,
    Eq. 2), evaluated as its :func:`~nqf.structure.quadratic_form` says (a raw model: matrix-free); Theorem 1's
    hypotheses are measured at the first input first and a model that fails them is refused.

    Args:
        model: an equinox Module (neurons along its method ``neuron_axes()``), an
            :class:`~nqf.architectures.Architecture`, or :func:`~nqf.structure.quadratic_form` of any model (its
            neuron axes, how its NQF is evaluated: ``form``).
        data: ``(xs, ys)`` (full batch), ``(xs, ys, batches)`` (an int array ``(num_steps, b)`` of sample indices,
            one row per step) or ``sample(key) -> (x_batch, y_batch)`` (fresh samples each step, needs ``key``).
        optimizer: an :class:`~nqf.training.Optimizer` or an optax ``GradientTransformation``, for both runs.
        num_steps: the model's optimiser steps.
        params: the parameters of an Architecture (``(p, d)``, or ``(B, p, d)``: ``B`` lanes vmapped) or of
            ``apply``; ``None`` for an equinox model.
        key: PRNG key of ``sample``; with a fast form, the key of a random unit-scale ``W`` at which it is checked.
        loss: ``loss(outputs, targets) -> scalar``, e.g. ``nqf.model.MSE(outputs="mean")``.
        track: what is recorded, and the agreement rule read off it (:class:`Track`, :class:`Agreement`).

    Returns:
        a :class:`Comparison`.
    """
    q, params, batched = _model(model, params)
    opt = as_optimizer("optimizer", optimizer)
    steps = check_int("num_steps", num_steps)
    every = check_record_every(track.record_every, steps)
    if key is not None:
        check_key("key", key)
    xs, ys, batches, sample, x_first = _data(data, steps, key)
    if sample is not None and "loss" in track.quantities:
        raise invalid("track", "not hold 'loss' (the full training set) with a sampling function `data`: track "
                               "'probe_loss' with a `probe`", repr(track.quantities))
    one = np.asarray(params)[0] if batched else params  # (a jax array's W0[0] would compile a slice)
    tr, frozen, packing = q.split(one)
    check_float64("params", tr, f"of {q.name}")
    _check_shapes(q, tr, frozen, x_first, ys, None if track.probe_targets is None else jnp.asarray(track.probe_targets))
    sets = [] if sample is not None else [xs]
    if track.probe is not None and not isinstance(track.probe, (int, np.integer)):
        sets.append(_check_probe(track.probe, x_first))
    if sample is not None and q.form not in ("matrix-free", "auto"):
        raise invalid("form", "be 'matrix-free' with a sampling function `data`: a fast form's parts are computed "
                              "once per sample", repr(q.form))
    parts, evaluation, form_gap = q.parts(one, sets, key=key)
    probe, py = _probe_parts(track, parts, xs) if track.probe is not None else (None, None)
    chk = q.check(one, x_first, require=True)
    (fit_m, data_m), (fit_q, data_q) = _fits(evaluation, loss, xs, ys, *parts[0], batches)
    args = {"frozen": frozen, "py": py, "train": data_m, "probe": probe}
    W0 = params if batched else tr
    d, p = packing.pack(tr).shape[1], packing.p
    steps_q = int(np.ceil(float(track.horizon) * steps / every)) * every
    runs = {}
    for name, fit, data_, n in (("module", fit_m, data_m, steps), ("nqf", fit_q, data_q, steps_q)):
        rec = Recorder(Fit(fit.evaluation, loss), track.quantities, track.linear_map, "d" if d <= p else "p")
        source = Stream(_KeyOnly(sample), key) if sample is not None else (
            data_ if batches is None else Minibatches(data_, batches))
        runs[name] = train(fit, W0, opt, num_steps=n, data=source, args=args, record=rec,
                           runs=Runs(every, ("params",) if batched else (), "ignore"))
        if "step_loss" in track.quantities:
            last = np.asarray(_final_loss(fit, runs[name].params, data_, args))
            runs[name].record["step_loss"] = np.concatenate([np.asarray(runs[name].batch_loss)[..., ::every],
                                                             last[..., None]], axis=-1)
    return _comparison(runs, track, batched, frozen, (form_gap, evaluation.kind, chk,
                                                              (parts[0][0], None if probe is None else probe[1]),
                                                              (parts[0][1], evaluation.B)))


def _comparison(runs, track, batched, frozen, extra) -> Comparison:
    rm, rq = runs["module"].record, runs["nqf"].record
    on = track.agreement.on or ("outputs" if "outputs" in track.quantities else track.quantities[0])
    T = len(runs["module"].steps)
    nb = 1 if batched else 0
    first_T = np.asarray(rq[on])[(slice(None),) * nb + (slice(0, T),)]  # the NQF's records on the model's steps
    gap = relative_gap(rm[on], first_T, time_axis=nb)
    window = track.agreement.window(runs["module"].steps, gap)
    final = {k: runs[k].params if batched else eqx.combine(runs[k].params, frozen) for k in runs}
    return Comparison(runs["module"].steps, rm, rq, {k: runs[k].batch_loss for k in runs}, gap, window,
                      float(track.agreement.threshold), on, final, *extra)
