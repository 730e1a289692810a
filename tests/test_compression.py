"""Compression of a wide NQF (Thm 3) and the error below k_V + 1 (Cor. 3)."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf.training import BatchLoss, Record
from nqf.updates import statistics, weight_outputs
from nqf.updates import compress, compression_bound, compression_error, update_lipschitz
from nqf.updates._compression import structure_span
from nqf.model import NQFData
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
    return NQFData(As, ys, gs=gs, Bs=Bs, f0=f0)


def _outputs_traj(run, data):
    return jax.vmap(lambda M, mu: nqf.model.outputs(M, data, mu=mu))(run.M, run.mu)


def test_structure_span_finds_the_data_subspace():
    data = _low_rank_nqf(k=3)
    As, gs = data.As, data.gs
    V, k = structure_span(data)
    assert k == 3 and V.shape == (9, 3)
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-12)
    P = V @ V.T
    np.testing.assert_allclose(jnp.einsum("ij,mjk,kl->mil", P, As, P), As, atol=1e-12)
    np.testing.assert_allclose(gs @ P, gs, atol=1e-12)
    # g alone can add a direction
    extra = jnp.zeros_like(gs).at[0].set(jnp.eye(9)[0] - P[0])
    assert structure_span(NQFData(As, data.ys, gs=gs + extra, Bs=data.Bs))[1] == 4


def test_compressed_model_reproduces_outputs_at_every_step():
    data = _low_rank_nqf(seed=1)
    m, p = data.m, data.p
    d, eta, steps = 40, 0.01, 40
    W = 0.5 / np.sqrt(d) * jnp.asarray(np.random.default_rng(2).normal(size=(p, d)))
    c = compress(statistics(W), data, d=d, eta=eta)
    assert c.exact and c.k_V == 3 and c.d == 4 and c.W.shape == (p, 4)
    assert abs(c.eta - eta * d / 4) < 1e-15 and abs(c.scale - 4 / d) < 1e-15
    np.testing.assert_allclose(c.data.As, (4 / d) * data.As)
    np.testing.assert_allclose(c.data.gs, data.gs)
    batches = jnp.asarray(np.random.default_rng(3).integers(0, m, size=(steps, 3)))
    wide = nqf.updates.nqf_sgd(statistics(W), data, batches, eta=eta, d=d)
    small = nqf.updates.nqf_sgd((c.M, c.mu), c.data, batches, eta=c.eta, d=c.d)
    f_wide = _outputs_traj(wide, data)
    f_small = _outputs_traj(small, c.data)
    assert float(jnp.max(jnp.abs(f_wide - f_small))) < 1e-12
    assert float(jnp.max(jnp.abs(f_wide[-1] - f_wide[0]))) > 1e-2
    # the statistics are the projected, rescaled ones of Eq. (106)
    P = c.V @ c.V.T
    np.testing.assert_allclose(small.M[-1], (d / c.d) * P @ wide.M[-1] @ P, atol=1e-11)
    np.testing.assert_allclose(small.mu[-1], P @ wide.mu[-1], atol=1e-12)
    # training the compressed weights themselves (optax) gives the same outputs
    loss = lambda W, idx: jnp.mean((weight_outputs(W, c.data.subset(idx)) - c.data.ys[idx]) ** 2)  # noqa: E731
    rec = nqf.train(BatchLoss(loss), c.W, optax.sgd(c.eta), num_steps=steps,
                    data=nqf.training.Minibatches(jnp.arange(m), batches),
                    record=Record(lambda W: weight_outputs(W, c.data))).record
    assert float(jnp.max(jnp.abs(rec - f_wide))) < 1e-12
    # the same model in the k_V coordinates of the data subspace
    Wr, data_r = c.reduced()
    assert Wr.shape == (3, 4) and data_r.p == 3
    np.testing.assert_allclose(weight_outputs(Wr, data_r), f_small[0], atol=1e-12)


def test_truncated_compression_obeys_eq_237():
    rng = np.random.default_rng(4)
    m, p, d, eta, steps = 10, 4, 30, 0.01, 25
    sym = lambda a: 0.5 * (a + np.swapaxes(a, -1, -2))  # noqa: E731
    data = NQFData(sym(rng.normal(size=(m, p, p))), rng.normal(size=m))
    W = 0.4 * jnp.asarray(rng.normal(size=(p, d)))
    M, mu = statistics(W)
    batches = jnp.asarray(rng.integers(0, m, size=(steps, 3)))
    wide = nqf.updates.nqf_sgd((M, mu), data, batches, eta=eta, d=d)
    for dp in (2, 4):
        c = compress((M, mu), data, d=d, eta=eta, d_prime=dp)
        assert not c.exact and c.k_V == p and c.d == dp
        C = (d / dp) * (np.asarray(M) - np.outer(mu, mu) / d)
        lam = np.sort(np.linalg.eigvalsh(C))[::-1]
        assert abs(c.tail - np.sqrt(np.sum(lam[dp - 1:] ** 2))) < 1e-12
        small = nqf.updates.nqf_sgd((c.M, c.mu), c.data, batches, eta=c.eta, d=c.d)
        e = compression_error(wide.M, wide.mu, small.M, small.mu, scale=c.scale)
        assert e.shape == (steps + 1,)
        # the initial error is (d'/d) x the prefactor of Eq. (237), App. B.5
        assert abs(float(e[0]) - c.scale * c.tail) < 1e-12
        assert abs(float(e[0]) - c.initial_error) < 1e-12
        L = update_lipschitz(wide, (c.scale * small.M, small.mu), data, batches, eta=eta, d=d)
        assert L.shape == (steps,) and bool(jnp.all(L > 0))
        e_np = np.asarray(e)
        assert np.all(e_np[1:] <= e_np[:-1] * (1 + eta * np.asarray(L)) * (1 + 1e-9))
        bound = compression_bound(c.tail, eta=eta, L=float(L.max()), t=np.arange(steps + 1))
        assert np.all(e_np <= np.asarray(bound))
        logb = compression_bound(c.tail, eta=eta, L=float(L.max()), t=np.arange(steps + 1), log=True)
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
        (dict(eta=-1.0), "eta"),
        (dict(data=(np.stack([np.eye(4)] * 5), np.ones(5))), "data"),
    ],
)
def test_compress_rejects_bad_input(over, match):
    rng = np.random.default_rng(5)
    W = rng.normal(size=(4, 6))
    args = dict(M=W @ W.T, mu=W.sum(axis=1), data=NQFData(np.stack([np.eye(4)] * 5), np.ones(5)), d=6, eta=0.1,
                d_prime=None)
    args.update(over)
    with pytest.raises((*BAD_INPUT, TypeError), match=match):
        compress((args["M"], args["mu"]), args["data"], d=args["d"], eta=args["eta"], d_prime=args["d_prime"])


def test_error_helpers_reject_bad_input():
    Ms, mus = np.stack([np.eye(3)] * 4), np.zeros((4, 3))
    with pytest.raises(BAD_INPUT, match="mus_c"):
        compression_error(Ms, mus, Ms, np.zeros((3, 3)), scale=0.5)
    with pytest.raises(BAD_INPUT, match="scale"):
        compression_error(Ms, mus, Ms, mus, scale=0.0)
    with pytest.raises(BAD_INPUT, match="L"):
        compression_bound(1.0, eta=0.1, L=-1.0, t=np.arange(3))
    data = NQFData(np.stack([np.eye(3)] * 2), np.ones(2))
    with pytest.raises(BAD_INPUT, match="batches"):
        update_lipschitz((Ms, mus), (Ms, mus), data, np.zeros((9, 1), dtype=int), eta=0.1, d=3)
    with pytest.raises(BAD_INPUT, match="n_points"):
        update_lipschitz((Ms, mus), (Ms, mus), data, np.zeros((3, 1), dtype=int), eta=0.1, d=3, n_points=1)
    with pytest.raises(TypeError, match="data"):
        structure_span(np.ones((2, 3, 3)))
