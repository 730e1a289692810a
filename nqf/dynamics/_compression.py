r"""Compression of a wide NQF to a narrow one (Thm 3, App. A.11; Cor. 3, App. B.5).

By Theorem 2 the training trajectory depends on the weights only through
$(M, \mu)$, and only through their projection on the subspace the data can see,

$$ \mathcal V = \mathrm{span}\bigcup_{x\in\mathcal X}\big(\{g(x)\}\cup\mathrm{Col}A(x)\cup\mathrm{Col}B(x)\big),
   \qquad k_{\mathcal V} = \dim\mathcal V \le p \quad\text{(Eq. 102)}. $$

**Theorem 3.** With $V$ an orthonormal basis of $\mathcal V$ and any width
$d' \ge k_{\mathcal V} + 1$, the NQF with $\tilde A = \frac{d'}{d}A$, $\tilde g = g$,
$\tilde B = B$, learning rate $\tilde\eta = \frac{d}{d'}\eta$ and initial statistics

$$ \tilde\mu(0) = VV^\top\mu(0),\qquad \tilde M(0) = \tfrac{d}{d'}\,VV^\top M(0)VV^\top \quad\text{(Eq. 103)} $$

has the same outputs on the training set at every SGD step: by induction
$\tilde\mu_t = VV^\top\mu_t$ and $\tilde M_t = \frac d{d'}VV^\top M_tVV^\top$
(Eqs. 106–112). Weights of width $d'$ with these statistics exist because
$\tilde M - \tilde\mu\tilde\mu^\top/d'$ has rank $\le k_{\mathcal V} \le d'-1$
(Eqs. 104–105, :func:`nqf.dynamics.weights_from_statistics`).

**Corollary 3.** For a smaller width $d' \le k_{\mathcal V}$ (the paper states
$d' \le p$ and does not project), keep $\tilde\mu = \mu$ and replace
$C = \frac d{d'}(M(0) - \mu\mu^\top/d)$ by its best rank-$(d'-1)$ approximation;
then (Eq. 237)

$$ \Big\|\tfrac{d'}{d}\tilde M_t - M_t\Big\|_F + \|\tilde\mu_t - \mu_t\|_2
   \le \Big(\sum_{k\ge d'}\lambda_k(C)^2\Big)^{1/2} e^{\eta L t}. $$

The initial error is in fact $\frac{d'}{d}$ times the prefactor (App. B.5,
Eq. 239 drops this factor), so the bound holds with room to spare at $t=0$.
:func:`update_lipschitz` estimates the constant $L$ along a run.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

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
from ..model._model import check_dataset
from ..model._model import check_order_parameter
from ._discrete import _sgd_step
from ._discrete import weights_from_statistics



def structure_span(
    As: StructureStack,
    gs: Float[ArrayLike, "m p"] | None = None,
    Bs: Float[ArrayLike, "m p p"] | None = None,
    *,
    rtol: float = 1e-10,
) -> tuple[Float[Array, "p k"], int]:
    r"""Orthonormal basis $V$ of the data subspace $\mathcal V$ (Eq. 102) and $k_{\mathcal V}$.

    $\mathcal V$ is spanned by every $g(x)$ and every column of $A(x)$ and $B(x)$
    over the training set; its dimension is the numerical rank of the stacked
    columns (singular values above ``rtol`` times the largest).

    Returns:
        ``(V, k_V)`` with ``V`` of shape ``(p, k_V)``.
    """
    m, p = check_dataset(As)
    check_positive("rtol", rtol)
    cols = [np.asarray(As, dtype=float).transpose(1, 0, 2).reshape(p, -1)]
    if gs is not None:
        check_shape("gs", gs, (m, p), "one g(x) per sample")
        check_finite("gs", gs)
        cols.append(np.asarray(gs, dtype=float).T)
    if Bs is not None:
        check_shape("Bs", Bs, (m, p, p), "one B(x) per sample")
        check_finite("Bs", Bs)
        cols.append(np.asarray(Bs, dtype=float).transpose(1, 0, 2).reshape(p, -1))
    X = np.concatenate(cols, axis=1)
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    if s.size == 0 or s[0] == 0.0:
        return jnp.zeros((p, 0)), 0
    k = int(np.sum(s > rtol * s[0]))
    return jnp.asarray(U[:, :k]), k


class Compressed(NamedTuple):
    r"""A compressed NQF (Thm 3 or Cor. 3), ready for :func:`nqf.nqf_sgd`.

    Attributes:
        W: weights of width ``d``, shape ``(p, d)`` (same parameter space as the original).
        M, mu: their statistics $\tilde M(0)$, $\tilde\mu(0)$.
        As, gs, Bs: structure of the compressed model ($\tilde A = \frac{d'}{d}A$; ``gs``, ``Bs`` unchanged).
        eta: its learning rate $\tilde\eta = \frac{d}{d'}\eta$.
        d: its width $d'$.
        scale: $d'/d$; $\frac{d'}{d}\tilde M_t$ is compared with $M_t$.
        V, k_V: basis and dimension of the data subspace (Eq. 102).
        exact: ``True`` if $d' \ge k_{\mathcal V} + 1$ (Thm 3: identical outputs).
        tail: the prefactor of Eq. (237), $(\sum_{k\ge d'}\lambda_k(C)^2)^{1/2}$ (0 if exact).
        initial_error: $\|\frac{d'}{d}\tilde M(0) - M(0)\|_F + \|\tilde\mu(0) - \mu(0)\|_2$
            for Cor. 3 (0 if exact; the exact case matches only the projection on $\mathcal V$).
    """

    W: Array
    M: Array
    mu: Array
    As: Array
    gs: Array | None
    Bs: Array | None
    eta: float
    d: int
    scale: float
    V: Array
    k_V: int
    exact: bool
    tail: float
    initial_error: float

    def reduced(self) -> tuple[Array, Array, Array | None, Array | None]:
        r"""The same model in the coordinates of $\mathcal V$: ``(V^T W, V^T A V, V^T g, V^T B V)``,
        i.e. $k_{\mathcal V}$ parameters per neuron instead of $p$ (exact case only)."""
        if not self.exact:
            raise ValueError("`reduced()` needs an exact compression (d' >= k_V + 1); this one is Cor. 3.")
        V = self.V
        As = jnp.einsum("pi,mpq,qj->mij", V, self.As, V)
        gs = None if self.gs is None else self.gs @ V
        Bs = None if self.Bs is None else jnp.einsum("pi,mpq,qj->mij", V, self.Bs, V)
        return V.T @ self.W, As, gs, Bs


def compress(
    M: Matrix,
    mu: Float[ArrayLike, " p"],
    As: StructureStack,
    *,
    d: int,
    eta: float,
    gs: Float[ArrayLike, "m p"] | None = None,
    Bs: Float[ArrayLike, "m p p"] | None = None,
    d_prime: int | None = None,
    rtol: float = 1e-10,
) -> Compressed:
    r"""Compress a width-$d$ NQF with statistics $(M, \mu)$ trained on the data ``As``
    (``gs``, ``Bs``) with learning rate ``eta`` to width ``d_prime`` (Thm 3 / Cor. 3).

    * ``d_prime=None`` (default): $d' = k_{\mathcal V} + 1$, the smallest exact width.
    * $d' \ge k_{\mathcal V} + 1$: Theorem 3 (Eqs. 103–105); training the result
      with :func:`nqf.nqf_sgd` (``eta=c.eta``, ``d=c.d``, ``As=c.As``) reproduces the
      original outputs on the training set at every step, to rounding.
    * $1 \le d' \le k_{\mathcal V}$: Corollary 3 (Eqs. 238–240), truncated
      initial covariance; error bounded by Eq. (237).

    Use :func:`nqf.dynamics.statistics` to get ``(M, mu)`` from weights ``W``.
    """
    p = check_order_parameter(M)
    m, p_A = check_dataset(As)
    if p_A != p:
        raise ValueError(f"`As` must have shape (m, {p}, {p}) to match `M`; got {np.shape(As)}.")
    check_shape("mu", mu, (p,), "sum of the neurons")
    check_finite("mu", mu)
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"`d` (width of the original model) must be an int >= 1; got {d!r}.")
    check_positive("eta", eta)
    V, k = structure_span(As, gs, Bs, rtol=rtol)
    if d_prime is None:
        d_prime = k + 1
    if isinstance(d_prime, bool) or not isinstance(d_prime, (int, np.integer)) or d_prime < 1:
        raise ValueError(f"`d_prime` (compressed width) must be an int >= 1; got {d_prime!r}.")
    d, d_prime = int(d), int(d_prime)
    M_np, mu_np = np.asarray(M, dtype=float), np.asarray(mu, dtype=float)
    C_full = M_np - np.outer(mu_np, mu_np) / d
    lam_min = float(np.linalg.eigvalsh(0.5 * (C_full + C_full.T)).min())
    if lam_min < -1e-10 * max(float(np.abs(M_np).max()), 1e-300):
        raise ValueError(
            f"`M` and `mu` are not the statistics of width-{d} weights: M - mu mu^T/d has "
            f"eigenvalue {lam_min:.3g} < 0 (check `d`)."
        )
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
    return Compressed(
        W=Wj, M=Wj @ Wj.T, mu=Wj.sum(axis=1), As=scale * jnp.asarray(As),
        gs=None if gs is None else jnp.asarray(gs), Bs=None if Bs is None else jnp.asarray(Bs),
        eta=float(eta) / scale, d=d_prime, scale=scale, V=V, k_V=k, exact=exact,
        tail=tail, initial_error=err0,
    )


def compression_error(
    Ms: Float[ArrayLike, "T p p"],
    mus: Float[ArrayLike, "T p"],
    Ms_c: Float[ArrayLike, "T p p"],
    mus_c: Float[ArrayLike, "T p"],
    *,
    scale: float,
) -> Float[Array, " T"]:
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
    tail: float, *, eta: float, L: float, steps: Int[ArrayLike, " T"], log: bool = False
) -> Float[Array, " T"]:
    r"""Right side of Eq. (237): $(\sum_{k\ge d'}\lambda_k^2)^{1/2}\,e^{\eta L t}$ at the steps ``steps``.

    With ``log=True`` the natural logarithm of the bound is returned (the bound
    itself overflows float64 once $\eta L t > 709$)."""
    check_positive("tail", tail, strict=False)
    check_positive("eta", eta)
    check_positive("L", L, strict=False)
    t = jnp.asarray(steps, dtype=float)
    if log:
        return jnp.log(tail) + eta * L * t
    return tail * jnp.exp(eta * L * t)


def update_lipschitz(
    Ms: Float[ArrayLike, "T p p"],
    mus: Float[ArrayLike, "T p"],
    Ms2: Float[ArrayLike, "T p p"],
    mus2: Float[ArrayLike, "T p"],
    As: StructureStack,
    ys: Targets,
    batches: Int[ArrayLike, "steps b"],
    *,
    eta: float,
    d: int,
    gs: Float[ArrayLike, "m p"] | None = None,
    Bs: Float[ArrayLike, "m p p"] | None = None,
    f0: float | Float[ArrayLike, " m"] = 0.0,
    n_points: int = 5,
) -> Float[Array, " steps"]:
    r"""Per-step Lipschitz constant $L_t$ of Eq. (241) between two trajectories.

    With $F_t$ the SGD map of Eqs. (23)–(24) for the batch of step $t$, the
    difference of the two updates obeys
    $\|(F_t - \mathrm{id})(S) - (F_t - \mathrm{id})(S')\| \le \eta L_t \|S - S'\|$ in the norm
    $\|(X, x)\| = \|X\|_F + \|x\|_2$ of Eq. (237), with $L_t$ the largest operator
    norm of $(J_{F_t} - I)/\eta$ on the segment from $S_t$ to $S'_t$ (mean-value
    theorem), sampled at ``n_points`` points. The operator norm of a block
    Jacobian in this norm is at most $\max(\|J_{MM}\|_2 + \|J_{\mu M}\|_2,\ \|J_{M\mu}\|_2 + \|J_{\mu\mu}\|_2)$.
    """
    m, p = check_dataset(As, ys)
    check_shape("Ms", Ms, (None, p, p), "trajectory of M")
    T = np.shape(Ms)[0]
    check_shape("mus", mus, (T, p), "trajectory of mu")
    check_shape("Ms2", Ms2, (T, p, p), "second trajectory of M")
    check_shape("mus2", mus2, (T, p), "second trajectory of mu")
    check_ndim("batches", batches, 2, "one row of sample indices per step")
    if np.shape(batches)[0] > T - 1:
        raise ValueError(f"`batches` has {np.shape(batches)[0]} steps but the trajectories only {T - 1}.")
    check_positive("eta", eta)
    if int(n_points) < 2:
        raise ValueError(f"`n_points` must be >= 2 (segment end points); got {n_points!r}.")
    As, ys = jnp.asarray(As), jnp.asarray(ys)
    f0_all = jnp.broadcast_to(jnp.asarray(f0, dtype=As.dtype), (m,))
    steps = np.shape(batches)[0]
    pp = p * p
    z1 = jnp.concatenate([jnp.asarray(Ms)[:steps].reshape(steps, pp), jnp.asarray(mus)[:steps]], axis=1)
    z2 = jnp.concatenate([jnp.asarray(Ms2)[:steps].reshape(steps, pp), jnp.asarray(mus2)[:steps]], axis=1)
    s = jnp.linspace(0.0, 1.0, int(n_points))
    zs = z1[:, None, :] + s[None, :, None] * (z2 - z1)[:, None, :]
    dummy = jnp.zeros((m, 1), As.dtype)
    Ls = _lipschitz_on_segments(
        zs, jnp.asarray(batches), As, ys, dummy if gs is None else jnp.asarray(gs),
        dummy if Bs is None else jnp.asarray(Bs), f0_all, float(eta), float(d), p, gs is not None, Bs is not None,
    )
    return jnp.max(Ls, axis=1)


@partial(jax.jit, static_argnames=("p", "has_g", "has_B"))
def _lipschitz_on_segments(zs, batches, As, ys, gs, Bs, f0, eta, d, p, has_g, has_B):
    pp = p * p

    def step_flat(z, idx):
        M, mu = z[:pp].reshape(p, p), z[pp:]
        M1, mu1 = _sgd_step(
            M, mu, As[idx], ys[idx], eta=eta, d=d,
            gs=gs[idx] if has_g else None, Bs=Bs[idx] if has_B else None, f0=f0[idx],
        )
        return jnp.concatenate([M1.ravel(), mu1])

    def L_at(z, idx):
        J = jax.jacfwd(step_flat)(z, idx) - jnp.eye(pp + p, dtype=z.dtype)
        n = lambda X: jnp.linalg.norm(X, ord=2)  # noqa: E731
        return jnp.maximum(n(J[:pp, :pp]) + n(J[pp:, :pp]), n(J[:pp, pp:]) + n(J[pp:, pp:])) / eta

    return jax.vmap(jax.vmap(L_at, in_axes=(0, None)), in_axes=(0, 0))(zs, batches)
