"""Chapter 10's default model, as a reader would write one: ``make_model(key, n_in, n_out, width, init_scale)``.

A sine MLP with hidden biases and vector outputs, ``f(x) = V sin(U x + b)``: in no table of the paper. Rerun the
chapter on your own model with ``papermill ... -p model yourpackage.yourmodule:your_factory``; the factory takes
the same arguments and returns a callable equinox Module with a method ``neuron_axes()`` (the neuron axis of each
parameter leaf, as ``jax.vmap``'s ``in_axes``).
"""

import equinox as eqx
import jax


class SinMLP(eqx.Module):
    """``f(x) = V sin(U x + b)``, ``width`` neurons: neuron i is row i of ``U``, entry i of ``b``, column i of ``V``."""

    U: jax.Array
    b: jax.Array
    V: jax.Array

    def __call__(self, x):
        return self.V @ jax.numpy.sin(self.U @ x + self.b)

    def neuron_axes(self):
        return SinMLP(0, 0, 1)


def make_model(key, n_in, n_out, width=16, init_scale=1e-3):
    k1, k2, k3 = jax.random.split(key, 3)
    return SinMLP(init_scale * jax.random.normal(k1, (width, n_in)), init_scale * jax.random.normal(k2, (width,)),
                  init_scale * jax.random.normal(k3, (n_out, width)))
