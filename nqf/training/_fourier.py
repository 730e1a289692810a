r"""Full-batch gradient descent on the Fourier MLP of Eq. (50) and on its NQF (Fig. 5): configurations of
the one trainer :func:`nqf.training.train` (``optax.sgd``, loss of Eq. 26, ``n`` models vmapped).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import check_size
from .._checks import check_ndim
from .._checks import check_positive
from .._types import ArrayLike
from ..architectures._fourier import fourier_mlp_batch
from ..architectures._fourier import raw_tanh_mlp
from ._trainer import optimizer
from ._trainer import train


def _check_run(eta, num_steps, every) -> None:
    check_positive("eta", eta)
    check_size("num_steps", num_steps)
    check_size("every", every)
    if int(num_steps) % int(every):
        raise ValueError(f"`every` must divide `num_steps` = {num_steps}; got {every!r}.")


class _FourierLoss(eqx.Module):
    nqf: bool = eqx.field(static=True)

    def __call__(self, p, batch, args):
        y, s, xs, w, pre = args
        return jnp.sum(w * (fourier_mlp_batch(p, xs, s, pre, nqf=self.nqf) - y) ** 2)


class _FourierRecord(eqx.Module):
    loss: _FourierLoss

    def __call__(self, p, args):
        return self.loss(p, None, args), p[0] * p[1]


class _RawLoss(eqx.Module):
    def __call__(self, p, batch, args):
        xs, ys = args
        return jnp.mean((raw_tanh_mlp(p, xs) - ys) ** 2)


class _RawRecord(eqx.Module):
    def __call__(self, p, args):
        return _RawLoss()(p, None, args)


class _EigenLoss(eqx.Module):
    def __call__(self, p, batch, args):
        b, c = args
        return jnp.sum((c * p[0] * p[1] - b) ** 2)


class _EigenRecord(eqx.Module):
    def __call__(self, p, args):
        return _EigenLoss()(p, None, args), p[0] * p[1]


def fourier_gd(
    params0: Float[ArrayLike, "n 2 P"], xs: Float[ArrayLike, " M"], ys: Float[ArrayLike, "n M"],
    s: Float[ArrayLike, "n P"], pre: float, eta: float, num_steps: int, *, every: int = 10, nqf: bool = False,
    weights: Float[ArrayLike, " M"] | None = None,
) -> tuple[Float[Array, "n R"], Float[Array, "n R P"]]:
    r"""Full-batch gradient descent on the loss of Eq. (26), $\frac1M\sum_\mu(f(x_\mu) - y_\mu)^2$ (no ½), for
    ``n`` independent Fourier MLPs at once (``jax.vmap``; e.g. one per $\theta$), the whole loop in
    ``lax.scan``. ``nqf=True`` trains the NQF of the module (:meth:`~nqf.architectures.FourierMLP.apply_nqf`) instead.
    A configuration of :func:`nqf.training.train` (``optax.sgd``; ``n`` runs vmapped).

    ``weights`` (default uniform) weigh the grid points in the mean: on a uniform grid $x_\mu = \mu/M$ the
    features and target are even about $x = 1/2$, so the points $\mu$ and $M-\mu$ can be merged into one of
    weight 2 (:meth:`nqf.datasets.FourierData.folded`), which halves the cost and changes nothing.

    Returns the loss and the products $a_kW_k$ every ``every`` steps, from step 0 to ``num_steps``
    (``num_steps // every + 1`` records; time $t = \eta\cdot$step)."""
    params0, xs, ys, s = (jnp.asarray(v, dtype=float) for v in (params0, xs, ys, s))
    check_ndim("params0", params0, 3, "(n, 2, P): rows (a, W) of n models")
    n, two, P = params0.shape
    if two != 2:
        raise ValueError(f"`params0` must have shape (n, 2, P); got {params0.shape}.")
    if ys.shape != (n, xs.shape[0]) or s.shape != (n, P):
        raise ValueError(f"`ys` must have shape {(n, xs.shape[0])} and `s` {(n, P)}; got {ys.shape} and {s.shape}.")
    _check_run(eta, num_steps, every)
    w = jnp.ones(xs.shape[0]) if weights is None else jnp.asarray(weights, dtype=float)
    if w.shape != xs.shape or bool(jnp.any(w < 0)):
        raise ValueError(f"`weights` must be non-negative with the shape of `xs` {xs.shape}; got {w.shape}.")
    shared = (xs, w / jnp.sum(w), jnp.asarray(float(pre)))  # broadcast to the n runs (vmapped args)
    args = (ys, s) + tuple(jnp.broadcast_to(a, (n,) + a.shape) for a in shared)
    loss = _FourierLoss(bool(nqf))
    res = train(loss, params0, optimizer("sgd", float(eta)), num_steps=int(num_steps), args=args,
                record=_FourierRecord(loss), record_every=int(every), vmap=("params", "args"))
    L, u = res.record
    return jnp.asarray(L), jnp.asarray(u)


def raw_mlp_gd(params0: dict, xs: Float[ArrayLike, " M"], ys: Float[ArrayLike, " M"], eta: float, num_steps: int,
               *, every: int = 10) -> Float[Array, " R"]:
    r"""Full-batch GD on the loss of Eq. (26) for :func:`~nqf.architectures.raw_tanh_mlp` (the baseline of Fig. 5); returns the
    loss every ``every`` steps from step 0 to ``num_steps``."""
    _check_run(eta, num_steps, every)
    res = train(_RawLoss(), params0, optimizer("sgd", float(eta)), num_steps=int(num_steps),
                args=(jnp.asarray(xs, dtype=float), jnp.asarray(ys, dtype=float)), record=_RawRecord(),
                record_every=int(every))
    return jnp.asarray(res.record)


def fourier_nqf_gd(
    params0: Float[ArrayLike, "n 2 P"], b: Float[ArrayLike, "n P"], c: Float[ArrayLike, "n P"], eta: float, num_steps: int,
    *, every: int = 10,
) -> tuple[Float[Array, "n R"], Float[Array, "n R P"]]:
    r"""Full-batch GD on the NQF of the Fourier MLP, written in its eigenbasis. On a uniform grid of $M > 2P$
    points the features are orthonormal, so for a target $\sum_kb_k\psi_k$ the loss of Eq. (26) is exactly
    $\mathcal L = \sum_k(c_ka_kW_k - b_k)^2$ and GD acts on each unit alone:
    $a_k \leftarrow a_k - 2\eta(c_ka_kW_k - b_k)c_kW_k$, $W_k \leftarrow W_k - 2\eta(c_ka_kW_k - b_k)c_ka_k$
    (the trainer differentiates this loss). Same iterates as :func:`fourier_gd` with ``nqf=True`` (a test
    checks it) at $O(P)$ cost per step.
    Returns the loss and $a_kW_k$ every ``every`` steps."""
    params0, b, c = (jnp.asarray(v, dtype=float) for v in (params0, b, c))
    check_ndim("params0", params0, 3, "(n, 2, P): rows (a, W) of n models")
    n, two, P = params0.shape
    if two != 2 or b.shape != (n, P) or c.shape != (n, P):
        raise ValueError(f"need params0 (n, 2, P), b and c (n, P); got {params0.shape}, {b.shape}, {c.shape}.")
    _check_run(eta, num_steps, every)
    res = train(_EigenLoss(), params0, optimizer("sgd", float(eta)), num_steps=int(num_steps), args=(b, c),
                record=_EigenRecord(), record_every=int(every), vmap=("params", "args"))
    L, u = res.record
    return jnp.asarray(L), jnp.asarray(u)
