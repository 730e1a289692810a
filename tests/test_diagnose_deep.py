"""nqf.diagnose round 3, item 2 (issue 51): a deep stack is not one layer of interchangeable neurons. equinox's
MLP(depth=2) gets a refusal naming the ways to describe it (the deep NQF of Def. 2; one hidden layer at a time), and
the second of them works."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf

jax.config.update("jax_enable_x64", True)


def _mlp(scale=None):
    mlp = eqx.nn.MLP(4, 3, 8, 2, activation=jnp.tanh, key=jax.random.PRNGKey(0))
    if scale is not None:
        mlp = jax.tree_util.tree_map(lambda a: scale * a if eqx.is_array(a) else a, mlp)
    return mlp


def _data():
    xs = jax.random.normal(jax.random.PRNGKey(1), (60, 4))
    return xs, xs[:, :3] @ jnp.diag(jnp.array([1.0, 0.5, 0.0]))


def _axes(mlp, where, values):
    axes = eqx.tree_at(where, mlp, values)
    return jax.tree_util.tree_map(lambda a: a if isinstance(a, int) else None, axes)


REFUSAL = r"`model` must be one layer of interchangeable neurons; got MLP is a deep stack of 2 hidden layers.*deep NQF of Def. 2.*one hidden layer at a time"


def test_a_deep_mlp_without_neuron_axes_is_refused_naming_what_to_do():
    with pytest.raises(ValueError, match=REFUSAL):
        nqf.quadratic_form(_mlp())
    with pytest.raises(ValueError, match=REFUSAL):
        nqf.diagnose(_mlp(), _data(), optax.sgd(0.05), num_steps=10)


def test_neuron_axes_across_two_hidden_layers_are_refused_with_the_theorem_that_fails():
    mlp = _mlp()
    axes = _axes(mlp, lambda m: (m.layers[0].weight, m.layers[0].bias, m.layers[1].weight, m.layers[1].bias,
                                 m.layers[2].weight), (0, 0, 1, 0, 1))
    with pytest.raises(ValueError, match=REFUSAL + r".*fail Theorem 1: `module` must be permutation-symmetric"):
        nqf.diagnose(nqf.quadratic_form(mlp, neuron_axes=axes), _data(), optax.sgd(0.05), num_steps=10)


def test_one_hidden_layer_at_a_time_is_diagnosed():
    """The refusal's second way: the first hidden layer's neurons, every other leaf fixed (at a small scale)."""
    mlp = _mlp(1e-2)
    axes = _axes(mlp, lambda m: (m.layers[0].weight, m.layers[0].bias, m.layers[1].weight), (0, 0, 1))
    rep = nqf.diagnose(nqf.quadratic_form(mlp, neuron_axes=axes), _data(), optax.sgd(0.05), num_steps=400)
    text = str(rep)
    assert "layers[1].bias (8,)" in text and "layers[2].weight (3, 8)" in text and "frozen" in text
    assert rep.run.W0.shape == (4 + 1 + 8, 8)
    pl = rep.plateaus
    err = np.abs(pl.module / pl.predicted - 1)
    assert np.all(err[pl.valid] <= pl.tolerance[pl.valid]), text


def test_a_one_hidden_layer_mlp_is_not_called_deep():
    from nqf.structure._neurons import deep_stack

    assert deep_stack(eqx.nn.MLP(4, 3, 8, 1, key=jax.random.PRNGKey(0))) is None
    assert deep_stack(_mlp()) is not None and deep_stack(object()) is None
