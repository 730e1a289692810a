"""notebooks/ch06_fig2.py: one Fig. 2 panel, seeds x initial scales in one compare_with_nqf (vmapped lanes)."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nqf
from nqf.training import optimizer
from helpers import count_compilations

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch06_modules import fig2_modules, low_rank_teacher  # noqa: E402
from ch06_fig2 import (_outputs, fig2_lanes, half_times, judged_modes,  # noqa: E402
                       learning_phase_end, nqf_seed_to_seed, order_stat, seed_directions, switch_on_band,
                       switch_on_stat, window_growth)

MLP = fig2_modules(key=jax.random.PRNGKey(20))[0]
TEACHER = low_rank_teacher(MLP, 60, key=jax.random.PRNGKey(0))


def test_half_times_first_recorded_step_at_one_half_per_mode():
    steps = np.array([0, 10, 20])
    ratio = np.array([[[0.1, 0.0], [0.6, 0.2], [0.9, 0.4]]])  # (1, T, r)
    np.testing.assert_array_equal(half_times(steps, ratio), [[10.0, np.inf]])


def test_fig2_lanes_compiles_once_for_new_data_rate_and_seeds():
    t1 = low_rank_teacher(MLP, 20, key=jax.random.PRNGKey(1))
    t2 = low_rank_teacher(MLP, 20, key=jax.random.PRNGKey(2))
    fig2_lanes(MLP, t1, nqf.optimizer("sgd", 0.05), num_steps=10, seeds=[0, 1], sigmas=[0.01, 0.1], n_probe=10)
    with count_compilations() as seen:
        fig2_lanes(MLP, t2, nqf.optimizer("sgd", 0.02), num_steps=10, seeds=[5, 6], sigmas=[0.1, 0.01], n_probe=10)
    assert seen == []


def test_the_feature_form_is_checked_and_outputs_at_zero_compiled():
    cnn = fig2_modules(key=jax.random.PRNGKey(20))[1]
    t = low_rank_teacher(cnn, 100, key=jax.random.PRNGKey(3))
    run = fig2_lanes(cnn, t, optimizer("sgd", 0.008), num_steps=2, seeds=[0], sigmas=[0.01], n_probe=10)
    assert run.comparison.form_gap < 1e-12  # the linear feature form is the matrix-free NQF (at W(0) and a random W)
    # a zero W passed as an argument: jit(vmap(apply)) with a constant zero W gave NaN for 100 CNN inputs (XLA, CPU)
    zero = np.zeros((cnn.arch.p, cnn.d))
    eager = jax.vmap(lambda x: cnn.arch.apply(jnp.asarray(zero), x))(t.xs)
    np.testing.assert_array_equal(_outputs(cnn.arch, zero, np.asarray(t.xs)), eager)


def _lanes(seeds, sigmas, **kw):
    return fig2_lanes(MLP, TEACHER, optimizer("sgd", 0.05), num_steps=20, seeds=seeds, sigmas=sigmas, record_every=5,
                      n_probe=10, **kw)


def test_lanes_are_named_by_seed_and_a_seed_is_the_same_draw_in_every_run():
    run = _lanes([3, 4, 3], [0.01, 0.01, 0.2])
    T, r = 5, TEACHER.s.size
    assert run.module.shape == run.nqf.shape == (3, T, r)
    assert run.out_module.shape == run.out_nqf.shape == (3, T, 10, 8)
    np.testing.assert_array_equal(run.lanes([3], 0.2), [2])
    np.testing.assert_array_equal(run.lanes([4, 3], 0.01), [1, 0])
    Z = seed_directions(MLP, [3])[0]
    np.testing.assert_array_equal(Z, jax.random.normal(jax.random.PRNGKey(3), (MLP.arch.p, MLP.d)))
    alone = _lanes([4], [0.01])
    np.testing.assert_allclose(run.module[1], alone.module[0], rtol=1e-10, atol=1e-14)
    # seed 3 at both scales: L(W) is quadratic in W, so at step 0 the ratio of scales is (0.2 / 0.01)^2
    np.testing.assert_allclose(run.module[2, 0] / run.module[0, 0], 400.0, rtol=1e-10)
    assert not run.diverged.any()


def test_a_diverging_lane_is_flagged_and_the_others_are_not():
    """A learning rate that blows up the large start only: that lane is diverged (its batch losses or probe
    outputs turn non-finite), the small-start lanes are not."""
    with np.errstate(over="ignore", invalid="ignore"):
        run = fig2_lanes(MLP, TEACHER, optimizer("sgd", 0.3), num_steps=40, seeds=[0, 0], sigmas=[0.01, 3.0],
                         record_every=5, n_probe=10)
    assert run.diverged.tolist() == [False, True]
    assert np.isnan(run.sv_gap(np.inf)[1]) and np.isfinite(run.sv_gap(np.inf)[0])  # set aside by the gaps


def test_gaps_probe_gap_and_the_nqf_seed_to_seed_thresholds():
    run = _lanes([0, 1, 2], [0.01] * 3)
    sv = np.max(np.abs(run.module - run.nqf), axis=(-2, -1))
    np.testing.assert_allclose(run.sv_gap(np.inf), sv)
    assert np.all(run.sv_gap(5) <= sv)
    d = run.out_module - run.out_nqf
    np.testing.assert_allclose(run.probe_gap(), np.sqrt(np.sum(d ** 2, axis=(-2, -1))) / run.signal)
    np.testing.assert_allclose(run.output_gap(np.inf), np.max(run.probe_gap(), axis=-1))
    f0 = jax.vmap(lambda x: MLP.arch.apply(jnp.zeros((MLP.arch.p, MLP.d)), x))(TEACHER.xs[:10])
    assert run.signal == pytest.approx(float(np.linalg.norm(np.asarray(TEACHER.ys[:10] - f0))))
    g_sv, g_out = nqf_seed_to_seed(run, [0, 1, 2], 0.01, np.inf)
    pairs = [(0, 1), (0, 2), (1, 2)]
    assert g_sv == pytest.approx(np.mean([np.max(np.abs(run.nqf[a] - run.nqf[b])) for a, b in pairs]))
    assert g_out == pytest.approx(np.mean([np.max(np.sqrt(np.sum((run.out_nqf[a] - run.out_nqf[b]) ** 2, axis=(-2, -1))))
                                           for a, b in pairs]) / run.signal)
    # a diverged lane has no gap (NaN: judge sets it aside)
    bad = run._replace(diverged=np.array([False, True, False]))
    assert np.isnan(bad.sv_gap(20)[1]) and np.isnan(bad.output_gap(20)[1]) and np.isfinite(bad.sv_gap(20)[0])


def test_switch_on_band_judged_modes_and_learning_phase_end():
    h = np.array([[10.0, 20.0, 30.0, np.inf], [12.0, 20.0, 34.0, 90.0], [14.0, 20.0, 32.0, 95.0]])
    reached = np.all(np.isfinite(h), axis=0)
    sd = np.std(h[:, :3], axis=0, ddof=1)
    tau = switch_on_band(h, reached)
    assert tau == pytest.approx(2 * np.sqrt(np.mean(sd ** 2)))
    np.testing.assert_array_equal(judged_modes(h, 100, tau), [True, True, True, False])
    np.testing.assert_array_equal(judged_modes(h, 33, tau), [True, True, False, False])
    assert learning_phase_end(h, [True, True, True, False]) == pytest.approx(32.0)


def test_switch_on_and_order_statistics_per_seed():
    judged = np.array([True, True, True, False])
    hm = np.array([[10.0, 21.0, 30.0, 50.0], [10.0, 20.0, np.inf, 50.0]])
    hn = np.array([[10.0, 20.0, 33.0, 99.0], [11.0, 20.0, 30.0, 50.0]])
    np.testing.assert_array_equal(switch_on_stat(hm, hn, judged, never=41.0), [3.0, 11.0])  # inf -> never
    np.testing.assert_array_equal(order_stat(hm, judged, never=41.0), [-9.0, -10.0])
    tied = np.array([[10.0, 10.0, 30.0, 0.0]])
    assert order_stat(tied, judged, never=41.0)[0] == 0.0
    assert order_stat(np.array([[20.0, 10.0, 30.0, 0.0]]), judged, never=41.0)[0] == 10.0


def test_window_growth_leaves_out_pairs_censored_at_the_same_end():
    never = 401.0
    w = np.array([[never, never, 8.0, 0.0],     # never/never left out; 8 - never, 0 - 8
                  [40.0, 16.0, 0.0, 0.0],       # 0/0 left out
                  [90.0, 110.0, never, 0.0],    # grows
                  [never, never, never, never]])  # nothing to judge
    out = window_growth(w, never)
    np.testing.assert_array_equal(out[:3], [-8.0, -16.0, never - 110.0])
    assert np.isnan(out[3])


def test_seed_mean_stats_read_the_mean_curves():
    from ch06_fig2 import Fig2Lanes, seed_mean_stats

    steps = np.arange(6.0)
    # two lanes, one mode pair: the module's mode 1 reaches 1/2 at steps 1 and 3, mode 2 at 2 and 4; the NQF's at 2 and 2
    ramp = lambda t0: np.clip((steps - t0) / 2 + 0.5, 0, 1)  # noqa: E731  (reaches 1/2 at t0)
    mod = np.stack([np.stack([ramp(1), ramp(2)], -1), np.stack([ramp(3), ramp(4)], -1)])
    nqf = np.stack([np.stack([ramp(2), ramp(3)], -1)] * 2)
    run = Fig2Lanes(np.array([7, 8]), np.array([0.01, 0.01]), steps, mod, nqf, None, None, None, None, 1.0,
                    np.array([False, False]), None)
    out = seed_mean_stats(run, [0, 1], judged=np.array([True, True]), never=7.0, t_end=5.0)
    # mean module curves reach 1/2 at steps 2 and 3 (mean ramps through 1/2 at t0 = 2, 3), the NQF at 2 and 3
    assert out["switch"].value == 0.0 and out["switch"].n == 2
    assert out["order"].value == -1.0
    assert out["sv gap"].value == pytest.approx(np.max(np.abs(mod.mean(0) - nqf.mean(0))))
    one = seed_mean_stats(run, [0, 1], judged=np.array([True, False]), never=7.0, t_end=5.0)
    assert one["order"] is None
