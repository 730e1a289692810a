r"""The model linearised at its own $W(0)$: the kernel (lazy) regime's surrogate, beside the NQF (the quadratic
regime's, at $W = 0$). $f^{\mathrm{lin}}_x(W) = f_x(W_0) + J_x(W_0)\,(W - W_0)$.

Two evaluations of the same surrogate:

* **matrix-free** (:class:`LinearisedFit`): one ``jax.jvp`` of the model per sample and step, for any loss;
* **Gauss–Newton** (:class:`LinearisedKernelFit`): under a :class:`~nqf.model.MSE` loss the surrogate's loss is
  *exactly* quadratic in $\delta = W - W_0$ (flattened, $P$ entries),
  $\mathcal L(\delta) = c\,(\|r_0\|^2 + 2\,b^\top\delta + \delta^\top G\,\delta)$ with $r_0 = f(W_0) - y$ over the
  training set, $G = J^\top J$ ($P\times P$), $b = J^\top r_0$ and $c$ the loss's normalisation; a step then costs one
  $P\times P$ product instead of a pass through the model. Used when $J$ over the training set fits
  :data:`JACOBIAN_MAX_ENTRIES` and $P \le$ :data:`KERNEL_MAX_P` (:func:`kernel_form`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ._model import MSE

#: the largest Jacobian (training and probe inputs x outputs x P, float64 entries) the Gauss-Newton form builds:
#: 2^25 entries = 256 MB, a tenth of the 2.5 GB issue 51 allows diagnose at 784-256-10
JACOBIAN_MAX_ENTRIES = 2**25
#: the largest P for the Gauss-Newton form: G = J^T J of 4096^2 float64 entries is 128 MB, and a step's P x P product
#: (1.7e7 multiply-adds) stays below a pass of a model with that many weights over a few hundred samples
KERNEL_MAX_P = 4096


def linearised_out(apply: Callable, tr0: Any, tr: Any, frozen: Any, x: Any):
    r"""$f_x(W_0) + J_x(W_0)(W - W_0)$ for the trainable leaves ``tr`` (``tr0`` at $W_0$), shared leaves ``frozen``
    fixed; ``apply(params, x)`` is the model."""
    f = lambda t: apply(eqx.combine(t, frozen), x)  # noqa: E731
    y0, dy = jax.jvp(f, (tr0,), (jax.tree_util.tree_map(lambda a, b: a - b, tr, tr0),))
    return y0 + dy


class LinearisedFit(eqx.Module):
    """The trainer's loss of the linearised model, matrix-free, ``loss(params, batch, args)``: ``batch = (xs, ys)``,
    ``args["tr0"]`` the weights it is linearised at, ``args["frozen"]`` the shared leaves."""

    apply: Callable = eqx.field(static=True)
    loss: Callable = eqx.field(static=True)

    def __call__(self, tr, batch, args):
        xs, ys = batch
        out = jax.vmap(lambda x: linearised_out(self.apply, args["tr0"], tr, args["frozen"], x))(xs)
        return self.loss(out, ys)


class LinearisedRecord(eqx.Module):
    """The trainer's record of the linearised run: on ``args["probe"]``, the surrogate's outputs (``"outputs"``) and
    the model's at the surrogate's weights (``"model_outputs"``). With ``args["Jp"]`` (the Gauss–Newton form) the
    surrogate's outputs are ``args["fp0"] + Jp (W - W_0)``, else one ``jax.jvp`` per probe input."""

    apply: Callable = eqx.field(static=True)

    def __call__(self, tr, args):
        px = args["probe"]
        if "Jp" in args:
            d = ravel_pytree(tr)[0] - args["flat0"]
            lin = args["fp0"] + jnp.reshape(args["Jp"] @ d, jnp.shape(args["fp0"]))
        else:
            lin = jax.vmap(lambda x: linearised_out(self.apply, args["tr0"], tr, args["frozen"], x))(px)
        mod = jax.vmap(lambda x: self.apply(eqx.combine(tr, args["frozen"]), x))(px)
        return {"outputs": lin, "model_outputs": mod}


class LinearisedKernelFit(eqx.Module):
    r"""The trainer's loss of the linearised model under an MSE loss, in its exact Gauss–Newton form
    $c\,(e_0 + 2\,b^\top\delta + \delta^\top G\,\delta)$, $\delta$ = the flattened ``params - args["tr0"]``
    (``args``: ``flat0``, ``G``, ``b``, ``e0``, ``c`` from :func:`kernel_form`); the batch is not used (full batch)."""

    def __call__(self, tr, batch, args):
        d = ravel_pytree(tr)[0] - args["flat0"]
        return args["c"] * (args["e0"] + 2.0 * jnp.dot(args["b"], d) + jnp.dot(d, args["G"] @ d))


@eqx.filter_jit
def _jacobian(apply, tr0, frozen, xs):
    """``(f(W_0) (N, *o), J (N * o, P))`` over the inputs ``xs``: forward mode along the P flattened directions."""
    flat0, unravel = ravel_pytree(tr0)
    f = lambda v: jax.vmap(lambda x: apply(eqx.combine(unravel(v), frozen), x))(xs)  # noqa: E731
    f0, push = jax.linearize(f, flat0)
    J = jax.vmap(push, out_axes=-1)(jnp.eye(flat0.size, dtype=flat0.dtype))
    return f0, jnp.reshape(J, (-1, flat0.size))


def kernel_form(apply: Callable, tr0: Any, frozen: Any, data: Any, probe: Any, loss: Any) -> dict | None:
    r"""The arrays of the Gauss–Newton form (``args`` of :class:`LinearisedKernelFit` and :class:`LinearisedRecord`),
    or ``None`` where it does not apply: a loss other than an :class:`~nqf.model.MSE` (the form is exact only for a
    loss quadratic in the outputs), or a Jacobian larger than the caps."""
    xs, ys = data
    n_train = int(np.shape(ys)[0])
    n_probe = int(np.shape(jax.tree_util.tree_leaves(probe)[0])[0])
    P = int(sum(np.size(a) for a in jax.tree_util.tree_leaves(tr0)))
    width = int(np.prod(np.shape(ys)[1:], dtype=np.int64))
    if not isinstance(loss, MSE) or P > KERNEL_MAX_P or (n_train + n_probe) * width * P > JACOBIAN_MAX_ENTRIES:
        return None
    both = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([jnp.asarray(a), jnp.asarray(b)]), xs, probe)
    f0, J = _jacobian(apply, tr0, frozen, both)
    rows = n_train * width
    r0 = jnp.reshape(f0[:n_train] - jnp.asarray(ys), (-1,))
    Jt = J[:rows]
    ones = jnp.ones((n_train, width))
    c = loss(ones, jnp.zeros_like(ones)) / (n_train * width)  # the loss of unit residuals: its normalisation
    return {"flat0": ravel_pytree(tr0)[0], "G": Jt.T @ Jt, "b": Jt.T @ r0, "e0": r0 @ r0, "c": c,
            "Jp": J[rows:], "fp0": f0[n_train:]}
