r"""The one ODE entry point of :mod:`nqf` and the gradient flow on $M$ (Eq. 28).

Every continuous-time solve of the package goes through :func:`integrate` (the only call of
``diffrax.diffeqsolve``): :func:`solve_ode` (any vector field), :func:`gradient_flow` and
:func:`gradient_flow_batch` (Eq. 28), :func:`nqf.solutions.lv_flow` (Eq. 32), the singular-limit
sweep and the $\xi$ flow of Eq. (133). Each returns the solver's step counts.

**Compiled once per shape.** Vector fields are module-level functions and the data travel
through ``args``, never through closures; the public functions are ``jax.jit``-ed with the
vector field, solver and step budget as static arguments and everything else (data, initial
condition, save times, tolerances) traced. A second call with new data of the same shapes
compiles nothing (``tests/test_flow.py`` counts compilations).

**Sufficient statistics.** Under ZGZ, $H = \frac4m\sum_\mu(\mathrm{Tr}[MA_\mu] - y_\mu)A_\mu$
(Eq. 27) is affine in $M$. With $u(S)$ the packed upper triangle of a symmetric $S$
($u_{ii} = S_{ii}$, $u_{ij} = \sqrt2S_{ij}$, so $\mathrm{Tr}[SA] = u(S)\cdot u(A)$), the $k\times k$
matrix $G = \sum_\mu u(A_\mu)u(A_\mu)^\top$ and the vector $c = \sum_\mu y_\mu u(A_\mu)$,
$k = p(p+1)/2$, give $u(H) = \frac4m(Gu(M) - c)$: a flow step costs $O(p^4)$ however many
samples there are. They are used when $m > p^2$ (``statistics=None``); the sample path costs
$O(mp^2)$ per step.

**Batches.** :func:`gradient_flow_batch` vmaps over initial conditions with one shared dataset
(its arrays enter the vmap unbatched: one copy, one matrix product per stage for all lanes), or
over one dataset per lane; with a ``jax.sharding`` mesh the lanes are split over its devices
(:mod:`nqf.dynamics._sharding`).

**Log time.** Runs that span decades (plateaus of length $\ln(1/\epsilon)$) can be solved in
$s = \ln(1 + (t - t_0)/t_s)$, $dy/ds = (t_s + t - t_0) f(t, y)$, with $t_s$ the first save
interval: ``time="log"`` (``"auto"`` picks it when the save times span more than three decades).
It pays on long plateaus, not on exponential growth (a logistic switch-on from $\epsilon$ costs the
same number of steps per e-fold in either clock); :func:`nqf.solutions.singular_limit_sweep`
uses the rescaled clock $\tau = t/\ln(1/\epsilon)$ instead.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import diffrax
import equinox._errors as _eqx_errors
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._checks import check_finite
from .._checks import check_int, check_size
from .._checks import check_ndim
from .._checks import check_positive
from .._checks import require_x64
from .._types import ArrayLike
from .._types import Matrix
from ..model._data import NQFData
from ..model._model import check_order_parameter
from ._sharding import check_mesh
from ._sharding import sharded_vmap

SOLVERS = {"dopri8": diffrax.Dopri8, "tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5}
TIMES = ("auto", "linear", "log")


class ODESolution(NamedTuple):
    """What every flow of :mod:`nqf` returns: the state at the save times and the solver's effort.

    Batched solves carry a leading batch axis on every field (``num_steps`` of shape ``(n,)``)."""

    ts: Float[Array, " T"]  # save times
    ys: PyTree  # the state at each save time, leading axis T (M(t) for the gradient flow)
    num_steps: Int[Array, ""]  # steps taken (accepted + rejected)
    num_accepted: Int[Array, ""]
    num_rejected: Int[Array, ""]
    successful: Bool[Array, ""]  # diffrax's result was `successful` (the public functions raise otherwise)


# ------------------------------------------------------------------ the entry point
def integrate(
    vector_field: Callable[[Any, Any, Any], Any],
    y0: PyTree,
    ts: Float[ArrayLike, " T"],
    args: PyTree,
    rtol: Float[ArrayLike, ""],
    atol: Float[ArrayLike, ""],
    *,
    solver: str = "tsit5",
    time: str = "linear",
    max_steps: int = 1_000_000,
    dense: bool = False,
    norm: Callable[[Any], Any] | None = None,
    progress: bool = False,
) -> diffrax.Solution:
    r"""The single ``diffrax.diffeqsolve`` call of :mod:`nqf` (traceable; callers jit it).

    Integrates ``dy/dt = vector_field(t, y, args)`` from ``ts[0]`` to ``ts[-1]`` with an
    explicit Runge-Kutta ``solver`` (``"dopri8"``, ``"tsit5"``, ``"dopri5"``) under PID step
    control (``rtol``, ``atol``; ``norm`` of the scaled error, diffrax's RMS norm by default),
    saving at ``ts``. ``time="log"`` integrates in $s = \ln(1 + (t - t_0)/t_s)$ instead, with
    $t_s$ = ``ts[1] - ts[0]`` (then ``sol.ts`` are in $s$; ``dense=True`` needs linear time).
    Does not raise inside ``jit`` (``throw=False``): check ``sol.result``, as ``raise_if_failed`` does.
    """
    ts = jnp.asarray(ts)
    if time == "log":
        if dense:
            raise ValueError("`dense=True` needs `time='linear'` (the dense solution would be in log time).")
        t0, ts_scale = ts[0], ts[1] - ts[0]
        term = diffrax.ODETerm(functools.partial(_log_time_field, vector_field))
        args = (args, t0, ts_scale)
        ss = jnp.log1p((ts - t0) / ts_scale)
        s0, s1 = jnp.zeros_like(t0), ss[-1]
    elif time == "linear":
        term = diffrax.ODETerm(vector_field)
        ss, s0, s1 = ts, ts[0], ts[-1]
    else:
        raise ValueError(f"`time` must be 'linear' or 'log'; got {time!r}.")
    if solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {sorted(SOLVERS)}; got {solver!r}.")
    controller = diffrax.PIDController(rtol=rtol, atol=atol, **({} if norm is None else {"norm": norm}))
    with _checks_without_host_callbacks():
        return diffrax.diffeqsolve(
            term, SOLVERS[solver](), t0=s0, t1=s1, dt0=None, y0=y0, args=args,
            saveat=diffrax.SaveAt(ts=ss, dense=dense), stepsize_controller=controller,
            max_steps=max_steps, adjoint=diffrax.ForwardMode(),
            progress_meter=diffrax.TqdmProgressMeter() if progress else diffrax.NoProgressMeter(), throw=False,
        )


@contextlib.contextmanager
def _checks_without_host_callbacks():
    """Trace diffrax's runtime checks (``equinox.error_if``) as NaN-poisoning instead of host callbacks.

    A program with a host callback is never written to JAX's persistent compilation cache, so with
    the default (``EQX_ON_ERROR=raise``) every new process would recompile every solver. The checks
    that diffrax makes (increasing save times) are made by our public functions before the call,
    and failures of the solve itself come back in ``sol.result`` (``throw=False``), which the public
    functions turn into a ``RuntimeError``. An explicit ``EQX_ON_ERROR`` in the environment wins.
    """
    if "EQX_ON_ERROR" in os.environ:
        yield
        return
    old = _eqx_errors.EQX_ON_ERROR
    _eqx_errors.EQX_ON_ERROR = "nan"
    try:
        yield
    finally:
        _eqx_errors.EQX_ON_ERROR = old


def _log_time_field(field, s, y, args):
    """$dy/ds = (t_s + t - t_0) f(t, y)$ with $t = t_0 + t_s(e^s - 1)$ (log-time substitution)."""
    inner, t0, ts_scale = args
    g = ts_scale * jnp.exp(s)
    return jax.tree.map(lambda v: g * v, field(t0 + g - ts_scale, y, inner))


def _solution(sol: diffrax.Solution, ts) -> ODESolution:
    st = sol.stats
    return ODESolution(ts, sol.ys, st["num_steps"], st["num_accepted_steps"], st["num_rejected_steps"],
                       sol.result == diffrax.RESULTS.successful)


def raise_if_failed(sol: ODESolution, what: str) -> ODESolution:
    """Raise a RuntimeError naming ``what`` unless every solve in ``sol`` succeeded; return ``sol``."""
    ok = np.asarray(sol.successful)
    if not ok.all():
        steps = np.asarray(sol.num_steps)[~ok] if np.ndim(ok) else np.asarray(sol.num_steps)
        raise RuntimeError(
            f"{what}: the ODE solver failed in {int(np.size(ok) - ok.sum())} of {np.size(ok)} solve(s) "
            f"(steps taken: {np.ravel(steps)[:5].tolist()}); raise `max_steps`, loosen `rtol`/`atol`, "
            "or check the data for blow-up."
        )
    return sol


def _check_ts(ts) -> np.ndarray:
    ts_np = np.asarray(ts, dtype=float)
    check_ndim("ts", ts_np, 1, "save times")
    check_finite("ts", ts_np)
    if ts_np.shape[0] < 2 or not np.all(np.diff(ts_np) > 0):
        raise ValueError(f"`ts` must be strictly increasing with >= 2 entries; got {ts_np[:5]}...")
    return ts_np


def _check_options(rtol, atol, solver, time, ts_np) -> str:
    check_positive("rtol", rtol)
    check_positive("atol", atol, strict=False)
    if solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {sorted(SOLVERS)}; got {solver!r}.")
    if time not in TIMES:
        raise ValueError(f"`time` must be one of {TIMES}; got {time!r}.")
    if time == "auto":
        span = (ts_np[-1] - ts_np[0]) / (ts_np[1] - ts_np[0])
        time = "log" if span > 1e3 else "linear"
    return time


@functools.partial(jax.jit, static_argnames=("vector_field", "solver", "time", "max_steps", "progress"))
def _solve_jit(vector_field, y0, ts, args, rtol, atol, *, solver, time, max_steps, progress):
    sol = integrate(vector_field, y0, ts, args, rtol, atol, solver=solver, time=time,
                    max_steps=max_steps, progress=progress)
    return _solution(sol, ts)


def solve_ode(
    vector_field: Callable[[Any, Any, Any], Any],
    y0: PyTree,
    ts: Float[ArrayLike, " T"],
    *,
    args: PyTree = None,
    rtol: float = 1e-10,
    atol: float = 1e-14,
    solver: str = "tsit5",
    time: str = "linear",
    max_steps: int = 1_000_000,
    progress: bool = False,
) -> ODESolution:
    """Integrate ``dy/dt = vector_field(t, y, args)`` and return ``y`` at every ``ts`` (jitted).

    Pass a **module-level** function as ``vector_field`` and the data as ``args``: the compiled
    solver is cached on the function and the shapes, so new data of the same shapes reuse it
    (a fresh ``lambda`` compiles anew on every call). ``progress=True`` shows diffrax's tqdm meter.
    Returns an :class:`ODESolution` (``.ys`` and the step counts).
    """
    require_x64("solve_ode")
    ts_np = _check_ts(ts)
    time = _check_options(rtol, atol, solver, time, ts_np)
    sol = _solve_jit(vector_field, jax.tree.map(jnp.asarray, y0), jnp.asarray(ts_np), args,
                     jnp.asarray(float(rtol)), jnp.asarray(float(atol)), solver=solver, time=time,
                     max_steps=int(max_steps), progress=bool(progress))
    return raise_if_failed(sol, "solve_ode")


def log_times(t_max: float, n: int = 200, t_min: float | None = None) -> np.ndarray:
    """Save times ``[0, t_min, ..., t_max]`` log-spaced over the decades between
    ``t_min`` (default ``t_max * 1e-6``) and ``t_max``; plateaus of length
    $\\ln(1/\\epsilon)$ need many decades of resolution."""
    check_positive("t_max", t_max)
    n = check_int("n", n, minimum=2)  # [0, t_min, ..., t_max]: n = 1 would drop t_max
    t_min = t_max * 1e-6 if t_min is None else t_min
    check_positive("t_min", t_min)
    if t_min >= t_max:
        raise ValueError(f"`t_min` must be < `t_max`; got t_min={t_min!r}, t_max={t_max!r}.")
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


def _flow_field_samples(t, M: Matrix, args) -> Matrix:
    r"""Eq. (28) from the samples: $\Delta = \mathcal A\,\mathrm{vec}M - r$, $H = \frac4m\mathcal A^\top\Delta$,
    with $\mathcal A$ the ``(m, p*p)`` matrix of the symmetric $A_\mu$ and $r = y - f_0$."""
    A2, r = args
    p = M.shape[-1]
    delta = A2 @ M.reshape(-1) - r
    H = (4.0 / A2.shape[0]) * (delta @ A2).reshape(p, p)
    return -(H @ M + M @ H)


def _flow_field_statistics(t, M: Matrix, args) -> Matrix:
    r"""Eq. (28) from the sufficient statistics: $u(H) = \frac4m(G\,u(M) - c)$."""
    G, c, scale = args
    p = M.shape[-1]
    idx, w, pos = _packing(p)
    uH = scale * (G @ (M.reshape(-1)[idx] * w) - c)
    H = (uH / w)[pos].reshape(p, p)
    return -(H @ M + M @ H)


def flow_statistics(data: NQFData) -> tuple[Float[Array, "k k"], Float[Array, " k"], Float[Array, ""]]:
    r"""The sufficient statistics of the flow: $G = \sum_\mu u(A_\mu)u(A_\mu)^\top$ ($k\times k$,
    $k = p(p+1)/2$), $c = \sum_\mu (y_\mu - f_0)u(A_\mu)$ and $4/m$; $u(H) = \frac4m(Gu(M) - c)$ (Eq. 27)."""
    m, p = data.As.shape[0], data.As.shape[-1]
    idx, w, _ = _packing(p)
    U = data.As.reshape(m, p * p)[:, idx] * w
    return U.T @ U, U.T @ (data.ys - data.f0), jnp.asarray(4.0 / m, dtype=U.dtype)


def _prepare(data: NQFData, statistics: bool):
    """(vector field, args) of Eq. (28) for the data; traceable."""
    if statistics:
        return _flow_field_statistics, flow_statistics(data)
    m, p = data.As.shape[0], data.As.shape[-1]
    return _flow_field_samples, (data.As.reshape(m, p * p), data.ys - data.f0)


def _use_statistics(statistics: bool | None, m: int, p: int) -> bool:
    if statistics is None:
        return m > p * p
    if not isinstance(statistics, (bool, np.bool_)):
        raise TypeError(f"`statistics` must be True, False or None (automatic: m > p^2); got {statistics!r}.")
    return bool(statistics)


def _check_data(data, what: str) -> tuple[int, int]:
    if not isinstance(data, NQFData):
        raise TypeError(
            f"`data` of {what} must be an nqf.NQFData (e.g. nqf.NQFData(As, ys)); got {type(data).__name__}. "
            f"The signature is {what}(M0, data, ts, ...)."
        )
    if not data.zgz:
        raise ValueError(
            f"{what} is the flow on M alone (Eqs. 27-28), which needs ZGZ data (no `gs`, no `Bs`); "
            "use the discrete update nqf.nqf_sgd on (M, mu) for the general form."
        )
    return data.m, data.p


@functools.partial(jax.jit, static_argnames=("statistics", "solver", "time", "max_steps", "progress"))
def _flow_jit(M0, data, ts, rtol, atol, *, statistics, solver, time, max_steps, progress):
    field, args = _prepare(data, statistics)
    return _solution(integrate(field, M0, ts, args, rtol, atol, solver=solver, time=time,
                               max_steps=max_steps, progress=progress), ts)


def gradient_flow(
    M0: Matrix,
    data: NQFData,
    ts: Float[ArrayLike, " T"],
    *,
    rtol: float = 1e-10,
    atol: float = 1e-14,
    statistics: bool | None = None,
    solver: str = "tsit5",
    time: str = "linear",
    max_steps: int = 1_000_000,
    progress: bool = False,
) -> ODESolution:
    r"""Gradient flow of the NQF, $\dot M = -HM - MH$ (Eq. 28), $H$ of Eq. (27), from $M(0)$ = ``M0``.

    Gradient descent with learning rate $\eta$ approximates it at $t = \eta\cdot$step.

    Args:
        M0: initial order parameter $W(0)W(0)^\top$, ``(p, p)``, symmetric PSD.
        data: an :class:`~nqf.model.NQFData` with ZGZ (``As``, ``ys``, optional ``f0``).
        ts: increasing save times, e.g. :func:`log_times`; the solve runs from ``ts[0]``.
        rtol, atol: PID tolerances on the entries of $M$.
        statistics: solve from the sufficient statistics $(G, c)$ (``True``), from the samples
            (``False``), or pick (``None``: statistics when $m > p^2$). Both give the same flow.
        solver: ``"tsit5"`` (default), ``"dopri8"`` (order 8, like scipy's DOP853: fewer, dearer
            steps; at equal ``rtol`` its global error is larger, so tighten ``rtol`` for equal accuracy)
            or ``"dopri5"``.
        time: ``"linear"`` (default), ``"log"`` ($s = \ln(1 + t/t_1)$), or ``"auto"`` (log when ``ts``
            spans more than three decades).

    Returns:
        :class:`ODESolution` with ``ys`` = $M(t)$ at each ``ts``, shape ``(T, p, p)``, and the step counts.
    """
    require_x64("gradient_flow")
    m, p = _check_data(data, "gradient_flow")
    check_order_parameter(M0, p, name="M0")
    ts_np = _check_ts(ts)
    max_steps = check_size("max_steps", max_steps)
    time = _check_options(rtol, atol, solver, time, ts_np)
    sol = _flow_jit(jnp.asarray(M0, dtype=float), data, jnp.asarray(ts_np), jnp.asarray(float(rtol)),
                    jnp.asarray(float(atol)), statistics=_use_statistics(statistics, m, p), solver=solver,
                    time=time, max_steps=int(max_steps), progress=bool(progress))
    return raise_if_failed(sol, "gradient_flow")


# ------------------------------------------------------------------ batched flow
@functools.partial(jax.jit, static_argnames=("shared", "statistics", "solver", "time", "max_steps", "mesh"))
def _flow_batch_jit(M0s, data, ts, rtol, atol, *, shared, statistics, solver, time, max_steps, mesh):
    def lane(M0, field_args):
        field, args = field_args if shared else _prepare(field_args, statistics)
        sol = integrate(field, M0, ts, args, rtol, atol, solver=solver, time=time, max_steps=max_steps)
        return _solution(sol, ts)._replace(ts=None)

    if shared:  # statistics (or the flattened samples) once, outside the vmap: one copy for all lanes
        field, args = _prepare(data, statistics)
        out = sharded_vmap(lambda M0, a: lane(M0, (field, a)), (0, None), mesh)(M0s, args)
    else:
        out = sharded_vmap(lane, (0, 0), mesh)(M0s, data)
    return out._replace(ts=ts)


def gradient_flow_batch(
    M0s: Float[ArrayLike, "n p p"],
    data: NQFData | Sequence[NQFData],
    ts: Float[ArrayLike, " T"],
    *,
    rtol: float = 1e-10,
    atol: float = 1e-14,
    statistics: bool | None = None,
    solver: str = "tsit5",
    time: str = "linear",
    max_steps: int = 1_000_000,
    mesh: jax.sharding.Mesh | None = None,
) -> ODESolution:
    r"""The gradient flow $\dot M = -HM - MH$ (Eq. 28) from ``n`` initial conditions at once.

    ``data`` is one :class:`~nqf.model.NQFData` shared by every lane (it enters the ``jax.vmap``
    unbatched: no copy per lane, one matrix product per stage for the whole batch), or a sequence
    of ``n`` datasets of equal shapes, one per lane (e.g. data broken by several sizes of a
    perturbation). ``mesh`` (a ``jax.sharding.Mesh``, e.g. :func:`nqf.dynamics.batch_mesh`) splits
    the lanes over its devices; the numbers are those of the unsharded solve. Options as in
    :func:`gradient_flow`. Returns an :class:`ODESolution` with ``ys`` of shape ``(n, T, p, p)``
    and ``num_steps`` of shape ``(n,)``.
    """
    require_x64("gradient_flow_batch")
    check_mesh(mesh)
    M0s = np.asarray(M0s, dtype=float)
    check_ndim("M0s", M0s, 3, "a batch of initial order parameters (n, p, p)")
    n = M0s.shape[0]
    if isinstance(data, NQFData):
        shared = True
        m, p = _check_data(data, "gradient_flow_batch")
    else:
        data = list(data)
        if len(data) != n:
            raise ValueError(f"`data` must be one NQFData or one per initial condition ({n}); got {len(data)}.")
        shapes = {(_check_data(d, "gradient_flow_batch"), d.As.shape) for d in data}
        if len(shapes) != 1:
            raise ValueError(f"the datasets in `data` must share their shapes; got {sorted(s[1] for s in shapes)}.")
        (m, p), _ = shapes.pop()
        shared = False
        data = jax.tree.map(lambda *leaves: jnp.stack(leaves), *data)
    if M0s.shape[1:] != (p, p):
        raise ValueError(f"`M0s` must have shape (n, {p}, {p}) to match the data; got {M0s.shape}.")
    for M0 in M0s:
        check_order_parameter(M0, p)
    ts_np = _check_ts(ts)
    time = _check_options(rtol, atol, solver, time, ts_np)
    sol = _flow_batch_jit(jnp.asarray(M0s), data, jnp.asarray(ts_np), jnp.asarray(float(rtol)),
                          jnp.asarray(float(atol)), shared=shared, statistics=_use_statistics(statistics, m, p),
                          solver=solver, time=time, max_steps=int(max_steps), mesh=mesh)
    return raise_if_failed(sol, "gradient_flow_batch")


def trajectory_error(M: Float[ArrayLike, "T p p"], M_ref: Float[ArrayLike, "T p p"]) -> float:
    r"""$\max_t\|M(t) - M_\mathrm{ref}(t)\|_F \,/\, \max_t\|M_\mathrm{ref}(t)\|_F$: how far a
    closed form drifts from the numerical flow, relative to the trajectory's size."""
    M, M_ref = np.asarray(M), np.asarray(M_ref)
    if M.shape != M_ref.shape:
        raise ValueError(f"`M` and `M_ref` must have the same shape; got {M.shape} and {M_ref.shape}.")
    axes = tuple(range(1, M.ndim))
    return float(np.max(np.sqrt(np.sum((M - M_ref) ** 2, axis=axes))) / np.max(np.sqrt(np.sum(M_ref**2, axis=axes))))
