"""notebooks/ch03_runs.py (Chapter 3): the runs of Theorems 2-3, Corollary 3 and App. B.6 on a tiny general NQF."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

import nqf
from nqf.datasets import teacher_dataset
from nqf.updates import nqf_sgd, same_statistics, statistics, weight_outputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch03_runs import minibatch_mse, ntk_width_sweep, output_trainer, pair_trainer, truncation_sweep  # noqa: E402


def _module(W, x):  # the chapter's module without ZGZ: a biased tanh layer, a skip path, a softplus readout
    k = x.shape[0]
    return jax.nn.softplus(W[k] @ jnp.tanh(W[:k].T @ x + 0.5) + jnp.sum(W[k + 1:].T @ x))


def _data(k=2, m=6, seed=0):
    return teacher_dataset(_module, k, m, p=2 * k + 1, seed=seed).data


def test_minibatch_mse_is_the_papers_loss_without_a_half():
    data = _data()
    W = 0.3 * jnp.asarray(np.random.default_rng(0).normal(size=(data.p, 4)))
    idx = jnp.array([0, 2, 3])
    batch = data.subset(idx)
    expected = jnp.mean((weight_outputs(W, batch) - batch.ys) ** 2)
    np.testing.assert_allclose(float(minibatch_mse(data)(W, idx)), float(expected), rtol=1e-15)


def test_pair_trainer_keeps_equal_statistics_equal_and_matches_the_closed_update():
    data = _data()
    Wa = 0.3 * jnp.asarray(np.random.default_rng(1).normal(size=(data.p, 4)))
    Wb = same_statistics(Wa, seed=2)
    batches = jnp.asarray(np.random.default_rng(3).integers(0, 6, size=(10, 3)))
    (Ma, mua), (Mb, mub), Ws = pair_trainer(data)((Wa, Wb), optax.sgd(0.05), batches)
    assert Ma.shape == (11, data.p, data.p) and mua.shape == (11, data.p) and Ws.shape == (11, data.p, 4)
    np.testing.assert_allclose(np.asarray(Ws[0]), np.asarray(Wa))
    np.testing.assert_allclose(np.asarray(Ma), np.asarray(Mb), atol=1e-12)
    np.testing.assert_allclose(np.asarray(mua), np.asarray(mub), atol=1e-12)
    closed = nqf_sgd(statistics(Wa), data, batches, eta=0.05, d=4)
    np.testing.assert_allclose(np.asarray(Ma), np.asarray(closed.M), atol=1e-12)


def test_output_trainer_records_the_training_outputs():
    data = _data()
    W = 0.3 * jnp.asarray(np.random.default_rng(4).normal(size=(data.p, 5)))
    batches = jnp.asarray(np.random.default_rng(5).integers(0, 6, size=(4, 2)))
    f, M, mu = output_trainer(data)(W, optax.sgd(0.05), batches)
    assert f.shape == (5, 6) and M.shape == (5, data.p, data.p) and mu.shape == (5, data.p)
    np.testing.assert_allclose(np.asarray(f[0]), np.asarray(weight_outputs(W, data)), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(f[-1]), np.asarray(nqf.model.outputs(M[-1], data, mu=mu[-1])), rtol=1e-10)


def test_truncation_sweep_is_exact_at_k_v_plus_one_and_below_the_bound_elsewhere():
    data = _data(k=1, m=8)
    W = 0.5 / np.sqrt(16) * jnp.asarray(np.random.default_rng(6).normal(size=(data.p, 16)))
    batches = jnp.asarray(np.random.default_rng(7).integers(0, 8, size=(12, 4)))
    sweep = truncation_sweep(statistics(W), data, batches, eta=0.05, d=16)
    assert list(sweep) == list(range(2, data.p + 2))
    exact = [dp for dp, r in sweep.items() if r["exact"]]
    assert exact and all(float(sweep[dp]["e"].max()) < 1e-10 for dp in exact)
    for dp, r in sweep.items():
        assert r["e"].shape == (13,)
        if not r["exact"]:
            assert r["ratio"] <= 1.0 and r["ratio_step"] <= 1.0 + 1e-9 and r["L"] > 0


def test_ntk_width_sweep_one_row_per_width():
    rows = ntk_width_sweep(_data(), [4, 16], alpha_A=0.5, alpha_B=1.5, eta=0.01, T=0.4)
    assert [r["d"] for r in rows] == [4, 16]
    assert all(set(r) == {"d", "change", "loss_drop", "ntk0"} and r["change"] >= 0 for r in rows)
