"""The feed-forward form of a structure matrix, Eqs. (17)-(19)."""

import jax
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp    # noqa: E402
import numpy as np    # noqa: E402
import pytest    # noqa: E402
from jaxtyping import TypeCheckError    # noqa: E402

from nqf.structure import feedforward_splits
from nqf.structure._feedforward import FeedforwardForm, representation, split_weights
from nqf.structure import effective_matrix, feedforward_form, feedforward_output, split_structure
from nqf.architectures import two_layer_mlp  # noqa: E402
from nqf.architectures._base import feedforward_structure  # noqa: E402
from nqf.architectures._modules import phase_retrieval  # noqa: E402
from helpers import BAD_INPUT

KEY = jax.random.PRNGKey(0)


def test_split_structure_inverts_eq17_also_per_output():
    C = normal(KEY, (3, 4))
    np.testing.assert_allclose(split_structure(feedforward_structure(C), 3), C, rtol=1e-15)
    Cs = normal(KEY, (2, 3, 4))  # one C^(m) per output (App. B.2)
    np.testing.assert_allclose(split_structure(feedforward_structure(Cs), 3), Cs, rtol=1e-15)


def test_output_effective_matrix_and_representation():
    n1, n2, d = 3, 2, 5
    kC, kW = jax.random.split(KEY)
    C = normal(kC, (n1, n2))
    W = normal(kW, (n1 + n2, d))
    A = feedforward_structure(C)
    Z1, Z2 = split_weights(W, n1)
    np.testing.assert_array_equal(Z1, W[:n1])  # neurons are columns: the split is along rows
    np.testing.assert_array_equal(Z2, W[n1:])
    E = effective_matrix(W, n1)
    assert E.shape == (n2, n1)
    np.testing.assert_allclose(E, Z2 @ Z1.T, rtol=1e-15)
    tr_MA = jnp.trace(W @ W.T @ A)
    np.testing.assert_allclose(feedforward_output(W, C), tr_MA, rtol=1e-13)  # Eq. (18)
    h = representation(W, C)
    assert h.shape == (d, n2)
    np.testing.assert_allclose(h, Z1.T @ C, rtol=1e-15)  # Eq. (19)
    np.testing.assert_allclose(jnp.trace(Z2 @ h), tr_MA, rtol=1e-13)
    Cs = jnp.stack([C, -2.0 * C])
    np.testing.assert_allclose(feedforward_output(W, Cs), jnp.array([1.0, -2.0]) * tr_MA, rtol=1e-13)
    assert representation(W, Cs).shape == (2, d, n2)


def test_feedforward_form_of_a_vector_mlp():
    mlp = two_layer_mlp(4, outputs=3)
    x = mlp.sample_input(KEY)
    W = 0.1 * normal(jax.random.PRNGKey(1), (mlp.p, 6))
    form = feedforward_form(mlp, x, W, 4)
    assert isinstance(form, FeedforwardForm)
    assert form.C.shape == (3, 4, 3) and form.effective.shape == (3, 4) and form.h.shape == (3, 6, 3)
    np.testing.assert_allclose(form.output, jnp.einsum("mij,ik,jk->m", mlp.structure(x), W, W), rtol=1e-13)
    np.testing.assert_allclose(form.effective @ x, form.output, rtol=1e-13)  # a linear network V U^T x
    for m in range(3):  # column m of h^(m) is the hidden pre-activation U^T x
        np.testing.assert_allclose(form.h[m][:, m], W[:4].T @ x, rtol=1e-14)
    np.testing.assert_allclose(form.Z2 @ jnp.tanh(form.h[0][:, 0]), mlp.apply(W, x), rtol=1e-13)


def test_not_feedforward_is_reported():
    A = phase_retrieval(3).structure(jnp.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"not of the feed-forward form of Eq. \(17\) at n1 = 1"):
        split_structure(A, 1)
    C = jnp.ones((2, 2))
    with pytest.raises(ValueError, match="not of the feed-forward form"):
        split_structure(feedforward_structure(C), 1)  # the split is at n1 = 2
    mlp = two_layer_mlp(3)
    with pytest.raises(ValueError, match="feed-forward form"):
        feedforward_form(mlp, jnp.ones(3), jnp.ones((4, 2)), 2)


def test_bad_input_names_the_argument():
    A = feedforward_structure(jnp.ones((2, 3)))
    for n1 in (0, 5, 2.0, True):
        with pytest.raises(BAD_INPUT, match="n1"):
            split_structure(A, n1)
    with pytest.raises(BAD_INPUT, match="`A`|A"):
        split_structure(jnp.ones((3, 4)), 1)
    with pytest.raises(ValueError, match="`A` must be finite"):
        split_structure(A.at[0, 3].set(jnp.nan), 2)
    with pytest.raises(BAD_INPUT, match="`W`|W"):
        split_weights(jnp.ones(5), 2)
    with pytest.raises(ValueError, match="n1"):
        split_weights(jnp.ones((5, 2)), 5)
    with pytest.raises(ValueError, match=r"`W` must have shape \(n1 \+ n2, d\) = \(5, \*\)"):
        feedforward_output(jnp.ones((4, 2)), jnp.ones((2, 3)))
    with pytest.raises(BAD_INPUT, match="`C`|C"):
        representation(jnp.ones((4, 2)), jnp.ones(4))
    mlp = two_layer_mlp(3)
    with pytest.raises(ValueError, match=r"`W` must have shape \(p, d\) = \(4, \*\)"):
        feedforward_form(mlp, jnp.ones(3), jnp.ones((5, 2)), 3)
    with pytest.raises(BAD_INPUT, match="arch"):
        feedforward_form(lambda W, x: 0.0, jnp.ones(3), jnp.ones((4, 2)), 3)


def test_feedforward_splits_lists_every_split_of_eq17():
    C = normal(KEY, (3, 4))
    assert feedforward_splits(feedforward_structure(C)) == [3]
    assert feedforward_splits(jnp.outer(jnp.arange(1.0, 4.0), jnp.arange(1.0, 4.0))) == []  # x x^T: not feed-forward
    one_hot = jnp.zeros((3, 4)).at[1, 2].set(1.0)  # e_i e_j^T: any split between row 1 and column 2
    assert feedforward_splits(feedforward_structure(one_hot)) == [2, 3, 4, 5]
    assert feedforward_splits(feedforward_structure(jnp.stack([C, 2 * C]))) == [3]  # per output (App. B.2)
    with pytest.raises(BAD_INPUT, match="`A`|A"):
        feedforward_splits(jnp.ones((3, 4)))
