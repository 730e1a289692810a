r"""The model linearised at its own $W(0)$: the kernel (lazy) regime's surrogate, beside the NQF (the quadratic
regime's, at $W = 0$). $f^{\mathrm{lin}}_x(W) = f_x(W_0) + J_x(W_0)\,(W - W_0)$, one ``jax.jvp``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax


def linearised_out(apply: Callable, tr0: Any, tr: Any, frozen: Any, x: Any):
    r"""$f_x(W_0) + J_x(W_0)(W - W_0)$ for the trainable leaves ``tr`` (``tr0`` at $W_0$), shared leaves ``frozen``
    fixed; ``apply(params, x)`` is the model."""
    f = lambda t: apply(eqx.combine(t, frozen), x)  # noqa: E731
    y0, dy = jax.jvp(f, (tr0,), (jax.tree_util.tree_map(lambda a, b: a - b, tr, tr0),))
    return y0 + dy


class LinearisedFit(eqx.Module):
    """The trainer's loss of the linearised model, ``loss(params, batch, args)``: ``batch = (xs, ys)``,
    ``args["tr0"]`` the weights it is linearised at, ``args["frozen"]`` the shared leaves."""

    apply: Callable = eqx.field(static=True)
    loss: Callable = eqx.field(static=True)

    def __call__(self, tr, batch, args):
        xs, ys = batch
        out = jax.vmap(lambda x: linearised_out(self.apply, args["tr0"], tr, args["frozen"], x))(xs)
        return self.loss(out, ys)


class LinearisedRecord(eqx.Module):
    """The trainer's record of the linearised run: on ``args["probe"]``, the surrogate's outputs (``"outputs"``) and
    the model's at the surrogate's weights (``"model_outputs"``)."""

    apply: Callable = eqx.field(static=True)

    def __call__(self, tr, args):
        px = args["probe"]
        lin = jax.vmap(lambda x: linearised_out(self.apply, args["tr0"], tr, args["frozen"], x))(px)
        mod = jax.vmap(lambda x: self.apply(eqx.combine(tr, args["frozen"]), x))(px)
        return {"outputs": lin, "model_outputs": mod}
