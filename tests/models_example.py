"""A reader-style model factory (a model the package does not ship): ``make_model(key, n_in, n_out, width, init_scale)``.

Used by tests/test_your_model.py (and :class:`TwoLayerNet` by the diagnose, bad-input and rule tests and
benchmarks/bench_diagnose.py; :class:`TanhMLP`, :func:`teacher_data`, :func:`dict_apply` and :func:`flax_mlps`
by the diagnose tests and benchmarks/diagnose_models.py), and as the import path ``models_example:make_model`` to rerun Chapter 10 on
a model of the reader's (``-p model models_example:make_model`` with this directory on ``PYTHONPATH``).
"""

from collections.abc import Callable

import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch10_models import TanhMLP  # noqa: E402  (f(x) = V tanh(U x + b): chapter 10's, one definition)


class GeluMLP(eqx.Module):
    """``f(x) = V gelu(U x + b)``, ``width`` neurons: neuron i is row i of ``U``, entry i of ``b``, column i of ``V``."""

    U: jax.Array
    b: jax.Array
    V: jax.Array

    def __call__(self, x):
        return self.V @ jax.nn.gelu(self.U @ x + self.b)

    def neuron_axes(self):
        return GeluMLP(0, 0, 1)


def make_model(key, n_in, n_out, width=8, init_scale=1e-2):
    k1, k2, k3 = jax.random.split(key, 3)
    return GeluMLP(init_scale * jax.random.normal(k1, (width, n_in)), init_scale * jax.random.normal(k2, (width,)),
                   init_scale * jax.random.normal(k3, (n_out, width)))


class SinMLP(eqx.Module):
    """``f(x) = V sin(U x + b)`` (odd units: the NQF's remainder is O(|W|^4), Sec. 2)."""

    U: jax.Array
    b: jax.Array
    V: jax.Array

    def __call__(self, x):
        return self.V @ jax.numpy.sin(self.U @ x + self.b)

    def neuron_axes(self):
        return SinMLP(0, 0, 1)


def make_sin_model(key, n_in, n_out, width=8, init_scale=1e-3):
    k1, k2, k3 = jax.random.split(key, 3)
    return SinMLP(init_scale * jax.random.normal(k1, (width, n_in)), init_scale * jax.random.normal(k2, (width,)),
                  init_scale * jax.random.normal(k3, (n_out, width)))


class TwoLayerNet(eqx.Module):
    """``f(x) = V act(U x)`` without a bias: neuron i is row i of ``U`` and column i of ``V``."""

    U: jax.Array
    V: jax.Array
    act: Callable = eqx.field(static=True, default=jax.numpy.tanh)

    def __call__(self, x):
        return self.V @ self.act(self.U @ x)

    def neuron_axes(self):
        return TwoLayerNet(0, 1, self.act)


def tanh_mlp(n_in=4, n_out=3, width=8, init=1e-3, seed=1):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    return TanhMLP(init * jax.random.normal(k1, (width, n_in)), init * jax.random.normal(k2, (width,)),
                   init * jax.random.normal(k3, (n_out, width)))


def dict_apply(params, x):
    """A pure ``apply(params, x)`` on a dict: the function of :class:`TanhMLP`."""
    return params["V"] @ jnp.tanh(params["U"] @ x + params["b"])


def teacher_data(m=120, n_in=4, n_out=3, s=(1.0, 0.5, 0.25), seed=0):
    """``m`` Gaussian inputs and the targets of a linear teacher with singular values ``s``."""
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(m, n_in))
    P = np.linalg.qr(rng.normal(size=(n_in, len(s))))[0]
    Q = np.linalg.qr(rng.normal(size=(n_out, len(s))))[0]
    return jnp.asarray(xs), jnp.asarray(xs @ (P * np.asarray(s)) @ Q.T)


# neuron axis of each leaf of the linen MLP's variables; the output bias has none (shared, frozen)
LINEN_AXES = {"params": {"Dense_0": {"kernel": 1, "bias": 0}, "Dense_1": {"kernel": 0, "bias": None}}}


def flax_mlps(init=1e-3):
    """A 4 -> 8 -> 3 tanh MLP in flax linen and in flax nnx, weights N(0, init^2) in float64:
    ``((variables, apply, LINEN_AXES), (state, nnx_apply, nnx_axes))`` (flax imported here, as it is optional)."""
    import flax.linen as nn
    from flax import nnx

    class LinenMLP(nn.Module):
        width: int
        out: int

        @nn.compact
        def __call__(self, x):
            ini = nn.initializers.normal(init)
            h = jnp.tanh(nn.Dense(self.width, param_dtype=jnp.float64, kernel_init=ini, bias_init=ini)(x))
            return nn.Dense(self.out, param_dtype=jnp.float64, kernel_init=ini)(h)  # output bias: zeros, shared

    class NnxMLP(nnx.Module):
        def __init__(self, n_in, width, out, rngs):
            ini = nnx.initializers.normal(init)
            self.l1 = nnx.Linear(n_in, width, param_dtype=jnp.float64, kernel_init=ini, bias_init=ini, rngs=rngs)
            self.l2 = nnx.Linear(width, out, use_bias=False, param_dtype=jnp.float64, kernel_init=ini, rngs=rngs)

        def __call__(self, x):
            return self.l2(jnp.tanh(self.l1(x)))

    lm = LinenMLP(8, 3)
    variables = lm.init(jax.random.PRNGKey(0), jnp.ones(4))
    graphdef, state = nnx.split(NnxMLP(4, 8, 3, nnx.Rngs(0)))

    def nnx_apply(state, x):
        return nnx.merge(graphdef, state)(x)

    # l1's kernel (in, out) -> axis 1, its bias -> 0; l2's kernel (in, out) -> 0
    nnx_axes = jax.tree_util.tree_map_with_path(
        lambda path, _: 1 if "l1" in jax.tree_util.keystr(path) and "kernel" in jax.tree_util.keystr(path) else 0,
        state)
    return (variables, lm.apply, LINEN_AXES), (state, nnx_apply, nnx_axes)
