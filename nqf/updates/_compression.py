r"""Compression of a wide NQF to a narrow one (Thm 3, App. A.11; Cor. 3, App. B.5).

Training sees $(M, \mu)$ only through their projection on the data subspace
$\mathcal V = \mathrm{span}\bigcup_x(\{g(x)\}\cup\mathrm{Col}A(x)\cup\mathrm{Col}B(x))$, $k_{\mathcal V} = \dim\mathcal V$
(Eq. 102). **Theorem 3**: at width $d' \ge k_{\mathcal V} + 1$, $\tilde A = \frac{d'}{d}A$, $\tilde\eta = \frac{d}{d'}\eta$,
$\tilde\mu(0) = VV^\top\mu(0)$, $\tilde M(0) = \frac{d}{d'}VV^\top M(0)VV^\top$ (Eq. 103) give the same outputs at every
step (Eqs. 106-112). **Corollary 3**: at $d' \le k_{\mathcal V}$, $C = \frac d{d'}(M(0) - \mu\mu^\top/d)$ truncated to
rank $d' - 1$ gives $\|\frac{d'}{d}\tilde M_t - M_t\|_F + \|\tilde\mu_t - \mu_t\|_2 \le (\sum_{k\ge d'}\lambda_k(C)^2)^{1/2}
e^{\eta L t}$ (Eq. 237; at $t = 0$ the error is $\frac{d'}{d}$ times the prefactor: Eq. 239 drops this factor).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int
from .._checks import check_ndim, check_positive, check_shape, check_size, invalid
from .._types import ArrayLike
from ..model._data import NQFData, require_data
from ._discrete import (_as_state, _check_batches, _check_options, _trajectory, _update, sgd_state,
    weights_from_statistics)


def structure_span(data: NQFData, *, rtol: float = 1e-10) -> tuple[Float[Array, "p k"], int]:
    r"""Orthonormal basis $V$ of the data subspace $\mathcal V$ (Eq. 102) and $k_{\mathcal V}$.

    $\mathcal V$ is spanned by every $g(x)$ and every column of $A(x)$ and $B(x)$
    over the training set ``data``; its dimension is the numerical rank of the stacked
    columns (singular values above ``rtol`` times the largest).

    Returns:
        ``(V, k_V)`` with ``V`` of shape ``(p, k_V)``.
    """
    data = require_data(data)
    check_positive("rtol", rtol)
    p = data.p
    cols = [np.asarray(data.As, dtype=float).transpose(1, 0, 2).reshape(p, -1)]
    if data.gs is not None:
        cols.append(np.asarray(data.gs, dtype=float).T)
    if data.Bs is not None:
        cols.append(np.asarray(data.Bs, dtype=float).transpose(1, 0, 2).reshape(p, -1))
    X = np.concatenate(cols, axis=1)
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    if s.size == 0 or s[0] == 0.0:
        return jnp.zeros((p, 0)), 0
    k = int(np.sum(s > rtol * s[0]))
    return jnp.asarray(U[:, :k]), k


class Compressed(NamedTuple):
    r"""A compressed NQF (Thm 3 or Cor. 3), ready for :func:`nqf.updates.nqf_sgd`.

    Attributes:
        W: weights of width ``d``, shape ``(p, d)`` (same parameter space as the original).
        M, mu: their statistics $\tilde M(0)$, $\tilde\mu(0)$.
        data: data of the compressed model, $\tilde A = \frac{d'}{d}A$ (``gs``, ``Bs``, ``ys``, ``f0`` unchanged).
        eta: its learning rate $\tilde\eta = \frac{d}{d'}\eta$.
        d: its width $d'$.
        scale: $d'/d$; $\frac{d'}{d}\tilde M_t$ is compared with $M_t$.
        V, k_V: basis and dimension of the data subspace (Eq. 102).
        exact: ``True`` if $d' \ge k_{\mathcal V} + 1$ (Thm 3: identical outputs).
        tail: the prefactor of Eq. (237), $(\sum_{k\ge d'}\lambda_k(C)^2)^{1/2}$ (0 if exact).
        initial_error: $\|\frac{d'}{d}\tilde M(0) - M(0)\|_F + \|\tilde\mu(0) - \mu(0)\|_2$
            for Cor. 3 (0 if exact; the exact case matches only the projection on $\mathcal V$).

    Train it with ``nqf.updates.nqf_sgd((c.M, c.mu), c.data, batches, eta=c.eta, d=c.d)``.
    """

    W: Array
    M: Array
    mu: Array
    data: NQFData
    eta: float
    d: int
    scale: float
    V: Array
    k_V: int
    exact: bool
    tail: float
    initial_error: float

    def reduced(self) -> tuple[Array, NQFData]:
        r"""The same model in the coordinates of $\mathcal V$: ``(V^T W, data)`` with
        ``data`` $= (V^\top AV, V^\top g, V^\top BV)$, i.e. $k_{\mathcal V}$ parameters per neuron
        instead of $p$ (exact case only)."""
        if not self.exact:
            raise invalid("self", "be an exact compression (d' >= k_V + 1) for `reduced()`", "Cor. 3's approximate one")
        V, dat = self.V, self.data
        As = jnp.einsum("pi,mpq,qj->mij", V, dat.As, V)
        gs = None if dat.gs is None else dat.gs @ V
        Bs = None if dat.Bs is None else jnp.einsum("pi,mpq,qj->mij", V, dat.Bs, V)
        return V.T @ self.W, NQFData(0.5 * (As + jnp.swapaxes(As, 1, 2)), dat.ys, gs=gs, Bs=Bs, f0=dat.f0)


def compress(
    state,
    data: NQFData,
    *,
    d: int,
    eta: float,
    d_prime: int | None = None,
    rtol: float = 1e-10,
) -> Compressed:
    r"""Compress a width-$d$ NQF with statistics ``state`` $= (M, \mu)$, trained on ``data`` with
    learning rate ``eta``, to width ``d_prime`` (Thm 3 / Cor. 3).

    * ``d_prime=None`` (default): $d' = k_{\mathcal V} + 1$, the smallest exact width.
    * $d' \ge k_{\mathcal V} + 1$: Theorem 3 (Eqs. 103–105); training the result
      with :func:`nqf.updates.nqf_sgd` (``c.data``, ``eta=c.eta``, ``d=c.d``) reproduces the
      original outputs on the training set at every step, to rounding.
    * $1 \le d' \le k_{\mathcal V}$: Corollary 3 (Eqs. 238–240), truncated
      initial covariance; error bounded by Eq. (237).

    ``state`` is ``(M, mu)`` (e.g. :func:`nqf.updates.statistics` of weights ``W``) or an
    :class:`~nqf.updates._discrete.SGDState` (its momentum buffer is ignored).
    """
    data = require_data(data)
    p = data.p
    st = _as_state(state, p)
    d = check_size("d", d)  # width of the original model
    check_positive("eta", eta)
    V, k = structure_span(data, rtol=rtol)
    d_prime = k + 1 if d_prime is None else check_size("d_prime", d_prime)  # compressed width
    M_np, mu_np = np.asarray(st.M, dtype=float), np.asarray(st.mu, dtype=float)
    C_full = M_np - np.outer(mu_np, mu_np) / d
    lam_min = float(np.linalg.eigvalsh(0.5 * (C_full + C_full.T)).min())
    if lam_min < -1e-10 * max(float(np.abs(M_np).max()), 1e-300):
        raise invalid("mu", f"be, with `M`, the statistics of width-{d} weights (check `d`)",
                      f"M - mu mu^T/d with eigenvalue {lam_min:.3g} < 0")
    scale = d_prime / d
    if d_prime >= k + 1:
        P = np.asarray(V) @ np.asarray(V).T
        mu_c = P @ mu_np
        M_c = (d / d_prime) * P @ M_np @ P
        W = weights_from_statistics(0.5 * (M_c + M_c.T), mu_c, d_prime)
        exact, tail, err0 = True, 0.0, 0.0
    else:
        C = (d / d_prime) * C_full
        lam, Q = np.linalg.eigh(0.5 * (C + C.T))
        lam, Q = np.clip(lam[::-1], 0.0, None), Q[:, ::-1]
        C_keep = (Q[:, : d_prime - 1] * lam[: d_prime - 1]) @ Q[:, : d_prime - 1].T
        tail = float(np.sqrt(np.sum(lam[d_prime - 1:] ** 2)))
        mu_c = mu_np
        M_c = np.outer(mu_np, mu_np) / d_prime + C_keep
        W = weights_from_statistics(0.5 * (M_c + M_c.T), mu_c, d_prime)
        exact = False
        err0 = float(np.linalg.norm(scale * M_c - M_np))
    Wj = jnp.asarray(W)
    data_c = NQFData(scale * data.As, data.ys, gs=data.gs, Bs=data.Bs, f0=data.f0)
    return Compressed(
        W=Wj, M=Wj @ Wj.T, mu=Wj.sum(axis=1), data=data_c,
        eta=float(eta) / scale, d=d_prime, scale=scale, V=V, k_V=k, exact=exact,
        tail=tail, initial_error=err0,
    )


def compression_error(Ms: Float[ArrayLike, "T p p"], mus: Float[ArrayLike, "T p"], Ms_c: Float[ArrayLike, "T p p"],
                      mus_c: Float[ArrayLike, "T p"], *, scale: float) -> Float[Array, " T"]:
    r"""Left side of Eq. (237) at every saved step:
    $e_t = \|s\tilde M_t - M_t\|_F + \|\tilde\mu_t - \mu_t\|_2$ with $s = d'/d$ (``Compressed.scale``)."""
    check_ndim("Ms", Ms, 3, "trajectory of M")
    T, p = np.shape(Ms)[0], np.shape(Ms)[1]
    check_shape("mus", mus, (T, p), "trajectory of mu")
    check_shape("Ms_c", Ms_c, (T, p, p), "trajectory of the compressed M")
    check_shape("mus_c", mus_c, (T, p), "trajectory of the compressed mu")
    check_positive("scale", scale)
    EM = scale * jnp.asarray(Ms_c) - jnp.asarray(Ms)
    return jnp.sqrt(jnp.sum(EM**2, axis=(1, 2))) + jnp.linalg.norm(jnp.asarray(mus_c) - jnp.asarray(mus), axis=1)


def compression_bound(
    tail: float, *, eta: float, L: float, t: Int[ArrayLike, " T"], log: bool = False
) -> Float[Array, " T"]:
    r"""Right side of Eq. (237): $(\sum_{k\ge d'}\lambda_k^2)^{1/2}\,e^{\eta L t}$ at the steps ``t`` (step indices).

    With ``log=True`` the natural logarithm of the bound is returned (the bound
    itself overflows float64 once $\eta L t > 709$)."""
    check_positive("tail", tail, strict=False)
    check_positive("eta", eta)
    check_positive("L", L, strict=False)
    t = jnp.asarray(t, dtype=float)
    if log:
        return jnp.log(tail) + eta * L * t
    return tail * jnp.exp(eta * L * t)


def update_lipschitz(states, states2, data: NQFData, batches: Int[ArrayLike, "steps b"], *, eta: float, d: int,
                     n_points: int = 5) -> Float[Array, " steps"]:
    r"""Per-step Lipschitz constant $L_t$ of Eq. (241) between two trajectories.

    With $F_t$ the SGD map of Eqs. (23)–(24) for the batch of step $t$ (the update of
    :func:`nqf.updates.nqf_sgd`), the difference of the two updates obeys
    $\|(F_t - \mathrm{id})(S) - (F_t - \mathrm{id})(S')\| \le \eta L_t \|S - S'\|$ in the norm
    $\|(X, x)\| = \|X\|_F + \|x\|_2$ of Eq. (237), with $L_t$ the largest operator
    norm of $(J_{F_t} - I)/\eta$ on the segment from $S_t$ to $S'_t$ (mean-value
    theorem), sampled at ``n_points`` points. The operator norm of a block
    Jacobian in this norm is at most $\max(\|J_{MM}\|_2 + \|J_{\mu M}\|_2,\ \|J_{M\mu}\|_2 + \|J_{\mu\mu}\|_2)$.

    ``states``, ``states2``: trajectories ``(Ms, mus)`` (or :class:`~nqf.updates._discrete.SGDState`
    trajectories) of equal length ``T``; ``batches`` has at most ``T - 1`` rows.
    """
    data = require_data(data)
    p = data.p
    Ms, mus = _trajectory(states, p)
    T = Ms.shape[0]
    Ms2, mus2 = _trajectory(states2, p)
    check_shape("Ms2", Ms2, (T, p, p), "second trajectory of M")
    batches = _check_batches(batches, data.m)
    if batches.shape[0] > T - 1:
        raise invalid("batches", f"have one row per step of the trajectories ({T - 1})", f"{batches.shape[0]} steps")
    eta, d, _, _ = _check_options(eta, d, 0.0, 0.0)
    if int(n_points) < 2:
        raise invalid("n_points", 'be >= 2 (segment end points)', f'{n_points!r}')
    steps = batches.shape[0]
    pp = p * p
    z1 = jnp.concatenate([Ms[:steps].reshape(steps, pp), mus[:steps]], axis=1)
    z2 = jnp.concatenate([Ms2[:steps].reshape(steps, pp), mus2[:steps]], axis=1)
    s = jnp.linspace(0.0, 1.0, int(n_points))
    zs = z1[:, None, :] + s[None, :, None] * (z2 - z1)[:, None, :]
    Ls = _lipschitz_on_segments(zs, batches, data, eta, d)
    return jnp.max(Ls, axis=1)


@jax.jit
def _lipschitz_on_segments(zs, batches, data, eta, d):
    p = data.p
    pp = p * p

    def step_flat(z, idx):
        S = _update(sgd_state(z[:pp].reshape(p, p), z[pp:]), data.subset(idx), eta, d, 0.0, 0.0)
        return jnp.concatenate([S.M.ravel(), S.mu])

    def L_at(z, idx):
        J = jax.jacfwd(step_flat)(z, idx) - jnp.eye(pp + p, dtype=z.dtype)
        n = lambda X: jnp.linalg.norm(X, ord=2)  # noqa: E731
        return jnp.maximum(n(J[:pp, :pp]) + n(J[pp:, :pp]), n(J[:pp, pp:]) + n(J[pp:, pp:])) / eta

    return jax.vmap(jax.vmap(L_at, in_axes=(0, None)), in_axes=(0, 0))(zs, batches)
