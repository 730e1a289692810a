r"""The Fourier MLP of Sec. 7 (Eq. 50, Fig. 5), its structure matrix (Eq. 296), and Fig. 5's baseline.

$$ f(x) = \frac{1}{\sqrt P}\sum_{k=1}^P W_k\tanh\big(s_ka_k\psi_k(x)\big),\qquad
   \psi_k(x) = \sqrt2\cos(2\pi kx),\quad s_k = k^{-\theta}, $$

with trainable $w_k = (a_k, W_k)$. Packed as one neuron of $p = 2P$ parameters $(a_1, W_1, a_2, W_2, \dots)$,
Theorem 1 gives the block-diagonal $A(x) = \bigoplus_k \frac{s_k}{2\sqrt P}\left(\begin{smallmatrix}0 & \psi_k(x)\\
\psi_k(x) & 0\end{smallmatrix}\right)$ (Eq. 296). Dropping the $1/\sqrt P$ is the reading under which Fig. 5
shows a power law (erratum 9 of the book).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import check_ndim, check_size, invalid
from .._types import ArrayLike
from ._base import Architecture


def fourier_features(x: Float[ArrayLike, "*n"] | float, P: int) -> Float[Array, "*n P"]:
    r"""Orthonormal Fourier features $\psi_k(x) = \sqrt2\cos(2\pi kx)$, $k = 1..P$ (Sec. 7). On a uniform
    grid of $M > 2P$ points, $\frac1M\sum_\mu\psi_k(x_\mu)\psi_j(x_\mu) = \delta_{kj}$."""
    check_size("P", P)  # number of Fourier units
    xs = jnp.asarray(x, dtype=float)[..., None]
    k = jnp.arange(1, P + 1, dtype=float).reshape((1,) * (xs.ndim - 1) + (P,))  # broadcast over x's axes
    return jnp.sqrt(2.0) * jnp.cos(2 * jnp.pi * k * xs)


def fourier_mlp(params: Float[ArrayLike, "2 P"], xs: Float[ArrayLike, " n"], s: Float[ArrayLike, " P"],
                pre: float | Float[ArrayLike, ""], *, nqf: bool = False) -> Float[Array, " n"]:
    r"""The Fourier MLP of Eq. (50) at a batch of inputs ``xs``, parameters as two rows
    ``(a, W)``: $\mathrm{pre}\sum_kW_k\tanh(s_ka_k\psi_k(x))$, with ``s`` the scales $s_k = k^{-\theta}$ and
    ``pre`` the prefactor ($1/\sqrt P$ as printed, or 1). ``nqf=True`` gives its NQF
    $\mathrm{pre}\sum_ks_ka_kW_k\psi_k(x)$ (Eq. 296). ``s`` and ``pre`` are arrays, not options: a new
    $\theta$ or reading compiles nothing, and ``jax.vmap`` runs many at once."""
    params = jnp.asarray(params)
    check_ndim("params", params, 2, "rows (a, W)")
    a, v = params[0], params[1]
    psi = fourier_features(xs, a.shape[0])
    s = jnp.asarray(s)
    if nqf:
        return pre * psi @ (s * a * v)
    return pre * jnp.tanh(psi * (s * a)[None, :]) @ v


class FourierMLP(Architecture):
    r"""Eq. (50) as a module of interchangeable neurons (``W`` of shape ``(2P, d)``, rows
    $(a_1, W_1, a_2, W_2, \dots)$; the paper's model is ``d = 1``), with its $A(x)$ (Eq. 296)."""

    P: int = eqx.field(static=True)
    theta: float = eqx.field(static=True)
    normalise: bool = eqx.field(static=True, default=True)

    @property
    def name(self) -> str:
        return f"Fourier MLP (P={self.P}, theta={self.theta:g})"

    @property
    def p(self) -> int:
        return 2 * self.P

    @property
    def coupling(self) -> Float[Array, " P"]:
        r"""$c_k = s_k/\sqrt P$ (or $s_k$ without the normalisation): $f\approx\sum_kc_ka_kW_k\psi_k(x)$."""
        s = jnp.arange(1, self.P + 1, dtype=float) ** (-float(self.theta))
        return s / jnp.sqrt(self.P) if self.normalise else s

    def _check(self, W):
        W = jnp.asarray(W, dtype=float)
        if W.ndim != 2 or W.shape[0] != 2 * self.P:
            raise invalid("W", f'have shape ({2 * self.P}, d) (rows a_1, W_1, a_2, W_2, ...)', f'{W.shape}')
        return W

    def apply(self, W: Float[ArrayLike, "p d"], x) -> Float[Array, ""]:
        """Eq. (50), summed over the ``d`` neurons (columns of ``W``)."""
        W = self._check(W)
        s = jnp.arange(1, self.P + 1, dtype=float) ** (-float(self.theta))
        pre = 1.0 / jnp.sqrt(self.P) if self.normalise else 1.0
        return pre * jnp.sum(W[1::2] * jnp.tanh(s[:, None] * W[0::2] * fourier_features(x, self.P)[:, None]))

    def apply_nqf(self, W: Float[ArrayLike, "p d"], x) -> Float[Array, ""]:
        r"""The NQF of the module, $\mathrm{Tr}[WW^\top A(x)] = \sum_kc_ka_kW_k\psi_k(x)$ (Prop. 1)."""
        W = self._check(W)
        return jnp.sum(self.coupling[:, None] * W[0::2] * W[1::2] * fourier_features(x, self.P)[:, None])

    def structure(self, x) -> Float[Array, "p p"]:
        """Eq. (296): block-diagonal, block k = c_k psi_k(x)/2 [[0, 1], [1, 0]]."""
        off = jnp.zeros(2 * self.P - 1).at[0::2].set(0.5 * self.coupling * fourier_features(x, self.P))
        return jnp.diag(off, 1) + jnp.diag(off, -1)

    def sample_input(self, key: Array):
        return jax.random.uniform(key, ())


def raw_tanh_mlp(params: dict, xs: Float[ArrayLike, " n"]) -> Float[Array, " n"]:
    r"""The baseline of Fig. 5: a tanh MLP on the raw scalar input,
    $f(x) = \sum_iv_i\tanh(u_ix + b_i)$ (``params = {"u", "b", "v"}``, each of shape ``(hidden,)``)."""
    xs = jnp.asarray(xs, dtype=float)
    return jnp.tanh(xs[:, None] * params["u"][None, :] + params["b"][None, :]) @ params["v"]
