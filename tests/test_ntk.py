"""The NTK from (M, mu), Eq. (245), against autodiff (Prop. 8), and its width scaling (App. B.6)."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import pytest

from nqf.updates import nqf_sgd, statistics, weight_outputs
from nqf.model import NQFData, empirical_ntk, ntk, ntk_change, ntk_learning_rate, ntk_trajectory, width_scaled
from helpers import BAD_INPUT, general_nqf_data


@pytest.mark.parametrize("general", [True, False])
def test_eq_245_equals_autodiff_ntk(general):
    As, Bs, gs, f0, _ = general_nqf_data()
    data = NQFData(As, _, gs=gs, Bs=Bs, f0=f0) if general else NQFData(As, _, f0=f0)
    for seed, d in ((1, 3), (2, 7)):
        W = jnp.asarray(np.random.default_rng(seed).normal(size=(As.shape[1], d)))
        M, mu = statistics(W)
        auto = empirical_ntk(lambda W: weight_outputs(W, data), W)
        closed = ntk(M, mu, data, d=d)
        assert closed.shape == (6, 6)
        np.testing.assert_allclose(closed, auto, rtol=1e-12, atol=1e-12 * float(jnp.max(jnp.abs(auto))))
        np.testing.assert_allclose(closed, closed.T, atol=1e-12)
        assert float(jnp.linalg.eigvalsh(closed)[0]) > -1e-10  # a Gram matrix
    if not general:  # ZGZ: only 4 Tr[A A' M] survives
        np.testing.assert_allclose(closed, 4 * jnp.einsum("aij,bjk,ki->ab", As, As, M), atol=1e-12)


def test_empirical_ntk_of_a_module_and_trajectory():
    xs = jnp.asarray(np.random.default_rng(3).normal(size=(5, 3)))
    W = jnp.asarray(np.random.default_rng(4).normal(size=(4, 6)))
    fn = lambda W: jax.vmap(lambda x: jnp.tanh(W[:3].T @ x) @ W[3])(xs)  # noqa: E731
    K = empirical_ntk(fn, W)
    J = jax.jacrev(fn)(W).reshape(5, -1)
    np.testing.assert_allclose(K, J @ J.T, atol=1e-12)
    As, Bs, gs, f0, ys = general_nqf_data(seed=5)
    data = NQFData(As, ys, gs=gs, Bs=Bs, f0=f0)
    Ws = jnp.asarray(np.random.default_rng(6).normal(size=(3, 4, 5)))
    Ms, mus = jax.vmap(statistics)(Ws)
    traj = ntk_trajectory((Ms, mus), data, d=5)
    assert traj.shape == (3, 6, 6)
    for t in range(3):
        np.testing.assert_allclose(traj[t], ntk(Ms[t], mus[t], data, d=5), atol=1e-12)
    ch = ntk_change(traj[0], traj)
    assert ch.shape == (3,) and float(ch[0]) == 0.0 and float(ch[1]) > 0.01
    assert float(ntk_change(traj[0], traj[0])) == 0.0


def test_width_scaling_lazy_vs_feature_learning():
    As, Bs, gs, f0, ys = general_nqf_data(seed=7, m=8, p=3)
    As, Bs = 0.3 * As, 0.3 * Bs
    data = NQFData(As, ys, gs=gs, Bs=Bs, f0=f0)
    scaled = width_scaled(data, d=16, alpha_A=0.5, alpha_B=1.5)
    np.testing.assert_allclose(scaled.As, As / 4)
    np.testing.assert_allclose(scaled.gs, gs / 4)
    np.testing.assert_allclose(scaled.Bs, Bs / 64)
    np.testing.assert_allclose(scaled.ys, ys)
    steps, eta = 150, 0.01
    full = jnp.tile(jnp.arange(8), (steps, 1))
    change = {}
    for name, (aA, aB) in {"lazy": (0.5, 1.5), "feature": (0.0, 1.0)}.items():
        for d in (256, 4096):
            scaled = width_scaled(data, d=d, alpha_A=aA, alpha_B=aB)
            W0 = jnp.asarray(np.random.default_rng(8).normal(size=(3, d)) / np.sqrt(d))
            st = nqf_sgd(statistics(W0), scaled, full, eta=eta, d=d)  # compiled once for every width
            T = ntk_trajectory((st.M[::15], st.mu[::15]), scaled, d=d)
            change[name, d] = float(ntk_change(T[0], T).max())
    ratio_lazy = change["lazy", 256] / change["lazy", 4096]
    assert 2.5 < ratio_lazy < 6.5  # d^(-1/2) over a factor 16 in width: 4
    assert change["feature", 4096] > 0.3 * change["feature", 256]
    assert change["feature", 4096] > 5 * change["lazy", 4096]


def test_ntk_learning_rate_is_a_fraction_of_the_stability_limit():
    As, Bs, gs, f0, ys = general_nqf_data(seed=9)
    data = NQFData(As, ys, gs=gs, Bs=Bs, f0=f0)
    W = 0.5 * jnp.asarray(np.random.default_rng(10).normal(size=(4, 8)))
    M, mu = statistics(W)
    lam = float(jnp.linalg.eigvalsh(ntk(M, mu, data, d=8))[-1])
    eta = ntk_learning_rate(M, mu, data, d=8)
    assert eta == float(f"{0.1 * 6 / lam:.2g}")
    assert abs(ntk_learning_rate(M, mu, data, d=8, fraction=1.0, digits=15) - 6 / lam) < 1e-12 * 6 / lam
    # the limit is real: GD on the linearised residuals, Delta <- (I - 2 eta Theta / m) Delta, diverges just above it
    K = np.asarray(ntk(M, mu, data, d=8))
    for f, grows in ((0.99, False), (1.01, True)):
        step = np.eye(6) - 2 * (f * 6 / lam) * K / 6
        assert (np.max(np.abs(np.linalg.eigvals(step))) > 1) == grows
    with pytest.raises(BAD_INPUT, match="fraction"):
        ntk_learning_rate(M, mu, data, d=8, fraction=0.0)


def test_bad_input_is_named():
    As, Bs, gs, f0, ys = general_nqf_data()
    data = NQFData(As, ys, gs=gs, Bs=Bs)
    M, mu = np.eye(4), np.zeros(4)
    with pytest.raises(BAD_INPUT, match="d"):
        ntk(M, mu, data, d=0)
    with pytest.raises(BAD_INPUT, match="mu"):
        ntk(M, np.zeros(3), data, d=2)
    with pytest.raises(TypeError, match="data"):
        ntk(M, mu, As, d=2)
    with pytest.raises(BAD_INPUT, match="M"):
        ntk(np.eye(3), np.zeros(3), data, d=2)
    with pytest.raises(BAD_INPUT, match="Theta"):
        ntk_change(np.eye(3), np.eye(4))
    with pytest.raises(BAD_INPUT, match="alpha_A"):
        width_scaled(data, d=4, alpha_A=-1.0, alpha_B=1.0)
    with pytest.raises(BAD_INPUT, match="gs"):
        width_scaled(NQFData(As, ys), d=4, alpha_A=1.0, alpha_B=1.0)
    with pytest.raises(BAD_INPUT, match="fn"):
        empirical_ntk(lambda W: jnp.sum(W), jnp.ones((2, 3)))
    with pytest.raises(BAD_INPUT, match="W"):
        empirical_ntk(lambda W: W.sum(axis=0), jnp.array([[np.nan, 1.0]]))
    with pytest.raises(BAD_INPUT, match="mus"):
        ntk_trajectory((np.stack([M] * 3), np.zeros((2, 4))), data, d=2)
