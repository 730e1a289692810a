"""Structure matrices and the module-vs-NQF comparison on pytree modules (equinox, dict of arrays)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf import pytree_structure_matrix
from nqf.structure import neuron_weights
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

K, H, O = 4, 6, 3


def _eqx_mlp(scale=0.1):
    mlp = eqx.nn.MLP(K, O, H, 1, activation=jnp.tanh, use_bias=False, use_final_bias=False,
                     key=jax.random.PRNGKey(0))
    mlp = eqx.tree_at(lambda m: (m.layers[0].weight, m.layers[1].weight), mlp,
                      (scale * mlp.layers[0].weight, scale * mlp.layers[1].weight))
    axes = jax.tree_util.tree_map(lambda _: None, mlp)
    axes = eqx.tree_at(lambda m: (m.layers[0].weight, m.layers[1].weight), axes, (0, 1),
                       is_leaf=lambda a: a is None)
    return mlp, axes


def _dict_mlp(scale=0.1):
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    params = {"U": scale * normal(k1, (K, H)), "v": scale * normal(k2, (H, O))}
    apply = lambda prm, x: jnp.tanh(x @ prm["U"]) @ prm["v"]  # noqa: E731
    return params, apply, {"U": 1, "v": 0}


def test_packing_is_the_mlp_packing_and_inverts():
    mlp, axes = _eqx_mlp()
    W, layout = neuron_weights(mlp, axes)
    assert W.shape == (K + O, H) and layout.p == K + O and layout.d == H
    np.testing.assert_array_equal(W[:K], mlp.layers[0].weight.T)  # u_i = row i of the first layer
    np.testing.assert_array_equal(W[K:], mlp.layers[1].weight)  # v_i = column i of the second
    back = layout.unflatten(W)
    x = jnp.arange(K, dtype=float)
    np.testing.assert_allclose(back(x), mlp(x))
    arch = nqf.architectures.two_layer_mlp(K, outputs=O)
    np.testing.assert_allclose(arch.apply(W, x), mlp(x), atol=1e-14)
    wide = layout.unflatten(jnp.ones((K + O, 2)))  # other widths
    assert wide.layers[0].weight.shape == (2, K) and wide.layers[1].weight.shape == (O, 2)


@pytest.mark.parametrize("kind", ["equinox", "dict"])
def test_structure_matrix_is_eq6(kind):
    """Autodiff A of the pytree module = the closed form of Eq. (6), one A per output."""
    x = normal(jax.random.PRNGKey(2), (K,))
    if kind == "equinox":
        mlp, axes = _eqx_mlp()
        A = pytree_structure_matrix(None, mlp, x, axes)
    else:
        params, apply, axes = _dict_mlp()
        A = pytree_structure_matrix(apply, params, x, axes)
    closed = nqf.architectures.two_layer_mlp(K, outputs=O).structure(x)
    assert A.shape == (O, K + O, K + O)
    np.testing.assert_allclose(A, closed, atol=1e-12)


def test_relu_pytree_is_refused():
    params, _, axes = _dict_mlp()
    relu = lambda prm, x: jax.nn.relu(x @ prm["U"]) @ prm["v"]  # noqa: E731
    with pytest.raises(ValueError, match="not smooth"):
        pytree_structure_matrix(relu, params, jnp.ones(K), axes)


def test_bad_axes():
    params, apply, _ = _dict_mlp()
    with pytest.raises(ValueError, match="same number of neurons"):
        neuron_weights(params, {"U": 0, "v": 0})
    with pytest.raises(ValueError, match="no leaf"):
        neuron_weights(params, None)
    with pytest.raises(ValueError, match="out of range"):
        neuron_weights(params, {"U": 2, "v": 0})
    with pytest.raises(ValueError, match="prefix"):
        neuron_weights(params, {"U": 1})


def test_compare_on_pytrees_equals_compare_on_the_architecture():
    """compare_with_nqf on an equinox MLP and on a dict MLP = on nqf.architectures.two_layer_mlp with the packed W."""
    xs = normal(jax.random.PRNGKey(3), (30, K))
    ys = xs @ normal(jax.random.PRNGKey(4), (K, O))
    opt = optax.adam(0.02)
    mlp, axes = _eqx_mlp()
    W0, _ = neuron_weights(mlp, axes)
    track = nqf.training.Track(("loss", "outputs"), probe=xs[:5])
    ref = nqf.compare_with_nqf(nqf.architectures.two_layer_mlp(K, outputs=O), (xs, ys), opt, num_steps=40, params=W0,
                               track=track)
    res = nqf.compare_with_nqf(nqf.quadratic_form(mlp, neuron_axes=axes), (xs, ys), opt, num_steps=40, track=track)
    for k in ("module", "nqf"):
        np.testing.assert_allclose(res.__getattribute__(k)["outputs"], ref.__getattribute__(k)["outputs"], atol=1e-12)
    params, apply, daxes = _dict_mlp()
    Wd, _ = neuron_weights(params, daxes)
    # the same call on the architecture as above (W packed from the dict): its compiled runs are reused
    ref = nqf.compare_with_nqf(nqf.architectures.two_layer_mlp(K, outputs=O), (xs, ys), opt, num_steps=40, params=Wd,
                               track=track)
    res = nqf.compare_with_nqf(nqf.quadratic_form(apply, neuron_axes=daxes), (xs, ys), opt, num_steps=40,
                               params=params, track=nqf.training.Track(("outputs",), probe=xs[:5]))
    np.testing.assert_allclose(res.nqf["outputs"], ref.nqf["outputs"], atol=1e-12)
    np.testing.assert_allclose(res.module["outputs"], ref.module["outputs"], atol=1e-12)
    assert set(res.final["nqf"]) == {"U", "v"}
