r"""The empirical neural tangent kernel of an NQF from $(M, \mu)$ (Prop. 8, App. B.6).

With $\nabla_W f_x = u(x)\mathbf 1^\top + 2A(x)W$, $u(x) = g(x) + 2B(x)\mu$ (Eq. 247), the kernel is

$$ \Theta(x, x') = d\,u(x)^\top u(x') + 2u(x)^\top A(x')\mu + 2\mu^\top A(x)u(x')
   + 4\,\mathrm{Tr}[A(x)A(x')M] \qquad\text{(Eq. 245)}, $$

a function of the order parameters alone; how much it moves in training depends on how $g$, $A$, $B$ scale
with the width (Prop. 9: :func:`width_scaled`, :func:`ntk_change`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_finite, check_ndim, check_positive, check_shape, check_size, invalid
from .._types import ArrayLike, Matrix
from ._data import NQFData, require_data
from ._model import check_order_parameter


def _check_width(d) -> int:
    return check_size("d", d)


def _ntk(M, mu, data: NQFData, d):
    As = data.As
    u = jnp.zeros((As.shape[0], mu.shape[0]), dtype=As.dtype)
    if data.gs is not None:
        u = u + data.gs
    if data.Bs is not None:
        u = u + 2.0 * jnp.einsum("mij,j->mi", data.Bs, mu)
    Amu = jnp.einsum("mij,j->mi", As, mu)  # A(x) mu
    cross = 2.0 * u @ Amu.T  # 2 u(x)^T A(x') mu
    AM = jnp.einsum("aij,jk->aik", As, M)
    trace = 4.0 * jnp.einsum("aij,bji->ab", As, AM)  # 4 Tr[A(x) A(x') M]
    return d * u @ u.T + cross + cross.T + trace


def ntk(M: Matrix, mu: Float[ArrayLike, " p"], data: NQFData, *, d: int) -> Float[Array, "m m"]:
    r"""The NTK Gram matrix $\Theta(x_a, x_b)$ over the samples of ``data`` from $(M, \mu)$, Eq. (245).

    Args:
        M, mu: order parameters, shapes ``(p, p)`` and ``(p,)``.
        data: the :class:`~nqf.model.NQFData` (``As`` and, if present, ``gs``, ``Bs`` of Eq. 20).
        d: width (enters through the term $d\,u^\top u$).
    """
    data = require_data(data)
    check_order_parameter(M, data.p)
    check_shape("mu", mu, (data.p,), "sum of the neurons")
    check_finite("mu", mu)
    return _ntk(jnp.asarray(M, dtype=float), jnp.asarray(mu, dtype=float), data, float(_check_width(d)))


def _trajectory(states, p: int):
    """``(Ms, mus)`` from a trajectory: a pair of stacks or any state with ``.M`` and ``.mu`` fields."""
    Ms, mus = (states.M, states.mu) if hasattr(states, "M") else states
    check_shape("Ms", Ms, (None, p, p), "trajectory of M")
    check_shape("mus", mus, (np.shape(Ms)[0], p), "trajectory of mu")
    return jnp.asarray(Ms, dtype=float), jnp.asarray(mus, dtype=float)


def ntk_trajectory(states, data: NQFData, *, d: int) -> Float[Array, "T m m"]:
    """Eq. (245) at every saved step of a trajectory: ``states`` is ``(Ms, mus)`` of shapes
    ``(T, p, p)``, ``(T, p)``, or the state trajectory returned by :func:`nqf.updates.nqf_sgd`."""
    data = require_data(data)
    Ms, mus = _trajectory(states, data.p)
    return _ntk_traj(Ms, mus, data, float(_check_width(d)))


@jax.jit
def _ntk_traj(Ms, mus, data, d):
    return jax.vmap(lambda M, mu: _ntk(M, mu, data, d))(Ms, mus)


def ntk_learning_rate(
    M: Matrix, mu: Float[ArrayLike, " p"], data: NQFData, *, d: int, fraction: float = 0.1, digits: int = 2
) -> float:
    r"""A learning rate set by the initial NTK: ``fraction`` of the linearised stability limit.

    Linearised around $(M, \mu)$, gradient descent on the paper's loss (Eq. 26, no ½) moves the
    residuals by $\Delta \leftarrow (I - \frac{2\eta}{m}\Theta)\Delta$, stable for
    $\eta < m/\lambda_{\max}(\Theta)$ with $\Theta$ of Eq. (245). Returns
    ``fraction`` $\cdot\, m/\lambda_{\max}$ rounded to ``digits`` significant digits.
    """
    check_positive("fraction", fraction)
    check_size("digits", digits)
    lam_max = float(jnp.linalg.eigvalsh(ntk(M, mu, data, d=d))[-1])
    if not lam_max > 0:
        raise invalid("M", "give an NTK with a positive eigenvalue (else there is no learning rate)",
                      f"the NTK at (M, mu) has no positive eigenvalue (largest {lam_max:.3g})")
    return float(f"{fraction * data.m / lam_max:.{int(digits)}g}")


def empirical_ntk(fn: Callable[[Any], Float[Array, " m"]], W: Float[ArrayLike, "..."]) -> Float[Array, "m m"]:
    r"""The NTK by autodiff, $\Theta = JJ^\top$ with $J = \partial f/\partial W$ (flattened).

    ``fn(W)`` returns the ``m`` outputs of the model at weights ``W``, e.g.
    ``lambda W: nqf.updates.weight_outputs(W, data)`` or
    ``lambda W: jax.vmap(lambda x: module.apply(W, x))(xs)``.
    """
    check_finite("W", W)
    W = jnp.asarray(W)
    J = jax.jacrev(fn)(W)
    if J.ndim < 1 + W.ndim or J.shape[J.ndim - W.ndim:] != W.shape:
        raise invalid("fn", "map W to a vector of outputs", f"a Jacobian of shape {J.shape}")
    J = J.reshape(-1, W.size)
    return J @ J.T


def ntk_change(Theta0: Float[ArrayLike, "m m"], Theta: Float[ArrayLike, "*T m m"]) -> Float[Array, "*T"]:
    r"""Relative change $\|\Theta - \Theta_0\|_F / \|\Theta_0\|_F$ (one value per leading index)."""
    check_ndim("Theta0", Theta0, 2, "a Gram matrix")
    m = np.shape(Theta0)[0]
    if np.shape(Theta)[-2:] != (m, m):
        raise invalid("Theta", f'end in shape ({m}, {m}) like `Theta0`', f'{np.shape(Theta)}')
    T0 = jnp.asarray(Theta0)
    diff = jnp.asarray(Theta) - T0[(None,) * (np.ndim(Theta) - 2)]
    return jnp.sqrt(jnp.sum(diff**2, axis=(-2, -1))) / jnp.sqrt(jnp.sum(T0**2))


def width_scaled(
    data: NQFData, *, d: int, alpha_A: float, alpha_B: float, alpha_g: float = 0.5
) -> NQFData:
    r"""Width scaling of App. B.6: the data with $(d^{-\alpha_A}A,\ d^{-\alpha_g}g,\ d^{-\alpha_B}B)$.

    With $\mu(0), M(0) = O(1)$ (weights of variance $1/d$) and $\alpha_g = \tfrac12$
    the initial kernel is $O(1)$; Prop. 9 predicts a frozen kernel as $d\to\infty$
    (lazy) for $\alpha_A > 0$ and $\alpha_B > 1$, and an $O(1)$ change
    (feature learning) for $\alpha_A = 0$ or $\tfrac12 \le \alpha_B \le 1$.
    ``data`` must carry ``gs`` and ``Bs``; ``ys`` and ``f0`` are kept.
    """
    data = require_data(data)
    if data.gs is None or data.Bs is None:
        raise invalid("data", 'carry both `gs` and `Bs` to be width-scaled (App. B.6)',
                      f"gs={('None' if data.gs is None else 'array')}, Bs={('None' if data.Bs is None else 'array')}")
    d = float(_check_width(d))
    for name, a in (("alpha_A", alpha_A), ("alpha_B", alpha_B), ("alpha_g", alpha_g)):
        check_positive(name, a, strict=False)
    return NQFData(data.As * d**-alpha_A, data.ys, gs=data.gs * d**-alpha_g, Bs=data.Bs * d**-alpha_B, f0=data.f0)
