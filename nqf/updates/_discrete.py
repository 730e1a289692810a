r"""The exact discrete update on $(M, \mu)$: SGD, heavy-ball momentum and weight decay (Thm 2, Cor. 2).

**Theorem 2 (Eqs. 23-24).** With the paper's MSE $\frac1b\sum_{x\in\mathcal B}(f_x - y_x)^2$, $\ell'_x = 2(f_x - y_x)/b$,
$v = \sum_x \ell'_x (g(x) + 2B(x)\mu)$ and $H = \sum_x 2\ell'_x A(x)$, neuron $i$'s gradient is $G_i = v + Hw_i$, and
one SGD step on any $W$ with $WW^\top = M$, $W\mathbf 1 = \mu$ and $d$ columns gives $\Delta\mu = -\eta(d\,v + H\mu)$,
$\Delta M = -\eta(v\mu^\top + \mu v^\top + HM + MH) + \eta^2(d\,vv^\top + v\mu^\top H + H\mu v^\top + HMH)$.
Corollary 2 (momentum, weight decay: Eqs. 209-217) closes on the joint moments of $W$ and the momentum buffer
$V$; its recursion is :func:`nqf.model._update.moment_update`'s.
"""

from __future__ import annotations

import warnings

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int
from .._checks import (check_finite, check_index_traced, check_ndim, check_positive, check_real, check_shape,
    check_size, invalid, is_concrete, wrong_kind)
from .._types import ArrayLike, Matrix, Weights
from ..model._data import NQFData, require_data
from ..model._model import check_order_parameter, outputs
from ..model._update import moment_update


# ------------------------------------------------------------------ the state
class SGDState(NamedTuple):
    r"""The state of the exact update: joint moments of the weights $W$ and the momentum
    buffer $V$ (Thm 2, Cor. 2). Without momentum $V$ is the last step's gradient
    (plus weight decay), which the next step does not use.

    Attributes:
        M: $WW^\top$, shape ``(p, p)``.
        mu: $W\mathbf 1$, shape ``(p,)``.
        N: $WV^\top$ (not symmetric), shape ``(p, p)``.
        K: $VV^\top$, shape ``(p, p)``.
        nu: $V\mathbf 1$, shape ``(p,)``.

    A trajectory (from :func:`nqf_sgd`) carries a leading time axis on every field.
    """

    M: Array
    mu: Array
    N: Array
    K: Array
    nu: Array


def sgd_state(M: Matrix, mu: Float[ArrayLike, " p"]) -> SGDState:
    """The state at step 0 with an empty momentum buffer ($V = 0$), as optax starts."""
    M = jnp.asarray(M, dtype=float)
    mu = jnp.asarray(mu, dtype=float)
    z = jnp.zeros_like(M)
    return SGDState(M, mu, z, z, jnp.zeros_like(mu))


def _as_state(state, p: int) -> SGDState:
    """Validate a state: an :class:`SGDState` or a pair ``(M, mu)`` (then the buffer is empty)."""
    if isinstance(state, SGDState):
        check_order_parameter(state.M, p)
        check_shape("state.mu", state.mu, (p,), "sum of the neurons")
        check_shape("state.N", state.N, (p, p), "W V^T")
        check_shape("state.K", state.K, (p, p), "V V^T")
        check_shape("state.nu", state.nu, (p,), "V 1")
        for name in SGDState._fields:
            check_finite(f"state.{name}", getattr(state, name))
        return SGDState(*(jnp.asarray(x, dtype=float) for x in state))
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise wrong_kind("state", 'be an SGDState or a pair (M, mu) of shapes (p, p) and (p,)',
                         f"{type(state).__name__}{('' if not isinstance(state, (tuple, list)) else f' of length {len(state)}')}")
    M, mu = state
    check_order_parameter(M, p)
    check_shape("mu", mu, (p,), "sum of the neurons")
    check_finite("mu", mu)
    return sgd_state(M, mu)


def _check_options(eta, d, momentum, weight_decay) -> tuple[float, float, float, float]:
    check_positive("eta", eta)
    d = check_size("d", d)
    check_real("momentum", momentum)
    b = float(momentum)
    if not (0.0 <= b < 1.0):
        raise invalid("momentum", 'be in [0, 1)', f'{momentum!r}')
    check_positive("weight_decay", weight_decay, strict=False)
    return float(eta), float(d), b, float(weight_decay)


def _check_batches(batches, m: int) -> Int[Array, "steps b"]:
    check_ndim("batches", batches, 2, "one row of sample indices per step")
    # concrete indices are checked now; traced ones (a caller's jit) by equinox.error_if at run time
    return check_index_traced("batches", jnp.asarray(batches), m)


# ------------------------------------------------------------------ the update (one implementation)
def _v_and_H(M, mu, batch: NQFData):
    r"""$v = \sum_x\ell'_x(g + 2B\mu)$ and $H = \sum_x 2\ell'_xA$ on a minibatch (Eq. 23)."""
    b = batch.As.shape[0]
    f = outputs(M, batch, mu=mu)
    lp = 2.0 * (f - batch.ys) / b  # the paper's MSE, no factor 1/2
    H = 2.0 * jnp.einsum("b,bij->ij", lp, batch.As)
    v = jnp.zeros_like(mu)
    if batch.gs is not None:
        v = v + lp @ batch.gs
    if batch.Bs is not None:
        v = v + 2.0 * jnp.einsum("b,bij,j->i", lp, batch.Bs, mu)
    return v, H


def _update(state: SGDState, batch: NQFData, eta, d, beta, wd) -> SGDState:
    """Eqs. (23)-(24) with momentum ``beta`` and weight decay ``wd`` (Cor. 2) on the minibatch
    ``batch``: $v$, $H$ of the NQF (Eq. 20), then :func:`nqf.model._update.moment_update`.
    Traceable in every number, so one compilation serves all learning rates, widths and options."""
    v, H = _v_and_H(state.M, state.mu, batch)
    return SGDState(*moment_update(tuple(state), v, H, eta, d, beta, wd))


@jax.jit
def _sgd_scan(state0, data, batches, eta, d, beta, wd):
    """The scan of :func:`nqf_sgd`: data and every number are arguments, so it compiles once per shape."""

    def body(state, idx):
        state = _update(state, data.subset(idx), eta, d, beta, wd)
        return state, state

    _, traj = jax.lax.scan(body, state0, batches)
    return SGDState(*(jnp.concatenate([s0[None], s]) for s0, s in zip(state0, traj)))


def nqf_sgd(state, data: NQFData, batches: Int[ArrayLike, "steps b"], *, eta: float, d: int,
            momentum: float = 0.0, weight_decay: float = 0.0) -> SGDState:
    r"""Exact steps on $(M, \mu)$, one per row of minibatch indices in ``batches``: SGD (Theorem 2,
    Eqs. 23-24), with heavy-ball ``momentum`` $\beta$ and coupled ``weight_decay`` $\lambda$ as options
    (Cor. 2, Eqs. 209-217). One ``lax.scan``, compiled once per shape: a
    new dataset, learning rate, width or option reuses it.

    Each step equals one step of ``optax.chain(optax.add_decayed_weights(weight_decay),
    optax.sgd(eta, momentum=momentum))`` on any $W$ with $WW^\top = M$, $W\mathbf 1 = \mu$ and $d$
    columns, to rounding. Full-batch GD is ``batches = jnp.tile(jnp.arange(m), (steps, 1))``; one step
    on the minibatch ``idx`` is ``batches = idx[None]``.

    Args:
        state: ``(M0, mu0)`` (empty momentum buffer) or an ``SGDState`` (the fields below).
        data: the training set, an :class:`~nqf.model.NQFData`.
        batches: integer sample indices, one row per step, shape ``(steps, b)``.
        eta: learning rate. d: number of neurons (width).
        momentum: $\beta\in[0, 1)$. weight_decay: $\lambda \ge 0$, added to the gradient as $\lambda W$.

    Returns:
        An ``SGDState`` whose fields ``M`` ($WW^\top$), ``mu`` ($W\mathbf 1$), ``N`` ($WV^\top$), ``K``
        ($VV^\top$) and ``nu`` ($V\mathbf 1$, $V$ the momentum buffer) carry a leading axis ``steps + 1``
        (step 0 included).
    """
    data = require_data(data)
    state0 = _as_state(state, data.p)
    batches = _check_batches(batches, data.m)
    run = _sgd_scan(state0, data, batches, *_check_options(eta, d, momentum, weight_decay))
    _warn_if_diverged(run.M, eta)
    return run


def _warn_if_diverged(Ms, eta) -> None:
    """A run whose order parameters became non-finite says so (never a silent NaN)."""
    if not is_concrete(Ms):
        return  # under a caller's jit: the caller sees the values
    bad = ~np.isfinite(np.asarray(Ms)).reshape(Ms.shape[0], -1).all(axis=1)
    if bad.any():
        warnings.warn(f"the NQF run diverged: M is non-finite from step {int(np.argmax(bad))} at `eta` = "
                      f"{float(eta):g}; lower `eta` or the initial scale.", RuntimeWarning, stacklevel=3)


# ------------------------------------------------------------------ weights
def _orthonormal_complement_of_ones(d: int) -> np.ndarray:
    r"""Rows: an orthonormal basis of $\mathbf 1^\perp \subset \mathbb R^d$, shape ``(d-1, d)``."""
    q, _ = np.linalg.qr(np.concatenate([np.ones((d, 1)), np.eye(d)[:, : d - 1]], axis=1))
    return q[:, 1:].T


def weights_from_statistics(M: Matrix, mu: Float[ArrayLike, " p"], d: int, *, seed: int | None = None,
                            rtol: float = 1e-10) -> Float[Array, "p d"]:
    r"""Weights $W \in \mathbb R^{p\times d}$ with $WW^\top = M$ and $W\mathbf 1 = \mu$.

    Construction of App. A.11 (Eqs. 104–105): $w_i = \mu/d + u_i$ with
    $\sum_i u_i = 0$ and $\sum_i u_i u_i^\top = C := M - \mu\mu^\top/d$; writing
    $C = LL^\top$ and $U = LZ$ with the rows of $Z$ orthonormal and orthogonal to
    $\mathbf 1$. Such $W$ exists iff $C$ is PSD with rank at most $d-1$.

    Args:
        M, mu: target statistics, shapes ``(p, p)`` and ``(p,)``.
        d: width (number of columns of ``W``).
        seed: ``None`` for a deterministic $Z$; an int rotates $Z$ by a random
            orthogonal matrix of $\mathbf 1^\perp$, giving another $W$ with the
            same statistics.
        rtol: relative tolerance for the PSD and rank checks.
    """
    d = check_size("d", d)
    p = check_order_parameter(M)
    check_shape("mu", mu, (p,), "sum of the neurons")
    check_finite("mu", mu)
    M = np.asarray(M, dtype=float)
    mu = np.asarray(mu, dtype=float)
    C = M - np.outer(mu, mu) / d
    C = 0.5 * (C + C.T)
    lam, Q = np.linalg.eigh(C)
    scale = max(float(np.max(np.abs(lam))), float(np.max(np.abs(M))), 1e-300)
    if lam.min() < -rtol * scale:
        raise invalid("mu", f"be, with `M`, the statistics of width-{d} weights (M - mu mu^T/d must be PSD)",
                      f"smallest eigenvalue {lam.min():.3g}")
    keep = lam > rtol * scale
    r = int(keep.sum())
    if r > d - 1:
        raise invalid("d", f"be large enough: M - mu mu^T/d has rank {r}, and width d reaches rank at most d - 1 "
                      "(App. A.11, Eq. 104)", f"d = {d}")
    L = Q[:, keep] * np.sqrt(lam[keep])
    Z = _orthonormal_complement_of_ones(d)
    if seed is not None and d > 2:
        O, R = np.linalg.qr(np.random.default_rng(seed).normal(size=(d - 1, d - 1)))
        Z = (O * np.sign(np.diag(R))).T @ Z
    W = np.outer(mu, np.ones(d)) / d + L @ Z[:r]
    return jnp.asarray(W)


def same_statistics(W: Weights, *, seed: int) -> Float[Array, "p d"]:
    r"""Another weight matrix $W Q$ with the same $M = WW^\top$ and $\mu = W\mathbf 1$.

    $Q = \mathbf 1\mathbf 1^\top/d + Z^\top O Z$ with $O$ a random orthogonal
    matrix of $\mathbf 1^\perp$ (Haar, from ``seed``), so $Q$ is orthogonal and
    $Q\mathbf 1 = \mathbf 1$. The neurons themselves change (for $d \ge 3$).
    """
    check_ndim("W", W, 2, "p parameters x d neurons")
    check_finite("W", W)
    d = np.shape(W)[1]
    if d < 3:
        raise invalid("W", "have at least 3 neurons to be rotated within 1^perp", f"d = {d}")
    Z = _orthonormal_complement_of_ones(d)
    O, R = np.linalg.qr(np.random.default_rng(seed).normal(size=(d - 1, d - 1)))
    Q = np.ones((d, d)) / d + Z.T @ (O * np.sign(np.diag(R))) @ Z
    return jnp.asarray(W) @ jnp.asarray(Q)


def statistics(W: Weights) -> tuple[Float[Array, "p p"], Float[Array, " p"]]:
    r"""The order parameters $(M, \mu) = (WW^\top, W\mathbf 1)$ of weights ``W`` (Sec. 4)."""
    check_ndim("W", W, 2, "p parameters x d neurons")
    W = jnp.asarray(W)
    return W @ W.T, W.sum(axis=1)


def weight_outputs(W: Weights, data: NQFData) -> Float[Array, " m"]:
    r"""The general NQF (Eq. 20) as a function of the weights,
    $f = f_0 + g^\top W\mathbf 1 + \mathbf 1^\top W^\top B W \mathbf 1 + \mathrm{Tr}[W^\top A W]$ (Eq. 93).

    Differentiable in ``W``: use it to train the weights with optax or to
    compute gradients and NTKs by autodiff. ``data`` may be a minibatch (``data.subset(idx)``)."""
    check_ndim("W", W, 2, "p parameters x d neurons")
    W = jnp.asarray(W)
    return outputs(W @ W.T, data, mu=W.sum(axis=1))


def _trajectory(states, p: int):
    """``(Ms, mus)`` of a trajectory: a pair of stacks, or an :class:`SGDState` trajectory."""
    Ms, mus = (states.M, states.mu) if isinstance(states, SGDState) else states
    check_shape("Ms", Ms, (None, p, p), "trajectory of M")
    check_shape("mus", mus, (np.shape(Ms)[0], p), "trajectory of mu")
    return jnp.asarray(Ms, dtype=float), jnp.asarray(mus, dtype=float)


def step_prediction_error(
    states,
    data: NQFData,
    batches: Int[ArrayLike, "steps b"],
    *,
    eta: float,
    d: int,
) -> tuple[Float[Array, " steps"], Float[Array, " steps"]]:
    r"""How well Eqs. (23)–(24) predict each recorded step of a run, with and without the $\eta^2$ terms.

    For every step $t$ the update of Theorem 2 is applied to the *recorded*
    $(M_t, \mu_t)$ (e.g. the statistics of a run of optax on $W$) and compared
    with the recorded $(M_{t+1}, \mu_{t+1})$. The first-order prediction keeps
    only the part of the update odd in $\eta$,
    $\tfrac12[F_\eta(S) - F_{-\eta}(S)]$, i.e. drops
    $\eta^2(d\,vv^\top + v\mu^\top H + H\mu v^\top + HMH)$.

    Args:
        states: the recorded trajectory, ``(Ms, mus)`` of shapes ``(T, p, p)``, ``(T, p)``.
        data: the training set; ``batches`` its ``T - 1`` minibatch index rows.

    Returns:
        ``(err, err_first_order)``: per step, the largest absolute deviation over
        the entries of $M$ and $\mu$.
    """
    data = require_data(data)
    Ms, mus = _trajectory(states, data.p)
    batches = _check_batches(batches, data.m)
    if batches.shape[0] != Ms.shape[0] - 1:
        raise invalid("batches", f'have one row per step, T - 1 = {Ms.shape[0] - 1}', f'{batches.shape[0]}')
    eta, d, _, _ = _check_options(eta, d, 0.0, 0.0)
    return _prediction_errors(Ms, mus, batches, data, eta, d)


@jax.jit
def _prediction_errors(Ms, mus, batches, data, eta, d):
    def one(M, mu, M1, mu1, idx):
        batch = data.subset(idx)
        S = sgd_state(M, mu)
        Sp = _update(S, batch, eta, d, 0.0, 0.0)
        Sm = _update(S, batch, -eta, d, 0.0, 0.0)
        full = jnp.maximum(jnp.max(jnp.abs(Sp.M - M1)), jnp.max(jnp.abs(Sp.mu - mu1)))
        first = jnp.maximum(jnp.max(jnp.abs(M + 0.5 * (Sp.M - Sm.M) - M1)),
                            jnp.max(jnp.abs(mu + 0.5 * (Sp.mu - Sm.mu) - mu1)))
        return full, first

    return jax.vmap(one)(Ms[:-1], mus[:-1], Ms[1:], mus[1:], batches)
