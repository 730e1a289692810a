"""Autodiff structure matrices, the hypotheses of Theorem 1, and the NQF remainder."""

import jax
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nqf.architectures import qk_attention# noqa: E402
from nqf.structure import remainder_scaling  # noqa: E402
from nqf.structure._expansion import nqf_expansion  # noqa: E402
from nqf.architectures import two_layer_mlp# noqa: E402
from nqf import structure_matrix, structure_report  # noqa: E402
from nqf.structure._autodiff import structure_stack  # noqa: E402

KEY = jax.random.PRNGKey(7)
X3 = jnp.array([0.7, -1.3, 0.4])


def _mlp(phi):
    """Plain callable: sum_i v_i phi(u_i . x), neuron [u; v], p = len(x) + 1."""
    return lambda W, x: jnp.sum(W[-1] * phi(W[:-1].T @ x))


def _ff(x):
    """Closed form 1/2 [[0, x], [x^T, 0]] of Eq. (6) with phi'(0) = 1."""
    k = x.shape[0]
    A = np.zeros((k + 1, k + 1))
    A[:k, k] = A[k, :k] = 0.5 * np.asarray(x)
    return A


def test_tanh_mlp_satisfies_theorem_1():
    rep = structure_report(two_layer_mlp(3), X3)
    assert rep.finite and rep.smooth_at_zero and rep.permutation_symmetric and rep.zgz and rep.zgz_property
    np.testing.assert_allclose(rep.A, _ff(X3), rtol=1e-12, atol=1e-15)
    assert float(jnp.max(jnp.abs(rep.g))) == 0.0 and float(jnp.max(jnp.abs(rep.B))) == 0.0
    assert float(rep.f0) == 0.0 and rep.smooth_ratio > 6  # Z2-symmetric: O(h^3) residual
    np.testing.assert_allclose(structure_matrix(_mlp(jnp.tanh), X3, p=4), _ff(X3), rtol=1e-12, atol=1e-15)
    assert "ZGZ at 0: yes" in rep.summary()


def test_vector_output_report():
    arch = two_layer_mlp(3, outputs=3)
    rep = structure_report(arch, X3)
    assert rep.A.shape == (3, 6, 6) and rep.g.shape == (3, 6) and rep.f0.shape == (3,)
    assert rep.zgz and rep.permutation_symmetric and rep.smooth_at_zero
    np.testing.assert_allclose(rep.A, arch.structure(X3), rtol=1e-12, atol=1e-15)


def test_bias_keeps_zgz_for_tanh_but_not_for_sigmoid():
    tanh_b = two_layer_mlp(3, bias=True)
    rep = structure_report(tanh_b, X3)
    assert rep.zgz and rep.zgz_property and rep.permutation_symmetric
    np.testing.assert_allclose(rep.A, tanh_b.structure(X3), rtol=1e-12, atol=1e-15)
    # sigmoid(0) = 1/2: the readout gradient at 0 is phi(0), so g = [0, 0, 0, 0, 1/2]; B = 0.
    sig_b = two_layer_mlp(3, activation=jax.nn.sigmoid, bias=True)
    rep = structure_report(sig_b, X3)
    assert not rep.zgz and not rep.zgz_property and rep.permutation_symmetric
    np.testing.assert_allclose(rep.g, [0, 0, 0, 0, 0.5], atol=1e-15)
    assert float(jnp.max(jnp.abs(rep.B))) == 0.0
    np.testing.assert_allclose(rep.A, sig_b.structure(X3), rtol=1e-12)  # phi'(0) = 1/4
    with pytest.raises(ValueError, match=r"breaks ZGZ.*\|g\(x\)\| = 0\.5"):
        structure_matrix(sig_b, X3)
    np.testing.assert_allclose(structure_matrix(sig_b, X3, allow_general=True), rep.A)


def test_zgz_breaking_linear_readout():
    # f = sum_i v_i (1 + u_i . x): g = [0; 1], B = 0, A = 1/2 [[0, x], [x^T, 0]].
    module = lambda W, x: jnp.sum(W[-1] * (1.0 + W[:-1].T @ x))  # noqa: E731
    rep = structure_report(module, X3, p=4)
    assert not rep.zgz and rep.permutation_symmetric and rep.smooth_at_zero
    np.testing.assert_allclose(rep.g, [0, 0, 0, 1.0], atol=1e-15)
    np.testing.assert_allclose(rep.B, np.zeros((4, 4)), atol=1e-15)
    np.testing.assert_allclose(rep.A, _ff(X3), atol=1e-15)
    with pytest.raises(ValueError, match=r"breaks ZGZ \(Property 1\): \|g\(x\)\| = 1, \|B\(x\)\| = 0"):
        structure_matrix(module, X3, p=4)


def test_cross_neuron_coupling_gives_B():
    # f = c.mu + (a.mu)^2 + sum_i (b.w_i)^2  =>  g = c, B = a a^T, A = b b^T (Eq. 20), exactly.
    a, b, c = jnp.array([1.0, 2.0, -1.0]), jnp.array([0.5, 0.0, 3.0]), jnp.array([0.3, -0.2, 0.1])
    module = lambda W, x: c @ W.sum(1) + (a @ W.sum(1)) ** 2 + jnp.sum((b @ W) ** 2)  # noqa: E731
    rep = structure_report(module, jnp.zeros(1), p=3, d=4)
    np.testing.assert_allclose(rep.g, c, atol=1e-15)
    np.testing.assert_allclose(rep.B, np.outer(a, a), atol=1e-13)
    np.testing.assert_allclose(rep.A, np.outer(b, b), atol=1e-13)
    assert not rep.zgz and rep.permutation_symmetric
    W = normal(KEY, (3, 5))
    np.testing.assert_allclose(nqf_expansion(rep.A, W, f0=rep.f0, g=rep.g, B=rep.B), module(W, None), rtol=1e-12)
    with pytest.raises(ValueError, match=r"breaks ZGZ.*\|B\(x\)\| = 6"):
        structure_matrix(module, jnp.zeros(1), p=3)


def test_relu_is_reported_not_silently_wrong():
    rep = structure_report(_mlp(jax.nn.relu), X3, p=4)
    assert rep.finite and not rep.smooth_at_zero and abs(rep.smooth_ratio - 2.0) < 0.05
    np.testing.assert_allclose(rep.A, 0.0)  # what autodiff alone would have claimed
    with pytest.raises(ValueError, match="not smooth at W = 0"):
        structure_matrix(_mlp(jax.nn.relu), X3, p=4)
    arch = two_layer_mlp(3, activation=jax.nn.relu, check_smooth=False)
    assert not structure_report(arch, X3).smooth_at_zero
    W = normal(KEY, (4, 3))
    assert abs(remainder_scaling(arch, X3, W, rep.A).slope - 2.0) < 0.1  # remainder O(s^2): A is wrong


def test_nonfinite_derivatives_are_reported():
    module = lambda W, x: jnp.sum(jnp.linalg.norm(W, axis=0)) * x[0]  # noqa: E731
    rep = structure_report(module, X3, p=2)
    assert not rep.finite
    with pytest.raises(ValueError, match="not finite"):
        structure_matrix(module, X3, p=2)


@pytest.mark.parametrize("kind", ["entries", "index_weights"])
def test_non_permutation_symmetric_module_raises(kind):
    if kind == "entries":
        module, x, p = (lambda W, x: W[0, 0] ** 2 + 2 * W[1, 1] ** 2), X3, 2
    else:
        module, x, p = (lambda W, x: jnp.sum(jnp.arange(1.0, W.shape[1] + 1) * W[-1] * jnp.tanh(W[:-1].T @ x))), X3, 4
    rep = structure_report(module, x, p=p)
    assert not rep.permutation_symmetric and rep.diag_block_spread > 0.5
    with pytest.raises(ValueError, match="not permutation-symmetric in its neurons"):
        structure_matrix(module, x, p=p)


def test_bad_arguments_raise_clear_errors():
    arch = two_layer_mlp(3)
    with pytest.raises(ValueError, match=r"`p` must match .* p = 4; got 5"):
        structure_report(arch, X3, p=5)
    with pytest.raises(ValueError, match=r"check `p` \(parameters per neuron\)"):
        structure_report(_mlp(jnp.tanh), X3, p=5)
    with pytest.raises(ValueError, match="`p` .* is required for a plain callable module"):
        structure_report(_mlp(jnp.tanh), X3)
    with pytest.raises(ValueError, match=r"`x` must have shape \(3\)"):
        structure_report(arch, jnp.ones(4))
    with pytest.raises(ValueError, match="`x` must be finite"):
        structure_report(arch, jnp.array([0.0, jnp.nan, 1.0]))
    with pytest.raises(ValueError, match="`d` must be an int >= 2"):
        structure_report(arch, X3, d=1)
    with pytest.raises(ValueError, match="scalar or an"):
        structure_report(lambda W, x: W * x[0], X3, p=2)


def test_structure_stack_paths():
    xs = normal(KEY, (5, 3))
    arch = two_layer_mlp(3)
    closed = structure_stack(arch, xs)
    auto = structure_stack(_mlp(jnp.tanh), xs, p=4)
    assert closed.shape == (5, 4, 4)
    np.testing.assert_allclose(auto, closed, rtol=1e-12, atol=1e-15)
    broken = lambda W, x: jnp.sum(W[-1] * (1.0 + W[:-1].T @ x))  # noqa: E731
    with pytest.raises(ValueError, match="breaks ZGZ"):
        structure_stack(broken, xs, p=4)
    np.testing.assert_allclose(structure_stack(broken, xs, p=4, allow_general=True), closed, atol=1e-15)
    with pytest.raises(ValueError, match="leading batch axis"):
        structure_stack(qk_attention(3, 4, 2), (jnp.ones((2, 3)), jnp.ones((3, 3, 4))))
    with pytest.raises(ValueError, match="needs an Architecture"):
        structure_stack(_mlp(jnp.tanh), xs, p=4, method="closed")


def test_qk_attention_report_has_constant_f0():
    c = jnp.array([0.3, -1.2, 0.7])
    arch = qk_attention(3, 5, 2, c=c)
    x = arch.sample_input(KEY)
    rep = structure_report(arch, x, d=4)
    assert rep.zgz and rep.permutation_symmetric and rep.smooth_at_zero
    np.testing.assert_allclose(rep.f0, 4 * c @ x[1].mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(rep.A, arch.structure(x), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "phi, slope",
    [(jnp.tanh, 4.0), (lambda z: z + 0.5 * z**2, 3.0)],
    ids=["tanh_Z2_symmetric", "non_odd_activation"],
)
def test_remainder_slope(phi, slope):
    arch = two_layer_mlp(3, activation=phi)
    W = normal(KEY, (arch.p, 4))
    fit = remainder_scaling(arch, X3, W, arch.structure(X3), scales=np.logspace(-3, -1, 9))
    assert abs(fit.slope - slope) < 0.1
    assert fit.remainders.shape == (9,) and np.all(np.diff(fit.remainders) > 0)


def test_exactly_quadratic_module_has_zero_remainder():
    module = lambda W, x: jnp.sum((W.T @ x) ** 2)  # noqa: E731  (phase retrieval)
    W = normal(KEY, (3, 2))
    fit = remainder_scaling(module, X3, W, jnp.outer(X3, X3))
    assert np.max(fit.remainders) < 1e-15 and np.isnan(fit.slope)


def test_nqf_expansion_vector_and_errors():
    arch = two_layer_mlp(3, outputs=2)
    A = arch.structure(X3)
    W = 1e-3 * normal(KEY, (5, 4))
    out = nqf_expansion(A, W)
    assert out.shape == (2,)
    np.testing.assert_allclose(out, arch.apply(W, X3), rtol=1e-5)
    # jaxtyping's runtime check (active under pytest) reports the same mismatches first.
    for kwargs, name, msg in [
        (dict(A=A, W=jnp.ones((4, 2))), "W", r"`W` must have shape \(5, \*\)"),
        (dict(A=jnp.ones((2, 3)), W=W), "A", "`A` must have shape"),
        (dict(A=A, W=W, g=jnp.ones(5)), "g", "`g` must have shape"),
    ]:
        with pytest.raises((ValueError, TypeError), match=f"{msg}|parameter '{name}'"):
            nqf_expansion(**kwargs)


def test_float32_inputs_use_float32_tolerances():
    rep = structure_report(two_layer_mlp(3), X3.astype(jnp.float32))
    assert rep.A.dtype == jnp.float32
    assert rep.zgz and rep.permutation_symmetric and rep.smooth_at_zero and rep.finite
    np.testing.assert_allclose(rep.A, _ff(X3), rtol=1e-6)
