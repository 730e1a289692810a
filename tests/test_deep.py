"""Deep modules and the deep NQF (App. B.4: Def. 2, Theorems 14 and 15; Fig. 8)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from nqf.architectures import deep_attention, deep_mlp, deep_single_head_attention
from nqf.training import BatchLoss, Minibatches, Record, train
from nqf.updates import deep_nqf_sgd, same_statistics, weights_from_statistics
from nqf.model import compress_statistics, deep_nqf_apply, deep_nqf_loss, layer_statistics, scale_forms
from nqf.model._deep import deep_nqf_output

from helpers import BAD_INPUT
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

MLP = deep_mlp(k=4, hidden=(5, 6, 7))
ATT = deep_attention(D=3, N=4, d_k=2)
SHA = deep_single_head_attention(D=3, N=4, d_k=2, key=jax.random.PRNGKey(81))  # Prop. 4 reading: neurons = rows of W^Q, W^K


def random_weights(arch, widths, scale=0.3, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), len(arch.ps))
    return tuple(scale * normal(k, (p, d)) for k, p, d in zip(keys, arch.ps, widths))


def inputs(arch, m, seed=1):
    return jax.vmap(arch.sample_input)(jax.random.split(jax.random.PRNGKey(seed), m))


@pytest.mark.parametrize("arch,widths", [(MLP, (5, 7)), (ATT, (2, 3))])
def test_forms_equal_trace_of_structure(arch, widths):
    """Def. 2: each block's form is Tr[M A_k(h_prev)] with the dense closed-form stack."""
    Ws = random_weights(arch, widths)
    stats = layer_statistics(Ws)
    h = arch.sample_input(jax.random.PRNGKey(5))
    for (M, mu), form, structure in zip(stats, arch.forms, arch.structures):
        A = structure(h)
        new = form(M, mu, h)
        assert A.shape == new.shape + M.shape
        np.testing.assert_allclose(new, jnp.einsum("...ij,ji->...", A, M), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(A, jnp.swapaxes(A, -1, -2), atol=0)
        h = new + 0.3 * normal(jax.random.PRNGKey(6), new.shape)  # a generic h for the next block


def _block_modules(arch):
    """Each block of the module as a function of one neuron w and the previous representation."""
    if arch is MLP:
        k, n2 = 4, 6

        def b1(w, x):
            return w[k:] * jnp.tanh(w[:k] @ x)

        def b2(w, h):
            return w[n2] * jnp.tanh(w[:n2] @ jnp.tanh(h))

        return b1, b2
    D, N, dk = 3, 4, 2
    from nqf.architectures import multihead_attention

    m1, m2 = multihead_attention(D, N, dk, D, outputs=D), multihead_attention(D, N, dk, D)

    def a1(w, X):
        return jax.vmap(lambda q: m1.apply(w[:, None], (q, X)), in_axes=1, out_axes=1)(X)

    def a2(w, H):
        return m2.apply(w[:, None], (H.mean(axis=1), H))

    return a1, a2


@pytest.mark.parametrize("arch", [MLP, ATT])
def test_structures_are_half_the_hessian(arch):
    """A^(l)_k = H_ii / 2 of the block's module at 0 (Thm 1), for every output k."""
    h = arch.sample_input(jax.random.PRNGKey(2))
    for p, block, structure in zip(arch.ps, _block_modules(arch), arch.structures):
        hess = jax.jit(jax.hessian(block))(jnp.zeros(p), h)
        A = structure(h)
        np.testing.assert_allclose(A, 0.5 * hess, atol=1e-12)
        h = block(jnp.ones(p) * 0.4, h) + normal(jax.random.PRNGKey(3), jnp.shape(block(jnp.zeros(p), h)))


@pytest.mark.parametrize("arch,widths", [(MLP, (5, 7)), (ATT, (2, 2))])
def test_module_approaches_deep_nqf(arch, widths):
    """The module minus its deep NQF, relative to the output, shrinks like s^2 along s W."""
    Ws = random_weights(arch, widths, scale=1.0)
    x = arch.sample_input(jax.random.PRNGKey(4))
    scales = np.array([1e-2, 2e-2, 4e-2])
    rel = []
    for s in scales:
        W = tuple(s * w for w in Ws)
        f, g = arch.apply(W, x), deep_nqf_apply(W, arch.forms, x)
        rel.append(abs(float(f - g)) / abs(float(g)))
    slope = np.polyfit(np.log(scales), np.log(rel), 1)[0]
    assert 1.8 < slope < 2.2, (rel, slope)


def test_collapse_mlp_is_the_linearised_deep_nqf():
    Ws = random_weights(MLP, (5, 7))
    W1, W2 = Ws
    x = MLP.sample_input(jax.random.PRNGKey(8))
    lin = W2[6] @ W2[:6].T @ W1[4:] @ W1[:4].T @ x
    W = MLP.collapse(Ws)  # the 1-layer NQF is Tr[W W^T A(x)] with Prop. 1's A
    np.testing.assert_allclose(jnp.trace(W @ W.T @ MLP.one_layer.structure(x)), lin, rtol=1e-12)


def test_collapse_attention_equals_deep_nqf():
    """The attention deep NQF is linear in x_avg, so the collapsed 1-layer NQF equals it exactly."""
    Ws = random_weights(ATT, (2, 3))
    W = ATT.collapse(Ws)
    for i in range(3):
        X = ATT.sample_input(jax.random.PRNGKey(10 + i))
        nqf1 = jnp.trace(W @ W.T @ ATT.one_layer.structure(X))
        np.testing.assert_allclose(nqf1, deep_nqf_apply(Ws, ATT.forms, X), rtol=1e-12)
        # the 1-layer module minus its own NQF at tiny weights is small relative to the NQF
        f0 = ATT.one_layer.apply(jnp.zeros_like(W), X)
        s = 1e-3
        assert abs(float(ATT.one_layer.apply(s * W, X) - f0 - s**2 * nqf1)) < 1e-3 * abs(float(s**2 * nqf1))


def _weight_run(Ws0, forms, xs, ys, batches, eta):
    def loss(Ws, idx):
        return deep_nqf_loss(layer_statistics(Ws), forms, jax.tree_util.tree_map(lambda a: a[idx], xs), ys[idx])

    return train(BatchLoss(loss), tuple(Ws0), optax.sgd(eta), num_steps=batches.shape[0],
                 data=Minibatches(jnp.arange(ys.shape[0]), batches), record=Record(layer_statistics)).record


@pytest.mark.parametrize("arch,widths", [(MLP, (5, 7)), (ATT, (3, 3)), (SHA, (3, 4))])
def test_theorem14_closure_and_update(arch, widths):
    """Thm 14: equal per-layer (M, mu) => identical SGD trajectories; Eqs. 222-223 reproduce each step."""
    m, b, steps, eta = 12, 4, 8, 0.05
    xs, ys = inputs(arch, m), jnp.linspace(-1.0, 1.0, m)
    batches = jax.random.randint(jax.random.PRNGKey(7), (steps, b), 0, m)
    Wa = random_weights(arch, widths, scale=0.5)
    Wb = tuple(same_statistics(W, seed=l + 1) for l, W in enumerate(Wa))
    assert float(jnp.max(jnp.abs(Wa[0] - Wb[0]))) > 0.1  # the neurons really differ
    ra = _weight_run(Wa, arch.forms, xs, ys, batches, eta)
    rb = _weight_run(Wb, arch.forms, xs, ys, batches, eta)
    rs = deep_nqf_sgd(layer_statistics(Wa), arch.forms, xs, ys, batches, eta=eta, widths=widths)
    moved = 0.0
    for la, lb, ls in zip(ra, rb, rs):
        for a, bb, s in zip(la, lb, ls):
            scale = float(jnp.max(jnp.abs(a)))
            assert float(jnp.max(jnp.abs(a - bb))) < 1e-12 * scale
            assert float(jnp.max(jnp.abs(a - s))) < 1e-12 * scale
            moved = max(moved, float(jnp.max(jnp.abs(a[-1] - a[0]))) / scale)
    assert moved > 1e-2  # training did move the order parameters
    # a weight set with other statistics follows another trajectory (the check is not vacuous)
    rc = _weight_run(random_weights(arch, widths, scale=0.5, seed=9), arch.forms, xs, ys, batches, eta)
    assert float(jnp.max(jnp.abs(rc[0][0][-1] - ra[0][0][-1]))) > 1e-3


def test_one_step_matches_weights():
    arch, widths = MLP, (5, 7)
    xs, ys = inputs(arch, 6), jnp.arange(6.0) / 3 - 1
    Ws = random_weights(arch, widths, scale=0.6)
    eta = 0.3
    grads = jax.jit(jax.grad(lambda W: deep_nqf_loss(layer_statistics(W), arch.forms, xs, ys)))(Ws)
    after = layer_statistics(tuple(W - eta * g for W, g in zip(Ws, grads)))
    run = deep_nqf_sgd(layer_statistics(Ws), arch.forms, xs, ys, jnp.arange(6)[None], eta=eta, widths=widths)
    pred = jax.tree_util.tree_map(lambda a: a[-1], run)
    for (Ma, ma), (Mp, mp) in zip(after, pred):
        np.testing.assert_allclose(Mp, Ma, atol=1e-13 * float(jnp.max(jnp.abs(Ma))))
        np.testing.assert_allclose(mp, ma, atol=1e-13 * float(jnp.max(jnp.abs(ma))))


def test_theorem15_compression():
    """Thm 15 with V = I: width d'_l = p_l + 1, forms scaled by d'/d, learning rates eta d/d'."""
    arch = MLP
    wide = (30, 20)
    narrow = tuple(p + 1 for p in arch.ps)  # (11, 8)
    xs, ys = inputs(arch, 10), jnp.linspace(-1, 1, 10)
    Ws = random_weights(arch, wide, scale=0.3)
    stats = layer_statistics(Ws)
    small = compress_statistics(stats, wide, narrow)
    Wn = tuple(weights_from_statistics(M, mu, d) for (M, mu), d in zip(small, narrow))
    forms_n = scale_forms(arch.forms, [dn / d for dn, d in zip(narrow, wide)])
    etas_w = (0.2, 0.2)
    etas_n = tuple(0.2 * d / dn for d, dn in zip(wide, narrow))

    def run(W, forms, etas, steps=15):
        def body(W, _):
            out = jax.vmap(lambda x: deep_nqf_apply(W, forms, x))(xs)
            g = jax.grad(lambda W: deep_nqf_loss(layer_statistics(W), forms, xs, ys))(W)
            return tuple(w - e * gg for w, e, gg in zip(W, etas, g)), out

        return jax.jit(lambda W: jax.lax.scan(body, W, None, length=steps)[1])(W)

    ow, on = run(Ws, arch.forms, etas_w), run(Wn, forms_n, etas_n)
    np.testing.assert_allclose(on, ow, atol=1e-11)
    assert float(jnp.max(jnp.abs(ow[-1] - ow[0]))) > 1e-2


def test_bad_input():
    Ws = random_weights(MLP, (5, 7))
    x = MLP.sample_input(jax.random.PRNGKey(0))
    with pytest.raises(BAD_INPUT, match="Ws"):
        MLP.apply(Ws[:1], x)
    with pytest.raises(BAD_INPUT, match="block 2"):
        MLP.apply((Ws[0], Ws[1][:-1]), x)
    with pytest.raises(BAD_INPUT, match="`x`"):
        MLP.apply(Ws, jnp.ones(3))
    stats, step0 = layer_statistics(Ws), jnp.zeros((1, 1), int)  # one step, on sample 0
    with pytest.raises(ValueError, match="widths"):
        deep_nqf_sgd(stats, MLP.forms, x[None], jnp.ones(1), step0, eta=0.1, widths=(5,))
    with pytest.raises(ValueError, match="forms"):
        deep_nqf_sgd(stats, MLP.forms[:1], x[None], jnp.ones(1), step0, eta=0.1, widths=(5, 7))
    with pytest.raises(ValueError, match="eta"):
        deep_nqf_sgd(stats, MLP.forms, x[None], jnp.ones(1), step0, eta=-0.1, widths=(5, 7))
    with pytest.raises(BAD_INPUT, match="Ws"):
        layer_statistics(jnp.ones((3, 3)))
    with pytest.raises(ValueError, match="hidden"):
        deep_mlp(k=0)
    assert float(deep_nqf_output(stats, MLP.forms, x)) == pytest.approx(float(deep_nqf_apply(Ws, MLP.forms, x)))


@pytest.mark.parametrize("arch,widths", [(MLP, (5, 7)), (ATT, (2, 3))])
def test_weight_forms_of_the_fig8_models(arch, widths):
    """deep_nqf (weights) = Def. 2 on the statistics; one_layer_nqf = Tr[W W^T A(x)] of one_layer and its NQF."""
    Ws = random_weights(arch, widths)
    W1 = arch.collapse(Ws)
    x = arch.sample_input(jax.random.PRNGKey(12))
    np.testing.assert_allclose(arch.deep_nqf(Ws, x), deep_nqf_apply(Ws, arch.forms, x), rtol=1e-13)
    dense = jnp.trace(W1 @ W1.T @ arch.one_layer.structure(x))
    np.testing.assert_allclose(arch.one_layer_nqf(W1, x), dense, rtol=1e-12)
    from nqf.structure import nqf_output
    np.testing.assert_allclose(nqf_output(arch.one_layer, W1, x), dense, rtol=1e-10, atol=1e-14)


# ----------------------------------------------------------------- the Prop. 4 reading of Fig. 8's attention
def _sha_blocks(arch):
    """Each block of the single-head module as a function of ONE neuron w = [w^Q; w^K] (p = 2D)."""
    D, dk = arch.D, arch.d_k
    V, c = (jnp.asarray(a) for a in (arch.V, arch.c))

    def attend(w, X, Q):
        return X @ jax.nn.softmax(X.T @ jnp.outer(w[D:], w[:D]) @ Q / np.sqrt(dk), axis=0)

    return (lambda w, X: V @ attend(w, X, X)), (lambda w, H: c @ attend(w, H, H.mean(axis=1)[:, None])[:, 0])


def test_single_head_forms_are_f0_plus_trace_of_structure_and_half_the_hessian():
    """Def. 2 under Prop. 4: form(M) = f(0) + Tr[M A_k(h_prev)], A_k = H_ii/2 of the block at 0 (Eq. 12)."""
    Ws = random_weights(SHA, (3, 4))
    h = SHA.sample_input(jax.random.PRNGKey(5))
    for (M, mu), form, structure, block, p in zip(layer_statistics(Ws), SHA.forms, SHA.structures, _sha_blocks(SHA), SHA.ps):
        A = structure(h)
        new, f0 = form(M, mu, h), form(jnp.zeros_like(M), mu, h)
        assert A.shape == new.shape + M.shape
        np.testing.assert_allclose(new - f0, jnp.einsum("...ij,ji->...", A, M), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(f0, block(jnp.zeros(p), h), rtol=1e-13)
        np.testing.assert_allclose(A, 0.5 * jax.jit(jax.hessian(block))(jnp.zeros(p), h), atol=1e-12)
        assert float(jnp.max(jnp.abs(A[..., :p // 2, p // 2:]))) > 1e-3  # query-key block: at quadratic order
        h = new + 0.3 * normal(jax.random.PRNGKey(6), new.shape)


def test_single_head_module_approaches_its_deep_nqf():
    """Z2 per neuron: module - deep NQF = O(s^4) against a quadratic term O(s^2): relative slope 2."""
    Ws = random_weights(SHA, (3, 4), scale=1.0)
    X = SHA.sample_input(jax.random.PRNGKey(4))
    f0 = SHA.deep_nqf(tuple(jnp.zeros_like(W) for W in Ws), X)
    np.testing.assert_allclose(f0, SHA.apply(tuple(jnp.zeros_like(W) for W in Ws), X), rtol=1e-13)
    scales = np.array([2e-2, 4e-2, 8e-2])
    rel = []
    for s in scales:
        W = tuple(s * w for w in Ws)
        g = SHA.deep_nqf(W, X)
        rel.append(abs(float(SHA.apply(W, X) - g)) / abs(float(g - f0)))
    slope = np.polyfit(np.log(scales), np.log(rel), 1)[0]
    assert 1.8 < slope < 2.2, (rel, slope)


def test_single_head_one_layer_nqf():
    """The 1-layer NQF is Prop. 4's NQF of the mean-query logits on X with readout V^T c (matrix-free equal),
    and differs from the deep NQF at step 0 only by the layer-2 term, O(s^6) against O(s^2)."""
    from nqf.structure import nqf_output
    Ws = random_weights(SHA, (3, 4), scale=1.0)
    W1 = SHA.collapse(Ws)
    X = SHA.sample_input(jax.random.PRNGKey(12))
    np.testing.assert_allclose(SHA.one_layer_nqf(W1, X), nqf_output(SHA.one_layer, W1, X), rtol=1e-10)
    np.testing.assert_allclose(SHA.deep_nqf(Ws, X), deep_nqf_apply(Ws, SHA.forms, X), rtol=1e-13)
    f0 = SHA.one_layer.apply(jnp.zeros_like(W1), X)
    rel = []
    for s in (0.05, 0.1):
        W = tuple(s * w for w in Ws)
        rel.append(abs(float(SHA.deep_nqf(W, X) - SHA.one_layer_nqf(SHA.collapse(W), X))) /
                   abs(float(SHA.one_layer_nqf(SHA.collapse(W), X) - f0)))
    assert rel[0] < 1e-3 and 10 < rel[1] / rel[0] < 22, rel  # ratio 2^4 = 16


def test_single_head_bad_input():
    with pytest.raises(ValueError, match="tuple of 2"):
        SHA.apply(jnp.zeros((6, 2)), SHA.sample_input(jax.random.PRNGKey(0)))
    with pytest.raises(ValueError, match="shape"):
        SHA.apply(random_weights(SHA, (2, 2)), jnp.zeros((3, 5)))
