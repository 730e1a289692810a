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

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Float
from .._checks import check_positive
from .._checks import check_shape
from .._types import ArrayLike
from ..model._data import NQFData
from ..model._data import require_data
from ..model._model import mse_loss
from ..model._model import residuals
from typing import NamedTuple



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


# ------------------------------------------------------------------ GD on W, and initial scales
class GDRun(NamedTuple):
    t: np.ndarray  # eta * step
    z: np.ndarray  # features diag(P^T W W^T P), (steps + 1, p)
    residuals: np.ndarray  # (steps + 1, m)
    offdiag: float  # max |(P^T W W^T P)_ij|, i != j, over the run (0 if W stays diagonal)


def full_batch_gd(
    W0: Float[ArrayLike, "p d"], data: NQFData, *, eta: float, num_steps: int,
    P: Float[ArrayLike, "p p"] | None = None,
) -> GDRun:
    r"""Full-batch gradient descent on $W$ for the paper's loss (Eq. 26), $W \leftarrow W - \eta\nabla_W\mathcal L$
    (``optax.sgd``, whole loop in ``lax.scan`` via :func:`nqf.train_weights`), recording the
    features $z_k = (P^\top WW^\top P)_{kk}$ and the residuals at every step; time is $t = \eta\cdot$step.
    ``data`` must satisfy ZGZ (no ``gs``, ``Bs``)."""
    data = require_data(data)
    if not data.zgz:
        raise ValueError("`full_batch_gd` trains f = f0 + Tr[W^T A W] (ZGZ data); `data` carries `gs` or `Bs`.")
    p = data.p
    W0 = jnp.asarray(W0, dtype=float)
    check_shape("W0", W0, (p, None), "initial weights (p, d)")
    check_positive("eta", eta)
    if int(num_steps) < 1:
        raise ValueError(f"`num_steps` must be >= 1; got {num_steps!r}.")
    P = jnp.eye(p) if P is None else jnp.asarray(P, dtype=float)
    check_shape("P", P, (p, p), "feature basis (columns)")

    def record(W):
        Mt = P.T @ W @ W.T @ P
        off = jnp.max(jnp.abs(Mt - jnp.diag(jnp.diag(Mt))))
        return jnp.diag(Mt), residuals(W @ W.T, data), off

    _, hist = train_weights(lambda W, _: mse_loss(W @ W.T, data), W0, optax.sgd(eta), int(num_steps), record=record)
    z, res, off = (np.asarray(v) for v in hist["record"])
    return GDRun(eta * np.arange(num_steps + 1), z, res, float(off.max()))
