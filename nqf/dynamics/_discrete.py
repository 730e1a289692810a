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


import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int
from .._checks import check_finite
from .._checks import check_ndim
from .._checks import check_positive
from .._checks import check_shape
from .._types import ArrayLike
from .._types import Matrix
from .._types import StructureStack
from .._types import Targets
from .._types import Weights
from ..model._model import check_dataset
from ..model._model import check_order_parameter
from ..model._model import outputs
from functools import partial
from typing import NamedTuple



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


# ------------------------------------------------------------------ weights
def _check_width(d) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or int(d) < 1:
        raise ValueError(f"`d` (number of neurons) must be an int >= 1; got {d!r}.")
    return int(d)


def _orthonormal_complement_of_ones(d: int) -> np.ndarray:
    r"""Rows: an orthonormal basis of $\mathbf 1^\perp \subset \mathbb R^d$, shape ``(d-1, d)``."""
    q, _ = np.linalg.qr(np.concatenate([np.ones((d, 1)), np.eye(d)[:, : d - 1]], axis=1))
    return q[:, 1:].T


def weights_from_statistics(
    M: Matrix,
    mu: Float[ArrayLike, " p"],
    d: int,
    *,
    seed: int | None = None,
    rtol: float = 1e-10,
) -> Float[Array, "p d"]:
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
    d = _check_width(d)
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
        raise ValueError(
            f"`M` and `mu` are not the statistics of any width-{d} weights: "
            f"M - mu mu^T/d must be PSD; its smallest eigenvalue is {lam.min():.3g}."
        )
    keep = lam > rtol * scale
    r = int(keep.sum())
    if r > d - 1:
        raise ValueError(
            f"`d` = {d} is too small: M - mu mu^T/d has rank {r}, and width d reaches rank "
            f"at most d - 1 = {d - 1} (App. A.11, Eq. 104)."
        )
    L = Q[:, keep] * np.sqrt(lam[keep])
    Z = _orthonormal_complement_of_ones(d)
    if seed is not None and d > 2:
        O, R = np.linalg.qr(np.random.default_rng(seed).normal(size=(d - 1, d - 1)))
        Z = (O * np.sign(np.diag(R))).T @ Z
    W = np.outer(mu, np.ones(d)) / d + L @ Z[:r]
    return jnp.asarray(W)


def same_statistics(W: Weights, seed: int = 0) -> Float[Array, "p d"]:
    r"""Another weight matrix $W Q$ with the same $M = WW^\top$ and $\mu = W\mathbf 1$.

    $Q = \mathbf 1\mathbf 1^\top/d + Z^\top O Z$ with $O$ a random orthogonal
    matrix of $\mathbf 1^\perp$ (Haar, from ``seed``), so $Q$ is orthogonal and
    $Q\mathbf 1 = \mathbf 1$. The neurons themselves change (for $d \ge 3$).
    """
    check_ndim("W", W, 2, "p parameters x d neurons")
    check_finite("W", W)
    d = np.shape(W)[1]
    if d < 3:
        raise ValueError(f"`W` needs at least 3 neurons to be rotated within 1^perp; got d = {d}.")
    Z = _orthonormal_complement_of_ones(d)
    O, R = np.linalg.qr(np.random.default_rng(seed).normal(size=(d - 1, d - 1)))
    Q = np.ones((d, d)) / d + Z.T @ (O * np.sign(np.diag(R))) @ Z
    return jnp.asarray(W) @ jnp.asarray(Q)


def statistics(W: Weights) -> tuple[Float[Array, "p p"], Float[Array, " p"]]:
    r"""The order parameters $(M, \mu) = (WW^\top, W\mathbf 1)$ of weights ``W`` (Sec. 4)."""
    check_ndim("W", W, 2, "p parameters x d neurons")
    W = jnp.asarray(W)
    return W @ W.T, W.sum(axis=1)


def weight_outputs(
    W: Weights,
    As: StructureStack,
    *,
    gs: Float[ArrayLike, "m p"] | None = None,
    Bs: Float[ArrayLike, "m p p"] | None = None,
    f0: Float[ArrayLike, " m"] | float = 0.0,
) -> Float[Array, " m"]:
    r"""The general NQF (Eq. 20) as a function of the weights,
    $f = f_0 + g^\top W\mathbf 1 + \mathbf 1^\top W^\top B W \mathbf 1 + \mathrm{Tr}[W^\top A W]$ (Eq. 93).

    Differentiable in ``W``: use it to train the weights with optax or to
    compute gradients and NTKs by autodiff."""
    check_ndim("W", W, 2, "p parameters x d neurons")
    W = jnp.asarray(W)
    return outputs(W @ W.T, As, mu=W.sum(axis=1), gs=gs, Bs=Bs, f0=f0)


def step_prediction_error(
    Ms: Float[ArrayLike, "T p p"],
    mus: Float[ArrayLike, "T p"],
    As: StructureStack,
    ys: Targets,
    batches: Int[ArrayLike, "steps b"],
    *,
    eta: float,
    d: int,
    gs: Float[ArrayLike, "m p"] | None = None,
    Bs: Float[ArrayLike, "m p p"] | None = None,
    f0: float | Float[ArrayLike, " m"] = 0.0,
) -> tuple[Float[Array, " steps"], Float[Array, " steps"]]:
    r"""How well Eqs. (23)–(24) predict each recorded step of a run, with and without the $\eta^2$ terms.

    For every step $t$ the update of Theorem 2 is applied to the *recorded*
    $(M_t, \mu_t)$ (e.g. the statistics of a run of optax on $W$) and compared
    with the recorded $(M_{t+1}, \mu_{t+1})$. The first-order prediction keeps
    only the part of the update odd in $\eta$,
    $\tfrac12[F_\eta(S) - F_{-\eta}(S)]$, i.e. drops
    $\eta^2(d\,vv^\top + v\mu^\top H + H\mu v^\top + HMH)$.

    Returns:
        ``(err, err_first_order)``: per step, the largest absolute deviation over
        the entries of $M$ and $\mu$.
    """
    m, p = check_dataset(As, ys)
    check_shape("Ms", Ms, (None, p, p), "trajectory of M")
    T = np.shape(Ms)[0]
    check_shape("mus", mus, (T, p), "trajectory of mu")
    check_ndim("batches", batches, 2, "one row of sample indices per step")
    steps = np.shape(batches)[0]
    if steps != T - 1:
        raise ValueError(f"`batches` must have one row per step, T - 1 = {T - 1}; got {steps}.")
    check_positive("eta", eta)
    _check_width(d)
    As, ys = jnp.asarray(As), jnp.asarray(ys)
    f0_all = jnp.broadcast_to(jnp.asarray(f0, dtype=As.dtype), (m,))
    dummy = jnp.zeros((m, 1), As.dtype)
    Ms, mus = jnp.asarray(Ms), jnp.asarray(mus)
    return _prediction_errors(
        Ms, mus, jnp.asarray(batches), As, ys, dummy if gs is None else jnp.asarray(gs),
        dummy if Bs is None else jnp.asarray(Bs), f0_all, float(eta), float(d), gs is not None, Bs is not None,
    )


@partial(jax.jit, static_argnames=("has_g", "has_B"))
def _prediction_errors(Ms, mus, batches, As, ys, gs, Bs, f0, eta, d, has_g, has_B):
    def one(M, mu, M1, mu1, idx):
        kw = dict(d=d, gs=gs[idx] if has_g else None, Bs=Bs[idx] if has_B else None, f0=f0[idx])
        Mp, mup = _sgd_step(M, mu, As[idx], ys[idx], eta=eta, **kw)
        Mm, mum = _sgd_step(M, mu, As[idx], ys[idx], eta=-eta, **kw)
        full = jnp.maximum(jnp.max(jnp.abs(Mp - M1)), jnp.max(jnp.abs(mup - mu1)))
        first = jnp.maximum(jnp.max(jnp.abs(M + 0.5 * (Mp - Mm) - M1)), jnp.max(jnp.abs(mu + 0.5 * (mup - mum) - mu1)))
        return full, first

    return jax.vmap(one)(Ms[:-1], mus[:-1], Ms[1:], mus[1:], batches)


# ------------------------------------------------------------ momentum closure
class MomentumState(NamedTuple):
    r"""Joint moments of the weights $W$ and the momentum buffer $V$ (Cor. 2).

    Attributes:
        M: $WW^\top$, shape ``(p, p)``.
        mu: $W\mathbf 1$, shape ``(p,)``.
        N: $WV^\top$ (not symmetric), shape ``(p, p)``.
        K: $VV^\top$, shape ``(p, p)``.
        nu: $V\mathbf 1$, shape ``(p,)``.
    """

    M: Array
    mu: Array
    N: Array
    K: Array
    nu: Array


def momentum_state(M: Matrix, mu: Float[ArrayLike, " p"]) -> MomentumState:
    """The state at step 0 with an empty momentum buffer ($V = 0$), as optax starts."""
    M = jnp.asarray(M)
    mu = jnp.asarray(mu)
    z = jnp.zeros_like(M)
    return MomentumState(M, mu, z, z, jnp.zeros_like(mu))


def _v_and_H(M, mu, As, ys, gs, Bs, f0):
    b = As.shape[0]
    f = outputs(M, As, mu=mu, gs=gs, Bs=Bs, f0=f0)
    lp = 2.0 * (f - ys) / b  # the paper's MSE, no factor 1/2
    H = 2.0 * jnp.einsum("b,bij->ij", lp, As)
    v = jnp.zeros_like(mu)
    if gs is not None:
        v = v + lp @ gs
    if Bs is not None:
        v = v + 2.0 * jnp.einsum("b,bij,j->i", lp, Bs, mu)
    return v, H


def _sgd_step(M, mu, As, ys, *, eta, d, gs, Bs, f0):
    """Eqs. (23)-(24), as :func:`nqf.nqf_sgd_step`, traceable in ``eta`` and ``d``."""
    v, H = _v_and_H(M, mu, As, ys, gs, Bs, f0)
    vm = jnp.outer(v, mu)
    dM = -eta * (vm + vm.T + H @ M + M @ H) + eta**2 * (d * jnp.outer(v, v) + vm @ H + H @ vm.T + H @ M @ H)
    return M + dM, mu - eta * (d * v + H @ mu)


def _momentum_step(state, As, ys, gs, Bs, f0, eta, d, beta, wd):
    M, mu, N, K, nu = state
    v, H = _v_and_H(M, mu, As, ys, gs, Bs, f0)
    Hl = H + wd * jnp.eye(M.shape[0], dtype=M.dtype)
    vmu = jnp.outer(v, mu)
    GG = d * jnp.outer(v, v) + vmu @ Hl + Hl @ vmu.T + Hl @ M @ Hl
    VG = jnp.outer(nu, v) + N.T @ Hl  # V G^T
    K1 = beta**2 * K + beta * (VG + VG.T) + GG
    WV1 = beta * N + vmu.T + M @ Hl  # W V'^T
    nu1 = beta * nu + d * v + Hl @ mu
    M1 = M - eta * (WV1 + WV1.T) + eta**2 * K1
    return MomentumState(0.5 * (M1 + M1.T), mu - eta * nu1, WV1 - eta * K1, 0.5 * (K1 + K1.T), nu1)


def nqf_momentum_step(
    state: MomentumState,
    As: StructureStack,
    ys: Targets,
    *,
    eta: float,
    d: int,
    beta: float = 0.9,
    weight_decay: float = 0.0,
    gs: Float[ArrayLike, "m p"] | None = None,
    Bs: Float[ArrayLike, "m p p"] | None = None,
    f0: float | Float[ArrayLike, " m"] = 0.0,
) -> MomentumState:
    r"""One step of heavy-ball SGD with coupled weight decay, written on the joint
    moments of weights and momentum buffer (Cor. 2, Eqs. 209–217; recursion in the
    module docstring). The minibatch loss is $\frac1b\sum_x (f_x - y_x)^2$.

    Args:
        state: :class:`MomentumState` (start from :func:`momentum_state`).
        As, ys, gs, Bs, f0: the minibatch, as in :func:`nqf.nqf_sgd_step`.
        eta: learning rate. d: width. beta: momentum in ``[0, 1)``.
        weight_decay: $\lambda \ge 0$, added to the gradient as $\lambda W$.
    """
    _check_momentum_args(eta, d, beta, weight_decay)
    return _momentum_step(state, jnp.asarray(As), jnp.asarray(ys), gs, Bs, f0, eta, d, beta, weight_decay)


def _check_momentum_args(eta, d, beta, weight_decay):
    check_positive("eta", eta)
    _check_width(d)
    b = float(beta)
    if not (0.0 <= b < 1.0):
        raise ValueError(f"`beta` (momentum) must be in [0, 1); got {beta!r}.")
    check_positive("weight_decay", weight_decay, strict=False)


@partial(jax.jit, static_argnames=("has_g", "has_B"))
def _momentum_scan(state0, As, ys, gs, Bs, f0, batches, eta, d, beta, wd, has_g, has_B):
    def body(state, idx):
        state = _momentum_step(
            state, As[idx], ys[idx], gs[idx] if has_g else None, Bs[idx] if has_B else None,
            f0[idx], eta, d, beta, wd,
        )
        return state, state

    _, traj = jax.lax.scan(body, state0, batches)
    return traj


def nqf_momentum(
    M0: Matrix,
    mu0: Float[ArrayLike, " p"],
    As: StructureStack,
    ys: Targets,
    batches: Int[ArrayLike, "steps b"],
    *,
    eta: float,
    d: int,
    beta: float = 0.9,
    weight_decay: float = 0.0,
    gs: Float[ArrayLike, "m p"] | None = None,
    Bs: Float[ArrayLike, "m p p"] | None = None,
    f0: float | Float[ArrayLike, " m"] = 0.0,
) -> MomentumState:
    r"""Iterate :func:`nqf_momentum_step` over the minibatch index rows ``batches``
    from an empty momentum buffer (``lax.scan``, compiled once per shape).

    Equals training any $W$ with $WW^\top = M_0$, $W\mathbf 1 = \mu_0$ by
    ``optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(eta, momentum=beta))``,
    to rounding (Cor. 2). ``beta = weight_decay = 0`` is Theorem 2.

    Returns:
        A :class:`MomentumState` whose fields carry a leading axis ``steps + 1``
        (step 0 included).
    """
    m, p = check_dataset(As, ys)
    check_order_parameter(M0, p)
    check_shape("mu0", mu0, (p,), "sum of the neurons")
    check_finite("mu0", mu0)
    check_ndim("batches", batches, 2, "one row of sample indices per step")
    _check_momentum_args(eta, d, beta, weight_decay)
    if gs is not None:
        check_shape("gs", gs, (m, p), "one g(x) per sample")
    if Bs is not None:
        check_shape("Bs", Bs, (m, p, p), "one B(x) per sample")
    batches = jnp.asarray(batches)
    if batches.size and (int(batches.min()) < 0 or int(batches.max()) >= m):
        raise ValueError(f"`batches` must hold sample indices in [0, {m}); got range "
                         f"[{int(batches.min())}, {int(batches.max())}].")
    As = jnp.asarray(As)
    f0_all = jnp.broadcast_to(jnp.asarray(f0, dtype=As.dtype), (m,))
    state0 = momentum_state(M0, mu0)
    dummy = jnp.zeros((m, 1), As.dtype)
    traj = _momentum_scan(
        state0, As, jnp.asarray(ys), dummy if gs is None else jnp.asarray(gs),
        dummy if Bs is None else jnp.asarray(Bs), f0_all, batches,
        float(eta), float(d), float(beta), float(weight_decay), gs is not None, Bs is not None,
    )
    return MomentumState(*(jnp.concatenate([s0[None], s]) for s0, s in zip(state0, traj)))
