"""Table 3 as code: the 17 rows, their closed forms against autodiff, the neuron convention."""

import jax
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp    # noqa: E402
import numpy as np    # noqa: E402
import pytest    # noqa: E402
from jaxtyping import TypeCheckError    # noqa: E402

import nqf    # noqa: E402
from nqf.architectures import multihead_attention  # noqa: E402
from nqf.architectures import mha_quartic_term
from nqf.architectures import mha_slices, single_head_attention_logits, stack_query_key, tied_qk_attention
from nqf.structure import split_structure  # noqa: E402
from nqf.architectures import Architecture, REGISTRY, to_nqf_weights  # noqa: E402
from nqf.architectures._modules import quadratic_network
from nqf.architectures._quadratic_rows import bilinear_sequence_regression, linear_ssl_augmentation, matrix_completion
from nqf.architectures._quadratic_rows import psd_matrix_sensing, rectangular_matrix_sensing, word_context_embedding
from nqf.architectures._registry import Table3Row
from nqf.structure import check_theorem1  # noqa: E402
from helpers import BAD_INPUT

ROWS = {row.key: row for row in REGISTRY}
SCALES = np.logspace(-3, -1, 5)


def _sample(arch, seed=0):
    return arch.sample_input(jax.random.PRNGKey(seed))


# ------------------------------------------------------------------ the registry
def test_registry_has_the_seventeen_rows():
    assert len(REGISTRY) == 17 and len(ROWS) == 17
    assert all(isinstance(row, Table3Row) for row in REGISTRY)
    # The paper's neurons are rows of W only in Prop. 4 and the two rows named in Table 3's caption.
    assert {r.key for r in REGISTRY if r.neurons == "rows"} == {"sh_logits", "tied_qk", "ssl"}
    assert {r.neurons for r in REGISTRY} == {"columns", "rows"}
    for row in REGISTRY:
        arch = row.build()
        assert isinstance(arch, Architecture) and arch.name
        assert row.formula and row.structure and row.reference and row.short
        if row.groups is not None:
            assert sum(row.groups) == arch.p, row.key
        if row.split is not None:  # declared feed-forward at this split (Eq. 17)
            split_structure(arch.structure(_sample(arch, 3)), row.split)


@pytest.mark.parametrize("key", sorted(ROWS))
def test_closed_form_matches_autodiff_and_remainder_order(key):
    row = ROWS[key]
    arch = row.build()
    c = check_theorem1(arch, x=_sample(arch, 1), seed=2, rays=1, scales=SCALES)
    assert c.closed_form_error <= 1e-10
    assert c.A.shape == c.A_autodiff.shape == (arch.p, arch.p)
    assert np.linalg.norm(c.A) > 0
    assert max(c.grad_norm, c.cross_block, c.diag_spread, c.permutation_residual) <= 1e-12
    if row.exact:
        assert c.relative_remainder <= 1e-12 and np.all(np.isnan(c.slopes))
    else:  # every non-quadratic row is Z2-symmetric per neuron: O(s^4)
        assert abs(float(np.mean(c.slopes)) - 4.0) <= 0.05


@pytest.mark.parametrize("make", [single_head_attention_logits, tied_qk_attention])
def test_vector_readout_gives_one_matrix_per_output(make):
    c2 = jnp.array([[0.3, -1.0], [1.2, 0.4], [-0.7, 0.9]])
    arch = make(3, 5, 4, c=c2)
    x = _sample(arch, 4)
    chk = check_theorem1(arch, x=x, rays=1, scales=SCALES, seed=0)
    assert arch.outputs == 2 and chk.A.shape == (2, arch.p, arch.p)
    assert chk.closed_form_error <= 1e-10
    for m in range(2):  # output m is the scalar module with readout c[:, m]
        np.testing.assert_allclose(chk.A[m], make(3, 5, 4, c=c2[:, m]).structure(x), rtol=1e-13, atol=1e-15)


# ---------------------------------------------------------- explicit closed forms
def test_quadratic_rows_closed_forms():
    S = jnp.array([[1.0, 2.0], [0.0, -1.0]])
    np.testing.assert_allclose(psd_matrix_sensing(2).structure(S), [[1.0, 1.0], [1.0, -1.0]])
    R = jnp.arange(6.0).reshape(2, 3)
    A = rectangular_matrix_sensing(2, 3).structure(R)
    np.testing.assert_allclose(A[:2, 2:], 0.5 * R)
    A = matrix_completion(3, 4).structure(jnp.array([2, 1]))
    expected = np.zeros((7, 7))
    expected[2, 3 + 1] = expected[3 + 1, 2] = 0.5
    np.testing.assert_allclose(A, expected, atol=0)
    U, V = jnp.arange(6.0).reshape(3, 2), jnp.arange(8.0).reshape(4, 2) - 3
    W = jnp.concatenate([U, V])  # neuron k = latent factor k = [U[:, k]; V[:, k]]
    assert float(matrix_completion(3, 4).apply(W, jnp.array([2, 1]))) == pytest.approx(float(U[2] @ V[1]))
    assert word_context_embedding(5, 3).p == 8
    x = jnp.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(quadratic_network(3).structure(x), jnp.outer(x, x))
    X = jnp.arange(12.0).reshape(3, 4) / 10
    np.testing.assert_allclose(bilinear_sequence_regression(3, 4, s=2, t=0).structure(X)[:3, 3:],
                               0.5 * jnp.outer(X[:, 2], X[:, 0]))


def test_neurons_as_rows_follow_the_papers_convention():
    key = jax.random.PRNGKey(9)
    # Linear SSL: the paper's encoder (k x n) has one neuron per row; nqf takes W.T.
    ssl = linear_ssl_augmentation(4)
    x = _sample(ssl, 5)
    W_paper = normal(key, (6, 4))
    delta = x[0] - x[1]
    W = to_nqf_weights(W_paper, "rows")
    assert W.shape == (4, 6)
    assert float(ssl.apply(W, x)) == pytest.approx(float(jnp.sum((W_paper @ delta) ** 2)), rel=1e-13)
    np.testing.assert_allclose(W @ W.T, W_paper.T @ W_paper, rtol=1e-13)
    assert float(jnp.trace(W_paper.T @ W_paper @ ssl.structure(x))) == pytest.approx(float(ssl.apply(W, x)), rel=1e-12)
    # Tied attention: W^Q = W^K = W (d_k x D), neurons = rows.
    tied = tied_qk_attention(3, 5, 4)
    q, X = _sample(tied, 6)
    W_paper = normal(key, (4, 3))
    c = jnp.ones(3) / jnp.sqrt(3)
    direct = c @ X @ jax.nn.softmax(X.T @ W_paper.T @ W_paper @ q / 2.0)
    assert float(tied.apply(to_nqf_weights(W_paper, "rows"), (q, X))) == pytest.approx(float(direct), rel=1e-13)
    # Single-head logits: neuron i = (row i of W^Q, row i of W^K).
    sh = single_head_attention_logits(3, 5, 4)
    WQ, WK = normal(key, (2, 4, 3))
    direct = c @ X @ jax.nn.softmax(X.T @ WK.T @ WQ @ q / 2.0)
    assert float(sh.apply(stack_query_key(WQ, WK), (q, X))) == pytest.approx(float(direct), rel=1e-13)
    assert to_nqf_weights(W_paper, "columns") is not None and to_nqf_weights(W_paper, "columns").shape == (4, 3)


def test_columns_of_a_rows_matrix_are_not_neurons():
    """The SSL encoder read with columns as neurons breaks Def. 1: nqf refuses it."""
    ssl = linear_ssl_augmentation(4)
    x = _sample(ssl, 5)

    def by_columns(W, x):  # W: the paper's (k x n) encoder, columns taken as neurons
        return jnp.sum((W @ (x[0] - x[1])) ** 2)

    rep = nqf.structure_report(by_columns, x, p=5, d=4)
    assert not rep.permutation_symmetric and rep.permutation_residual > 1e-3
    with pytest.raises(ValueError, match="not permutation-symmetric"):
        nqf.structure_matrix(by_columns, x, p=5, d=4)

    class Weighted(Architecture):  # neuron i weighted by i + 1: not S_d-symmetric
        name = "weighted"
        p = 4

        def apply(self, W, x):
            return jnp.sum((1.0 + jnp.arange(W.shape[1], dtype=W.dtype)) * (W.T @ (x[0] - x[1])) ** 2)

        def structure(self, x):
            return ssl.structure(x)

        def sample_input(self, key):
            return ssl.sample_input(key)

    arch = Weighted()
    c = check_theorem1(arch, x=x, rays=1, scales=SCALES, seed=0)
    assert c.permutation_residual > 1e-3 and c.diag_spread > 1e-3


# -------------------------------------------------------------- MHA at order four
def test_mha_query_key_enter_at_quartic_order():
    D, N, d_k, d_v = 3, 4, 2, 2
    mha = multihead_attention(D, N, d_k, d_v)
    sl = mha_slices(D, d_k, d_v)
    assert sl["readout"].stop == mha.p and sl["query"].stop == d_k * D
    x = _sample(mha, 2)
    W = normal(jax.random.PRNGKey(3), (mha.p, 3))
    W = W / jnp.linalg.norm(W)
    A = mha.structure(x)
    assert float(jnp.max(jnp.abs(A[: sl["key"].stop]))) == 0.0
    T4 = float(mha_quartic_term(W, x, D=D, N=N, d_k=d_k, d_v=d_v))
    for s, tol in ((1e-2, 1e-4), (3e-3, 1e-5)):
        gap = float(mha.apply(s * W, x) - s**2 * jnp.einsum("ij,ik,jk->", A, W, W))
        assert abs(gap / s**4 - T4) <= tol * abs(T4)
    W0 = W.at[sl["query"]].set(0.0).at[sl["key"]].set(0.0)
    assert float(mha_quartic_term(W0, x, D=D, N=N, d_k=d_k, d_v=d_v)) == 0.0
    f = float(mha.apply(0.1 * W0, x))
    assert abs(f - 0.01 * float(jnp.einsum("ij,ik,jk->", A, W0, W0))) <= 1e-14 * abs(f)


# ---------------------------------------------------------------------- bad input
def test_bad_weights_name_the_argument_and_the_convention():
    for arch, x in [(psd_matrix_sensing(3), jnp.ones((3, 3))), (rectangular_matrix_sensing(2, 3), jnp.ones((2, 3))),
                    (matrix_completion(2, 3), jnp.array([0, 1])), (quadratic_network(3), jnp.ones(3)),
                    (bilinear_sequence_regression(2, 3), jnp.ones((2, 3)))]:
        with pytest.raises(BAD_INPUT, match="`W`|W"):
            arch.apply(jnp.zeros((arch.p + 1, 2)), x)
    for arch in (linear_ssl_augmentation(3), tied_qk_attention(3, 4, 2), single_head_attention_logits(3, 4, 2)):
        with pytest.raises(ValueError, match="ROWS"):
            arch.apply(jnp.zeros((arch.p + 1, 2)), _sample(arch))
        with pytest.raises(BAD_INPUT, match="`W`|W"):
            arch.apply(jnp.zeros(arch.p), _sample(arch))


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(BAD_INPUT, match="`x`|x"):
        psd_matrix_sensing(3).structure(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="`x` must be finite"):
        quadratic_network(2).structure(jnp.array([1.0, jnp.nan]))
    with pytest.raises(BAD_INPUT, match="integer|x"):
        matrix_completion(2, 3).structure(jnp.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="out of range"):
        matrix_completion(2, 3).structure(jnp.array([2, 0]))
    with pytest.raises(ValueError, match=r"`x` must be a pair \(x, chi\)"):
        linear_ssl_augmentation(3).structure(jnp.ones(3))
    with pytest.raises(ValueError, match=r"augmentation chi\)` must have shape \(3\)"):
        linear_ssl_augmentation(3).structure((jnp.ones(3), jnp.ones(4)))
    with pytest.raises(ValueError, match=r"`x` must be a pair \(q, X\)"):
        tied_qk_attention(3, 4, 2).structure(jnp.ones(3))
    with pytest.raises(ValueError, match="`c` must have shape"):
        single_head_attention_logits(3, 4, 2, c=jnp.ones(4))
    with pytest.raises(ValueError, match="`t` must be a token position"):
        bilinear_sequence_regression(3, 4, t=4)
    with pytest.raises(ValueError, match="`n` must be an integer >= 1"):
        psd_matrix_sensing(0)
    with pytest.raises(ValueError, match="`d_k` must be an integer >= 1"):
        tied_qk_attention(3, 4, 0)
    with pytest.raises(BAD_INPUT, match="WQ|WK"):
        stack_query_key(jnp.ones((2, 3)), jnp.ones((3, 3)))
    with pytest.raises(BAD_INPUT, match="`W`|W"):
        mha_quartic_term(jnp.ones((5, 2)), _sample(multihead_attention(3, 4, 2, 2)), D=3, N=4, d_k=2, d_v=2)
    with pytest.raises(ValueError, match="`neurons`"):
        to_nqf_weights(jnp.ones((2, 3)), "cols")
    with pytest.raises(BAD_INPUT, match="W_paper"):
        to_nqf_weights(jnp.ones(3), "rows")


def test_check_row_rejects_bad_arguments():
    arch = quadratic_network(3)
    x = jnp.ones(3)
    with pytest.raises(BAD_INPUT, match="arch"):
        check_theorem1(lambda W, x: 0.0, x=x, seed=0)
    with pytest.raises(ValueError, match="`rays`"):
        check_theorem1(arch, x=x, rays=0, seed=0)
    with pytest.raises(ValueError, match="`width`"):
        check_theorem1(arch, x=x, width=1, seed=0)
    with pytest.raises(ValueError, match="`scales`"):
        check_theorem1(arch, x=x, scales=np.array([1e-2]), seed=0)
    with pytest.raises(ValueError, match="`x` must be finite"):
        check_theorem1(arch, x=jnp.array([1.0, jnp.inf, 0.0]), seed=0)
    with pytest.raises(ValueError, match=r"`x` must have shape \(3\)"):
        check_theorem1(arch, x=jnp.ones(4), seed=0)


def test_tables_1_and_3_are_views_of_one_registry():
    from nqf.architectures import TABLE1
    assert [r.key for r in TABLE1] == ["mlp", "cnn", "mha", "moe", "phase", "dln_square"]  # the paper's Table 1 order
    assert all(r in REGISTRY for r in TABLE1) and [r.table1 for r in TABLE1] == list(range(6))
    archs = [r.build() for r in TABLE1]
    assert archs == [r.build() for r in TABLE1]  # architectures compare by value
    assert [a.name for a in archs] == ["two-layer MLP", "single-layer CNN", "multi-head attention",
                                       "mixture of experts", "phase retrieval", "diagonal linear network"]
