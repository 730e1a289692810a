r"""THE trainer: one jitted ``lax.scan`` over a parameter pytree with an optax optimiser. ``loss`` and ``record``
are static, data come through arguments and numeric hyperparameters are traced, so new data or a new learning
rate compile nothing; step $k$ at rate $\eta$ is flow time $t = \eta k$ (Eq. 26)."""

from __future__ import annotations

import inspect
import numbers
import re
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._checks import (check_callable, check_finite, check_int, check_key, check_optimizer, check_option,
                       check_positive, check_record_every, failed, invalid, wrong_kind)
from ..model import mse_loss

VMAPPABLE = ("params", "data", "batches", "key", "args")
#: the most steps one call takes, summed over its vmapped runs (one loss per step is kept: 2**27 are 1 GiB)
MAX_STEPS = 2**27
#: the optax optimisers :func:`optimizer` builds by name: their ``update(grads, state, params)`` needs nothing
#: else (``lbfgs`` and ``polyak_sgd`` need the loss value, and a line search, at every update)
OPTIMIZERS = tuple(n for n in (
    "adabelief", "adadelta", "adafactor", "adagrad", "adam", "adamax", "adamaxw", "adamw", "adan", "amsgrad",
    "fromage", "lamb", "lars", "lion", "nadam", "nadamw", "noisy_sgd", "novograd", "optimistic_gradient_descent",
    "radam", "rmsprop", "rprop", "sgd", "sign_sgd", "signum", "sm3", "yogi") if callable(getattr(optax, n, None)))
_NEEDS_VALUE = {"lbfgs": "L-BFGS", "polyak_sgd": "Polyak's step size"}
#: ranges of the hyperparameters by name: decay rates in [0, 1) (a momentum or b1 >= 1 grows without bound)
_UNIT = ("momentum", "b1", "b2", "b3", "decay")
_NONNEGATIVE = ("eps", "eps_root", "weight_decay", "initial_accumulator_value")


# ------------------------------------------------------------------ optimisers as values
class Optimizer(eqx.Module):
    """An optax optimiser as a value: the factory and its non-numeric options are static, the
    numeric hyperparameters are arrays (traced), so a new learning rate reuses the compiled run.

    Build one with :func:`optimizer`; :meth:`build` returns the ``optax.GradientTransformation``.
    """

    factory: Callable = eqx.field(static=True)
    numeric: dict
    options: tuple = eqx.field(static=True)

    def build(self) -> optax.GradientTransformation:
        """The optax transformation (inside a trace its numeric hyperparameters are tracers)."""
        return self.factory(**self.numeric, **dict(self.options))

    @property
    def learning_rate(self) -> float | None:
        """The learning rate, if the optimiser has one (for messages)."""
        lr = self.numeric.get("learning_rate")
        return None if lr is None else float(lr)

    def describe(self) -> str:
        """The hyperparameters, for messages: ``"`learning_rate` = 0.1, `momentum` = 0.9"``."""
        return ", ".join(f"`{k}` = {float(v):g}" for k, v in self.numeric.items()) or "this `optimizer`"


def _factory(name: str | Callable) -> Callable:
    """The optax factory ``name`` stands for: one of ``OPTIMIZERS``, or a factory given as a callable (an
    optax factory outside that list is refused like its name)."""
    listed = ", ".join(repr(n) for n in OPTIMIZERS)
    if isinstance(name, str) or (callable(name) and getattr(name, "__module__", "").startswith("optax")):
        key = name if isinstance(name, str) else getattr(name, "__name__", repr(name))
        if key not in OPTIMIZERS:
            why = (f" ({_NEEDS_VALUE[key]} needs the loss value at each update, which the trainer's "
                   "update(grads, state, params) does not give)") if key in _NEEDS_VALUE else ""
            raise invalid("name", f"name an optax optimiser the trainer runs, one of {listed}{why}", repr(key))
        return getattr(optax, key)
    if isinstance(name, (bytes, numbers.Number)) or name is None:
        raise wrong_kind("name", f"be the name of an optax optimiser ({listed}) or its factory",
                         f"{type(name).__name__} {name!r}")
    return check_callable("name", name, "an optax optimiser factory or its name")


def _check_hyperparameter(factory: Callable, k: str, v: Any, declared) -> None:
    """One hyperparameter of ``factory``: its kind by the factory's default (a bool option takes only a bool;
    a numeric one no string), its range by its name (decay rates in [0, 1), eps and weight decay >= 0)."""
    default = declared.default if declared is not None else inspect.Parameter.empty
    if isinstance(default, bool) and not isinstance(v, (bool, np.bool_)):
        raise wrong_kind(k, "be True or False (a bool option of the optimiser)", f"{type(v).__name__} {v!r}")
    if k in _UNIT + _NONNEGATIVE and v is None and default is None:
        return  # optax's "off" (sgd's momentum=None)
    if (k in _UNIT + _NONNEGATIVE or isinstance(default, numbers.Real)) and not isinstance(default, bool):
        if isinstance(v, (str, bytes, bool, np.bool_)) or v is None or callable(v):
            raise wrong_kind(k, "be a number (a numeric hyperparameter of the optimiser)", f"{type(v).__name__} {v!r}")
    if k in _UNIT:
        check_positive(k, v, strict=False)
        if not float(v) < 1:
            raise invalid(k, "be in [0, 1) (a decay rate: at 1 or above the run grows without bound)", repr(v))
    elif k in _NONNEGATIVE:
        check_positive(k, v, strict=False)


def optimizer(name: str | Callable, /, learning_rate: float, **hyperparams) -> Optimizer:
    r"""An optax optimiser whose learning rate (and other numeric hyperparameters) are traced.

    ``optimizer("sgd", 0.1)`` is ``optax.sgd(0.1)``, ``optimizer("sgd", 0.1, momentum=0.9)`` heavy-ball
    momentum, ``optimizer("adam", 1e-3)`` Adam; any optax optimiser whose update needs only the gradients
    (``sgd``, ``adam``, ``adamw``, ``rmsprop``, ``lion``, ...; not ``lbfgs``), or a factory of one's own, may be
    given instead of its name (``optax.adamw``). Numbers become traced arrays; booleans, strings and ``None``
    stay static options.

    Checked before anything is built: ``learning_rate`` a finite number > 0; ``momentum``, ``b1``, ``b2``,
    ``b3``, ``decay`` in [0, 1); ``eps``, ``eps_root``, ``weight_decay`` >= 0; a bool option (``nesterov``)
    a bool; a hyperparameter the factory does not take is named.
    """
    factory = _factory(name)
    if callable(learning_rate) and not isinstance(learning_rate, (numbers.Number, jax.Array, np.ndarray)):
        raise wrong_kind("learning_rate", "be a number > 0 (for a schedule, give the optax transformation itself: "
                                          "train(loss, params0, optax.sgd(schedule), ...))",
                         getattr(learning_rate, "__qualname__", type(learning_rate).__name__))
    check_positive("learning_rate", learning_rate)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = None
    if params is not None and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(hyperparams) - set(params))
        if unknown:
            label = getattr(factory, "__name__", repr(factory))
            raise wrong_kind(unknown[0], f"be a hyperparameter of {label}, one of {', '.join(params)}",
                             f"{unknown[0]}={hyperparams[unknown[0]]!r}")
    for k, v in hyperparams.items():
        _check_hyperparameter(factory, k, v, None if params is None else params.get(k))
    numeric, options = {}, []
    for k, v in {"learning_rate": learning_rate, **hyperparams}.items():
        if isinstance(v, (bool, np.bool_)) or v is None or isinstance(v, str) or callable(v):
            options.append((k, v))
        elif isinstance(v, numbers.Real) or (hasattr(v, "dtype") and np.shape(v) == ()):
            if not np.isfinite(float(v)):
                raise invalid(k, "be a finite number", repr(v))
            numeric[k] = jnp.asarray(float(v), dtype=jnp.result_type(float))
        else:
            raise wrong_kind(k, "be a number, a bool, a string or None", type(v).__name__)
    opt = Optimizer(factory, numeric, tuple(options))
    try:
        jax.eval_shape(lambda o: o.build().init(jnp.zeros(2)), opt)
    except TypeError as err:
        raise wrong_kind("hyperparams", f"be hyperparameters that optax.{getattr(factory, '__name__', factory)} "
                                        "accepts", f"{sorted(numeric) + [k for k, _ in options]}, refused with: {err}"
                         ) from err
    return opt


class _Fixed(eqx.Module):
    tx: Any = eqx.field(static=True)

    def build(self) -> optax.GradientTransformation:
        return self.tx

    @property
    def learning_rate(self) -> float | None:
        return None

    def describe(self) -> str:
        return ("this `optimizer` (an optax transformation: the trainer cannot read its learning rate or momentum; "
                "a negative learning rate or a momentum >= 1 climbs)")


def as_optimizer(name: str, opt) -> Optimizer | _Fixed:
    """An :class:`Optimizer`, or a plain optax transformation wrapped as a (static) value."""
    if isinstance(opt, (Optimizer, _Fixed)):
        return opt
    check_optimizer(name, opt)
    return _Fixed(opt)


# ------------------------------------------------------------------ how a step's batch is chosen
class FullBatch(eqx.Module):
    """Every step sees all of ``data``."""

    def __call__(self, data, inp, args):
        return data


class IndexBatch(eqx.Module):
    """Step ``k`` sees the rows ``batches[k]`` of every leaf of ``data``."""

    def __call__(self, data, idx, args):
        return jax.tree_util.tree_map(lambda a: a[idx], data)


class Sampled(eqx.Module):
    """Step ``k`` sees ``sample(key_k, args)``: fresh samples each step (online SGD)."""

    sample: Callable = eqx.field(static=True)

    def __call__(self, data, key, args):
        return self.sample(key, args)


class Minibatches(eqx.Module):
    """A batch source for :func:`train`: step ``k`` sees the rows ``indices[k]`` of every leaf of ``data``
    (``indices``: an int array ``(num_steps, b)``, or ``(num_steps,)`` for one row without a batch axis)."""

    data: Any
    indices: Any


class Stream(eqx.Module):
    """A batch source for :func:`train`: step ``k`` sees ``sample(key_k, args)``, fresh samples (online SGD), with
    ``key`` split into one key per step."""

    sample: Callable = eqx.field(static=True)
    key: Any


class Runs(eqx.Module):
    """How :func:`train` runs: records every ``record_every`` steps (and after the last), the arguments named in
    ``vmap`` (among ``"params"``, ``"data"``, ``"args"``) carry a leading lane axis vmapped in one program, and a
    run whose loss becomes non-finite or climbs is reported by ``on_divergence``: ``"warn"``, ``"raise"``
    (``RuntimeError``) or ``"ignore"``."""

    record_every: int = eqx.field(static=True, default=1)
    vmap: Any = eqx.field(static=True, default=())
    on_divergence: str = eqx.field(static=True, default="warn")

    def __check_init__(self):
        check_option("on_divergence", self.on_divergence, ("warn", "raise", "ignore"))
        v = self.vmap
        names = v is None or isinstance(v, str) or (isinstance(v, (tuple, list)) and all(isinstance(n, str) for n in v))
        if not names:
            raise wrong_kind("vmap", f"be a tuple of names among {LANES} (or one name; () for one run)",
                             f"{type(v).__name__} {v!r:.60}")
        for name in (() if v is None else (v,) if isinstance(v, str) else v):
            check_option("vmap", name, LANES)

    @property
    def lanes(self) -> tuple:
        """The vmapped argument names as a tuple."""
        v = self.vmap
        return () if v is None else (v,) if isinstance(v, str) else tuple(v)


#: the arguments of :func:`train` that may carry a lane axis (``Runs(vmap=...)``)
LANES = ("params", "data", "args")


# ------------------------------------------------------------------ the one loop
def _float_counters(state):
    """The optimiser state with its integer scalar counters (Adam's ``count``) cast to float (strict dtype
    promotion; bit-identical numbers)."""
    to = jnp.result_type(float)
    return jax.tree_util.tree_map(
        lambda a: a.astype(to) if isinstance(a, jax.Array) and a.ndim == 0 and jnp.issubdtype(a.dtype, jnp.integer)
        else a, state)


def _scan(loss, record, select, opt, params0, data, batches, key, args, *, num_steps, every):
    tx = opt.build()
    n_blocks = num_steps // every
    if isinstance(select, Sampled):
        stream = jax.random.split(key, num_steps)
    elif isinstance(select, IndexBatch):
        stream = batches
    else:
        stream = None
    if stream is not None:
        stream = jax.tree_util.tree_map(lambda a: jnp.reshape(a, (n_blocks, every) + a.shape[1:]), stream)

    def step(carry, inp):
        params, state = carry
        batch = select(data, inp, args)
        out = eqx.filter_eval_shape(loss, params, batch, args)  # static: raises while tracing, before any run
        if not hasattr(out, "shape") or out.shape != () or not jnp.issubdtype(out.dtype, jnp.floating):
            raise wrong_kind("loss", f"return a real scalar (the loss of one batch){_named(loss)}",
                             f"{getattr(out, 'dtype', type(out).__name__)} of shape {getattr(out, 'shape', '?')}")
        value, grads = jax.value_and_grad(loss)(params, batch, args)
        updates, state = tx.update(grads, state, params)
        slope = sum(jnp.vdot(u, g) for u, g in zip(jax.tree_util.tree_leaves(updates),
                                                    jax.tree_util.tree_leaves(grads)))  # < 0: downhill
        return (optax.apply_updates(params, updates), state), (value, slope)

    def block(carry, inp):
        rec = None if record is None else record(carry[0], args)
        carry, (values, slopes) = jax.lax.scan(step, carry, inp, length=every)
        return carry, (rec, values, slopes[0])

    (params, _), (recs, values, slopes) = jax.lax.scan(block, (params0, _float_counters(tx.init(params0))),
                                                       stream, length=n_blocks)
    if record is not None:
        last = record(params, args)
        recs = jax.tree_util.tree_map(lambda r, l: jnp.concatenate([r, l[None]]), recs, last)
    return params, recs, jnp.reshape(values, (-1,)), slopes[0]


@eqx.filter_jit
def _run(loss, record, select, opt, params0, data, batches, key, args, num_steps, every, axes):
    def one(params0, data, batches, key, args):
        return _scan(loss, record, select, opt, params0, data, batches, key, args,
                     num_steps=num_steps, every=every)

    if not axes:
        return one(params0, data, batches, key, args)
    in_axes = tuple(0 if name in axes else None for name in VMAPPABLE)
    return jax.vmap(one, in_axes=in_axes)(params0, data, batches, key, args)


# ------------------------------------------------------------------ the public function
class Training(NamedTuple):
    """The result of :func:`train`. With ``vmap``, arrays carry the leading run axis ``S``."""

    steps: np.ndarray  #: ``(T,)`` recorded steps 0, every, ..., num_steps
    params: Any  #: final parameters
    record: Any  #: what ``record`` returned, each leaf ``(*S, T, ...)`` (``None`` without ``record``)
    batch_loss: np.ndarray  #: ``(*S, num_steps)`` loss on each step's batch, before the step
    diverged: np.ndarray  #: ``(*S,)`` bool: the loss became non-finite
    first_nonfinite: np.ndarray  #: ``(*S,)`` first step with a non-finite loss (-1: none)
    climbed: np.ndarray | None = None  #: ``(*S,)`` bool: the loss rose 10x over the run, or the first update went uphill


def _traced_floats(tree):
    """Python floats in ``args`` become arrays (else ``filter_jit`` would make them static)."""
    return jax.tree_util.tree_map(
        lambda a: jnp.asarray(a) if isinstance(a, float) else a, tree)


#: a run "climbed" when the median batch loss of its last tenth of steps is this many times that of its first
#: tenth (or the first update points uphill, ``<update, gradient> > 0``: a negative learning rate)
GROWTH = 10.0


def _named(fn) -> str:
    """`` (the user's function `f`)`` for a :class:`~nqf.training.BatchLoss`/``Record`` wrapping ``f``."""
    inner = getattr(fn, "fn", None)
    label = getattr(inner, "__qualname__", None) if inner is not None else None
    return f" ({type(fn).__name__} of your function `{label}`)" if label else ""


def _check_arity(name: str, fn, n: int, spelled: str, wrap: str) -> None:
    """``fn`` can be called with ``n`` positional arguments (when Python can tell), else a ``TypeError`` that
    says the signature the trainer calls and how to wrap a function of fewer arguments."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*range(n))
    except TypeError:
        raise wrong_kind(name, f"take {n} positional arguments {spelled}{wrap}",
                         f"{getattr(fn, '__qualname__', type(fn).__name__)}{sig}") from None


def _check_params(name: str, params) -> None:
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    if not leaves:
        raise invalid(name, "contain at least one array", "an empty pytree")
    for path, leaf in leaves:
        where = jax.tree_util.keystr(path) or "the root"
        if not (isinstance(leaf, (jax.Array, np.ndarray, numbers.Number)) and not isinstance(leaf, (bool, np.bool_))):
            raise wrong_kind(name, "have floating-point array leaves (the trainer differentiates every leaf; pass "
                                   "other values through `args`)", f"a leaf of type {type(leaf).__name__} "
                                                                   f"{leaf!r:.60} at {where}")
        dtype = leaf.dtype if hasattr(leaf, "dtype") else jnp.result_type(leaf)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise wrong_kind(name, "have floating-point leaves (the trainer differentiates them; cast, e.g. "
                                   "W.astype(float))", f"a leaf of dtype {dtype} at {where}")
        check_finite(name, leaf)


def _check_rows(data, batches, vmapped: bool) -> None:
    """``batches`` index the rows of every leaf of ``data``: the leaves share their number of rows (a shorter
    leaf would be indexed past its end, which JAX clamps silently), and every index is one of them."""
    axis = 1 if vmapped else 0
    sizes = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(data)[0]:
        shape = np.shape(leaf)
        where = jax.tree_util.keystr(path) or "the root"
        if len(shape) <= axis:
            raise invalid("data", f"have a row axis (axis {axis}) on every leaf, as `batches` indexes rows",
                          f"a leaf of shape {shape} at {where}")
        sizes.setdefault(shape[axis], where)
    if len(sizes) > 1:
        raise invalid("data", "have leaves with the same number of rows (`batches` indexes the rows of every leaf; "
                              "JAX would clamp an index past the end of a shorter leaf)",
                      ", ".join(f"{n} rows at {w}" for n, w in sorted(sizes.items())))
    if sizes:
        m = next(iter(sizes))
        host = np.asarray(batches)
        lo, hi = int(host.min()), int(host.max())
        if lo < 0 or hi >= m:
            raise invalid("batches", f"hold indices in [0, {m}) (the rows of `data`)", f"range [{lo}, {hi}]")


def _climbed(values: np.ndarray, slopes: np.ndarray) -> np.ndarray:
    """Per run: the first update went uphill, or the median loss of the last tenth of the steps is
    ``GROWTH`` times that of the first tenth (non-finite runs are flagged as diverged instead)."""
    n = values.shape[-1]
    k = max(1, n // 10)
    with np.errstate(invalid="ignore", over="ignore"):
        first, last = np.median(values[..., :k], axis=-1), np.median(values[..., -k:], axis=-1)
        grew = (n > 1) & np.isfinite(first) & np.isfinite(last) & (last > GROWTH * np.abs(first)) & (last > first)
    return np.asarray(grew | (np.asarray(slopes) > 0))


def _leading(name: str, tree) -> int:
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in jax.tree_util.tree_leaves(tree)}
    if len(sizes) != 1 or None in sizes:
        raise invalid(name, "carry the same leading run axis (vmap) on every leaf",
                      f"leading sizes {sorted(map(str, sizes))}")
    return sizes.pop()


def _source(data, num_steps: int, lanes: tuple):
    """``(select, data, batches, key, internal vmap names)`` of a batch source (:class:`Minibatches`, :class:`Stream`
    or a pytree: full batch)."""
    axes = tuple(n for n in lanes if n != "data")
    if isinstance(data, Stream):
        check_callable("sample", data.sample, "a callable sample(key, args)")
        _check_arity("sample", data.sample, 2, "sample(key, args)", "")
        if data.key is None:
            raise invalid("key", "be given with `sample` (one PRNG key, split into one per step)", "None")
        if "data" not in lanes:
            check_key("key", data.key)
        return Sampled(data.sample), None, None, data.key, axes + (("key",) if "data" in lanes else ())
    if not isinstance(data, Minibatches):
        return FullBatch(), data, None, None, axes + (("data",) if "data" in lanes else ())
    # checked on the host (NumPy): no eager programs
    batches = data.indices if isinstance(data.indices, jax.Array) else np.asarray(data.indices)
    lead = 1 if "data" in lanes else 0
    if batches.ndim not in (1 + lead, 2 + lead) or batches.shape[lead] != num_steps or \
            not jnp.issubdtype(batches.dtype, jnp.integer):
        raise invalid("batches", f"be an int array (num_steps,) or (num_steps, b) = ({num_steps}, *) of row "
                                 f"indices{' with a leading run axis' if lead else ''}",
                      f"{batches.dtype} array of shape {batches.shape}")
    if data.data is None:
        raise invalid("data", "be given with `batches` (they index the rows of `data`)", "None")
    _check_rows(data.data, batches, "data" in lanes)
    return IndexBatch(), data.data, batches, None, axes + (("data", "batches") if "data" in lanes else ())


def _distinct(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with the fewest significant digits (3 or more) that tell them apart."""
    for digits in range(3, 17):
        sa, sb = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if sa != sb:
            return sa, sb
    return sa, sb


def _report(values, slopes, opt, on_divergence):
    """``(diverged, first_nonfinite, climbed)`` per run, warned about (or raised) by ``on_divergence``."""
    bad = ~np.isfinite(values)
    diverged = bad.any(axis=-1)
    first = np.where(diverged, np.argmax(bad, axis=-1), -1)
    climbed = _climbed(values, slopes) & ~diverged
    if (diverged.any() or climbed.any()) and on_divergence != "ignore":
        where = f"at {opt.describe()}"
        if diverged.any():
            body = (f"the loss is non-finite from step {int(first[diverged].min())} "
                    f"({int(diverged.sum())} of {diverged.size} runs) {where}; lower the learning rate or the "
                    f"initial scale.")
        else:
            run = np.unravel_index(int(np.argmax(climbed)), climbed.shape) if climbed.ndim else ()
            v = values[run]
            k = max(1, v.size // 10)
            uphill = bool(np.asarray(slopes)[run] > 0)
            runs_ = f"{int(climbed.sum())} of {climbed.size} runs"
            if uphill:  # the first update's direction, whatever the medians did afterwards
                body = (f"the first update points up the gradient (the loss's slope along it is "
                        f"{float(np.asarray(slopes)[run]):+.3g}; {runs_}) {where}: a negative learning rate?")
            else:
                a, b = _distinct(float(np.median(v[:k])), float(np.median(v[-k:])))
                body = (f"the loss rose from {a} to {b} (median of the first and the last tenth of the steps; "
                        f"{runs_}) {where}; lower the learning rate (a momentum, b1 or b2 must be < 1).")
        if on_divergence == "raise":
            raise failed("training", f"it diverged: {body}")
        warnings.warn(f"training diverged: {body}", RuntimeWarning, stacklevel=3)
    return diverged, first, climbed


def train(loss: Callable, params0: Any, optimizer: Any, *, num_steps: int, data: Any = None, args: Any = None,
          record: Callable | None = None, runs: Runs = Runs()) -> Training:
    r"""Minimise ``loss`` over ``params0`` with one optax optimiser; the whole run is one jitted scan.

    Args:
        loss: ``loss(params, batch, args) -> scalar``, a module-level function or an ``equinox.Module``
            (static: the compiled run is cached on it).
        params0: initial parameters, any pytree of float arrays.
        optimizer: an :class:`Optimizer` (:func:`optimizer`; traced learning rate) or an optax
            ``GradientTransformation``.
        num_steps: number of optimiser steps, an int in [1, 2**27] (over all vmapped runs: one loss per step
            is kept, 2**27 of them are 1 GiB).
        data: where a step's batch comes from: any pytree (every step sees all of it), :class:`Minibatches`
            (rows of it per step) or :class:`Stream` (fresh samples per step).
        args: arrays both ``loss`` and ``record`` see (probe sets, teacher weights, frozen leaves).
        record: ``record(params, args) -> pytree``, recorded every ``runs.record_every`` steps and after the
            last (``num_steps // record_every + 1`` records).
        runs: :class:`Runs`: the recording interval, the vmapped lanes and what a diverging run does.

    Returns:
        a :class:`Training`.
    """
    check_callable("loss", loss, "a callable loss(params, batch, args)")
    _check_arity("loss", loss, 3, "loss(params, batch, args)",
                 "; wrap a loss fn(params, batch) as nqf.training.BatchLoss(fn)")
    if record is not None:
        check_callable("record", record, "a callable record(params, args)")
        _check_arity("record", record, 2, "record(params, args)",
                     "; wrap a function fn(params) as nqf.training.Record(fn)")
    opt = as_optimizer("optimizer", optimizer)
    num_steps = check_int("num_steps", num_steps, maximum=MAX_STEPS)
    every = check_record_every(runs.record_every, num_steps)
    lanes = runs.lanes
    select, data, batches, key, vmap = _source(data, num_steps, lanes)
    _check_params("params0", params0)
    args = _traced_floats(args)
    sizes = {_leading(name, value) for name, value in
             (("params0", params0), ("data", data), ("batches", batches), ("key", key), ("args", args))
             if name.rstrip("0") in vmap}
    if len(sizes) > 1:
        raise invalid("vmap", f"name arguments that share one leading run axis ({lanes})", f"sizes {sorted(sizes)}")
    n_lanes = sizes.pop() if sizes else 1
    if num_steps * n_lanes > MAX_STEPS:
        raise invalid("num_steps", f"be at most {MAX_STEPS // n_lanes} for {n_lanes} vmapped runs (the runs keep one "
                                   f"loss per step: {MAX_STEPS} in all, 1 GiB)", repr(num_steps))
    try:
        params, recs, values, slopes = _run(loss, record, select, opt, params0, data, batches, key, args, num_steps,
                                            every, vmap)
    except TypeError as err:  # a record that returns a string, None, an object: JAX's scan message points at us
        found = re.search(r"returned a value of type (.*?) at output component \[1\](\S*),", str(err))
        if record is None or found is None:
            raise
        where = found.group(2).removeprefix("[0]")  # [1][0]: the records of the scan's step, then the user's tree
        where = f" at {where}" if where else ""
        raise wrong_kind("record", "return numbers or arrays (any pytree of them), one record per recorded step",
                         f"a {found.group(1).strip('<>').replace('class ', '')} value{where}") from None
    values, slopes = np.asarray(values), np.asarray(slopes)
    diverged, first, climbed = _report(values, slopes, opt, runs.on_divergence)
    recs = None if record is None else jax.tree_util.tree_map(np.asarray, recs)
    return Training(np.arange(0, num_steps + 1, every), params, recs, values, diverged, first, climbed)


# ------------------------------------------------------------------ a user's functions as the trainer's values
class BatchLoss(eqx.Module):
    """A loss ``fn(params, batch)`` as the trainer's ``loss(params, batch, args)``. ``fn`` is static: pass the same
    function object to reuse the compiled run."""

    fn: Callable = eqx.field(static=True)

    def __call__(self, params, batch, args):
        return self.fn(params, batch)


class Record(eqx.Module):
    """A function ``fn(params)`` as the trainer's ``record(params, args)`` (``fn`` static)."""

    fn: Callable = eqx.field(static=True)

    def __call__(self, params, args):
        return self.fn(params)


class NQFLoss(eqx.Module):
    r"""The NQF's loss in its weights, $\mathcal L(WW^\top)$ (Eq. 26, :func:`nqf.model.mse_loss`), on the batch, an
    :class:`~nqf.model.NQFData` (``train(NQFLoss(), W0, opt, data=nqf_data, ...)``)."""

    def __call__(self, W, batch, args):
        return mse_loss(W @ W.T, batch)
