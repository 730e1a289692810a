r"""The neural quadratic form on its order parameters $(M, \mu)$.

For a dataset of structure matrices $A(x_\mu)$ (a stack of shape ``(m, p, p)``)
the general NQF of Eq. (20) predicts

$$ f_{x}(W) = f_x(0) + g(x)^\top\mu + \mu^\top B(x)\mu + \mathrm{Tr}[M A(x)], $$

with $M = W W^\top$ and $\mu = \sum_i w_i$. The book's loss is the paper's
Eq. (26), **without** the factor ½:
$\mathcal L = \frac1m\sum_\mu (\mathrm{Tr}[M A(x_\mu)] - y_\mu)^2$, with residuals
$\Delta_\mu$ and $H = \frac4m\sum_\mu \Delta_\mu A(x_\mu)$ (Eq. 27).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Float
from .._checks import check_finite
from .._checks import check_psd
from .._checks import check_shape
from .._checks import check_square_stack
from .._checks import check_symmetric
from .._types import ArrayLike
from .._types import Matrix
from .._types import StructureStack
from .._types import Targets



def check_dataset(As, ys=None) -> tuple[int, int]:
    """Validate a stack of structure matrices (and targets); return ``(m, p)``."""
    m, p = check_square_stack("As", As)
    check_finite("As", As)
    check_symmetric("As", As)
    if ys is not None:
        check_shape("ys", ys, (m,), "one target per structure matrix in `As`")
        check_finite("ys", ys)
    return m, p


def check_order_parameter(M, p: int | None = None, *, psd: bool = True) -> int:
    """Validate an order parameter ``M`` (square, finite, symmetric PSD); return ``p``."""
    shape = jnp.shape(M)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"`M` must be a square (p, p) matrix; got shape {shape}.")
    if p is not None and shape[0] != p:
        raise ValueError(
            f"`M` must have shape ({p}, {p}) to match the structure matrices; got shape {shape}."
        )
    check_finite("M", M)
    if psd:
        check_psd("M", M)
    else:
        check_symmetric("M", M)
    return shape[0]


def outputs(
    M: Matrix,
    As: StructureStack,
    *,
    mu: Float[ArrayLike, " p"] | None = None,
    gs: Float[ArrayLike, "m p"] | None = None,
    Bs: Float[ArrayLike, "m p p"] | None = None,
    f0: Float[ArrayLike, " m"] | float = 0.0,
) -> Float[ArrayLike, " m"]:
    r"""Model outputs $f_{x_\mu} = f_0 + g_\mu^\top\mu + \mu^\top B_\mu\mu + \mathrm{Tr}[M A_\mu]$ (Eq. 20).

    Args:
        M: order parameter $W W^\top$, shape ``(p, p)``.
        As: structure matrices, shape ``(m, p, p)``.
        mu: $\sum_i w_i$, needed only when ``gs`` or ``Bs`` is given.
        gs, Bs: linear and cross terms of the general form (App. B.1).
        f0: $f_x(0)$, a scalar or one value per sample.
    """
    out = jnp.einsum("ij,mji->m", M, As)
    if gs is not None or Bs is not None:
        if mu is None:
            raise ValueError("`mu` is required when `gs` or `Bs` is given (Eq. 20).")
        if gs is not None:
            out = out + gs @ mu
        if Bs is not None:
            out = out + jnp.einsum("i,mij,j->m", mu, Bs, mu)
    return out + f0


def residuals(M: Matrix, As: StructureStack, ys: Targets) -> Float[ArrayLike, " m"]:
    r"""Residuals $\Delta_\mu = \mathrm{Tr}[M A(x_\mu)] - y_\mu$ (Sec. 5, Eq. 29)."""
    return outputs(M, As) - ys


def mse_loss(M: Matrix, As: StructureStack, ys: Targets) -> Float[ArrayLike, ""]:
    r"""The paper's loss $\frac1m\sum_\mu \Delta_\mu^2$ (Eq. 26), no factor ½."""
    return jnp.mean(residuals(M, As, ys) ** 2)


def h_matrix(M: Matrix, As: StructureStack, ys: Targets) -> Matrix:
    r"""$H = \frac4m\sum_\mu \Delta_\mu A(x_\mu)$ of Eq. (27); the flow is $\dot W = -HW$."""
    delta = residuals(M, As, ys)
    return 4.0 * jnp.einsum("m,mij->ij", delta, As) / As.shape[0]


def flow_field(M: Matrix, As: StructureStack, ys: Targets) -> Matrix:
    r"""Right-hand side of the closed flow $\dot M = -HM - MH$ (Eq. 28)."""
    H = h_matrix(M, As, ys)
    return -(H @ M + M @ H)
