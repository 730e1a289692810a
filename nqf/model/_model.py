r"""The neural quadratic form on its order parameters $(M, \mu)$: outputs of Eq. (20) on an
:class:`~nqf.model.NQFData`, and the book's loss, the paper's Eq. (26) **without** the factor ½,
$\mathcal L = \frac1m\sum_\mu \Delta_\mu^2$, with $H = \frac4m\sum_\mu \Delta_\mu A(x_\mu)$ (Eq. 27).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float
from .._checks import check_finite, check_psd, check_shape, check_square_stack, check_symmetric, invalid
from .._types import ArrayLike, Matrix
from ._data import NQFData, require_data


def check_dataset(As, ys=None) -> tuple[int, int]:
    """Validate a stack of structure matrices (and targets); return ``(m, p)``."""
    m, p = check_square_stack("As", As)
    check_finite("As", As)
    check_symmetric("As", As)
    if ys is not None:
        check_shape("ys", ys, (m,), "one target per structure matrix in `As`")
        check_finite("ys", ys)
    return m, p


def check_order_parameter(M, p: int | None = None, *, psd: bool = True, name: str = "M") -> int:
    """Validate an order parameter ``M`` (square, finite, symmetric PSD); return ``p``.

    ``name`` is the caller's name of the argument (``"M0"`` for an initial condition)."""
    shape = jnp.shape(M)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise invalid(name, 'be a square (p, p) matrix', f'shape {shape}')
    if p is not None and shape[0] != p:
        raise invalid(name, f'have shape ({p}, {p}) to match the structure matrices', f'shape {shape}')
    check_finite(name, M)
    if psd:
        check_psd(name, M)
    else:
        check_symmetric(name, M)
    return shape[0]


def outputs(M: Matrix, data: NQFData, *, mu: Float[ArrayLike, " p"] | None = None) -> Float[Array, " m"]:
    r"""Model outputs $f_{x_\mu} = f_0 + g_\mu^\top\mu + \mu^\top B_\mu\mu + \mathrm{Tr}[M A_\mu]$ (Eq. 20).

    Args:
        M: order parameter $W W^\top$, shape ``(p, p)``.
        data: the :class:`~nqf.model.NQFData` (``As``; ``gs``, ``Bs`` of the general form,
            App. B.1; offsets ``f0``).
        mu: $\sum_i w_i$, shape ``(p,)``; needed only when the data carry ``gs`` or ``Bs``.
    """
    data = require_data(data)
    check_order_parameter(M, data.p, psd=False)
    if mu is not None:
        check_shape("mu", mu, (data.p,), "sum of the neurons")
    out = jnp.einsum("ij,mji->m", M, data.As) + data.f0
    if not data.zgz:
        if mu is None:
            raise invalid("mu", "be given when the data carry `gs` or `Bs` (Eq. 20)", "None")
        if data.gs is not None:
            out = out + data.gs @ mu
        if data.Bs is not None:
            out = out + jnp.einsum("i,mij,j->m", mu, data.Bs, mu)
    return out


def residuals(M: Matrix, data: NQFData, *, mu: Float[ArrayLike, " p"] | None = None) -> Float[Array, " m"]:
    r"""Residuals $\Delta_\mu = f_{x_\mu} - y_\mu$ (Sec. 5, Eq. 29; $\mathrm{Tr}[MA_\mu] - y_\mu$ under ZGZ)."""
    return outputs(M, data, mu=mu) - data.ys


class MSE(eqx.Module):
    r"""THE loss convention of the package (Eq. 26, no factor ½), one object for every trainer, runner and recipe.

    The default, :data:`nqf.model.mse` ``= MSE()``, is $\mathcal L = \frac1m\sum_\mu\|f(x_\mu) - y_\mu\|^2$: the **mean over
    samples** (axis 0) of the squared error **summed over outputs** (every other axis). For scalar outputs this is
    the paper's $\frac1m\sum_\mu\Delta_\mu^2$; for $o$ outputs it is the loss of App. B.2 (one $A^{(o)}$ per output),
    whose flow is Eq. (28) with $H = \frac4m\sum_{\mu, o}\Delta_{\mu o}A^{(o)}(x_\mu)$.

    ``outputs="mean"`` averages over outputs instead (time rescaled by $o$: :attr:`time_factor`);
    ``samples="sum"`` sums over samples (the flow of a summed loss runs $m$ times faster). ``weights`` (one per
    sample) weight each sample's squared error. A value (hashable): compiled runs are cached on it.
    """

    outputs: str = eqx.field(static=True, default="sum")  #: ``"sum"`` or ``"mean"`` over the outputs
    samples: str = eqx.field(static=True, default="mean")  #: ``"mean"`` or ``"sum"`` over the samples

    def __check_init__(self):
        for name, value, options in (("outputs", self.outputs, ("sum", "mean")),
                                     ("samples", self.samples, ("mean", "sum"))):
            if value not in options:
                raise invalid(name, f"be one of {options}", repr(value))

    def time_factor(self, num_outputs: int, num_samples: int) -> float:
        """The factor by which this loss's gradient flow is faster than that of :data:`nqf.model.mse` (Eq. 28's time)."""
        return (1.0 / num_outputs if self.outputs == "mean" else 1.0) * (num_samples if self.samples == "sum" else 1.0)

    def __call__(self, predictions: Float[ArrayLike, "m *o"], targets: Float[ArrayLike, "m *o"],
                 weights: Float[ArrayLike, " m"] | None = None) -> Float[Array, ""]:
        r = jnp.reshape(jnp.asarray(predictions) - jnp.asarray(targets), (jnp.shape(targets)[0], -1))
        if self.outputs == "mean" and self.samples == "mean" and weights is None:
            return jnp.mean(r**2)
        per_sample = jnp.sum(r**2, axis=1) if self.outputs == "sum" else jnp.mean(r**2, axis=1)
        if weights is not None:
            per_sample = jnp.asarray(weights) * per_sample
        return jnp.mean(per_sample) if self.samples == "mean" else jnp.sum(per_sample)


#: THE loss of the package (:class:`MSE` with its defaults): mean over samples, summed over outputs, no ½ (Eq. 26)
mse = MSE()


def mse_loss(M: Matrix, data: NQFData, *, mu: Float[ArrayLike, " p"] | None = None) -> Float[Array, ""]:
    r"""The paper's loss $\frac1m\sum_\mu \Delta_\mu^2$ (Eq. 26), no factor ½, of the NQF at $(M, \mu)$
    (:data:`nqf.model.mse` of its outputs)."""
    return jnp.mean(residuals(M, data, mu=mu) ** 2)


def _require_zgz(data: NQFData, what: str) -> None:
    if not data.zgz:
        raise invalid("data", f"be ZGZ data (no `gs`, no `Bs`): `{what}` is the flow on M alone (Eqs. 27-28); use the "
                      "discrete update nqf.updates.nqf_sgd on (M, mu) for the general form", "data with `gs` or `Bs`")


def h_matrix(M: Matrix, data: NQFData) -> Matrix:
    r"""$H = \frac4m\sum_\mu \Delta_\mu A(x_\mu)$ of Eq. (27); the flow is $\dot W = -HW$ (ZGZ data)."""
    _require_zgz(data, "h_matrix")
    delta = residuals(M, data)
    return 4.0 * jnp.einsum("m,mij->ij", delta, data.As) / data.As.shape[0]
