r"""Training dynamics of the NQF: the exact discrete update (Thm 2), the
gradient flow on $M$ (Eq. 28) and plain optimisation of $W$ for comparison.

* :func:`nqf_sgd_step` / :func:`nqf_sgd` — SGD written on $(M, \mu)$ alone,
  Eqs. (23)–(24) with the $\eta^2$ terms.
* :func:`gradient_flow` — $\dot M = -HM - MH$ with diffrax (Tsit5, adaptive
  steps, float64), saved on log-spaced times over many decades.
* :func:`train_weights` — any optax optimiser on any loss of $W$, the whole
  loop jitted with ``lax.scan`` (GD, SGD, momentum, Adam, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_finite
from .._checks import check_ndim
from .._checks import check_positive
from .._checks import check_shape
from .._checks import require_x64
from .._types import ArrayLike
from .._types import Matrix
from .._types import StructureStack
from .._types import Targets
from ..model._model import check_dataset
from ..model._model import check_order_parameter
from ..model._model import flow_field
from ..model._data import NQFData
import functools



def log_times(t_max: float, n: int = 200, t_min: float | None = None) -> np.ndarray:
    """Save times ``[0, t_min, ..., t_max]`` log-spaced over the decades between
    ``t_min`` (default ``t_max * 1e-6``) and ``t_max``; plateaus of length
    $\\ln(1/\\epsilon)$ need many decades of resolution."""
    check_positive("t_max", t_max)
    t_min = t_max * 1e-6 if t_min is None else t_min
    check_positive("t_min", t_min)
    if t_min >= t_max:
        raise ValueError(f"`t_min` must be < `t_max`; got t_min={t_min!r}, t_max={t_max!r}.")
    return np.concatenate([[0.0], np.geomspace(t_min, t_max, n - 1)])


def solve_ode(
    vector_field: Callable[[Any, Any, Any], Any],
    y0: Any,
    ts: Float[ArrayLike, " T"],
    *,
    args: Any = None,
    rtol: float = 1e-10,
    atol: float = 1e-14,
    max_steps: int = 1_000_000,
    progress: bool = False,
) -> Any:
    """Integrate ``dy/dt = vector_field(t, y, args)`` from ``ts[0]`` with diffrax
    (Tsit5, PID step control) and return ``y`` at every ``ts``. Raises if the
    solver fails. ``progress=True`` shows diffrax's tqdm meter."""
    ts = jnp.asarray(ts)
    check_ndim("ts", ts, 1, "save times")
    check_finite("ts", ts)
    if ts.shape[0] < 2 or not bool(jnp.all(jnp.diff(ts) > 0)):
        raise ValueError(f"`ts` must be strictly increasing with >= 2 entries; got {np.asarray(ts)[:5]}...")
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        diffrax.Tsit5(),
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=y0,
        args=args,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        progress_meter=diffrax.TqdmProgressMeter() if progress else diffrax.NoProgressMeter(),
        throw=True,
    )
    return sol.ys


def gradient_flow(
    As: StructureStack,
    ys: Targets,
    M0: Matrix,
    ts: Float[ArrayLike, " T"],
    *,
    rtol: float = 1e-10,
    atol: float = 1e-14,
    progress: bool = False,
    max_steps: int = 1_000_000,
) -> Float[ArrayLike, "T p p"]:
    r"""Gradient flow of the NQF, $\dot M = -HM - MH$ (Eq. 28), $H$ of Eq. (27).

    Gradient descent with learning rate $\eta$ approximates it at $t = \eta\cdot$step.
    ``ts`` are the save times (e.g. :func:`log_times`); returns $M(t)$ at each.
    """
    require_x64("gradient_flow")
    m, p = check_dataset(As, ys)
    check_order_parameter(M0, p)
    return solve_ode(
        lambda t, M, args: flow_field(M, NQFData(*args)), jnp.asarray(M0), ts,
        args=(jnp.asarray(As), jnp.asarray(ys)), rtol=rtol, atol=atol,
        progress=progress, max_steps=max_steps,
    )




# ------------------------------------------------------------------ batched numerical flow
def gradient_flow_batch(
    As: Float[ArrayLike, "n m p p"], ys: Float[ArrayLike, "n m"], M0: Float[ArrayLike, "n p p"],
    ts: Float[ArrayLike, " T"], *, rtol: float = 1e-10, atol: float = 1e-14, max_steps: int = 1_000_000,
) -> Float[Array, "n T p p"]:
    r"""The gradient flow $\dot M = -HM - MH$ (Eq. 28) for ``n`` datasets at once
    (``jax.vmap`` over the leading axis; same Tsit5 solver as :func:`nqf.gradient_flow`)."""
    require_x64("gradient_flow_batch")
    As, ys, M0 = (jnp.asarray(a) for a in (As, ys, M0))
    check_ndim("As", As, 4, "a batch of structure-matrix stacks (n, m, p, p)")
    n, m, p, _ = As.shape
    check_shape("ys", ys, (n, m), "one target vector per dataset")
    check_shape("M0", M0, (n, p, p), "one initial order parameter per dataset")
    for i in range(n):
        check_dataset(As[i], ys[i])
        check_order_parameter(M0[i], p)
    return _flow_batch(As, ys, M0, jnp.asarray(ts), rtol=float(rtol), atol=float(atol), max_steps=int(max_steps))


@functools.partial(jax.jit, static_argnames=("rtol", "atol", "max_steps"))
def _flow_batch(As, ys, M0, ts, *, rtol, atol, max_steps):
    def one(A, y, M):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, M, args: flow_field(M, NQFData(*args))), diffrax.Tsit5(), t0=ts[0], t1=ts[-1],
            dt0=None, y0=M, args=(A, y), saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol), max_steps=max_steps, throw=True,
        )
        return sol.ys

    return jax.vmap(one)(As, ys, M0)


def trajectory_error(M: Float[ArrayLike, "T p p"], M_ref: Float[ArrayLike, "T p p"]) -> float:
    r"""$\max_t\|M(t) - M_\mathrm{ref}(t)\|_F \,/\, \max_t\|M_\mathrm{ref}(t)\|_F$: how far a
    closed form drifts from the numerical flow, relative to the trajectory's size."""
    M, M_ref = np.asarray(M), np.asarray(M_ref)
    if M.shape != M_ref.shape:
        raise ValueError(f"`M` and `M_ref` must have the same shape; got {M.shape} and {M_ref.shape}.")
    axes = tuple(range(1, M.ndim))
    return float(np.max(np.sqrt(np.sum((M - M_ref) ** 2, axis=axes))) / np.max(np.sqrt(np.sum(M_ref**2, axis=axes))))
