"""Chapter 7's recipes: full-batch GD (``optax.sgd``; the loss of Eq. 26) as runs of :func:`nqf.training.train`, recording
the loss (and the products $a_kW_k$) every ``record_every`` steps from step 0 to ``num_steps``; time $t = \\eta\\cdot$step.
:func:`fourier_gd`: ``n`` Fourier MLPs of Eq. (50), or their NQFs (``nqf=True``), vmapped; ``weights`` weigh the grid
points (:meth:`nqf.datasets.FourierData.folded`). :func:`fourier_nqf_gd`: that NQF in its eigenbasis,
$\\sum_k(c_ka_kW_k - b_k)^2$ (the same iterates). :func:`raw_mlp_gd`: Fig. 5's baseline on raw $x$.
:func:`all_modes_gd`: one-hot data with W diagonal, one scalar per mode, $\\frac1K\\sum_k(a_kw_k^2 - y_k)^2$."""

import equinox as eqx
import jax.numpy as jnp

from nqf.architectures import fourier_mlp, raw_tanh_mlp
from nqf.model import MSE, mse
from nqf.training import Runs, optimizer, train

SUMMED = MSE(samples="sum")  # summed over the modes (the eigenbasis) or over the weighted grid points


class Loss(eqx.Module):
    """The four losses, of the parameters and ``args``: the one loss convention, :class:`nqf.model.MSE`."""
    kind: str = eqx.field(static=True)

    def __call__(self, p, batch, args):
        if self.kind == "eigen":
            return SUMMED(args[1] * p[0] * p[1], args[0])
        if self.kind == "raw":
            return mse(raw_tanh_mlp(p, args[0]), args[1])
        if self.kind == "modes":
            return mse(args[0] * p**2, args[1])
        y, s, xs, w, pre = args
        return SUMMED(fourier_mlp(p, xs, s, pre, nqf=self.kind == "nqf"), y, weights=w)


class Recorded(eqx.Module):
    """The loss, and with ``products`` a_k W_k (the parameters are rows ``(a, W)``)."""
    loss: Loss
    products: bool = eqx.field(static=True)

    def __call__(self, p, args):
        return (self.loss(p, None, args), p[0] * p[1]) if self.products else self.loss(p, None, args)


def _gd(kind, params0, args, *, learning_rate, num_steps, record_every, vmapped=False, products=True):
    f = lambda a: jnp.asarray(a, dtype=float)  # noqa: E731
    loss, products = Loss(kind), products and kind not in ("raw", "modes")
    return train(loss, params0 if kind == "raw" else f(params0), optimizer("sgd", float(learning_rate)),
                 num_steps=num_steps, args=tuple(map(f, args)), record=Recorded(loss, products),
                 runs=Runs(record_every, ("params", "args") if vmapped else ())).record


def fourier_gd(params0, xs, ys, s, *, pre, nqf=False, weights=None, **run):
    """params0 (n, 2, P), ys (n, M), s (n, P): the loss (n, R) and a_k W_k (n, R, P)."""
    w = jnp.ones(len(xs)) if weights is None else jnp.asarray(weights, dtype=float)
    shared = (jnp.asarray(xs, dtype=float), w / jnp.sum(w), jnp.asarray(float(pre)))  # the same for the n runs
    args = (ys, s) + tuple(jnp.broadcast_to(a, (len(params0),) + a.shape) for a in shared)
    return _gd("nqf" if nqf else "module", params0, args, vmapped=True, **run)


def fourier_nqf_gd(params0, b, c, *, products=True, **run):
    """params0 (n, 2, P), b, c (n, P): the loss (n, R) and a_k W_k (n, R, P); with ``products=False`` the loss only."""
    return _gd("eigen", params0, (b, c), vmapped=True, products=products, **run)


def raw_mlp_gd(params0, xs, ys, **run):
    return _gd("raw", params0, (xs, ys), **run)


def all_modes_gd(w0, a, y, **run):
    return _gd("modes", w0, (a, y), **run)
