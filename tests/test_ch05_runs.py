"""notebooks/ch05_runs.py (Chapters 5 and 7): full-batch GD on W recording the features, one run of nqf.training.train."""

import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import nqf
from nqf import NQFData, datasets
from nqf.datasets._solvable import orthogonal_features_dataset
from helpers import count_compilations

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch05_runs import full_batch_gd  # noqa: E402


def test_full_batch_gd_records_features_and_residuals():
    r = jnp.array([1.0, 0.5])
    As, ys = orthogonal_features_dataset(r, C_kk=1.0, seed=0)
    data = NQFData(As, ys)
    run = full_batch_gd(1e-2 * jnp.eye(2), data, learning_rate=0.01, num_steps=50)
    assert run.z.shape == (51, 2) and run.residuals.shape == (51, 2)
    np.testing.assert_allclose(run.residuals[0], np.asarray(nqf.model.residuals(1e-4 * jnp.eye(2), data)), atol=1e-15)
    assert run.offdiag == 0.0
    with pytest.raises(ValueError, match="ZGZ"):
        full_batch_gd(jnp.eye(2), NQFData(As, ys, gs=jnp.ones((2, 2))), learning_rate=0.1, num_steps=2)


def test_full_batch_gd_equals_the_exact_discrete_nqf_update():
    d = datasets.fig4_dataset()
    W0 = 0.01 * np.random.default_rng(0).normal(size=(12, 3))
    run = full_batch_gd(W0, d.data, learning_rate=0.05, num_steps=200)
    closed = nqf.updates.nqf_sgd((W0 @ W0.T, W0.sum(1)), d.data, jnp.tile(jnp.arange(4), (200, 1)), eta=0.05, d=3)
    np.testing.assert_allclose(run.z, np.einsum("tii->ti", np.asarray(closed.M)), rtol=1e-10, atol=1e-16)
    np.testing.assert_allclose(run.t, 0.05 * np.arange(201))
    assert run.offdiag > 0  # a dense W(0) gives off-diagonal entries
    # in the basis P of the features' eigenvectors the same run reads z_k = (P^T W W^T P)_kk
    P = np.linalg.qr(np.random.default_rng(1).normal(size=(12, 12)))[0]
    rot = full_batch_gd(W0, d.data, learning_rate=0.05, num_steps=200, P=P)
    np.testing.assert_allclose(rot.z[-1], np.diag(P.T @ np.asarray(closed.M[-1]) @ P), rtol=1e-9, atol=1e-14)
    with pytest.raises((TypeError, ValueError)):
        full_batch_gd(np.ones((3, 2)), d.data, learning_rate=0.1, num_steps=3)  # W0 of the wrong shape


def test_full_batch_gd_compiles_once_for_new_data_and_rate():
    rng = np.random.default_rng(0)
    As = rng.normal(size=(10, 3, 3))
    data = nqf.NQFData(jnp.asarray(As + np.swapaxes(As, 1, 2)), jnp.asarray(rng.normal(size=10)))
    full_batch_gd(0.1 * jnp.eye(3), data, learning_rate=0.01, num_steps=5)
    with count_compilations() as seen:
        full_batch_gd(0.2 * jnp.eye(3), data, learning_rate=0.02, num_steps=5)
    assert seen == []
