"""nqf.quadratic_form: the NQF of a model is itself a model (Theorem 1, Eq. 2)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf._random import normal


def _mlp(scale=1e-2, key=0):
    """An eqx.nn.MLP 3 -> 5 (tanh) -> 2 at small weights, biases zero (ZGZ), and its equinox-style neuron axes."""
    mlp = eqx.nn.MLP(3, 2, 5, 1, activation=jnp.tanh, key=jax.random.PRNGKey(key))
    mlp = jax.tree_util.tree_map(lambda a: scale * a if eqx.is_array(a) else a, mlp)
    mlp = eqx.tree_at(lambda m: (m.layers[0].bias, m.layers[1].bias), mlp, replace=(jnp.zeros(5), jnp.zeros(2)))
    axes = eqx.tree_at(lambda m: (m.layers[0].weight, m.layers[1].weight), jax.tree_util.tree_map(lambda _: None, mlp),
                       replace=(0, 1), is_leaf=lambda x: x is None)
    return mlp, axes


def test_equinox_neuron_axes_are_accepted_both_ways():
    """The activation function stays a leaf of an eqx.nn.MLP: it is ignored, as eqx.filter ignores it; so is a
    model array left in place of an axis (tree_at on the model itself)."""
    mlp, axes = _mlp()
    on_model = eqx.tree_at(lambda m: (m.layers[0].weight, m.layers[1].weight), mlp, replace=(0, 1))
    x = jnp.asarray([0.3, -1.0, 0.5])
    for spec in (axes, on_model):
        q = nqf.quadratic_form(mlp, neuron_axes=spec)
        assert isinstance(q, eqx.Module) and q.model is mlp
        np.testing.assert_allclose(q(x), mlp(x), rtol=1e-3)
    W, layout = nqf.structure.neuron_weights(mlp, on_model)
    assert W.shape == (3 + 2, 5) and layout.d == 5
    with pytest.raises(ValueError, match="neuron_axes"):
        nqf.quadratic_form(mlp, neuron_axes=eqx.tree_at(lambda m: m.layers[0].weight, axes, replace="0",
                                                        is_leaf=lambda x: x is None))


def test_its_output_equals_the_model_to_third_order_near_zero():
    """|f(sW) - q(sW)| = O(s^3) for a model without Z2 symmetry in its weights, O(s^4) for tanh (odd)."""
    x = jnp.asarray([0.3, -1.0, 0.5])
    gaps = []
    for s in (1e-2, 5e-3):
        mlp, axes = _mlp(scale=s)
        q = nqf.quadratic_form(mlp, neuron_axes=axes)
        gaps.append(float(jnp.max(jnp.abs(q(x) - mlp(x)))))
    assert gaps[0] / gaps[1] > 2**3 * 0.9  # at least third order (tanh: fourth)
    # and the quadratic term is Tr[W W^T A(x)] with A(x) of q.structure
    mlp, axes = _mlp()
    q = nqf.quadratic_form(mlp, neuron_axes=axes)
    W, _ = nqf.structure.neuron_weights(mlp, axes)
    A = q.structure(x)
    np.testing.assert_allclose(q(x), jnp.einsum("opq,pq->o", A, W @ W.T), rtol=1e-10, atol=1e-18)
    np.testing.assert_allclose(q.structure(x[None], batch=True)[0], A, rtol=1e-12)
    chk = q.check(x)
    assert chk.smooth_ratio > 3 and chk.permutation_residual < 1e-12 and chk.zgz_residual < 1e-12


def test_it_trains_in_a_plain_optax_loop_and_vmaps():
    mlp, axes = _mlp()
    q = nqf.quadratic_form(mlp, neuron_axes=axes)
    xs = normal(jax.random.PRNGKey(1), (20, 3))
    ys = xs[:, :2]
    opt = optax.sgd(0.1)

    @eqx.filter_jit
    def step(q, state):
        loss, g = eqx.filter_value_and_grad(lambda q: nqf.model.mse(jax.vmap(q)(xs), ys))(q)
        upd, state = opt.update(g, state, eqx.filter(q, eqx.is_array))
        return eqx.apply_updates(q, upd), state, loss

    state = opt.init(eqx.filter(q, eqx.is_array))
    losses = []
    for _ in range(60):
        q, state, loss = step(q, state)
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]
    assert isinstance(q.model, eqx.nn.MLP)  # the trained parameters are the model's
    # vmap over a batch of quadratic forms (lanes), as over a batch of models
    qs = eqx.filter_vmap(lambda k: nqf.quadratic_form(_mlp(key=0)[0], neuron_axes=axes))(jnp.arange(3))
    out = eqx.filter_vmap(lambda q: q(xs[0]))(qs)
    assert out.shape == (3, 2)


def test_apply_and_architecture_flavours_are_called_like_apply():
    arch = nqf.architectures.two_layer_mlp(3, outputs=2)
    W = 0.01 * normal(jax.random.PRNGKey(2), (arch.p, 6))
    x = jnp.asarray([0.3, -1.0, 0.5])
    q = nqf.quadratic_form(arch)
    np.testing.assert_allclose(q(W, x), nqf.structure.nqf_output(arch, W, x), rtol=1e-12)
    np.testing.assert_allclose(q.structure(W, x), arch.structure(x))
    qmf = nqf.quadratic_form(arch, form="matrix-free")
    np.testing.assert_allclose(qmf(W, x), q(W, x), rtol=1e-10)
    params = {"U": W[:3].T, "V": W[3:]}
    apply = lambda p, x: p["V"] @ jnp.tanh(p["U"] @ x)  # noqa: E731
    qa = nqf.quadratic_form(apply, neuron_axes={"U": 0, "V": 1})
    np.testing.assert_allclose(qa(params, x), q(W, x), rtol=1e-10)
    with pytest.raises(ValueError, match="neuron_axes"):
        nqf.quadratic_form(apply)
    with pytest.raises(ValueError, match="form"):
        nqf.quadratic_form(arch, form="dense")


def test_parts_give_the_fastest_exact_form():
    """One hidden layer: rank-two factors (auto), equal to the matrix-free NQF; the structure stack of an
    Architecture, checked against the matrix-free NQF at a random W."""
    mlp, axes = _mlp()
    q = nqf.quadratic_form(mlp, neuron_axes=axes)
    xs = normal(jax.random.PRNGKey(3), (12, 3))
    (f0, a), = q.parts(mlp, [xs])[0]
    ev = q.parts(mlp, [xs])[1]
    assert ev.kind == "rank-two" and a.shape[0] == 12
    tr, frozen, _ = q.split(mlp)
    fast = ev(tr, {"frozen": frozen}, (xs, f0, a))
    np.testing.assert_allclose(fast, jax.vmap(q)(xs), rtol=1e-9, atol=1e-16)
    arch = nqf.architectures.two_layer_mlp(3, outputs=2)
    W = 0.01 * normal(jax.random.PRNGKey(4), (arch.p, 6))
    parts, ev, gap = nqf.quadratic_form(arch, form="structure").parts(W, [xs], key=jax.random.PRNGKey(17))
    assert ev.kind == "structure" and gap < 1e-12 and parts[0][1].shape == (12, 2, arch.p, arch.p)
