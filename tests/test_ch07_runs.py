"""notebooks/ch07_runs.py: Chapter 7's GD runs (Fourier MLP and its NQF, the raw tanh MLP, all modes of one-hot data)
as runs of nqf.training.train."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nqf import datasets
from nqf.architectures import raw_tanh_mlp
from helpers import count_compilations
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch07_runs import all_modes_gd, fourier_gd, fourier_nqf_gd, raw_mlp_gd  # noqa: E402

RUN = dict(learning_rate=0.02, num_steps=40, record_every=10)


def test_fourier_gd_folded_and_eigenbasis_forms_agree():
    P = 8
    d = datasets.fourier_dataset(P, 32, beta=1.5, theta=0.5, normalise=False)
    p0 = 0.1 * normal(jax.random.PRNGKey(0), (1, 2, P))
    s = np.arange(1, P + 1)[None] ** -0.5
    L1, u1 = fourier_gd(p0, d.xs, d.ys[None], s, pre=1.0, **RUN)
    assert L1.shape == (1, 5) and u1.shape == (1, 5, P)
    xh, yh, w = d.folded()
    L2, u2 = fourier_gd(p0, xh, yh[None], s, pre=1.0, weights=w, **RUN)
    np.testing.assert_allclose(L1, L2, rtol=1e-12)
    np.testing.assert_allclose(u1, u2, rtol=1e-10, atol=1e-15)
    L3, u3 = fourier_gd(p0, d.xs, d.ys[None], s, pre=1.0, nqf=True, **RUN)
    L4, u4 = fourier_nqf_gd(p0, d.b[None], s, **RUN)
    np.testing.assert_allclose(L3, L4, rtol=1e-10)
    np.testing.assert_allclose(u3, u4, rtol=1e-10, atol=1e-15)


def test_raw_mlp_gd_is_gradient_descent_on_its_mse():
    xs, ys = jnp.linspace(0.0, 1.0, 9), jnp.sin(3 * jnp.linspace(0.0, 1.0, 9))
    p = {"u": jnp.linspace(-2.0, 2.0, 4), "b": jnp.zeros(4), "v": 0.1 * jnp.ones(4)}
    L = raw_mlp_gd(p, xs, ys, learning_rate=0.1, num_steps=6, record_every=3)
    loss = lambda p: jnp.mean((raw_tanh_mlp(p, xs) - ys) ** 2)  # noqa: E731
    ref = []
    for k in range(7):
        if k % 3 == 0:
            ref.append(loss(p))
        p = jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, jax.grad(loss)(p))
    np.testing.assert_allclose(L, ref, rtol=1e-12)


def test_all_modes_gd_is_the_scalar_recursion_of_each_mode():
    """w_k <- w_k - (4 eta / K) a_k (a_k w_k^2 - y_k) w_k (the notebook's hand-written scan, which this replaces)."""
    K, eta = 50, 0.01
    a, y = np.linspace(0.5, 2.0, K), np.linspace(1.0, 0.1, K)
    w0 = np.full(K, 1e-3)
    L = all_modes_gd(w0, a, y, learning_rate=eta, num_steps=300, record_every=100)
    w, ref = w0.copy(), []
    for k in range(301):
        if k % 100 == 0:
            ref.append(np.mean((a * w**2 - y) ** 2))
        w = w - (4 * eta / K) * a * (a * w**2 - y) * w
    np.testing.assert_allclose(L, ref, rtol=1e-12)


def test_fourier_nqf_gd_compiles_once_for_new_data_and_rate():
    P = 4
    p0 = 0.1 * jnp.ones((2, 2, P))
    b, c = jnp.ones((2, P)), jnp.linspace(0.5, 1.0, P)[None].repeat(2, 0)
    p2 = 2 * p0
    fourier_nqf_gd(p0, b, c, learning_rate=0.01, num_steps=20, record_every=10)
    with count_compilations() as seen:
        fourier_nqf_gd(p2, b, c, learning_rate=0.02, num_steps=20, record_every=10)
    assert seen == []


def test_fourier_nqf_gd_records_the_loss_alone_on_request():
    P = 4
    p0 = 0.1 * jnp.ones((2, 2, P))
    b, c = jnp.ones((2, P)), jnp.linspace(0.5, 1.0, P)[None].repeat(2, 0)
    L, _ = fourier_nqf_gd(p0, b, c, learning_rate=0.01, num_steps=20, record_every=10)
    L2 = fourier_nqf_gd(p0, b, c, products=False, learning_rate=0.01, num_steps=20, record_every=10)
    np.testing.assert_array_equal(np.asarray(L), np.asarray(L2))
