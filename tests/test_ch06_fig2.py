"""notebooks/ch06_fig2.py: one Fig. 2 panel, seeds x initial scales in one compare_with_nqf (vmapped lanes)."""

import sys
from pathlib import Path

import jax
import numpy as np

import nqf
from nqf.datasets import fig2_modules, low_rank_teacher
from nqf.training import optimizer
from helpers import count_compilations

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch06_fig2 import fig2_run, half_times  # noqa: E402

MLP = fig2_modules(key=jax.random.PRNGKey(20))[0]
TEACHER = low_rank_teacher(MLP, 60, key=jax.random.PRNGKey(0))
SIGMAS = (0.01, 0.2)


def _run(**kw):
    return fig2_run(MLP, TEACHER, optimizer("sgd", 0.05), num_steps=20, sigmas=SIGMAS, record_every=5, n_probe=10,
                    **{"key": jax.random.PRNGKey(1), **kw})


def test_seeds_add_a_leading_axis_and_each_lane_is_its_own_run():
    S, B, T, r = 3, len(SIGMAS), 5, TEACHER.s.size
    res = _run(seeds=S)
    assert res.module.shape == res.nqf.shape == (S, B, T, r)
    assert res.half_module.shape == res.half_nqf.shape == (S, B, r)
    assert res.loss_module.shape == res.loss_nqf.shape == (S, B, T)
    np.testing.assert_array_equal(res.steps, [0, 5, 10, 15, 20])
    # seed s is the draw jax.random.split(key, S)[s]: the same numbers as a run with that key alone
    for s, k in enumerate(jax.random.split(jax.random.PRNGKey(1), S)):
        one = _run(key=k)
        assert one.module.shape == (B, T, r)
        np.testing.assert_allclose(res.module[s], one.module, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(res.nqf[s], one.nqf, rtol=1e-10, atol=1e-14)
    # the seeds are independent draws: their starts differ; the scales share Z within a seed
    assert np.max(np.abs(res.nqf[0, 1] - res.nqf[1, 1])) > 1e-6
    # L(W) is quadratic in W, so at step 0 the scales of one seed differ by (sigma_2 / sigma_1)^2 exactly
    np.testing.assert_allclose(res.module[:, 1, 0] / res.module[:, 0, 0], (SIGMAS[1] / SIGMAS[0]) ** 2, rtol=1e-10)


def test_feature_form_equals_the_matrix_free_nqf_and_derived_fields():
    fast, slow = _run(seeds=2), _run(seeds=2, nqf_form="matrix-free")
    np.testing.assert_allclose(fast.nqf, slow.nqf, rtol=1e-10, atol=1e-13)
    np.testing.assert_array_equal(fast.module, slow.module)
    gap = np.max(np.abs(fast.module - fast.nqf), axis=(-2, -1))
    np.testing.assert_allclose(fast.learning_phase_gap(np.inf), gap)
    assert np.all(fast.learning_phase_gap(0) <= gap)
    np.testing.assert_allclose(fast.end_gap(), np.max(np.abs(fast.module[..., -1, :] - fast.nqf[..., -1, :]), axis=-1))
    np.testing.assert_array_equal(fast.half_nqf, half_times(fast.steps, fast.nqf))


def test_half_times_and_a_diverged_lane_counts_as_parted():
    steps = np.array([0, 10, 20])
    ratio = np.array([[[0.1, 0.0], [0.6, 0.2], [0.9, 0.4]]])  # (1, T, r)
    np.testing.assert_array_equal(half_times(steps, ratio), [[10.0, np.inf]])
    res = _run()
    bad = res._replace(module=np.where(res.steps[:, None] >= 10, np.nan, res.module))
    assert np.all(np.isinf(bad.end_gap())) and np.all(np.isinf(bad.learning_phase_gap(20)))


def test_fig2_run_compiles_once_for_new_data_and_rate():
    t1 = low_rank_teacher(MLP, 20, key=jax.random.PRNGKey(1))
    t2 = low_rank_teacher(MLP, 20, key=jax.random.PRNGKey(2))
    fig2_run(MLP, t1, nqf.optimizer("sgd", 0.05), num_steps=10, sigmas=(0.01, 0.1), key=jax.random.PRNGKey(0), n_probe=10)
    with count_compilations() as seen:
        fig2_run(MLP, t2, nqf.optimizer("sgd", 0.02), num_steps=10, sigmas=(0.01, 0.1), key=jax.random.PRNGKey(3),
                 n_probe=10)
    assert seen == []
