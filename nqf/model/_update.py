r"""The exact update of the moments of the weights (Thm 2, Eqs. 23-24; Cor. 2, Eqs. 209-217; Thm 14).

One step of heavy-ball SGD with coupled weight decay on weights $W$ (neurons as columns, width
$d$) whose every neuron has the gradient $G_i = v + Hw_i$, with momentum buffer $V$:
$V' = \beta V + G + \lambda W$, $W' = W - \eta V'$. The moments $M = WW^\top$, $\mu = W\mathbf 1$,
$N = WV^\top$, $K = VV^\top$, $\nu = V\mathbf 1$ then move in closed form; with
$H_\lambda = H + \lambda I$,

$$ K' = \beta^2K + \beta(VG^\top + GV^\top) + GG^\top,\quad
   WV'^\top = \beta N + \mu v^\top + MH_\lambda,\quad \nu' = \beta\nu + d\,v + H_\lambda\mu, $$
$$ M' = M - \eta(WV'^\top + V'W^\top) + \eta^2K',\quad \mu' = \mu - \eta\nu',\quad
   N' = WV'^\top - \eta K', $$

with $GG^\top = d\,vv^\top + v\mu^\top H_\lambda + H_\lambda\mu v^\top + H_\lambda MH_\lambda$ and
$VG^\top = \nu v^\top + N^\top H_\lambda$. At $\beta = \lambda = 0$ this is Eqs. (23)-(24)
(Theorem 2; per layer, Theorem 14). What $v$ and $H$ are depends on the model:
:func:`nqf.updates.nqf_sgd` (the NQF of Eq. 20) and :func:`nqf.updates.deep_nqf_sgd`
(each layer of a deep NQF) compute them and call this one function.
"""

from __future__ import annotations

import jax.numpy as jnp


def moment_update(moments, v, H, eta, d, beta, wd):
    """One step of the moments ``(M, mu, N, K, nu)`` given the gradient terms ``v``, ``H`` (module
    docstring). Traceable in every number; returns the new ``(M, mu, N, K, nu)``. No
    symmetrisation: the map is the literal recursion, so its Jacobian is that of Eqs. (23)-(24)."""
    M, mu, N, K, nu = moments
    Hl = H + wd * jnp.eye(M.shape[0], dtype=M.dtype)
    vmu = jnp.outer(v, mu)
    GG = d * jnp.outer(v, v) + vmu @ Hl + Hl @ vmu.T + Hl @ M @ Hl
    VG = jnp.outer(nu, v) + N.T @ Hl  # V G^T
    K1 = beta**2 * K + beta * (VG + VG.T) + GG
    WV1 = beta * N + vmu.T + M @ Hl  # W V'^T
    nu1 = beta * nu + d * v + Hl @ mu
    M1 = M - eta * (WV1 + WV1.T) + eta**2 * K1
    return M1, mu - eta * nu1, WV1 - eta * K1, K1, nu1
