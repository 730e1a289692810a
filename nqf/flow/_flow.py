r"""The one ODE entry point of :mod:`nqf` and the gradient flow on $M$ (Eq. 28).

Every continuous-time solve of the package goes through :func:`integrate` (the only call of
``diffrax.diffeqsolve``): :func:`solve_ode` (any vector field), :func:`gradient_flow` (Eq. 28, one
initial condition or a batch), :func:`nqf.solutions.lv_flow` (Eq. 32), the singular-limit sweep,
the $\xi$ flow of Eq. (133) and the per-sample losses of :func:`nqf.solutions.sample_wise_loss`.
Each returns the solver's step counts.

**Compiled once per shape.** Vector fields are module-level functions and the data travel
through ``args``, never through closures; the public functions are ``jax.jit``-ed with the
vector field, solver and step budget as static arguments and everything else (data, initial
condition, save times, tolerances) traced. A second call with new data of the same shapes, or a
new ``rtol``, compiles nothing (``tests/test_flow.py`` counts compilations). With JAX's persistent
compilation cache on, :func:`gradient_flow` also stores its traced program as a ``jax.export``
serialization next to that cache (:mod:`nqf.flow._export`, keyed by shapes, options and
versions): the first call of a new process then skips Python tracing and lowering of diffrax's
solve and gets the same numbers, bit for bit. Both caches need a program without host callbacks, so
equinox's checks (diffrax's, of the save times, which the public functions make before the solve)
must be traced by its documented switch ``EQX_ON_ERROR=nan`` (or ``off``), read when equinox is
imported; nqf never changes that mode. Under equinox's default (``raise``) every new process compiles
each flow anew (first call at $m = 256$, $p = 8$, warm caches, load 0.3-0.4 on 2 cores: 1.2 s; with
``EQX_ON_ERROR=nan`` 0.20 s, 0.46-0.51 s from JAX's persistent cache alone). The book sets it.

**Sufficient statistics or samples.** Under ZGZ, $H = \frac4m\sum_\mu(\mathrm{Tr}[MA_\mu] - y_\mu)A_\mu$
(Eq. 27) is affine in $M$. With $u(S)$ the packed upper triangle of a symmetric $S$
($u_{ii} = S_{ii}$, $u_{ij} = \sqrt2S_{ij}$, so $\mathrm{Tr}[SA] = u(S)\cdot u(A)$) and $U$ the
$m\times k$ matrix of rows $u(A_\mu)$, $k = p(p+1)/2$: the sample path evaluates
$u(H) = \frac4mU^\top(Uu(M) - r)$, $r = y - f_0$ ($2mk$ multiply-adds per evaluation); the
statistics path forms $G = U^\top U$ and $c = U^\top r$ once ($mk^2$, a matrix product) and then
evaluates $u(H) = \frac4m(Gu(M) - c)$ ($k^2$). ``statistics=None`` picks the cheaper by a cost
model measured on a 2-core CPU (:func:`_use_statistics`); both give the same flow.

**The solver.** ``solver="auto"`` (the default) is Tsit5 (order 5), at every tolerance: no choice from
the tolerance alone is faster at equal accuracy on both kinds of flow we measured (issue 21). Dopri8
(order 8, like scipy's DOP853) takes 3-6x fewer steps at the same ``rtol`` but uses up its tolerance where
Tsit5 over-delivers. On the logistic flow of Thm 6 (five modes from $\epsilon = 10^{-5}$, ``t`` to 400,
``rtol = 1e-10``, ``atol = 1e-14``) Tsit5 is within 7e-10 of the closed form in 575 steps (3450
evaluations), Dopri8 within 9e-8 in 167 (2171): its error is set by ``atol`` on the $10^{-5}$ entries, and
with both tolerances divided by 100 it is still 3e-9 (3029 evaluations). On random non-commuting data
($m$ = 16-256, $p$ = 8-32, ``t`` to 5) Tsit5 at ``rtol = 1e-10`` is within 5e-12-1e-11 of a tight reference
(scipy's DOP853 at the same ``rtol``: 3e-11-2e-10); Dopri8 reaches Tsit5's error only at ``rtol/1000``
(1.5-1.6x fewer evaluations than Tsit5; 1.3-1.5x more than scipy's DOP853 at ``rtol = 1e-10``, whose
error is 3-20x larger). So the default keeps the accuracy the tolerance promises; ``solver="dopri8"`` is
there when fewer steps at a looser error matter.

**Batches.** ``M0`` of shape ``(n, p, p)`` solves ``n`` flows in one program: with one dataset shared
by every lane (its arrays enter the ``jax.vmap`` unbatched: one copy, one matrix product per stage
for all lanes), or one dataset per lane; with a ``jax.sharding`` mesh the lanes are split over its
devices (:mod:`nqf.flow._sharding`).

**Log time.** Runs that span decades (plateaus of length $\ln(1/\epsilon)$) can be solved in
$s = \ln(1 + (t - t_0)/t_s)$, $dy/ds = (t_s + t - t_0) f(t, y)$, with $t_s$ the first save
interval: ``time="log"`` (``"auto"`` picks it when the save times span more than three decades).
It pays on long plateaus, not on exponential growth (a logistic switch-on from $\epsilon$ costs the
same number of steps per e-fold in either clock); :func:`nqf.solutions.singular_limit_sweep`
uses the rescaled clock $\tau = t/\ln(1/\epsilon)$ instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._checks import check_finite
from .._checks import check_int
from .._checks import check_ndim
from .._checks import check_positive
from .._checks import check_psd
from .._checks import require_x64
from .._types import ArrayLike
from .._types import Matrix
from ..model._data import NQFData
from ..model._model import check_order_parameter
from . import _export
from ._sharding import check_mesh
from ._sharding import sharded_vmap
from .._checks import invalid, wrong_kind
from .._checks import failed

SOLVERS = {"dopri8": diffrax.Dopri8, "tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5}
AUTO_DOPRI8_BELOW = 0.0  # solver="auto" never takes Dopri8: at equal error it costs what Tsit5 costs (module doc)
TIMES = ("auto", "linear", "log")


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
    rtol: Float[ArrayLike, ""],
    atol: Float[ArrayLike, ""],
    *,
    solver: str = "tsit5",
    time: str = "linear",
    max_steps: int = 1_000_000,
    dense: bool = False,
    norm: Callable[[Any], Any] | None = None,
    progress: bool = False,
    t0: Float[ArrayLike, ""] | None = None,
    t1: Float[ArrayLike, ""] | None = None,
    dtmax: float | None = None,
) -> diffrax.Solution:
    r"""The single ``diffrax.diffeqsolve`` call of :mod:`nqf` (traceable; callers jit it).

    Integrates ``dy/dt = vector_field(t, y, args)`` from ``ts[0]`` to ``ts[-1]`` with an
    explicit Runge-Kutta ``solver`` (``"dopri8"``, ``"tsit5"``, ``"dopri5"``) under PID step
    control (``rtol``, ``atol``; ``norm`` of the scaled error, diffrax's RMS norm by default),
    saving at ``ts`` (non-decreasing), from ``t0`` to ``t1`` (default ``ts[0]`` and ``ts[-1]``; linear
    time only), with steps of at most ``dtmax``. ``time="log"`` integrates in $s = \ln(1 + (t - t_0)/t_s)$ instead, with
    $t_s$ = ``ts[1] - ts[0]`` (then ``sol.ts`` are in $s$; ``dense=True`` needs linear time).
    Does not raise inside ``jit`` (``throw=False``): check ``sol.result``, as ``raise_if_failed`` does.
    """
    ts = jnp.asarray(ts)
    if time == "log":
        if t0 is not None or t1 is not None:
            raise invalid("time", "be 'linear' with `t0`/`t1`", f"{time!r}")
        if dense:
            raise invalid("time", "be 'linear' with `dense=True` (the dense solution would be in log time)", f"{time!r}")
        t0, ts_scale = ts[0], ts[1] - ts[0]
        term = diffrax.ODETerm(functools.partial(_log_time_field, vector_field))
        args = (args, t0, ts_scale)
        ss = jnp.log1p((ts - t0) / ts_scale)
        s0, s1 = jnp.zeros_like(t0), ss[-1]
    elif time == "linear":
        term = diffrax.ODETerm(vector_field)
        ss = ts
        s0 = ts[0] if t0 is None else t0
        s1 = ts[-1] if t1 is None else t1
    else:
        raise invalid("time", "be 'linear' or 'log'", f'{time!r}')
    if solver not in SOLVERS:
        raise invalid("solver", f"be one of {sorted(SOLVERS)} here (resolve 'auto' first)", f'{solver!r}')
    extra = ({} if norm is None else {"norm": norm}) | ({} if dtmax is None else {"dtmax": dtmax})
    controller = diffrax.PIDController(rtol=rtol, atol=atol, **extra)
    return diffrax.diffeqsolve(
        term, SOLVERS[solver](), t0=s0, t1=s1, dt0=None, y0=y0, args=args,
        saveat=diffrax.SaveAt(ts=ss, dense=dense), stepsize_controller=controller,
        max_steps=max_steps, adjoint=diffrax.ForwardMode(),
        progress_meter=diffrax.TqdmProgressMeter() if progress else diffrax.NoProgressMeter(), throw=False,
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
    """The solver that ``solver="auto"`` means at ``rtol``: ``"tsit5"`` (``"dopri8"`` only below
    ``AUTO_DOPRI8_BELOW``, 0: see the module docstring); an explicit name is returned as it is (after
    checking it)."""
    if not isinstance(solver, str) or (solver != "auto" and solver not in SOLVERS):
        raise invalid("solver", f"be 'auto' or one of {sorted(SOLVERS)}", f'{solver!r}')
    if solver != "auto":
        return solver
    return "dopri8" if float(rtol) < AUTO_DOPRI8_BELOW else "tsit5"


def _check_options(rtol, atol, solver, time, ts_np, max_steps, progress) -> tuple[str, str, int, bool]:
    """The options every solve shares, checked once: (solver, time, max_steps, progress) resolved."""
    check_positive("rtol", rtol)
    if not float(rtol) < 1:  # a relative error of 100% per step controls nothing: the solve can blow up and stall
        raise invalid("rtol", "be a relative tolerance in (0, 1), e.g. 1e-10 (at 1 or above no step is ever "
                              "refused for its error)", repr(rtol))
    check_positive("atol", atol, strict=False)
    solver = choose_solver(solver, rtol)
    if time not in TIMES:
        raise invalid("time", f'be one of {TIMES}', f'{time!r}')
    if time == "auto":
        span = (ts_np[-1] - ts_np[0]) / (ts_np[1] - ts_np[0])
        time = "log" if span > 1e3 else "linear"
    max_steps = check_int("max_steps", max_steps, minimum=1, maximum=2**62)  # the solver counts steps in int64
    if not isinstance(progress, (bool, np.bool_)):
        raise wrong_kind("progress", 'be True or False', f'{progress!r}')
    return solver, time, int(max_steps), bool(progress)


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
    solver: str = "auto",
    time: str = "linear",
    max_steps: int = 1_000_000,
    progress: bool = False,
) -> ODESolution:
    """Integrate ``dy/dt = vector_field(t, y, args)`` and return ``y`` at every ``ts`` (jitted).

    Pass a **module-level** function as ``vector_field`` and the data as ``args``: the compiled
    solver is cached on the function and the shapes, so new data of the same shapes reuse it
    (a fresh ``lambda`` compiles anew on every call). ``solver``, ``time``, ``max_steps`` as in
    :func:`gradient_flow`; ``progress=True`` shows diffrax's tqdm meter. Returns an :class:`ODESolution` (``.ys`` and the step counts).
    """
    require_x64("solve_ode")
    ts_np = _check_ts(ts)
    solver, time, max_steps, progress = _check_options(rtol, atol, solver, time, ts_np, max_steps, progress)
    sol = _solve_jit(vector_field, jax.tree.map(jnp.asarray, y0), jnp.asarray(ts_np), args,
                     jnp.asarray(float(rtol)), jnp.asarray(float(atol)), solver=solver, time=time,
                     max_steps=max_steps, progress=progress)
    return raise_if_failed(sol, "solve_ode", max_steps=max_steps)


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


def flow_statistics(data: NQFData) -> tuple[Float[Array, "k k"], Float[Array, " k"], Float[Array, ""]]:
    r"""The sufficient statistics of the flow: $G = \sum_\mu u(A_\mu)u(A_\mu)^\top$ ($k\times k$,
    $k = p(p+1)/2$), $c = \sum_\mu (y_\mu - f_0)u(A_\mu)$ and $4/m$; $u(H) = \frac4m(Gu(M) - c)$ (Eq. 27)."""
    U = _packed_stack(data.As)
    return U.T @ U, U.T @ (data.ys - data.f0), jnp.asarray(4.0 / data.As.shape[0], dtype=U.dtype)


def _prepare(data: NQFData, statistics: bool):
    """(vector field, args) of Eq. (28) for the data; traceable."""
    if statistics:
        return _flow_field_statistics, flow_statistics(data)
    U = _packed_stack(data.As)
    return _flow_field_samples, (U, data.ys - data.f0, jnp.asarray(4.0 / data.As.shape[0], dtype=U.dtype))


# The cost model of `statistics=None`, in multiply-adds: a solve takes about _EVALS right-hand-side
# evaluations; one evaluation costs 2mk on the sample path and k^2 on the statistics path, which first
# forms G = U^T U (mk^2 in a matrix product, about _GEMM_SPEEDUP times faster per multiply-add than the
# matrix-vector products of the steps). Shared data are prepared once for all n lanes. The constants are
# fitted, not derived: the default Tsit5 takes 700-1400 evaluations at rtol 1e-10 on the benchmark's
# problems, but the cache-resident statistics matvec is cheaper per multiply-add than the streaming sample
# one; with these values the choice agrees with the faster path measured side by side (default call,
# rtol 1e-10, 51 save times on [0, 5], issue 21): at p = 32 samples to m = 256 (23 vs 28 ms), statistics
# from m = 384 (100 vs 114 ms); at p = 8 samples at m = 16, statistics from m = 32 (a tie) and beyond.
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
                      "discrete update nqf.nqf_sgd on (M, mu) for the general form", "data with `gs` or `Bs`")
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
    return M0


@functools.partial(jax.jit, static_argnames=("lanes", "statistics", "solver", "time", "max_steps", "progress", "mesh"))
def _flow_jit(M0, data, ts, rtol, atol, *, lanes, statistics, solver, time, max_steps, progress, mesh):
    """One program for every flow: ``lanes`` is None (one M0), "shared" (one dataset) or "per-lane"."""

    def solve(M0, field, args):
        sol = integrate(field, pack(M0), ts, args, rtol, atol, solver=solver, time=time, max_steps=max_steps,
                        progress=progress)
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
    *old_order: Any,
    rtol: float = 1e-10,
    atol: float = 1e-14,
    statistics: bool | None = None,
    solver: str = "auto",
    time: str = "linear",
    max_steps: int = 1_000_000,
    progress: bool = False,
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
        rtol, atol: PID tolerances on the entries of $M$ (traced: a new value compiles nothing); ``rtol`` in
            (0, 1), ``atol`` >= 0.
        statistics: solve from the sufficient statistics $(G, c)$ (``True``), from the samples
            (``False``), or pick the cheaper (``None``, by a cost model in $m$, $p$ and the batch size).
            Both give the same flow.
        solver: ``"auto"`` (default: ``"tsit5"``, the accurate choice at a given ``rtol``; module docstring), ``"dopri8"``
            (order 8, like scipy's DOP853), ``"tsit5"`` or ``"dopri5"``.
        time: ``"linear"`` (default), ``"log"`` ($s = \ln(1 + t/t_1)$), or ``"auto"`` (log when ``ts``
            spans more than three decades).
        max_steps: the solver's step budget (a positive int); a solve that needs more raises.
        progress: show diffrax's progress bar.
        mesh: a ``jax.sharding.Mesh`` (e.g. :func:`nqf.flow.batch_mesh`) over which a batch's lanes
            are split; the numbers are those of the unsharded solve.

    Returns:
        :class:`ODESolution` with ``ys`` = $M(t)$ at each ``ts``, shape ``(T, p, p)`` (``(n, T, p, p)``
        for a batch, with ``num_steps`` of shape ``(n,)``), and the step counts.
    """
    if old_order:  # gradient_flow(As, ys, M0, ts) of nqf 0.1
        raise wrong_kind("M0", "be the first of the three positional arguments gradient_flow(M0, data, ts) (the old "
                               "order gradient_flow(As, ys, M0, ts) is now gradient_flow(M0, nqf.model.NQFData(As, ys), "
                               "ts); options are keywords)", f"{3 + len(old_order)} positional arguments")
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
    solver, time, max_steps, progress = _check_options(rtol, atol, solver, time, ts_np, max_steps, progress)
    n = np.shape(M0)[0] if ndim == 3 else 1
    lanes = None if ndim == 2 else ("shared" if shared else "per-lane")
    # NumPy arrays and Python floats go to the program as they are: jnp.asarray would compile and run a
    # small staging program for each of them on the first call of a process (the avals are the same).
    args = (np.asarray(M0, dtype=float), data, ts_np, float(rtol), float(atol))
    options = dict(lanes=lanes, statistics=_use_statistics(statistics, m, p, n if lanes == "shared" else 1),
                   solver=solver, time=time, max_steps=max_steps, progress=progress, mesh=mesh)
    out = None
    if mesh is None and not progress:  # a sharded program or a progress bar's host callback: no export
        out = _export.call("gradient_flow", _flow_jit, args, options)
    sol = _flow_jit(*args, **options) if out is None else ODESolution(*out)
    return raise_if_failed(sol, "gradient_flow", max_steps=max_steps)


def gradient_flow_batch(M0s, data, ts, **options) -> ODESolution:
    """Deprecated spelling of :func:`gradient_flow` with ``M0`` of shape ``(n, p, p)`` (kept, unexported,
    for callers not yet moved); same arguments and result."""
    if np.ndim(M0s) != 3:
        raise invalid("M0s", 'have shape (n, p, p)', f'shape {np.shape(M0s)}')
    return gradient_flow(M0s, data, ts, **options)


def trajectory_error(M: Float[ArrayLike, "T p p"], M_ref: Float[ArrayLike, "T p p"]) -> float:
    r"""$\max_t\|M(t) - M_\mathrm{ref}(t)\|_F \,/\, \max_t\|M_\mathrm{ref}(t)\|_F$: how far a
    closed form drifts from the numerical flow, relative to the trajectory's size."""
    M, M_ref = np.asarray(M), np.asarray(M_ref)
    if M.shape != M_ref.shape:
        raise invalid("M_ref", "have the shape of `M`", f"{M.shape} and {M_ref.shape}")
    axes = tuple(range(1, M.ndim))
    return float(np.max(np.sqrt(np.sum((M - M_ref) ** 2, axis=axes))) / np.max(np.sqrt(np.sum(M_ref**2, axis=axes))))
