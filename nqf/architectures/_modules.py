r"""Modules as sums of interchangeable neurons (Table 1, Props. 1, 5, 6): the two-layer MLP, the CNN, the
mixture of experts, phase retrieval and the diagonal linear network, each with its closed-form $A(x)$.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_size as _int, invalid
from .._random import normal
from .._types import ArrayLike
from ._base import (Architecture, _check_outputs, _readout, _readout_blocks, _zero_slope, check_activation,
    check_input, check_weights, feedforward_structure, require_function)


class TwoLayerMLP(Architecture):
    r"""Two-layer MLP $f_x(W) = \sum_i v_i\,\phi(u_i^\top x [+ b_i])$ (Eq. 5, Prop. 1); see :func:`two_layer_mlp`."""

    k: int = eqx.field(static=True)
    activation: Callable = eqx.field(static=True)
    outputs: int | None = eqx.field(static=True, default=None)
    bias: bool = eqx.field(static=True, default=False)

    @property
    def name(self) -> str:
        return "two-layer MLP" + (" (bias)" if self.bias else "")

    @property
    def p(self) -> int:
        return self.k + int(self.bias) + (1 if self.outputs is None else self.outputs)

    def apply(self, W: Float[ArrayLike, "p d"], x: ArrayLike) -> Float[Array, "*o"]:
        k = self.k
        check_weights(W, self.p, "two_layer_mlp")
        check_input("x", x, (k,), "one input vector")
        z = W[:k].T @ x + (W[k] if self.bias else 0.0)
        return _readout(W[k + int(self.bias):], self.activation(z), self.outputs)

    def structure(self, x: ArrayLike) -> Float[Array, "*o p p"]:
        check_input("x", x, (self.k,), "one input vector")
        x = jnp.asarray(x)
        xt = jnp.concatenate([x, jnp.ones((1,), x.dtype)]) if self.bias else x
        return feedforward_structure(_zero_slope(self.activation, x) * _readout_blocks(xt, self.outputs))

    def sample_input(self, key: Array) -> Float[Array, " k"]:
        return normal(key, (self.k,))


def two_layer_mlp(k: int, *, activation: Callable = jnp.tanh, outputs: int | None = None, bias: bool = False,
                  check_smooth: bool = True) -> Architecture:
    r"""Two-layer MLP $f_x(W) = \sum_i v_i\,\phi(u_i^\top x [+ b_i])$ (Eq. 5, Prop. 1).

    Neuron packing: ``w = [u; v]`` ($u \in \mathbb R^k$, $v \in \mathbb R$), or
    ``w = [u; b; v]`` with ``bias=True``; with ``outputs = o`` the readout is
    $v \in \mathbb R^o$ and there is one $A^{(m)}$ per output (App. B.2).
    Closed form (Eq. 6), with $\tilde x = x$ (or $[x; 1]$ with a bias):

    $$ A^{(m)}(x) = \frac{\phi'(0)}{2}\begin{bmatrix} 0 & \tilde x e_m^\top \\ e_m \tilde x^\top & 0\end{bmatrix}. $$

    A hidden bias keeps ZGZ when $\phi(0) = 0$ ($\partial_b f = v\phi' = 0$ and
    $\partial_v f = \phi(0) = 0$ at $w_i = 0$): it acts as a constant input 1.
    If $\phi(0) \ne 0$ the formula is still the $A$ of the general form (Eq. 20)
    but ZGZ fails with $g(x) = [0; \phi(0) e_m]$.
    """
    outputs = _check_outputs(outputs)
    require_function(activation)
    if check_smooth:
        check_activation(activation)
    return TwoLayerMLP(_int("k", k), activation, outputs, bool(bias))


def patch_index(height: int, width: int, kh: int, kw: int) -> np.ndarray:
    """Flat indices ``(P, kh*kw)`` of the valid stride-1 patches, row-major."""
    rows = np.arange(height - kh + 1)[:, None, None, None] + np.arange(kh)[None, None, :, None]
    cols = np.arange(width - kw + 1)[None, :, None, None] + np.arange(kw)[None, None, None, :]
    return (rows * width + cols).reshape(-1, kh * kw)


class CNN(Architecture):
    r"""Single-channel CNN with global sum pooling (Eq. 15, Prop. 6); see :func:`cnn`."""

    height: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    kh: int = eqx.field(static=True)
    kw: int = eqx.field(static=True)
    activation: Callable = eqx.field(static=True)
    outputs: int | None = eqx.field(static=True, default=None)

    name = "single-layer CNN"

    @property
    def p(self) -> int:
        return self.kh * self.kw + (1 if self.outputs is None else self.outputs)

    def _patches(self, x) -> Array:
        idx = patch_index(self.height, self.width, self.kh, self.kw)
        return jnp.reshape(jnp.asarray(x), (-1,))[idx]  # (P, m)

    def apply(self, W: Float[ArrayLike, "p d"], x: ArrayLike) -> Float[Array, "*o"]:
        check_weights(W, self.p, "cnn")
        check_input("x", x, (self.height, self.width), "one single-channel image")
        m = self.kh * self.kw
        return _readout(W[m:], self.activation(self._patches(x) @ W[:m]).sum(0), self.outputs)

    def structure(self, x: ArrayLike) -> Float[Array, "*o p p"]:
        check_input("x", x, (self.height, self.width), "one single-channel image")
        x = jnp.asarray(x)
        s = self._patches(x).sum(0)
        return feedforward_structure(_zero_slope(self.activation, x) * _readout_blocks(s, self.outputs))

    def sample_input(self, key: Array) -> Float[Array, "h w"]:
        return normal(key, (self.height, self.width))


def cnn(height: int, width: int, kh: int, kw: int, *, activation: Callable = jnp.tanh, outputs: int | None = None,
        check_smooth: bool = True) -> Architecture:
    r"""Single-channel CNN with global sum pooling, $f = \sum_i v_i \sum_p \phi(k_i^\top x_p)$ (Eq. 15).

    Valid cross-correlation (no kernel flip), stride 1, no padding; $x_p$ is the
    row-major flattened $k_h\times k_w$ patch $p$, $P = (H-k_h+1)(W-k_w+1)$.
    Neuron packing ``w = [vec_row(K) (kh*kw); v]`` (``v`` in $\mathbb R^o$ with
    ``outputs = o``). Closed form (Prop. 6, Eq. 16): the MLP's $A$ with
    $\sum_p x_p$ in place of $x$.
    """
    outputs = _check_outputs(outputs)
    height, width, kh, kw = _int("height", height), _int("width", width), _int("kh", kh), _int("kw", kw)
    if kh > height or kw > width:
        bad = "kh" if kh > height else "kw"
        raise invalid(bad, f"fit in the input: kernel (kh, kw) = ({kh}, {kw}), input (height, width) = ({height}, {width})",
                      f"{bad} = {kh if bad == 'kh' else kw}")
    require_function(activation)
    if check_smooth:
        check_activation(activation)
    return CNN(height, width, kh, kw, activation, outputs)


def _linear_expert(theta: Float[ArrayLike, " n"], x: Float[ArrayLike, " n"]) -> Float[Array, ""]:
    r"""Default expert $E(x; \theta) = \theta^\top x$, so $G(x) = \nabla_\theta E(x; 0) = x$."""
    return theta @ x


class MixtureOfExperts(Architecture):
    r"""Mixture of experts with independent gating (Eq. 13, Prop. 5); see :func:`mixture_of_experts`."""

    k: int = eqx.field(static=True)
    expert: Callable = eqx.field(static=True)
    n_theta: int = eqx.field(static=True)
    gate: Callable = eqx.field(static=True)

    name = "mixture of experts"

    @property
    def p(self) -> int:
        return self.k + self.n_theta

    def apply(self, W: Float[ArrayLike, "p d"], x: ArrayLike) -> Float[Array, ""]:
        k = self.k
        check_weights(W, self.p, "mixture_of_experts")
        check_input("x", x, (k,), "one input vector")
        experts = jax.vmap(self.expert, in_axes=(1, None))(jnp.asarray(W[k:]), x)
        return jnp.sum(self.gate(W[:k].T @ x) * experts)

    def structure(self, x: ArrayLike) -> Float[Array, "p p"]:
        check_input("x", x, (self.k,), "one input vector")
        x = jnp.asarray(x)
        G = jax.grad(self.expert)(jnp.zeros(self.n_theta, jnp.result_type(x, float)), x)
        return feedforward_structure(_zero_slope(self.gate, x) * jnp.outer(x, G))

    def sample_input(self, key: Array) -> Float[Array, " k"]:
        return normal(key, (self.k,))


def mixture_of_experts(k: int, *, expert: Callable | None = None, n_theta: int | None = None,
                       gate: Callable = jnp.tanh, check_smooth: bool = True) -> Architecture:
    r"""Mixture of experts with independent gating, $f = \sum_i \psi(r_i^\top x)\, E(x; \Theta_i)$ (Eq. 13).

    Neuron packing ``w = [r (k); theta (n_theta)]``. ``expert(theta, x)`` returns
    a scalar; the default is one linear expert, $E = \theta^\top x$ ($n_\theta = k$). Prop. 5
    needs $\psi(0) = 0$ and $E(x; 0) = 0$ (checked here on a sample input).
    Closed form (Eq. 14), $G(x) = \nabla_\Theta E(x; 0)$:

    $$ A(x) = \frac{\psi'(0)}{2}\begin{bmatrix} 0 & x G(x)^\top \\ G(x) x^\top & 0\end{bmatrix}. $$
    """
    if expert is None:
        expert, n_theta = _linear_expert, k if n_theta is None else n_theta
        if n_theta != k:
            raise invalid("n_theta", f"be k = {k} with the linear expert", f"{n_theta}")
    elif n_theta is None or n_theta < 1:
        raise invalid("n_theta", "be given (parameters of one expert, >= 1) with a custom expert", f"{n_theta!r}")
    require_function(gate, "gate")
    if expert is not None:
        require_function(expert, "expert")
    if check_smooth:
        check_activation(gate, "gate")
    if abs(float(gate(jnp.zeros(())))) > 0:
        raise invalid("gate", 'satisfy psi(0) = 0 (Prop. 5)', f'psi(0) = {float(gate(jnp.zeros(()))):.3g}')
    e0 = expert(jnp.zeros(n_theta), jnp.cos(jnp.arange(1.0, k + 1.0)))  # a generic x, no hidden key
    if np.shape(e0) != () or abs(float(e0)) > 0:
        raise invalid("expert", 'return a scalar with E(x; 0) = 0 (Prop. 5)', f'{e0!r}')
    return MixtureOfExperts(_int("k", k), expert, _int("n_theta", n_theta), gate)


class PhaseRetrieval(Architecture):
    r"""$\hat y = \sum_i (w_i^\top x)^2$, $A_x = xx^\top$: phase retrieval, or the quadratic network (Table 3);
    see :func:`phase_retrieval`, :func:`quadratic_network`."""

    n: int = eqx.field(static=True)
    name: str = eqx.field(static=True, default="phase retrieval")

    @property
    def p(self) -> int:
        return self.n

    def apply(self, W: Float[ArrayLike, "p d"], x: ArrayLike) -> Float[Array, ""]:
        check_weights(W, self.n, self.name.replace(" ", "_"))
        check_input("x", x, (self.n,), "one input vector")
        return jnp.sum((W.T @ x) ** 2)

    def structure(self, x: ArrayLike) -> Float[Array, "p p"]:
        check_input("x", x, (self.n,), "one input vector")
        return jnp.outer(x, x)

    def sample_input(self, key: Array) -> Float[Array, " n"]:
        return normal(key, (self.n,))


def phase_retrieval(n: int) -> Architecture:
    r"""Phase retrieval $\hat y_a = a^\top W W^\top a$, $A_a = a a^\top$ (Tables 1, 3): input ``x = a``, neuron
    $w_i \in \mathbb R^n$; exactly quadratic, so the NQF is exact."""
    return PhaseRetrieval(_int("n", n))


def quadratic_network(n: int) -> Architecture:
    r"""Quadratic network $f_W(x) = \sum_r (w_r^\top x)^2$, $A_x = xx^\top$ (Table 3): the function of
    :func:`phase_retrieval`, read as a network with quadratic activation and unit readout."""
    return PhaseRetrieval(_int("n", n), "quadratic network")


class DiagonalLinearNetwork(Architecture):
    r"""Diagonal linear network (Table 1 / Table 3); see :func:`diagonal_linear_network`."""

    n: int = eqx.field(static=True)
    two_factor: bool = eqx.field(static=True, default=False)

    @property
    def name(self) -> str:
        return "diagonal linear network" + (" (two-factor)" if self.two_factor else "")

    @property
    def p(self) -> int:
        return 2 * self.n if self.two_factor else self.n

    def apply(self, W: Float[ArrayLike, "p d"], x: ArrayLike) -> Float[Array, ""]:
        n = self.n
        check_weights(W, self.p, "diagonal_linear_network")
        check_input("x", x, (n,), "one input vector")
        if self.two_factor:
            return jnp.sum(x[:, None] * W[:n] * W[n:])
        return 0.25 * jnp.sum(x[:, None] * W**2)

    def structure(self, x: ArrayLike) -> Float[Array, "p p"]:
        check_input("x", x, (self.n,), "one input vector")
        D = jnp.diag(jnp.asarray(x))
        return feedforward_structure(D) if self.two_factor else 0.25 * D

    def sample_input(self, key: Array) -> Float[Array, " n"]:
        return normal(key, (self.n,))


def diagonal_linear_network(n: int, *, two_factor: bool = False) -> Architecture:
    r"""Diagonal linear network (Table 1 / Table 3).

    Square parametrisation: neuron $u \in \mathbb R^n$,
    $f_x = \sum_k x_k u_k^2 / 4$ (summed over neurons), $A_x = \tfrac14\mathrm{Diag}(x)$.
    Two-factor signed form (``two_factor=True``): neuron ``[u; v]``,
    $f_x = u^\top \mathrm{Diag}(x) v$, $A_x = \tfrac12[[0, \mathrm{Diag}(x)], [\mathrm{Diag}(x), 0]]$.
    Both are exactly quadratic.
    """
    return DiagonalLinearNetwork(_int("n", n), bool(two_factor))


def gaussian_linear_part(arch: Architecture, W: Float[ArrayLike, "p d"], *, n_quad: int = 60) -> Float[Array, "*o k"]:
    r"""The best linear map of a two-layer MLP under Gaussian inputs, $\mathbb E_x[f_x(W)\,x^\top]$.

    For $x\sim\mathcal N(0, I_k)$, Stein's lemma gives
    $\mathbb E[f_x\,x^\top] = \mathbb E[\nabla_x f_x] = Z_2\,\mathrm{diag}(\kappa)\,Z_1^\top$ with
    $Z_1 = U$ (inputs weights, ``W[:k]``), $Z_2$ the readouts and
    $\kappa_i = \mathbb E_{z}\,\phi'(\lVert u_i\rVert z + b_i)$, $z\sim\mathcal N(0, 1)$
    (Gauss–Hermite quadrature with ``n_quad`` nodes, exact for polynomial $\phi'$ of
    degree $< 2 n_\text{quad}$). Near $W = 0$, $\kappa_i \to \phi'(0)$ and this is the
    effective matrix $Z_2Z_1^\top$ of the feed-forward form (Eq. 18) scaled by
    $\phi'(0)$; away from it, the activation's curvature shrinks each neuron's slope.
    Returns shape ``(o, k)``, or ``(k,)`` for a scalar module.
    """
    if not isinstance(arch, TwoLayerMLP):
        raise invalid("arch", 'be a two_layer_mlp', f'{type(arch).__name__}')
    check_weights(W, arch.p, "two_layer_mlp")
    n_quad = _int("n_quad", n_quad)
    W = jnp.asarray(W)
    k = arch.k
    U, b = W[:k], (W[k] if arch.bias else jnp.zeros(W.shape[1], W.dtype))
    Z2 = W[k + int(arch.bias):]  # (o, d)
    z, w = np.polynomial.hermite_e.hermegauss(n_quad)
    w = w / w.sum()
    sigma = jnp.linalg.norm(U, axis=0)  # std of u_i . x
    slopes = jax.vmap(jax.grad(arch.activation))(jnp.ravel(sigma[:, None] * z[None, :] + b[:, None]))
    kappa = jnp.reshape(slopes, (-1, n_quad)) @ jnp.asarray(w, W.dtype)  # (d,)
    out = (Z2 * kappa[None, :]) @ U.T  # (o, k)
    return out[0] if arch.outputs is None else out
