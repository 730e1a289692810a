r"""Training of the weights $W$ themselves, for comparison with the NQF: thin configurations of the
one trainer :func:`nqf.training.train`.

* :func:`train_weights` — any optax optimiser on any loss ``loss_fn(params, batch)`` of $W$, with a
  stream of batches (GD, SGD, momentum, Adam, ...).
* :func:`full_batch_gd` — GD on $W$ for the paper's loss of the NQF (Eq. 26), recording the features
  and residuals every step (Figs. 3 and 4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Float
from .._checks import check_callable
from .._checks import check_int
from .._checks import check_positive
from .._checks import check_shape
from .._types import ArrayLike
from ..model._data import NQFData
from ..model._data import require_data
from ..model._model import mse_loss
from ..model._model import residuals
from typing import NamedTuple

from ._losses import BatchLoss
from ._losses import NQFLoss
from ._losses import Record
from ._trainer import optimizer
from ._trainer import train



def train_weights(
    loss_fn: Callable[[Any, Any], Float[ArrayLike, ""]],
    params0: Any,
    optimizer: Any,
    num_steps: int,
    *,
    batches: Any = None,
    record: Callable[[Any], Any] | None = None,
) -> tuple[Any, Any]:
    """Optimise ``loss_fn(params, batch)`` with an optax optimiser: :func:`nqf.training.train` with the
    batches given as data, one per step.

    Args:
        loss_fn: scalar loss of the parameters and one batch (``batch`` is a row of
            ``batches``, or ``None`` for full batch). Static: pass the same function object to reuse
            the compiled run.
        params0: initial parameters (e.g. ``W`` of shape ``(p, d)``).
        optimizer: an :class:`~nqf.training.Optimizer` (traced learning rate) or an optax
            transformation (``optax.sgd(eta)``, ``optax.sgd(eta, momentum=0.9)``, ``optax.adam(eta)``).
        num_steps: number of updates.
        batches: pytree whose leaves have a leading axis of length ``num_steps``.
        record: function of the parameters recorded before every step and after the
            last (default: the loss on the step's batch is always recorded).

    Returns:
        ``(final_params, history)`` where ``history["loss"]`` has ``num_steps`` entries
        and ``history["record"]`` (if ``record``) has ``num_steps + 1``. A diverging run warns.
    """
    check_callable("loss_fn", loss_fn, "a callable loss_fn(params, batch)")
    if record is not None:
        check_callable("record", record, "a callable record(params)")
    num_steps = check_int("num_steps", num_steps)
    if batches is not None:
        for leaf in jax.tree_util.tree_leaves(batches):
            if jnp.shape(leaf)[:1] != (num_steps,):
                raise ValueError(
                    f"`batches` leaves must have leading axis num_steps={num_steps}; got shape {jnp.shape(leaf)}."
                )
    res = train(BatchLoss(loss_fn), params0, optimizer, num_steps=num_steps, data=batches,
                batches=None if batches is None else jnp.arange(num_steps),
                record=None if record is None else Record(record))
    history = {"loss": jnp.asarray(res.batch_loss)}
    if record is not None:
        history["record"] = jax.tree_util.tree_map(jnp.asarray, res.record)
    return res.params, history


# ------------------------------------------------------------------ GD on W, and initial scales
class _GDRecord(eqx.Module):
    def __call__(self, W, args):
        P = args["P"]
        Mt = P.T @ W @ W.T @ P
        off = jnp.max(jnp.abs(Mt - jnp.diag(jnp.diag(Mt))))
        return jnp.diag(Mt), residuals(W @ W.T, args["data"]), off


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
    (``optax.sgd``, one configuration of :func:`nqf.training.train`), recording the
    features $z_k = (P^\top WW^\top P)_{kk}$ and the residuals at every step; time is $t = \eta\cdot$step.
    ``data`` must satisfy ZGZ (no ``gs``, ``Bs``)."""
    data = require_data(data)
    if not data.zgz:
        raise ValueError("`full_batch_gd` trains f = f0 + Tr[W^T A W] (ZGZ data); `data` carries `gs` or `Bs`.")
    p = data.p
    W0 = jnp.asarray(W0, dtype=float)
    check_shape("W0", W0, (p, None), "initial weights (p, d)")
    check_positive("eta", eta)
    num_steps = check_int("num_steps", num_steps)
    P = jnp.eye(p) if P is None else jnp.asarray(P, dtype=float)
    check_shape("P", P, (p, p), "feature basis (columns)")

    res = train(NQFLoss(), W0, optimizer("sgd", float(eta)), num_steps=int(num_steps), data=data,
                args={"data": data, "P": P}, record=_GDRecord())
    hist = {"record": res.record}
    z, res, off = (np.asarray(v) for v in hist["record"])
    return GDRun(eta * np.arange(num_steps + 1), z, res, float(off.max()))
