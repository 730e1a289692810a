"""Chapter 5's recipe (also used by Chapter 7): full-batch GD on the weights W of an NQF, recording its features.

:func:`full_batch_gd` is one run of :func:`nqf.training.train`: plain GD (``optax.sgd``) on the paper's loss of the
NQF written in its weights, $\\mathcal L(WW^\\top)$ (Eq. 26, :class:`nqf.training.NQFLoss`), recording the features
$z_k = (P^\\top WW^\\top P)_{kk}$ and the residuals at every step; step $k$ is flow time $t = \\eta k$.
"""

from typing import NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np

import nqf
from nqf.training import NQFLoss, optimizer, train


class FeatureRecord(eqx.Module):
    """diag(P^T W W^T P), the residuals of W W^T on ``args["data"]``, and the largest off-diagonal entry."""

    def __call__(self, W, args):
        Mt = args["P"].T @ W @ W.T @ args["P"]
        return jnp.diag(Mt), nqf.model.residuals(W @ W.T, args["data"]), jnp.max(jnp.abs(Mt - jnp.diag(jnp.diag(Mt))))


class GDRun(NamedTuple):
    t: np.ndarray  #: (num_steps + 1,) flow time eta * step
    z: np.ndarray  #: (num_steps + 1, p) features diag(P^T W W^T P)
    residuals: np.ndarray  #: (num_steps + 1, m)
    offdiag: float  #: max |(P^T W W^T P)_ij|, i != j, over the run (0 while W stays diagonal)


def full_batch_gd(W0, data, *, learning_rate: float, num_steps: int, P=None) -> GDRun:
    """GD on W from ``W0`` (p, d) for the NQF loss of ``data`` (ZGZ data: no ``gs``, ``Bs``); ``P``: the feature basis."""
    if not data.zgz:
        raise ValueError("`data` must satisfy ZGZ (no `gs`, `Bs`): GD trains f = f0 + Tr[W^T A W].")
    P = jnp.eye(data.p) if P is None else jnp.asarray(P, dtype=float)
    run = train(NQFLoss(), jnp.asarray(W0, dtype=float), optimizer("sgd", float(learning_rate)), num_steps=num_steps,
                data=data, args={"data": data, "P": P}, record=FeatureRecord())
    z, res, off = run.record
    return GDRun(learning_rate * np.arange(num_steps + 1), z, res, float(off.max()))
