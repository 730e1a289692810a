r"""The loss and record values shared by every run of :func:`nqf.training.train`.

Each is an ``equinox.Module`` (hashable by value), so a compiled run is cached on *what* the loss is,
never on a closure. Every loss is the paper's MSE (Eq. 26, :func:`nqf.model.mse`): the mean over
samples of the squared error summed over outputs.

* :class:`OutputLoss` — of a module ``apply(params, x)`` or of its NQF, on batches ``(xs, ys)``;
* :class:`NQFLoss` — of the NQF written in its weights, $\mathcal L(WW^\top)$ on an :class:`~nqf.model.NQFData`;
* :class:`BatchLoss` and :class:`Record` — a user's ``loss_fn(params, batch)`` and ``record_fn(params)``
  as values of the trainer's signatures.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax

from ..model import mse
from ..model import mse_loss
from ..structure import module_out
from ..structure import nqf_out


class OutputLoss(eqx.Module):
    """The loss of Eq. 26 (:func:`nqf.model.mse`) of a module (``nqf=False``) or of its NQF (``nqf=True``)
    on a batch ``(xs, ys)``; the frozen leaves come through ``args["frozen"]``."""

    apply: Callable
    nqf: bool = eqx.field(static=True)

    def predict(self, tr, args, xs):
        fn = nqf_out if self.nqf else module_out
        return jax.vmap(lambda x: fn(self.apply, tr, args["frozen"], x))(xs)

    def __call__(self, tr, batch, args):
        xb, yb = batch
        return mse(self.predict(tr, args, xb), yb)


class NQFLoss(eqx.Module):
    r"""The NQF's loss in its weights, $\mathcal L(WW^\top)$ (Eq. 26, :func:`nqf.model.mse_loss`), on the
    batch, an :class:`~nqf.model.NQFData` (``train(NQFLoss(), W0, opt, data=nqf_data, ...)``)."""

    def __call__(self, W, batch, args):
        return mse_loss(W @ W.T, batch)


class BatchLoss(eqx.Module):
    """A loss ``fn(params, batch)`` as the trainer's ``loss(params, batch, args)``. ``fn`` is static:
    pass the same function object to reuse the compiled run."""

    fn: Callable = eqx.field(static=True)

    def __call__(self, params, batch, args):
        return self.fn(params, batch)


class Record(eqx.Module):
    """A function ``fn(params)`` as the trainer's ``record(params, args)`` (``fn`` static)."""

    fn: Callable = eqx.field(static=True)

    def __call__(self, params, args):
        return self.fn(params)
