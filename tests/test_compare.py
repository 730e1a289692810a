"""nqf.compare_with_nqf: a module beside its NQF under one optax optimiser (Sec. 7, Fig. 2)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from helpers import BAD_INPUT
from nqf.training import Agreement, Track, compare_with_nqf
from nqf import check_hypotheses
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class


def _mlp_data(m=40, k=5, o=3, seed=0):
    kx, ke = jax.random.split(jax.random.PRNGKey(seed))
    xs = normal(kx, (m, k))
    E = 0.5 * normal(ke, (o, k))
    return xs, xs @ E.T


def test_quadratic_network_is_its_nqf():
    """A module that IS its NQF (quadratic network, Table 3): the two runs agree to rounding."""
    arch = nqf.architectures._modules.quadratic_network(4)
    xs = normal(jax.random.PRNGKey(0), (30, 4))
    ys = jnp.sum(xs[:, :2] ** 2, axis=1)
    W0 = 0.1 * normal(jax.random.PRNGKey(1), (4, 3))
    for opt in (optax.sgd(0.01), optax.sgd(0.01, momentum=0.9), optax.adam(0.01)):
        res = compare_with_nqf(arch, (xs, ys), opt, num_steps=50, params=W0, track=Track(("loss", "outputs"), probe=xs[:5]))
        assert np.max(res.gap) < 1e-12
        assert res.window == np.inf
        np.testing.assert_allclose(res.final["module"], res.final["nqf"], atol=1e-12)
        assert res.module["loss"][-1] < res.module["loss"][0]


def test_tanh_mlp_small_init_tracks_and_large_init_parts():
    arch = nqf.architectures.two_layer_mlp(5, outputs=3)
    xs, ys = _mlp_data()
    Z = normal(jax.random.PRNGKey(2), (8, 8))
    W0 = jnp.stack([1e-3 * Z, 0.5 * Z])  # two runs at once (vmap)
    res = compare_with_nqf(arch, (xs, ys), optax.sgd(0.05), num_steps=100, params=W0,
                           track=Track(("loss", "outputs", "singular_values"), probe=xs[:10],
                                       linear_map=lambda W: W[5:] @ W[:5].T, record_every=5, agreement=Agreement(0.2)))
    assert res.gap.shape == (2, 21) and res.module["singular_values"].shape == (2, 21, 3)
    assert res.gap[0, 0] < 1e-5 < res.gap[1, 0]  # relative error O(|W|^2) (tanh: Z2 symmetric)
    assert res.window[1] < res.window[0]
    assert res.batch_loss["module"].shape == (2, 100)


def test_minibatches_and_sampling_function_give_the_same_batches():
    arch = nqf.architectures.two_layer_mlp(5, outputs=3)
    xs, ys = _mlp_data()
    W0 = 0.01 * normal(jax.random.PRNGKey(3), (8, 4))
    steps, b = 20, 8
    key = jax.random.PRNGKey(4)
    idx = jnp.stack([jax.random.choice(k, 40, (b,), replace=False) for k in jax.random.split(key, steps)])
    res = compare_with_nqf(arch, (xs, ys, idx), optax.sgd(0.1), num_steps=steps, params=W0,
                           track=Track(("outputs",), probe=xs))
    sample = lambda k: (xs[jax.random.choice(k, 40, (b,), replace=False)],  # noqa: E731
                        ys[jax.random.choice(k, 40, (b,), replace=False)])
    res2 = compare_with_nqf(arch, sample, optax.sgd(0.1), num_steps=steps, params=W0, key=key,
                            track=Track(("outputs", "probe_loss"), probe=xs, probe_targets=ys))
    np.testing.assert_allclose(res.module["outputs"], res2.module["outputs"], atol=1e-12)
    np.testing.assert_allclose(res.nqf["outputs"], res2.nqf["outputs"], atol=1e-12)
    np.testing.assert_allclose(res.batch_loss["nqf"], res2.batch_loss["nqf"], atol=1e-12)


def test_relu_mlp_is_refused():
    relu = nqf.architectures.two_layer_mlp(5, activation=jax.nn.relu, outputs=3, check_smooth=False)
    xs, ys = _mlp_data()
    with pytest.raises(ValueError, match="not smooth"):
        compare_with_nqf(relu, (xs, ys), optax.sgd(0.1), num_steps=10, params=0.1 * jnp.ones((8, 4)))
    chk = check_hypotheses(relu.apply, 0.1 * jnp.ones((8, 4)), xs[0])
    assert 1.5 < chk.smooth_ratio < 2.5


def test_bias_breaking_zgz_and_broken_symmetry_are_refused():
    xs, ys = _mlp_data(o=1)
    ys = ys[:, 0]
    cosh = lambda W, x: jnp.sum(W[5] * jnp.cosh(W[:5].T @ x))  # noqa: E731  phi(0) != 0: ZGZ fails
    with pytest.raises(ValueError, match="ZGZ"):
        compare_with_nqf(nqf.quadratic_form(cosh, neuron_axes=1), (xs, ys), optax.sgd(0.1), num_steps=5,
                         params=0.1 * jnp.ones((6, 4)))
    weighted = lambda W, x: jnp.sum(jnp.arange(1.0, 5.0) * W[5] * jnp.tanh(W[:5].T @ x))  # noqa: E731
    W0 = 0.1 * normal(jax.random.PRNGKey(0), (6, 4))
    with pytest.raises(ValueError, match="permutation"):
        compare_with_nqf(nqf.quadratic_form(weighted, neuron_axes=1), (xs, ys), optax.sgd(0.1), num_steps=5,
                         params=W0)


def test_bad_input():
    arch = nqf.architectures.two_layer_mlp(5, outputs=3)
    xs, ys = _mlp_data()
    W0 = 0.01 * jnp.ones((8, 4))
    sgd = optax.sgd(0.1)
    with pytest.raises(ValueError, match="W0"):
        compare_with_nqf(arch, (xs, ys), sgd, num_steps=5, params=jnp.ones((7, 4)))
    with pytest.raises(ValueError, match="targets"):
        compare_with_nqf(arch, (xs, ys[:, :2]), sgd, num_steps=5, params=W0)
    with pytest.raises(ValueError, match="targets"):
        compare_with_nqf(arch, (xs, ys[:30]), sgd, num_steps=5, params=W0)
    with pytest.raises(ValueError, match="`data` must hold inputs 'two-layer MLP' accepts"):
        compare_with_nqf(arch, (xs[:, :4], ys), sgd, num_steps=5, params=W0)
    with pytest.raises(TypeError, match="optax"):
        compare_with_nqf(arch, (xs, ys), lambda g: g, num_steps=5, params=W0)
    for steps in (0, -3, 2.5):
        with pytest.raises(BAD_INPUT, match="steps"):
            compare_with_nqf(arch, (xs, ys), sgd, num_steps=steps, params=W0)
    for thr in (0.0, 1.0, -0.1, 2.0):
        with pytest.raises(BAD_INPUT, match="threshold"):
            compare_with_nqf(arch, (xs, ys), sgd, num_steps=5, params=W0, track=Track(agreement=Agreement(thr)))
    with pytest.raises(ValueError, match="record_every"):
        compare_with_nqf(arch, (xs, ys), sgd, num_steps=5, params=W0, track=Track(record_every=2))
    with pytest.raises(ValueError, match="linear_map"):
        compare_with_nqf(arch, (xs, ys), sgd, num_steps=5, params=W0, track=Track(("singular_values",)))
    with pytest.raises(ValueError, match="probe"):
        compare_with_nqf(arch, (xs, ys), sgd, num_steps=5, params=W0, track=Track(("outputs",)))
    with pytest.raises(ValueError, match="batches"):
        compare_with_nqf(arch, (xs, ys, jnp.zeros((4, 2), int)), sgd, num_steps=5, params=W0)
    with pytest.raises(ValueError, match="neuron_axes"):
        compare_with_nqf(lambda W, x: arch.apply(W, x), (xs, ys), sgd, num_steps=5, params=W0)


def test_nqf_output_is_eq2_and_fig2_teachers_have_the_stated_spectrum():
    """nqf_output = f(0) + Tr[W W^T A(x)] with the closed-form A (Eq. 2, one A per output), and each Fig. 2
    teacher's end-to-end linear map has singular values (1, 1/2, 1/4, 1/8)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
    from ch06_modules import fig2_modules, low_rank_teacher

    def parts(mod, W, x, W_teacher):  # one compiled program per module (eager ops would compile one each)
        closed = mod.arch.apply(jnp.zeros_like(W), x) + jnp.einsum("ij,oji->o", W @ W.T, mod.arch.structure(x))
        return mod.linear_map(W_teacher), closed, nqf.structure.nqf_output(mod.arch, W, x), mod.linear_map(W)

    for i, mod in enumerate(fig2_modules(key=jax.random.PRNGKey(20))):
        T = low_rank_teacher(mod, 3, key=jax.random.PRNGKey(i))
        W = 0.3 * normal(jax.random.PRNGKey(10 + i), (mod.arch.p, mod.d))
        x = jax.tree_util.tree_map(lambda a: a[0], T.xs)
        L_teacher, closed, nqf_out, L = jax.jit(parts, static_argnums=0)(mod, W, x, T.W_teacher)
        sv = np.linalg.svd(L_teacher, compute_uv=False)
        np.testing.assert_allclose(sv[:4], [1.0, 0.5, 0.25, 0.125], atol=1e-12)
        assert sv[4] < 1e-12
        np.testing.assert_allclose(nqf_out, closed, rtol=1e-10, atol=1e-12)
        if mod.key == "mlp":  # the recovered singular values of the MLP are those of the product of its layers
            np.testing.assert_allclose(L, nqf.structure.effective_matrix(W, 20), atol=1e-14)


def test_fast_nqf_forms_equal_the_matrix_free_run():
    """nqf_form='structure' (A(x) and f_x(0) computed once) and a closed-form quadratic(W, x) give the
    matrix-free NQF's run to rounding, under GD and Adam, batched or not, full batch or minibatches."""
    arch = nqf.architectures.two_layer_mlp(5, outputs=3)
    xs, ys = _mlp_data()
    W0 = 0.05 * normal(jax.random.PRNGKey(3), (2, 8, 4))
    quad = lambda W, x: W[5:] @ W[:5].T @ x  # noqa: E731  Prop. 1 with tanh'(0) = 1: Tr[W W^T A(x)] = V U^T x
    idx = jax.random.randint(jax.random.PRNGKey(5), (30, 8), 0, 40)
    for opt, data in ((optax.sgd(0.1), (xs, ys)), (nqf.training.optimizer("adam", 0.01), (xs, ys, idx))):
        kw = dict(num_steps=30, params=W0, track=Track(("loss", "probe_loss", "outputs"), probe=xs[:7],
                                                        probe_targets=ys[:7]))
        ref = compare_with_nqf(arch, data, opt, **kw)
        for form in ("structure", quad):
            res = compare_with_nqf(nqf.quadratic_form(arch, form=form), data, opt, key=jax.random.PRNGKey(17), **kw)
            for k in ("loss", "probe_loss", "outputs"):
                np.testing.assert_allclose(res.nqf[k], ref.nqf[k], rtol=1e-10, atol=1e-13)
                np.testing.assert_array_equal(res.module[k], ref.module[k])  # the module run is untouched
            np.testing.assert_allclose(res.final["nqf"], ref.final["nqf"], rtol=1e-10, atol=1e-13)
            assert 0.0 <= res.form_gap < 1e-12  # the measured distance of the exact forms from the matrix-free NQF
        assert ref.form_gap is None
    one = compare_with_nqf(nqf.quadratic_form(arch, form="structure"), (xs, ys), optax.sgd(0.1), num_steps=10,
                           params=W0[0], key=jax.random.PRNGKey(17))
    ref_one = compare_with_nqf(arch, (xs, ys), optax.sgd(0.1), num_steps=10, params=W0[0])
    assert one.nqf["loss"].shape == (11,)
    np.testing.assert_allclose(one.nqf["loss"], ref_one.nqf["loss"], rtol=1e-10)


def test_fast_form_parts_of_a_probe_laid_out_unlike_the_data(loose_promotion):
    """Training and probe inputs of one layout share one compiled f_x(0); a probe of another dtype gets its own,
    computed from its own inputs (not from a cast copy)."""
    arch = nqf.architectures.two_layer_mlp(5, outputs=3)
    xs, ys = _mlp_data()
    W0 = 0.05 * normal(jax.random.PRNGKey(3), (8, 4))
    quad = lambda W, x: W[5:] @ W[:5].T @ x  # noqa: E731
    q = nqf.quadratic_form(arch, form=quad)
    kw = dict(num_steps=5, params=W0, key=jax.random.PRNGKey(17))
    same = compare_with_nqf(q, (xs, ys), optax.sgd(0.1), track=Track(("outputs",), probe=xs[:7]), **kw)
    other = compare_with_nqf(q, (xs, ys), optax.sgd(0.1), track=Track(("outputs",), probe=np.asarray(xs[:7], np.float32)),
                             **kw)
    np.testing.assert_allclose(other.nqf["outputs"], same.nqf["outputs"], rtol=1e-5, atol=1e-8)  # float32 inputs
    assert other.form_gap < 1e-6 and same.form_gap < 1e-12


def test_fast_nqf_form_is_checked_and_refused_where_it_cannot_apply():
    arch = nqf.architectures.two_layer_mlp(5, outputs=3)
    xs, ys = _mlp_data()
    W0 = 0.05 * normal(jax.random.PRNGKey(3), (8, 4))
    wrong = lambda W, x: 1.01 * (W[5:] @ W[:5].T @ x)  # noqa: E731  1 % off
    with pytest.raises(ValueError, match="does not equal the matrix-free NQF"):
        compare_with_nqf(nqf.quadratic_form(arch, form=wrong), (xs, ys), optax.sgd(0.1), num_steps=5, params=W0,
                         key=jax.random.PRNGKey(17))
    with pytest.raises(ValueError, match="form"):
        nqf.quadratic_form(arch, form="dense")
    sample = lambda k: (xs[:8], ys[:8])  # noqa: E731
    with pytest.raises(ValueError, match="sampling function"):
        compare_with_nqf(nqf.quadratic_form(arch, form="structure"), sample, optax.sgd(0.1), num_steps=5, params=W0,
                         key=jax.random.PRNGKey(0), track=Track(("outputs",), probe=xs[:3]))
    big = nqf.architectures.multihead_attention(20, 16, 8, 20, outputs=8)  # p = 880: 6e6 entries per sample
    xb = jax.vmap(big.sample_input)(jax.random.split(jax.random.PRNGKey(0), 20))
    with pytest.raises(ValueError, match="structure-matrix entries"):
        compare_with_nqf(nqf.quadratic_form(big, form="structure"), (xb, jnp.zeros((20, 8))), optax.sgd(0.1),
                         num_steps=5, params=0.01 * jnp.ones((big.p, 2)), key=jax.random.PRNGKey(17))


def test_default_quadratic_is_the_matrix_free_nqf():
    """Architecture.quadratic (from the closed-form structure matrix) = the matrix-free NQF minus f_x(0), for a
    scalar and a vector-output MLP and a CNN."""
    from nqf.structure import nqf_output

    for arch in (nqf.architectures.two_layer_mlp(4), nqf.architectures.two_layer_mlp(4, outputs=2),
                 nqf.architectures.cnn(5, 5, 3, 3)):
        W = normal(jax.random.PRNGKey(0), (arch.p, 3))
        x = arch.sample_input(jax.random.PRNGKey(1))
        want = nqf_output(arch, W, x) - arch.apply(jnp.zeros_like(W), x)
        np.testing.assert_allclose(arch.quadratic(W, x), want, rtol=1e-10, atol=1e-12)


def test_qk_attention_quadratic_is_its_nqf():
    """QKAttention.quadratic (no p x p matrix) = Tr[W W^T A(x)] of its closed form, scalar and vector readout."""
    for c in (jnp.linspace(-1.0, 1.0, 4), jnp.ones((4, 2))):
        arch = nqf.architectures.qk_attention(4, 5, 3, c=c)
        W = normal(jax.random.PRNGKey(0), (arch.p, 3))
        x = arch.sample_input(jax.random.PRNGKey(1))
        dense = jnp.einsum("...ij,ij->...", arch.structure(x), W @ W.T)
        np.testing.assert_allclose(arch.quadratic(W, x), dense, rtol=1e-12)
