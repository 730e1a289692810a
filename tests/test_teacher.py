"""General NQF data measured from a module's expansion (nqf.datasets.teacher_dataset)."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import pytest

from nqf.datasets import teacher_dataset
from nqf.datasets._general import subspace_inputs
from nqf.updates import compress, statistics, weight_outputs


def _module(W, x):
    k = x.shape[0]
    pre = W[k] @ jnp.tanh(W[:k].T @ x + 0.5) + jnp.sum(W[k + 1:].T @ x)
    return jax.nn.softplus(pre)


def test_teacher_dataset_is_the_modules_expansion():
    k, m = 3, 5
    td = teacher_dataset(_module, k, m, p=2 * k + 1, seed=0)
    data = td.data
    assert data.m == m and data.p == 2 * k + 1 and not td.zgz
    assert data.gs is not None and data.Bs is not None
    # the targets are the teacher's NQF outputs
    np.testing.assert_allclose(data.ys, weight_outputs(td.W_teacher, data), atol=1e-14)
    # the NQF is the module to second order: f(tW) - NQF(tW) = O(t^3)
    W = jnp.asarray(np.random.default_rng(1).normal(size=(2 * k + 1, 4)))
    gaps = []
    for t in (1e-2, 5e-3):
        module_out = jax.vmap(lambda x: _module(t * W, x))(td.xs)
        gaps.append(float(jnp.max(jnp.abs(module_out - weight_outputs(t * W, data)))))
    assert 6.0 < gaps[0] / gaps[1] < 10.0  # ratio 2^3 = 8


def test_subspace_inputs_have_the_requested_rank():
    rng = np.random.default_rng(2)
    xs = subspace_inputs(8, 30, rank=2, rng=rng)
    s = np.linalg.svd(xs, compute_uv=False)
    assert xs.shape == (30, 8) and s[1] > 1e-3 and s[2] < 1e-12
    td = teacher_dataset(_module, 6, 12, p=13, seed=3, rank=2)
    W = 0.3 * jnp.asarray(np.random.default_rng(4).normal(size=(13, 20)))
    assert compress(statistics(W), td.data, d=20, eta=0.1).k_V == 2 * 2 + 1  # Thm 3's k_V = 2r + 1
    with pytest.raises(ValueError, match="rank"):
        subspace_inputs(3, 4, rank=5, rng=rng)
