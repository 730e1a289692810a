"""nqf.training.fig2_run: one Fig. 2 panel, seeds x initial scales in one vmapped run."""

import jax
import numpy as np
import pytest

from nqf.datasets import fig2_modules, low_rank_teacher
from nqf.training import fig2_run, optimizer

MLP = fig2_modules()[0]
TEACHER = low_rank_teacher(MLP, 60, key=jax.random.PRNGKey(0))
SIGMAS = (0.01, 0.2)


def _run(**kw):
    return fig2_run(MLP, TEACHER, optimizer("sgd", 0.05), 20, SIGMAS, key=jax.random.PRNGKey(1), record_every=5,
                    n_probe=10, **kw)


def test_seeds_add_a_leading_axis_and_each_lane_is_its_own_run():
    S, B, T, r = 3, len(SIGMAS), 5, TEACHER.s.size
    res = _run(seeds=S)
    assert res.module.shape == res.nqf.shape == (S, B, T, r)
    assert res.gap.shape == res.window.shape == (S, B)
    assert res.half_module.shape == res.half_nqf.shape == (S, B, r)
    assert res.loss_module.shape == res.loss_nqf.shape == (S, B, T)
    np.testing.assert_array_equal(res.steps, [0, 5, 10, 15, 20])
    # seed s is the draw jax.random.split(key, S)[s]: the same numbers as a run with that key alone
    for s, k in enumerate(jax.random.split(jax.random.PRNGKey(1), S)):
        one = fig2_run(MLP, TEACHER, optimizer("sgd", 0.05), 20, SIGMAS, key=k, record_every=5, n_probe=10)
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
    np.testing.assert_allclose(fast.gap, np.max(np.abs(fast.module - fast.nqf), axis=(-2, -1)))
    np.testing.assert_allclose(fast.learning_phase_gap(np.inf), fast.gap)
    assert np.all(fast.learning_phase_gap(0) <= fast.gap)
    np.testing.assert_allclose(fast.end_gap(), np.max(np.abs(fast.module[..., -1, :] - fast.nqf[..., -1, :]), axis=-1))


@pytest.mark.parametrize("seeds", [0, -1, 1.5])
def test_bad_seeds(seeds):
    with pytest.raises((TypeError, ValueError), match="seeds"):
        _run(seeds=seeds)
