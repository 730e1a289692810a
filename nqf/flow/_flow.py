r"""The one ODE entry point of :mod:`nqf` (:func:`integrate`, the only ``diffrax.diffeqsolve``) and the
gradient flow on $M$ (Eq. 28), compiled once per shape: vector fields are module-level functions, the data travel
through ``args``, and only the field, solver and step budget are static. :func:`gradient_flow` also stores its
program as a ``jax.export`` serialization (:mod:`nqf.flow._export`); both caches need a program without host
callbacks (equinox's ``EQX_ON_ERROR=nan`` or ``off``). Under ZGZ, $H$ (Eq. 27) is affine in $M$: the flow runs on
the packed upper triangle $u(M)$ (:func:`pack`), from the samples or from the sufficient statistics (:func:`_prepare`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._checks import (is_concrete, check_finite, check_int, check_ndim, check_positive, check_psd, require_x64, invalid,
    wrong_kind, failed)
from .._types import ArrayLike
from ..model._data import NQFData
from ..model._model import check_order_parameter
from . import _export
from ._sharding import check_mesh, sharded_vmap

SOLVERS = {"dopri8": diffrax.Dopri8, "tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5}
TIMES = ("auto", "linear", "log")


class ODEOptions(eqx.Module):
    r"""How an ODE of :mod:`nqf` is solved, diffrax's way (one frozen object, as ``PIDController``):
    PID step control at ``rtol``, ``atol`` (traced: a new value compiles nothing; ``rtol`` in (0, 1), ``atol``
    >= 0), an explicit Runge-Kutta ``solver`` (``"auto"`` = ``"tsit5"``, ``"dopri8"`` (order 8, like scipy's
    DOP853), ``"tsit5"``, ``"dopri5"``), the clock ``time`` (``"linear"``; ``"log"``: $s = \ln(1 + (t - t_0)/t_s)$,
    $t_s$ the first save interval, for long plateaus; ``"auto"``: log when the save times span more than three
    decades), the step budget ``max_steps`` (a solve that needs more raises), diffrax's progress bar
    (``progress``), the largest step ``dtmax`` and the ``norm`` of the scaled error (diffrax's RMS norm by
    default). Checked when a flow is called."""

    rtol: float | Float[Array, ""] = 1e-10  # a float, or traced inside the flows' programs
    atol: float | Float[Array, ""] = 1e-14
    solver: str = eqx.field(static=True, default="auto")
    time: str = eqx.field(static=True, default="linear")
    max_steps: int = eqx.field(static=True, default=1_000_000)
    progress: bool = eqx.field(static=True, default=False)
    dtmax: float | None = eqx.field(static=True, default=None)
    norm: Callable[[Any], Any] | None = eqx.field(static=True, default=None)


class ODESolution(NamedTuple):
    """What every flow of :mod:`nqf` returns: the state at the save times and the solver's effort.

    Batched solves carry a leading batch axis on every field (``num_steps`` of shape ``(n,)``)."""

    ts: Float[Array, " T"]  # save times
    ys: PyTree  # the state at each save time, leading axis T (M(t) for the gradient flow)
    num_steps: Int[Array, ""]  # steps taken (accepted + rejected)
    num_accepted: Int[Array, ""]  # steps the solver accepted
    num_rejected: Int[Array, ""]  # steps the solver rejected (and retried smaller)
    successful: Bool[Array, ""]  # diffrax's result was `successful` (the public functions raise otherwise)


# ------------------------------------------------------------------ the entry point
def integrate(
    vector_field: Callable[[Any, Any, Any], Any],
    y0: PyTree,
    ts: Float[ArrayLike, " T"],
    args: PyTree,
    options: ODEOptions,
    *,
    dense: bool = False,
    span: tuple[Any, Any] | None = None,
) -> diffrax.Solution:
    r"""The single ``diffrax.diffeqsolve`` call of :mod:`nqf` (traceable; callers jit it and check ``options``).

    Integrates ``dy/dt = vector_field(t, y, args)`` from ``ts[0]`` to ``ts[-1]`` (or over ``span = (t0, t1)``,
    linear time only) under ``options`` (a resolved :class:`ODEOptions`: no ``"auto"``), saving at ``ts``
    (non-decreasing). ``time="log"`` integrates in $s = \ln(1 + (t - t_0)/t_s)$, $t_s$ = ``ts[1] - ts[0]``
    (then ``sol.ts`` are in $s$; ``dense=True`` needs linear time). Does not raise inside ``jit``
    (``throw=False``): check ``sol.result``, as :func:`raise_if_failed` does.
    """
    ts, time = jnp.asarray(ts), options.time
    if time == "log":
        if span is not None or dense:
            raise invalid("time", "be 'linear' with `span` or `dense=True` (they are in linear time)", repr(time))
        t0, ts_scale = ts[0], ts[1] - ts[0]
        term = diffrax.ODETerm(functools.partial(_log_time_field, vector_field))
        args = (args, t0, ts_scale)
        ss = jnp.log1p((ts - t0) / ts_scale)
        s0, s1 = jnp.zeros_like(t0), ss[-1]
    elif time == "linear":
        term = diffrax.ODETerm(vector_field)
        ss = ts
        s0, s1 = (ts[0], ts[-1]) if span is None else span
    else:
        raise invalid("time", "be 'linear' or 'log'", f'{time!r}')
    if options.solver not in SOLVERS:
        raise invalid("solver", f"be one of {sorted(SOLVERS)} here (resolve 'auto' first)", repr(options.solver))
    extra = ({} if options.norm is None else {"norm": options.norm}) | (
        {} if options.dtmax is None else {"dtmax": options.dtmax})
    controller = diffrax.PIDController(rtol=options.rtol, atol=options.atol, **extra)
    return diffrax.diffeqsolve(
        term, SOLVERS[options.solver](), t0=s0, t1=s1, dt0=None, y0=y0, args=args,
        saveat=diffrax.SaveAt(ts=ss, dense=dense), stepsize_controller=controller,
        max_steps=options.max_steps, adjoint=diffrax.ForwardMode(),
        progress_meter=diffrax.TqdmProgressMeter() if options.progress else diffrax.NoProgressMeter(), throw=False,
    )


def _log_time_field(field, s, y, args):
    """$dy/ds = (t_s + t - t_0) f(t, y)$ with $t = t_0 + t_s(e^s - 1)$ (log-time substitution)."""
    inner, t0, ts_scale = args
    g = ts_scale * jnp.exp(s)
    return jax.tree.map(lambda v: g * v, field(t0 + g - ts_scale, y, inner))


def succeeded(sol: diffrax.Solution) -> Bool[Array, ""]:
    """Whether a solve of :func:`integrate` succeeded (traceable; ``throw=False`` leaves it to the caller)."""
    return sol.result == diffrax.RESULTS.successful


def _solution(sol: diffrax.Solution, ts) -> ODESolution:
    st = sol.stats
    return ODESolution(ts, sol.ys, st["num_steps"], st["num_accepted_steps"], st["num_rejected_steps"],
                       succeeded(sol))


def raise_if_failed(sol: ODESolution, what: str, *, max_steps: int | None = None) -> ODESolution:
    """Raise a RuntimeError naming ``what`` unless every solve in ``sol`` succeeded; return ``sol``. With
    ``max_steps`` the message says which way out fits: a solve that used its whole step budget needs more steps
    (or log time); one that stopped before it had its step size collapse, as on a flow that blows up."""
    ok = np.asarray(sol.successful)
    if not ok.all():
        steps = np.asarray(sol.num_steps)[~ok] if np.ndim(ok) else np.asarray(sol.num_steps)
        head = (f"the ODE solver failed in {int(np.size(ok) - ok.sum())} of {np.size(ok)} solve(s) "
                f"(steps taken: {np.ravel(steps)[:5].tolist()})")
        if max_steps is None:
            advice = "raise `max_steps`, loosen `rtol`/`atol`, or check the data for blow-up."
        elif np.all(np.ravel(steps) >= max_steps):
            advice = (f"it used its whole budget, `max_steps` = {max_steps}: either the solution blows up before the "
                      "last save time (no budget suffices: check `M0` and the data, or end `ts` earlier), or the span "
                      "needs more steps (raise `max_steps`, or solve in log time, time='log', when the save times span "
                      "decades); a looser `rtol` does not help a blow-up.")
        else:
            advice = ("it stopped before its step budget, its step size collapsed: the solution blows up (or stiffens) "
                      "before the last save time; check `M0` and the data, or end `ts` earlier.")
        raise failed(what, f"{head}; {advice}")
    return sol


def _real_kind(name: str, x, *, integers: bool) -> None:
    """``x`` is an array of real numbers: ``TypeError`` naming ``name`` for strings, objects, booleans and
    complex numbers (NumPy would drop an imaginary part with only a ComplexWarning), and for integers unless
    ``integers`` (save times may be whole numbers; an order parameter is a float matrix)."""
    if isinstance(x, (str, bytes)) or x is None:
        raise wrong_kind(name, "be an array of real numbers", f"{type(x).__name__} {x!r:.40}")
    try:
        dtype = np.dtype(x.dtype) if isinstance(x, (jax.Array, np.ndarray, np.generic)) else np.asarray(x).dtype
    except (TypeError, ValueError) as err:
        raise wrong_kind(name, "be an array of real numbers", f"{type(x).__name__} ({err})") from None
    ok = "fiu" if integers else "f"
    if dtype.kind not in ok:
        what = {"c": "complex", "b": "boolean", "i": "integer", "u": "integer"}.get(dtype.kind, "non-numeric")
        hint = " (cast it: M0.astype(float))" if dtype.kind in "iub" and not integers else ""
        raise wrong_kind(name, f"be an array of real {'numbers' if integers else 'floating-point numbers'}{hint}",
                         f"{'an' if what[0] in 'aeiou' else 'a'} {what} array of dtype {dtype}")


def _check_ts(ts) -> np.ndarray:
    _real_kind("ts", ts, integers=True)
    ts_np = np.asarray(ts, dtype=float)
    check_ndim("ts", ts_np, 1, "save times")
    check_finite("ts", ts_np)
    if ts_np.shape[0] < 2 or not np.all(np.diff(ts_np) > 0):
        raise invalid("ts", 'be strictly increasing with >= 2 entries', f'{ts_np[:5]}..')
    return ts_np


def choose_solver(solver: str, rtol: float) -> str:
    """The solver that ``solver="auto"`` means: ``"tsit5"`` at every ``rtol`` (at equal error Dopri8 costs as
    much); an explicit name is returned as it is (after checking it)."""
    if not isinstance(solver, str) or (solver != "auto" and solver not in SOLVERS):
        raise invalid("solver", f"be 'auto' or one of {sorted(SOLVERS)}", f'{solver!r}')
    return "tsit5" if solver == "auto" else solver


def check_options(options: ODEOptions, ts_np: np.ndarray | None = None) -> ODEOptions:
    """``options`` checked once, at the boundary, and resolved (``"auto"`` solver and clock made explicit,
    ``rtol``/``atol`` Python floats); ``ts_np`` (the save times) resolves ``time="auto"``."""
    if not isinstance(options, ODEOptions):
        raise wrong_kind("options", "be an nqf.flow.ODEOptions (e.g. ODEOptions(rtol=1e-8))", type(options).__name__)
    rtol, atol, time = options.rtol, options.atol, options.time
    check_positive("rtol", rtol)
    if not float(rtol) < 1:  # a relative error of 100% per step controls nothing: the solve can blow up and stall
        raise invalid("rtol", "be a relative tolerance in (0, 1), e.g. 1e-10 (at 1 or above no step is ever "
                              "refused for its error)", repr(rtol))
    check_positive("atol", atol, strict=False)
    if time not in TIMES:
        raise invalid("time", f'be one of {TIMES}', f'{time!r}')
    if time == "auto":
        time = "log" if ts_np is not None and (ts_np[-1] - ts_np[0]) / (ts_np[1] - ts_np[0]) > 1e3 else "linear"
    max_steps = check_int("max_steps", options.max_steps, minimum=1, maximum=2**62)  # int64 step counts
    if not isinstance(options.progress, (bool, np.bool_)):
        raise wrong_kind("progress", 'be True or False', f'{options.progress!r}')
    return ODEOptions(float(rtol), float(atol), choose_solver(options.solver, rtol), time, int(max_steps),
                      bool(options.progress), options.dtmax, options.norm)


@functools.partial(jax.jit, static_argnames=("vector_field", "solver", "time", "max_steps", "progress"))
def _solve_jit(vector_field, y0, ts, args, rtol, atol, *, solver, time, max_steps, progress):
    sol = integrate(vector_field, y0, ts, args, ODEOptions(rtol, atol, solver, time, max_steps, progress))
    return _solution(sol, ts)


def solve_ode(
    vector_field: Callable[[Any, Any, Any], Any],
    y0: PyTree,
    ts: Float[ArrayLike, " T"],
    *,
    args: PyTree = None,
    options: ODEOptions = ODEOptions(),
) -> ODESolution:
    """Integrate ``dy/dt = vector_field(t, y, args)`` and return ``y`` at every ``ts`` (jitted), as ``options``
    (an :class:`ODEOptions`; ``dtmax`` and ``norm`` unused here) say.

    Pass a **module-level** function as ``vector_field`` and the data as ``args``: the compiled
    solver is cached on the function and the shapes, so new data of the same shapes reuse it
    (a fresh ``lambda`` compiles anew on every call). Returns an :class:`ODESolution` (``.ys`` and the step
    counts).
    """
    require_x64("solve_ode")
    ts_np = _check_ts(ts)
    o = check_options(options, ts_np)
    sol = _solve_jit(vector_field, jax.tree.map(jnp.asarray, y0), jnp.asarray(ts_np), args,
                     jnp.asarray(o.rtol), jnp.asarray(o.atol), solver=o.solver, time=o.time,
                     max_steps=o.max_steps, progress=o.progress)
    return raise_if_failed(sol, "solve_ode", max_steps=o.max_steps)


def log_times(t_max: float, n: int, *, t_min: float | None = None) -> np.ndarray:
    """Save times ``[0, t_min, ..., t_max]`` log-spaced over the decades between
    ``t_min`` (default ``t_max * 1e-6``) and ``t_max``; plateaus of length
    $\\ln(1/\\epsilon)$ need many decades of resolution."""
    check_positive("t_max", t_max)
    n = check_int("n", n, minimum=2)  # [0, t_min, ..., t_max]: n = 1 would drop t_max
    t_min = t_max * 1e-6 if t_min is None else t_min
    check_positive("t_min", t_min)
    if t_min >= t_max:
        raise invalid("t_min", 'be < `t_max`', f't_min={t_min!r}, t_max={t_max!r}')
    return np.concatenate([[0.0], np.geomspace(t_min, t_max, n - 1)])


# ------------------------------------------------------------------ the gradient flow, Eq. (28)
@functools.lru_cache(maxsize=None)
def _packing(p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices of the packed upper triangle $u(S)$ in ``S.ravel()``, its weights (1 on the diagonal,
    $\\sqrt2$ off it) and, for each of the $p^2$ entries, its position in $u$ (to unpack)."""
    i, j = np.triu_indices(p)
    w = np.where(i == j, 1.0, np.sqrt(2.0))
    pos = np.zeros((p, p), dtype=np.int32)
    pos[i, j] = np.arange(i.size)
    pos[j, i] = np.arange(i.size)
    return (i * p + j).astype(np.int32), w, pos.ravel()


def _packed_stack(As: Float[Array, "m p p"]) -> Float[Array, "m k"]:
    """$U$, the rows $u(A_\\mu)$ (traceable)."""
    m, p = As.shape[0], As.shape[-1]
    idx, w, _ = _packing(p)
    return As.reshape(m, p * p)[:, idx] * w[None, :]


def _side(k: int) -> int:
    """$p$ from $k = p(p+1)/2$."""
    return int(round((np.sqrt(8 * k + 1) - 1) / 2))


def pack(M: Float[Array, "*b p p"]) -> Float[Array, "*b k"]:
    r"""$u(M)$: the upper triangle of symmetric matrices, off-diagonal entries times $\sqrt2$ (traceable)."""
    p = M.shape[-1]
    idx, w, _ = _packing(p)
    u = M.reshape(*M.shape[:-2], p * p)[..., idx]
    return u * w[(None,) * (u.ndim - 1)]


def unpack(u: Float[Array, "*b k"]) -> Float[Array, "*b p p"]:
    """The symmetric matrices of :func:`pack`'s $u$ (traceable)."""
    p = _side(u.shape[-1])
    _, w, pos = _packing(p)
    return (u / w[(None,) * (u.ndim - 1)])[..., pos].reshape(*u.shape[:-1], p, p)


def _field_from_uH(uH, u):
    """$u(-(HM + MH))$ from $u(H)$ and $u(M)$; $MH = (HM)^\top$ for symmetric $H$, $M$ (one matrix product)."""
    HM = unpack(uH) @ unpack(u)
    return -pack(HM + HM.T)


def _flow_field_samples(t, u, args):
    r"""Eq. (28) on the packed state $u(M)$, from the samples: $u(H) = \frac4mU^\top(Uu(M) - r)$, $U$ the
    ``(m, k)`` rows $u(A_\mu)$ and $r = y - f_0$ (``args = (U, r, 4/m)``). The solver works on the $k$
    entries of $u(M)$, not the $p^2$ of $M$: half the work per stage."""
    U, r, scale = args
    return _field_from_uH(scale * ((U @ u - r) @ U), u)


def _flow_field_statistics(t, u, args):
    r"""Eq. (28) on the packed state, from the sufficient statistics: $u(H) = \frac4m(G\,u(M) - c)$
    (``args = (G, c, 4/m)``)."""
    G, c, scale = args
    return _field_from_uH(scale * (G @ u - c), u)


def _prepare(data: NQFData, statistics: bool):
    """(vector field, args) of Eq. (28) for the data; traceable. The statistics are $G = U^\top U$ ($k\times k$),
    $c = U^\top(y - f_0)$ and $4/m$."""
    U = _packed_stack(data.As)
    scale = jnp.asarray(4.0 / data.As.shape[0], dtype=U.dtype)
    if statistics:
        return _flow_field_statistics, (U.T @ U, U.T @ (data.ys - data.f0), scale)
    return _flow_field_samples, (U, data.ys - data.f0, scale)


# The cost model of `statistics=None`, in multiply-adds: about _EVALS evaluations per solve, 2mk each from the
# samples, k^2 from the statistics after forming G = U^T U (mk^2, _GEMM_SPEEDUP times cheaper per multiply-add);
# shared data are prepared once for all lanes. Fitted to the faster path measured side by side at p = 8 and 32.
_EVALS = 300
_GEMM_SPEEDUP = 3.0


def _use_statistics(statistics: bool | None, m: int, p: int, lanes: int = 1) -> bool:
    """Whether to solve from the sufficient statistics: ``statistics`` itself, or (``None``) the cost model."""
    if statistics is None:
        k = p * (p + 1) // 2
        return m * k * k / _GEMM_SPEEDUP + lanes * _EVALS * k * k < lanes * _EVALS * 2 * m * k
    if not isinstance(statistics, (bool, np.bool_)):
        raise wrong_kind("statistics", 'be True, False or None (automatic: a cost model)', f'{statistics!r}')
    return bool(statistics)


def _check_data(data, what: str = "gradient_flow") -> tuple[int, int]:
    if not isinstance(data, NQFData):
        raise wrong_kind("data", f"be an nqf.NQFData (e.g. nqf.NQFData(As, ys)), or one per initial condition for a "
                         f"batch of them (the signature is {what}(M0, data, ts, ...))", type(data).__name__)
    if not data.zgz:
        raise invalid("data", f"be ZGZ data (no `gs`, no `Bs`): {what} is the flow on M alone (Eqs. 27-28); use the "
                      "discrete update nqf.updates.nqf_sgd on (M, mu) for the general form", "data with `gs` or `Bs`")
    return data.m, data.p


def _lanes_data(data, n: int) -> tuple[NQFData, bool, int, int]:
    """(data, shared, m, p): one dataset for every lane, or a sequence of ``n`` stacked into one pytree."""
    if isinstance(data, NQFData):
        m, p = _check_data(data)
        return data, True, m, p
    if isinstance(data, (str, bytes)) or not isinstance(data, Sequence):
        _check_data(data)  # raises the TypeError
    data = list(data)
    if len(data) != n:
        raise invalid("data", f'be one NQFData or one per initial condition ({n})', f'{len(data)}')
    shapes = {(_check_data(d), (d.As.shape, getattr(d, "num_outputs", 1))) for d in data}
    if len(shapes) != 1:
        raise invalid("data", "hold datasets that share their shapes (and numbers of outputs)",
                      f"{sorted(s[1] for s in shapes)}")
    (m, p), _ = shapes.pop()
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *data), False, m, p


def _check_M0(M0, p: int):
    """``M0`` of shape ``(p, p)`` or ``(n, p, p)``: real floats, finite, symmetric PSD; returned as it is."""
    _real_kind("M0", M0, integers=False)
    shape = np.shape(M0)
    if len(shape) == 2:
        check_order_parameter(M0, p, name="M0")
    elif len(shape) == 3:
        if shape[1:] != (p, p) or shape[0] < 1:
            raise invalid("M0", f'have shape ({p}, {p}) or (n, {p}, {p}) to match the data', f'shape {shape}')
        check_finite("M0", M0)
        check_psd("M0", M0)
    else:
        raise invalid("M0", 'have shape (p, p) or (n, p, p) (a batch of initial conditions)', f'shape {shape}')
    if is_concrete(M0):
        zero = np.all(np.asarray(M0) == 0, axis=(-2, -1))
        if np.any(zero):
            which = "" if zero.ndim == 0 else f" (initial conditions {np.flatnonzero(zero)[:5].tolist()} of {zero.size})"
            warnings.warn(f"`M0` is exactly 0{which}: a fixed point of the flow (Eq. 28: Mdot = -HM - MH = 0), so "
                          "M(t) = 0 for every t. For the small-initialisation dynamics start from a small M0, "
                          "e.g. 1e-3 * I or W0 @ W0.T for a small W0.", RuntimeWarning, stacklevel=3)
    return M0


@functools.partial(jax.jit, static_argnames=("lanes", "statistics", "solver", "time", "max_steps", "progress", "mesh"))
def _flow_jit(M0, data, ts, rtol, atol, *, lanes, statistics, solver, time, max_steps, progress, mesh):
    """One program for every flow: ``lanes`` is None (one M0), "shared" (one dataset) or "per-lane"."""

    def solve(M0, field, args):
        sol = integrate(field, pack(M0), ts, args, ODEOptions(rtol, atol, solver, time, max_steps, progress))
        return _solution(sol, ts)._replace(ts=None, ys=unpack(sol.ys))

    if lanes is None:
        out = solve(M0, *_prepare(data, statistics))
    elif lanes == "shared":  # statistics (or U) once, outside the vmap: one copy for all lanes
        field, args = _prepare(data, statistics)
        out = sharded_vmap(lambda M0, a: solve(M0, field, a), (0, None), mesh)(M0, args)
    else:
        out = sharded_vmap(lambda M0, d: solve(M0, *_prepare(d, statistics)), (0, 0), mesh)(M0, data)
    return out._replace(ts=ts)


def gradient_flow(
    M0: Float[ArrayLike, "*n p p"],
    data: NQFData | Sequence[NQFData],
    ts: Float[ArrayLike, " T"],
    *,
    options: ODEOptions = ODEOptions(),
    statistics: bool | None = None,
    mesh: jax.sharding.Mesh | None = None,
) -> ODESolution:
    r"""Gradient flow of the NQF, $\dot M = -HM - MH$ (Eq. 28), $H$ of Eq. (27), from $M(0)$ = ``M0``.

    Gradient descent with learning rate $\eta$ approximates it at $t = \eta\cdot$step.

    Args:
        M0: initial order parameter $W(0)W(0)^\top$, ``(p, p)``, symmetric PSD; or a batch of them,
            ``(n, p, p)``, solved in one program.
        data: an :class:`~nqf.model.NQFData` with ZGZ (``As``, ``ys``, optional ``f0``), shared by every
            initial condition (it enters the ``jax.vmap`` unbatched: no copy per lane); for a batch,
            also a sequence of ``n`` datasets of equal shapes, one per lane (e.g. data broken by several
            sizes of a perturbation).
        ts: increasing save times, e.g. :func:`log_times`; the solve runs from ``ts[0]``.
        options: an :class:`ODEOptions` (tolerances on the entries of $M$, solver, clock, step budget,
            progress bar; ``dtmax`` and ``norm`` unused here).
        statistics: solve from the sufficient statistics $(G, c)$ (``True``), from the samples
            (``False``), or pick the cheaper (``None``, by a cost model in $m$, $p$ and the batch size).
            Both give the same flow.
        mesh: a ``jax.sharding.Mesh`` (e.g. :func:`nqf.flow.batch_mesh`) over which a batch's lanes
            are split; the numbers are those of the unsharded solve.

    Returns:
        :class:`ODESolution` with ``ys`` = $M(t)$ at each ``ts``, shape ``(T, p, p)`` (``(n, T, p, p)``
        for a batch, with ``num_steps`` of shape ``(n,)``), and the step counts.
    """
    require_x64("gradient_flow")
    check_mesh(mesh)
    ndim = np.ndim(M0)
    if ndim == 3:
        data, shared, m, p = _lanes_data(data, np.shape(M0)[0])
    else:
        m, p = _check_data(data)
        shared = True
        if mesh is not None:
            raise invalid("M0", "have shape (n, p, p) with `mesh` (it splits a batch of initial conditions)", f"shape {np.shape(M0)}")
    M0 = _check_M0(M0, p)
    ts_np = _check_ts(ts)
    o = check_options(options, ts_np)
    n = np.shape(M0)[0] if ndim == 3 else 1
    lanes = None if ndim == 2 else ("shared" if shared else "per-lane")
    # NumPy arrays and Python floats go to the program as they are: jnp.asarray would compile and run a
    # small staging program for each of them on the first call of a process (the avals are the same).
    args = (np.asarray(M0, dtype=float), data, ts_np, o.rtol, o.atol)
    static = dict(lanes=lanes, statistics=_use_statistics(statistics, m, p, n if lanes == "shared" else 1),
                  solver=o.solver, time=o.time, max_steps=o.max_steps, progress=o.progress, mesh=mesh)
    out = None
    if mesh is None and not o.progress:  # a sharded program or a progress bar's host callback: no export
        out = _export.call("gradient_flow", _flow_jit, args, static)
    sol = _flow_jit(*args, **static) if out is None else ODESolution(*out)
    return raise_if_failed(sol, "gradient_flow", max_steps=o.max_steps)


def trajectory_error(M: Float[ArrayLike, "T p p"], M_ref: Float[ArrayLike, "T p p"]) -> float:
    r"""$\max_t\|M(t) - M_\mathrm{ref}(t)\|_F \,/\, \max_t\|M_\mathrm{ref}(t)\|_F$: how far a
    closed form drifts from the numerical flow, relative to the trajectory's size."""
    M, M_ref = np.asarray(M), np.asarray(M_ref)
    if M.shape != M_ref.shape:
        raise invalid("M_ref", "have the shape of `M`", f"{M.shape} and {M_ref.shape}")
    axes = tuple(range(1, M.ndim))
    return float(np.max(np.sqrt(np.sum((M - M_ref) ** 2, axis=axes))) / np.max(np.sqrt(np.sum(M_ref**2, axis=axes))))
