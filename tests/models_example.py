"""A reader-style model factory (a model the package does not ship): ``make_model(key, n_in, n_out, width, init_scale)``.

Used by tests/test_your_model.py (and :class:`TwoLayerNet` by the diagnose, bad-input and rule tests and
benchmarks/bench_diagnose.py), and as the import path ``models_example:make_model`` to rerun Chapter 9 on
a model of the reader's (``-p model models_example:make_model`` with this directory on ``PYTHONPATH``).
"""

from collections.abc import Callable

import equinox as eqx
import jax


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
