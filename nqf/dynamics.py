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
import optax
from jaxtyping import Array, Float, Int

from ._checks import check_finite, check_ndim, check_positive, check_shape
from .model import check_dataset, check_order_parameter, flow_field, outputs
from ._types import ArrayLike, Matrix, StructureStack, Targets


def require_x64(what: str) -> None:
    """Raise unless JAX runs in float64 (the book's tolerances need it)."""
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            f"{what} needs float64: call `jax.config.update('jax_enable_x64', True)` "
            "(or set JAX_ENABLE_X64=1) before creating arrays."
        )


def nqf_sgd_step(
    M: Matrix,
    mu: Float[ArrayLike, " p"],
    As: StructureStack,
    ys: Targets,
    *,
    eta: float | Float[ArrayLike, ""],
    d: int | Int[ArrayLike, ""],
    gs: Float[ArrayLike, "b p"] | None = None,
    Bs: Float[ArrayLike, "b p p"] | None = None,
    f0: float | Float[ArrayLike, " b"] = 0.0,
) -> tuple[Matrix, Float[ArrayLike, " p"]]:
    r"""One exact SGD step on $(M, \mu)$, Theorem 2, Eqs. (23)–(24).

    The minibatch loss is the paper's MSE $\frac1b\sum_{x\in\mathcal B}(f_x - y_x)^2$,
    so $\ell'_x = 2(f_x - y_x)/b$, $v = \sum_x \ell'_x (g(x) + 2B(x)\mu)$ and
    $H = \sum_x 2\ell'_x A(x)$. Then

    $$\Delta\mu = -\eta(d\,v + H\mu),\qquad
      \Delta M = -\eta(v\mu^\top + \mu v^\top + HM + MH)
                 + \eta^2(d\,vv^\top + v\mu^\top H + H\mu v^\top + HMH).$$

    This equals one step of $W \leftarrow W - \eta\nabla_W$ on any $W$ with
    $WW^\top = M$, $W\mathbf 1 = \mu$ and $d$ columns, to rounding.

    Args:
        M, mu: order parameters, shapes ``(p, p)`` and ``(p,)``.
        As, ys: the minibatch's structure matrices ``(b, p, p)`` and targets ``(b,)``.
        eta: learning rate. d: number of neurons (width).
        gs, Bs, f0: terms of the general form Eq. (20) (``None`` = ZGZ holds).
    """
    b = As.shape[0]
    f = outputs(M, As, mu=mu, gs=gs, Bs=Bs, f0=f0)
    lp = 2.0 * (f - ys) / b
    H = 2.0 * jnp.einsum("b,bij->ij", lp, As)
    v = jnp.zeros_like(mu)
    if gs is not None:
        v = v + lp @ gs
    if Bs is not None:
        v = v + 2.0 * jnp.einsum("b,bij,j->i", lp, Bs, mu)
    dmu = -eta * (d * v + H @ mu)
    vm = jnp.outer(v, mu)
    dM = -eta * (vm + vm.T + H @ M + M @ H) + eta**2 * (
        d * jnp.outer(v, v) + vm @ H + H @ vm.T + H @ M @ H
    )
    return M + dM, mu + dmu


def nqf_sgd(
    M0: Matrix,
    mu0: Float[ArrayLike, " p"],
    As: StructureStack,
    ys: Targets,
    batches: Int[ArrayLike, "steps b"],
    *,
    eta: float,
    d: int,
    gs: Float[ArrayLike, "m p"] | None = None,
    Bs: Float[ArrayLike, "m p p"] | None = None,
    f0: float | Float[ArrayLike, " m"] = 0.0,
) -> tuple[Float[ArrayLike, "steps+1 p p"], Float[ArrayLike, "steps+1 p"]]:
    """Iterate :func:`nqf_sgd_step` over the minibatch index rows ``batches``
    (``lax.scan``); returns the trajectories of ``M`` and ``mu`` including step 0.
    Full-batch GD is ``batches = jnp.tile(jnp.arange(m), (steps, 1))``."""
    m, p = check_dataset(As, ys)
    check_order_parameter(M0, p)
    check_shape("mu0", mu0, (p,), "sum of the neurons")
    check_ndim("batches", batches, 2, "one row of sample indices per step")
    check_positive("eta", eta)
    if int(d) < 1:
        raise ValueError(f"`d` (number of neurons) must be >= 1; got {d!r}.")
    f0_all = jnp.broadcast_to(jnp.asarray(f0, dtype=As.dtype), (m,))
    Ms, mus = _nqf_sgd_scan(M0, mu0, As, ys, jnp.asarray(batches), eta, d, gs, Bs, f0_all)
    return jnp.concatenate([M0[None], Ms]), jnp.concatenate([mu0[None], mus])


@jax.jit
def _nqf_sgd_scan(M0, mu0, As, ys, batches, eta, d, gs, Bs, f0_all):
    """The scan of :func:`nqf_sgd`, compiled once per shape (not per call)."""

    def body(carry, idx):
        M, mu = carry
        M, mu = nqf_sgd_step(
            M, mu, As[idx], ys[idx], eta=eta, d=d,
            gs=None if gs is None else gs[idx],
            Bs=None if Bs is None else Bs[idx],
            f0=f0_all[idx],
        )
        return (M, mu), (M, mu)

    _, (Ms, mus) = jax.lax.scan(body, (M0, mu0), batches)
    return Ms, mus


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
        lambda t, M, args: flow_field(M, *args), jnp.asarray(M0), ts,
        args=(jnp.asarray(As), jnp.asarray(ys)), rtol=rtol, atol=atol,
        progress=progress, max_steps=max_steps,
    )


def train_weights(
    loss_fn: Callable[[Any, Any], Float[ArrayLike, ""]],
    params0: Any,
    optimizer: optax.GradientTransformation,
    num_steps: int,
    *,
    batches: Any = None,
    record: Callable[[Any], Any] | None = None,
) -> tuple[Any, Any]:
    """Optimise ``loss_fn(params, batch)`` with an optax optimiser, the whole loop
    jitted with ``lax.scan``.

    Args:
        loss_fn: scalar loss of the parameters and one batch (``batch`` is a row of
            ``batches``, or ``None`` for full batch).
        params0: initial parameters (e.g. ``W`` of shape ``(p, d)``).
        optimizer: e.g. ``optax.sgd(eta)``, ``optax.sgd(eta, momentum=0.9)``, ``optax.adam(eta)``.
        num_steps: number of updates.
        batches: pytree whose leaves have a leading axis of length ``num_steps``.
        record: function of the parameters recorded before every step and after the
            last (default: the loss on the step's batch is always recorded).

    Returns:
        ``(final_params, history)`` where ``history["loss"]`` has ``num_steps`` entries
        and ``history["record"]`` (if ``record``) has ``num_steps + 1``.
    """
    if int(num_steps) < 1:
        raise ValueError(f"`num_steps` must be >= 1; got {num_steps!r}.")
    if batches is not None:
        for leaf in jax.tree_util.tree_leaves(batches):
            if jnp.shape(leaf)[:1] != (num_steps,):
                raise ValueError(
                    f"`batches` leaves must have leading axis num_steps={num_steps}; got shape {jnp.shape(leaf)}."
                )
    xs = batches if batches is not None else jnp.zeros((num_steps,))

    def body(carry, batch):
        params, state = carry
        b = batch if batches is not None else None
        loss, grads = jax.value_and_grad(loss_fn)(params, b)
        updates, state = optimizer.update(grads, state, params)
        rec = record(params) if record is not None else None
        return (optax.apply_updates(params, updates), state), (loss, rec)

    @jax.jit
    def run(params):
        (params, _), (losses, recs) = jax.lax.scan(body, (params, optimizer.init(params)), xs)
        return params, losses, recs

    params, losses, recs = run(params0)
    history = {"loss": losses}
    if record is not None:
        last = record(params)
        history["record"] = jax.tree_util.tree_map(lambda r, l: jnp.concatenate([r, l[None]]), recs, last)
    return params, history


__all__ = [
    "gradient_flow",
    "log_times",
    "nqf_sgd",
    "nqf_sgd_step",
    "require_x64",
    "solve_ode",
    "train_weights",
]
