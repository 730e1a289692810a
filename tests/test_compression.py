"""Compression of a wide NQF (Thm 3) and the error below k_V + 1 (Cor. 3)."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf.dynamics import statistics, weight_outputs
from nqf.dynamics import compress, compression_bound, compression_error, structure_span, update_lipschitz
from helpers import BAD_INPUT


def _low_rank_nqf(seed=0, m=8, p=9, k=3):
    """General NQF whose g, A, B live in a random k-dimensional subspace of R^p."""
    rng = np.random.default_rng(seed)
    V = np.linalg.qr(rng.normal(size=(p, k)))[0]
    sym = lambda a: 0.5 * (a + np.swapaxes(a, -1, -2))  # noqa: E731
    As = np.einsum("pi,mij,qj->mpq", V, sym(rng.normal(size=(m, k, k))), V)
    Bs = 0.3 * np.einsum("pi,mij,qj->mpq", V, sym(rng.normal(size=(m, k, k))), V)
    gs = 0.5 * rng.normal(size=(m, k)) @ V.T
    f0 = 0.1 * rng.normal(size=m)
    ys = rng.normal(size=m)
    return [jnp.asarray(a) for a in (As, Bs, gs, f0, ys)]


def _outputs_traj(Ms, mus, As, gs, Bs, f0):
    return jax.vmap(lambda M, mu: nqf.outputs(M, As, mu=mu, gs=gs, Bs=Bs, f0=f0))(Ms, mus)


def test_structure_span_finds_the_data_subspace():
    As, Bs, gs, f0, ys = _low_rank_nqf(k=3)
    V, k = structure_span(As, gs, Bs)
    assert k == 3 and V.shape == (9, 3)
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-12)
    P = V @ V.T
    np.testing.assert_allclose(jnp.einsum("ij,mjk,kl->mil", P, As, P), As, atol=1e-12)
    np.testing.assert_allclose(gs @ P, gs, atol=1e-12)
    # g alone can add a direction
    extra = jnp.zeros_like(gs).at[0].set(jnp.eye(9)[0] - P[0])
    assert structure_span(As, gs + extra, Bs)[1] == 4


def test_compressed_model_reproduces_outputs_at_every_step():
    As, Bs, gs, f0, ys = _low_rank_nqf(seed=1)
    m, p = ys.shape[0], As.shape[1]
    d, eta, steps = 40, 0.01, 40
    W = 0.5 / np.sqrt(d) * jnp.asarray(np.random.default_rng(2).normal(size=(p, d)))
    M, mu = statistics(W)
    c = compress(M, mu, As, d=d, eta=eta, gs=gs, Bs=Bs)
    assert c.exact and c.k_V == 3 and c.d == 4 and c.W.shape == (p, 4)
    assert abs(c.eta - eta * d / 4) < 1e-15 and abs(c.scale - 4 / d) < 1e-15
    np.testing.assert_allclose(c.As, (4 / d) * As)
    batches = jnp.asarray(np.random.default_rng(3).integers(0, m, size=(steps, 3)))
    Ms, mus = nqf.nqf_sgd(M, mu, As, ys, batches, eta=eta, d=d, gs=gs, Bs=Bs, f0=f0)
    Mc, muc = nqf.nqf_sgd(c.M, c.mu, c.As, ys, batches, eta=c.eta, d=c.d, gs=c.gs, Bs=c.Bs, f0=f0)
    f_wide = _outputs_traj(Ms, mus, As, gs, Bs, f0)
    f_small = _outputs_traj(Mc, muc, c.As, c.gs, c.Bs, f0)
    assert float(jnp.max(jnp.abs(f_wide - f_small))) < 1e-12
    assert float(jnp.max(jnp.abs(f_wide[-1] - f_wide[0]))) > 1e-2
    # the statistics are the projected, rescaled ones of Eq. (106)
    P = c.V @ c.V.T
    np.testing.assert_allclose(Mc[-1], (d / c.d) * P @ Ms[-1] @ P, atol=1e-11)
    np.testing.assert_allclose(muc[-1], P @ mus[-1], atol=1e-12)
    # training the compressed weights themselves (optax) gives the same outputs
    loss = lambda W, idx: jnp.mean((weight_outputs(W, c.As[idx], gs=gs[idx], Bs=Bs[idx], f0=f0[idx]) - ys[idx]) ** 2)  # noqa: E731
    _, hist = nqf.train_weights(loss, c.W, optax.sgd(c.eta), steps, batches=batches,
                                record=lambda W: weight_outputs(W, c.As, gs=gs, Bs=Bs, f0=f0))
    assert float(jnp.max(jnp.abs(hist["record"] - f_wide))) < 1e-12
    # the same model in the k_V coordinates of the data subspace
    Wr, Ar, gr, Br = c.reduced()
    assert Wr.shape == (3, 4)
    np.testing.assert_allclose(weight_outputs(Wr, Ar, gs=gr, Bs=Br, f0=f0), f_small[0], atol=1e-12)


def test_truncated_compression_obeys_eq_237():
    rng = np.random.default_rng(4)
    m, p, d, eta, steps = 10, 4, 30, 0.01, 25
    sym = lambda a: 0.5 * (a + np.swapaxes(a, -1, -2))  # noqa: E731
    As = jnp.asarray(sym(rng.normal(size=(m, p, p))))
    ys = jnp.asarray(rng.normal(size=m))
    W = 0.4 * jnp.asarray(rng.normal(size=(p, d)))
    M, mu = statistics(W)
    batches = jnp.asarray(rng.integers(0, m, size=(steps, 3)))
    Ms, mus = nqf.nqf_sgd(M, mu, As, ys, batches, eta=eta, d=d)
    for dp in (2, 4):
        c = compress(M, mu, As, d=d, eta=eta, d_prime=dp)
        assert not c.exact and c.k_V == p and c.d == dp
        C = (d / dp) * (np.asarray(M) - np.outer(mu, mu) / d)
        lam = np.sort(np.linalg.eigvalsh(C))[::-1]
        assert abs(c.tail - np.sqrt(np.sum(lam[dp - 1:] ** 2))) < 1e-12
        Mc, muc = nqf.nqf_sgd(c.M, c.mu, c.As, ys, batches, eta=c.eta, d=c.d)
        e = compression_error(Ms, mus, Mc, muc, scale=c.scale)
        assert e.shape == (steps + 1,)
        # the initial error is (d'/d) x the prefactor of Eq. (237), App. B.5
        assert abs(float(e[0]) - c.scale * c.tail) < 1e-12
        assert abs(float(e[0]) - c.initial_error) < 1e-12
        L = update_lipschitz(Ms, mus, c.scale * Mc, muc, As, ys, batches, eta=eta, d=d)
        assert L.shape == (steps,) and bool(jnp.all(L > 0))
        e_np = np.asarray(e)
        assert np.all(e_np[1:] <= e_np[:-1] * (1 + eta * np.asarray(L)) * (1 + 1e-9))
        bound = compression_bound(c.tail, eta=eta, L=float(L.max()), steps=np.arange(steps + 1))
        assert np.all(e_np <= np.asarray(bound))
        logb = compression_bound(c.tail, eta=eta, L=float(L.max()), steps=np.arange(steps + 1), log=True)
        np.testing.assert_allclose(np.exp(logb), bound, rtol=1e-12)
    with pytest.raises(ValueError, match="exact"):
        c.reduced()


@pytest.mark.parametrize(
    "over, match",
    [
        (dict(d_prime=0), "d_prime"),
        (dict(d=0), "d"),
        (dict(d=2), "M"),  # M - mu mu^T / 2 is not PSD for these weights
        (dict(mu=np.ones(3)), "mu"),
        (dict(As=np.ones((5, 3, 3))), "As"),
        (dict(eta=-1.0), "eta"),
        (dict(gs=np.ones((5, 2))), "gs"),
    ],
)
def test_compress_rejects_bad_input(over, match):
    rng = np.random.default_rng(5)
    W = rng.normal(size=(4, 6))
    args = dict(M=W @ W.T, mu=W.sum(axis=1), As=np.stack([np.eye(4)] * 5), d=6, eta=0.1, gs=None, d_prime=None)
    args.update(over)
    with pytest.raises(BAD_INPUT, match=match):
        compress(args["M"], args["mu"], args["As"], d=args["d"], eta=args["eta"], gs=args["gs"],
                 d_prime=args["d_prime"])


def test_error_helpers_reject_bad_input():
    Ms, mus = np.stack([np.eye(3)] * 4), np.zeros((4, 3))
    with pytest.raises(BAD_INPUT, match="mus_c"):
        compression_error(Ms, mus, Ms, np.zeros((3, 3)), scale=0.5)
    with pytest.raises(BAD_INPUT, match="scale"):
        compression_error(Ms, mus, Ms, mus, scale=0.0)
    with pytest.raises(BAD_INPUT, match="L"):
        compression_bound(1.0, eta=0.1, L=-1.0, steps=np.arange(3))
    As, ys = np.stack([np.eye(3)] * 2), np.ones(2)
    with pytest.raises(BAD_INPUT, match="batches"):
        update_lipschitz(Ms, mus, Ms, mus, As, ys, np.zeros((9, 1), dtype=int), eta=0.1, d=3)
    with pytest.raises(BAD_INPUT, match="n_points"):
        update_lipschitz(Ms, mus, Ms, mus, As, ys, np.zeros((3, 1), dtype=int), eta=0.1, d=3, n_points=1)
    with pytest.raises(BAD_INPUT, match="As"):
        structure_span(np.ones((2, 3, 4)))
