"""Neurons as blocks of an axis (issue 51, item 3): a packed layer is described without rewriting it. equinox's
MultiheadAttention holds its heads in the rows of one matrix (``query_proj.weight`` is ``(heads * qk_size, in)``);
``nqf.structure.Blocks(0, qk_size)`` in ``neuron_axes`` makes the heads its neurons. Checked against the same layer
written with a separate head axis: the same A(x), the same diagnosis."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf.structure import Blocks, neuron_weights

jax.config.update("jax_enable_x64", True)

H, QK, VO, E, T = 4, 3, 3, 6, 5  # heads, head sizes, model width, tokens


class SelfAttention(eqx.Module):
    """equinox's layer, as a reader has it: heads packed in the rows of each projection."""

    mha: eqx.nn.MultiheadAttention

    def __call__(self, x):
        return self.mha(x, x, x)


class HeadAxisAttention(eqx.Module):
    """The same layer written with a separate head axis: Q, K ``(H, QK, E)``, V ``(H, VO, E)``, O ``(E, H, VO)``."""

    Q: jax.Array
    K: jax.Array
    V: jax.Array
    O: jax.Array

    def __call__(self, x):
        q, k, v = (jnp.einsum("hse,te->hts", P, x) for P in (self.Q, self.K, self.V))
        w = jax.nn.softmax(jnp.einsum("hts,hus->htu", q, k) / jnp.sqrt(QK), axis=-1)
        return jnp.einsum("htu,hus,ehs->te", w, v, self.O)


def _pair(scale=1e-3, seed=0):
    mha = eqx.nn.MultiheadAttention(H, E, key=jax.random.PRNGKey(seed), qk_size=QK, vo_size=VO, inference=True)
    mha = jax.tree_util.tree_map(lambda a: scale * a if eqx.is_array(a) else a, mha)
    packed = SelfAttention(mha)
    sep = HeadAxisAttention(mha.query_proj.weight.reshape(H, QK, E), mha.key_proj.weight.reshape(H, QK, E),
                            mha.value_proj.weight.reshape(H, VO, E), mha.output_proj.weight.reshape(E, H, VO))
    axes = jax.tree_util.tree_map(lambda _: None, packed)
    axes = eqx.tree_at(lambda m: (m.mha.query_proj.weight, m.mha.key_proj.weight, m.mha.value_proj.weight,
                                  m.mha.output_proj.weight), packed,
                       (Blocks(0, QK), Blocks(0, QK), Blocks(0, VO), Blocks(1, VO)))
    axes = jax.tree_util.tree_map(lambda a: a if isinstance(a, Blocks) else None, axes,
                                  is_leaf=lambda a: isinstance(a, Blocks))
    return packed, axes, sep, HeadAxisAttention(0, 0, 0, 1)


def test_the_two_layers_are_one_function():
    packed, _, sep, _ = _pair(scale=0.7)
    x = jax.random.normal(jax.random.PRNGKey(3), (T, E))
    np.testing.assert_allclose(packed(x), sep(x), rtol=1e-12, atol=1e-14)


def test_blocks_pack_the_heads_as_the_head_axis_does():
    packed, axes, sep, sep_axes = _pair(scale=0.7)
    Wp, layout = neuron_weights(packed, axes)
    Ws, _ = neuron_weights(sep, sep_axes)
    assert Wp.shape == (3 * QK * E + E * VO, H) and layout.d == H
    np.testing.assert_array_equal(Wp, Ws)
    back = layout.unflatten(Wp)
    for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(packed)):
        np.testing.assert_array_equal(a, b)
    wide = layout.unflatten(jnp.concatenate([Wp, Wp], axis=1))  # any width: 2H heads
    assert wide.mha.query_proj.weight.shape == (2 * H * QK, E)


def test_heads_as_blocks_give_the_head_axis_layers_A_and_hypotheses():
    packed, axes, sep, sep_axes = _pair()
    x = jax.random.normal(jax.random.PRNGKey(3), (T, E))
    qp, qs = nqf.quadratic_form(packed, neuron_axes=axes), nqf.quadratic_form(sep, neuron_axes=sep_axes)
    chk = qp.check(x, require=True)  # Theorem 1 holds with the heads as neurons
    assert chk.permutation_residual < 1e-12 and chk.zgz_residual < 1e-12
    Ap, As = qp.structure(x), qs.structure(x)
    assert Ap.shape == (T, E, 3 * QK * E + E * VO, 3 * QK * E + E * VO)
    np.testing.assert_allclose(Ap, As, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(qp(x), qs(x), rtol=1e-10, atol=1e-15)


def test_a_block_size_that_does_not_divide_the_axis_is_refused_naming_the_argument():
    packed, axes, _, _ = _pair()
    bad = eqx.tree_at(lambda m: m.mha.query_proj.weight, axes, Blocks(0, 5))
    with pytest.raises(ValueError, match=r"`neuron_axes` must give leaf 0 .* shape \(12, 6\) blocks whose size divides "
                                         r"its axis 0 \(length 12\); got Blocks\(axis=0, size=5\)"):
        nqf.quadratic_form(packed, neuron_axes=bad)
    with pytest.raises(ValueError, match=r"`size` must be >= 1"):
        Blocks(0, 0)
    with pytest.raises(ValueError, match=r"`axis` must be an int; got 'rows'"):
        Blocks("rows", 3)
    with pytest.raises(ValueError, match=r"`neuron_axes` must give leaf 0 .* a neuron axis in range"):
        nqf.quadratic_form(packed, neuron_axes=eqx.tree_at(lambda m: m.mha.query_proj.weight, axes, Blocks(2, 3)))


def _teacher(m=120, seed=5):
    """Targets every token's output a rank-2 map of the token mean (what attention at W = 0 sees)."""
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(m, T, E))
    P, Q = (np.linalg.qr(rng.normal(size=(E, 2)))[0] for _ in range(2))
    Tm = (P * np.array([2.0, 1.0])) @ Q.T
    ys = np.broadcast_to((xs.mean(axis=1) @ Tm)[:, None, :], (m, T, E))
    return jnp.asarray(xs), jnp.asarray(np.array(ys))


def test_equinox_attention_with_heads_as_blocks_is_diagnosed_as_the_head_axis_layer():
    packed, axes, sep, sep_axes = _pair()
    data = _teacher()
    rp = nqf.diagnose(nqf.quadratic_form(packed, neuron_axes=axes), data, optax.sgd(0.1), num_steps=600)
    rs = nqf.diagnose(nqf.quadratic_form(sep, neuron_axes=sep_axes), data, optax.sgd(0.1), num_steps=600)
    np.testing.assert_allclose(rp.run.nqf_eigs, rs.run.nqf_eigs, rtol=1e-7, atol=1e-14)
    np.testing.assert_allclose(rp.run.eigs_module, rs.run.eigs_module, rtol=1e-7, atol=1e-14)
    pl, text = rp.plateaus, str(rp)
    assert pl.levels.size >= 1 and pl.valid.any(), text
    err = np.abs(pl.module / pl.predicted - 1)
    assert np.all(err[pl.valid] <= pl.tolerance[pl.valid]), text


def test_blocks_on_a_parameter_dict_with_a_negative_axis():
    """An apply(params, x) on a dict, heads packed in the last axis of one leaf and the first of another."""
    rng = np.random.default_rng(0)
    params = {"V": jnp.asarray(rng.normal(size=(E, H * VO))), "O": jnp.asarray(rng.normal(size=(H * VO, 2)))}

    def apply(p, x):  # x (E,): each head s-block of V's columns and O's rows; a product per head, summed
        return jnp.tanh(x @ p["V"]) @ p["O"]

    axes = {"V": Blocks(-1, VO), "O": Blocks(0, VO)}
    W, layout = neuron_weights(params, axes)
    assert W.shape == (E * VO + VO * 2, H)
    # leaves in key order: O (head i: rows [i VO, (i+1) VO), 2 columns), then V (head i: its VO columns)
    np.testing.assert_array_equal(W[:VO * 2, 1], params["O"][VO:2 * VO].reshape(-1))
    np.testing.assert_array_equal(W[VO * 2:, 1], params["V"][:, VO:2 * VO].reshape(-1))
    back = layout.unflatten(W)
    np.testing.assert_array_equal(back["V"], params["V"])
    q = nqf.quadratic_form(apply, neuron_axes=axes)
    x = jnp.asarray(rng.normal(size=(E,)))
    assert q.check(params, x, require=True).permutation_residual < 1e-12
    assert q.structure(params, x).shape == (2, E * VO + VO * 2, E * VO + VO * 2)
