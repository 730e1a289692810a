"""Closed-form structure matrices (Sec. 3, Table 1 / Table 3) against autodiff."""

import jax
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp    # noqa: E402
import numpy as np    # noqa: E402
import pytest    # noqa: E402

from nqf.architectures import multihead_attention, qk_attention  # noqa: E402
from nqf.architectures import cnn
from nqf.architectures import TABLE1, diagonal_linear_network, two_layer_mlp
from nqf.architectures._base import feedforward_structure
from nqf.architectures._modules import mixture_of_experts, phase_retrieval
from nqf.structure._autodiff import relative_error, structure_stack  # noqa: E402
from helpers import BAD_INPUT  # noqa: E402


def test_closed_form_error_is_tiny_for_gelu_mlp_and_mha():
    for arch in (two_layer_mlp(3, activation=jax.nn.gelu), multihead_attention(3, 4, 2, 2)):
        xs = jax.tree_util.tree_map(lambda a: a[None], arch.sample_input(jax.random.PRNGKey(5)))
        assert relative_error(structure_stack(arch, xs, method="closed", check=False),
                              structure_stack(arch, xs, method="autodiff", check=False)) <= 1e-10


def _custom_expert(theta, x):
    # E(x; 0) = 0, gradient G(x) = [sum sin x, tanh x]; the quadratic part does not enter A.
    return theta[0] * jnp.sum(jnp.sin(x)) + theta[1:] @ jnp.tanh(x) + (theta @ theta) * x[0]


ARCHS = {
    "mlp": two_layer_mlp(4),
    "mlp_bias": two_layer_mlp(3, bias=True),
    "mlp_vec": two_layer_mlp(3, outputs=2),
    "cnn": cnn(4, 5, 2, 3),
    "cnn_vec": cnn(3, 4, 2, 2, outputs=2),
    "mha": multihead_attention(D=3, N=4, d_k=2, d_v=2),
    "mha_vec": multihead_attention(D=3, N=4, d_k=2, d_v=3, outputs=2),
    "qk": qk_attention(D=3, N=5, d_k=2, c=jnp.array([0.3, -1.2, 0.7])),
    "qk_vec": qk_attention(D=3, N=5, d_k=2, c=jnp.arange(6.0).reshape(3, 2) - 2.5),
    "moe": mixture_of_experts(3),
    "moe_custom": mixture_of_experts(3, expert=_custom_expert, n_theta=4, gate=jax.nn.gelu),
    "phase": phase_retrieval(4),
    "dln": diagonal_linear_network(4),
    "dln2": diagonal_linear_network(3, two_factor=True),
}


def _batch(arch, m=4, seed=0):
    xs = [arch.sample_input(k) for k in jax.random.split(jax.random.PRNGKey(seed), m)]
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *xs)


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_closed_form_matches_autodiff(name):
    arch = ARCHS[name]
    xs = _batch(arch)
    closed = structure_stack(arch, xs, method="closed", check=False)
    auto = structure_stack(arch, xs, method="autodiff", check=False)
    lead = () if arch.outputs is None else (arch.outputs,)
    assert closed.shape == (4,) + lead + (arch.p, arch.p)
    assert float(jnp.linalg.norm(auto)) > 0
    assert float(jnp.linalg.norm(closed - auto) / jnp.linalg.norm(auto)) <= 1e-10
    np.testing.assert_allclose(closed, jnp.swapaxes(closed, -1, -2), atol=0)


def test_table1_has_six_architectures():
    archs = [row.build() for row in TABLE1]
    assert len(archs) == 6
    for arch in archs:
        x = jax.tree_util.tree_map(np.asarray, arch.sample_input(jax.random.PRNGKey(3)))  # numpy works too
        A = arch.structure(x)
        assert A.shape == (arch.p, arch.p) and arch.name
        assert float(arch.apply(np.zeros((arch.p, 2)), x)) == 0.0


def test_mha_query_key_blocks_vanish_and_value_block_is_kron():
    D, N, d_k, d_v = 3, 4, 2, 2
    arch = multihead_attention(D, N, d_k, d_v)
    x = arch.sample_input(jax.random.PRNGKey(1))
    A = structure_stack(arch, jax.tree_util.tree_map(lambda a: a[None], x), method="autodiff", check=False)[0]
    qk = 2 * d_k * D
    assert float(jnp.max(jnp.abs(A[:qk]))) == 0.0 and float(jnp.max(jnp.abs(A[:, :qk]))) == 0.0
    x_avg = x[1].mean(axis=1)
    np.testing.assert_allclose(A[qk:qk + D * d_v, qk + D * d_v:], 0.5 * jnp.kron(x_avg[:, None], jnp.eye(d_v)),
                               rtol=1e-12, atol=1e-15)


def test_vector_outputs_are_one_matrix_per_output():
    arch = two_layer_mlp(3, outputs=2)
    x = arch.sample_input(jax.random.PRNGKey(2))
    A = arch.structure(x)
    scalar = two_layer_mlp(3).structure(x)  # readout on the last coordinate
    np.testing.assert_allclose(A[0][:4, :4], scalar[:4, :4], atol=0)
    keep = np.array([0, 1, 2, 4])
    np.testing.assert_allclose(A[1][keep][:, keep], scalar, atol=0)
    W = normal(jax.random.PRNGKey(4), (arch.p, 5))
    assert arch.apply(W, x).shape == (2,)


def test_bias_acts_as_constant_input():
    arch = two_layer_mlp(2, bias=True)
    A = arch.structure(jnp.array([0.5, -2.0]))
    expected = 0.5 * np.array([[0, 0, 0, 0.5], [0, 0, 0, -2.0], [0, 0, 0, 1.0], [0.5, -2.0, 1.0, 0]])
    np.testing.assert_allclose(A, expected, atol=0)


def test_feedforward_structure_is_eq17():
    C = jnp.arange(6.0).reshape(2, 3)
    A = feedforward_structure(C)
    assert A.shape == (5, 5)
    np.testing.assert_allclose(A[:2, 2:], 0.5 * C)
    np.testing.assert_allclose(A, A.T)


def test_nonsmooth_activation_is_rejected():
    with pytest.raises(ValueError, match="not smooth at 0"):
        two_layer_mlp(3, activation=jax.nn.relu)
    with pytest.raises(ValueError, match="not smooth at 0"):
        cnn(3, 3, 2, 2, activation=jnp.abs)
    with pytest.raises(ValueError, match="`gate` is not smooth"):
        mixture_of_experts(3, gate=jax.nn.relu)


def test_moe_hypotheses_are_checked():
    with pytest.raises(ValueError, match=r"psi\(0\) = 0"):
        mixture_of_experts(3, gate=jax.nn.sigmoid)
    with pytest.raises(ValueError, match=r"E\(x; 0\) = 0"):
        mixture_of_experts(3, expert=lambda th, x: 1.0 + th @ x, n_theta=3)
    with pytest.raises(ValueError, match="n_theta"):
        mixture_of_experts(3, expert=_custom_expert)


def test_bad_weights_and_inputs_raise_clear_errors():
    arch = two_layer_mlp(3)
    x = arch.sample_input(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"`W` must have shape \(p, d\) = \(4, \*\)"):
        arch.apply(jnp.zeros((5, 2)), x)
    with pytest.raises(ValueError, match=r"`x` must have shape \(3\)"):
        arch.apply(jnp.zeros((4, 2)), jnp.ones(4))
    with pytest.raises(ValueError, match="`x` must be finite"):
        arch.apply(jnp.zeros((4, 2)), jnp.array([1.0, jnp.nan, 0.0]))
    with pytest.raises(ValueError, match="`x` must be finite"):
        arch.structure(jnp.array([1.0, jnp.inf, 0.0]))
    mha = ARCHS["mha"]
    with pytest.raises(ValueError, match=r"`x` must be a pair \(q, X\)"):
        mha.apply(jnp.zeros((mha.p, 2)), jnp.ones(3))
    with pytest.raises(ValueError, match=r"context X\)` must have shape \(3, 4\)"):
        mha.structure((jnp.ones(3), jnp.ones((3, 5))))
    with pytest.raises(ValueError, match="`c` must have shape"):
        qk_attention(3, 4, 2, c=jnp.ones(4))
    with pytest.raises(ValueError, match="`outputs`"):
        two_layer_mlp(3, outputs=0)


def test_gaussian_linear_part_is_steins_lemma():
    from nqf.architectures import gaussian_linear_part
    key_w, key_x = jax.random.split(jax.random.PRNGKey(8))
    # phi(z) = z + z^3/3: phi' = 1 + z^2, so kappa_i = 1 + |u_i|^2 exactly (quadrature is exact).
    arch = two_layer_mlp(3, activation=lambda z: z + z**3 / 3, outputs=2)
    W = 0.7 * normal(key_w, (arch.p, 5))
    U, V = W[:3], W[3:]
    kappa = 1.0 + jnp.sum(U**2, axis=0)
    np.testing.assert_allclose(gaussian_linear_part(arch, W), (V * kappa[None, :]) @ U.T, rtol=1e-12)
    # tanh: against a Monte Carlo estimate of E[f_x x^T] (standard error ~ 1/sqrt(n)).
    tanh = two_layer_mlp(3)
    Wt = W[:4]
    xs = normal(key_x, (200_000, 3))
    mc = jnp.mean(jax.vmap(tanh.apply, in_axes=(None, 0))(Wt, xs)[:, None] * xs, axis=0)
    assert float(jnp.max(jnp.abs(gaussian_linear_part(tanh, Wt) - mc))) < 0.02
    # near W = 0 it is phi'(0) times the effective matrix Z2 Z1^T (Eq. 18)
    small = 1e-4 * Wt
    np.testing.assert_allclose(gaussian_linear_part(tanh, small), small[3] @ small[:3].T, rtol=1e-7)
    with pytest.raises(BAD_INPUT, match="`arch` must be a two_layer_mlp|arch"):
        gaussian_linear_part(cnn(3, 3, 2, 2), jnp.zeros((5, 2)))
