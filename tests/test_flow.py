"""The one ODE entry point: statistics path vs sample path, batches, log time, step counts,
failures, and compile counts (a second call with new data of the same shapes compiles nothing)."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nqf
from nqf import NQFData
from nqf import dynamics
from nqf import solutions
from helpers import BAD_INPUT


def _data(m, p, seed=0, scale=1.0):
    """Random non-commuting symmetric A (Thm 7 fails, no closed form) and realisable targets."""
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(m, p, p))
    As = scale * (G + np.swapaxes(G, 1, 2)) / (2 * np.sqrt(p))
    W = rng.normal(size=(p, p)) / np.sqrt(p)
    return NQFData(As, np.einsum("ij,mij->m", W @ W.T, As))


def _M0(p, seed=1, scale=0.3):
    W = scale * np.random.default_rng(seed).normal(size=(p, p)) / np.sqrt(p)
    return W @ W.T + 1e-3 * np.eye(p)


TS = np.linspace(0.0, 5.0, 26)


@contextlib.contextmanager
def count_compilations():
    """Count XLA backend compilations inside the block (cf. optax test_utils.log_compilations)."""
    count = [0]

    def listener(event, duration_secs, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield count
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


# ----------------------------------------------------------------------------- statistics vs samples
@pytest.mark.parametrize("m, p", [(40, 3), (7, 4)])
def test_statistics_path_equals_sample_path(m, p):
    data = _data(m, p)
    M0 = _M0(p)
    a = nqf.gradient_flow(M0, data, TS, statistics=True, rtol=1e-12, atol=1e-16)
    b = nqf.gradient_flow(M0, data, TS, statistics=False, rtol=1e-12, atol=1e-16)
    assert dynamics.trajectory_error(a.ys, b.ys) < 1e-10
    assert int(a.num_steps) > 0 and int(b.num_steps) > 0
    # both are Eq. (28): compare with the model's own right-hand side at t = 0 through one tiny step
    f = nqf.flow_field(jnp.asarray(M0), data)
    from nqf.dynamics._flow import _flow_field_samples, _flow_field_statistics, flow_statistics
    As2 = data.As.reshape(m, p * p)
    np.testing.assert_allclose(_flow_field_samples(0.0, jnp.asarray(M0), (As2, data.ys - data.f0)), f, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(_flow_field_statistics(0.0, jnp.asarray(M0), flow_statistics(data)), f, rtol=1e-10, atol=1e-13)


def test_offsets_f0_enter_as_shifted_targets():
    data = _data(30, 3)
    shifted = NQFData(data.As, data.ys + 0.7, f0=0.7)
    M0 = _M0(3)
    for st in (True, False):
        a = nqf.gradient_flow(M0, data, TS, statistics=st).ys
        b = nqf.gradient_flow(M0, shifted, TS, statistics=st).ys
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-13)


# ----------------------------------------------------------------------------- batches
def test_batch_with_shared_data_equals_single_runs():
    data = _data(50, 3, seed=2)  # m > p^2: statistics path
    M0s = np.stack([_M0(3, seed=s) for s in range(5)])
    batch = dynamics.gradient_flow_batch(M0s, data, TS)
    assert batch.ys.shape == (5, len(TS), 3, 3) and batch.num_steps.shape == (5,)
    for i in (0, 4):
        one = nqf.gradient_flow(M0s[i], data, TS)
        np.testing.assert_allclose(batch.ys[i], one.ys, rtol=1e-12, atol=1e-15)
        assert int(batch.num_steps[i]) == int(one.num_steps)


def test_batch_with_one_dataset_per_lane():
    datas = [_data(6, 3, seed=s) for s in range(3)]
    M0s = np.stack([_M0(3)] * 3)
    batch = dynamics.gradient_flow_batch(M0s, datas, TS)
    np.testing.assert_allclose(batch.ys[2], nqf.gradient_flow(M0s[2], datas[2], TS).ys, rtol=1e-12, atol=1e-15)


def test_log_time_solves_the_same_flow():
    data = _data(20, 3, seed=3)
    ts = nqf.log_times(50.0, 30, t_min=1e-3)
    M0 = _M0(3)
    lin = nqf.gradient_flow(M0, data, ts, rtol=1e-12, atol=1e-16)
    log = nqf.gradient_flow(M0, data, ts, rtol=1e-12, atol=1e-16, time="log")
    auto = nqf.gradient_flow(M0, data, ts, rtol=1e-12, atol=1e-16, time="auto")  # spans > 3 decades: log
    assert dynamics.trajectory_error(log.ys, lin.ys) < 1e-9
    np.testing.assert_array_equal(auto.ys, log.ys)
    dop = nqf.gradient_flow(M0, data, ts, rtol=1e-12, atol=1e-16, solver="dopri8")
    assert dynamics.trajectory_error(dop.ys, lin.ys) < 1e-9
    assert int(dop.num_steps) < int(lin.num_steps)  # order 8: fewer steps


# ----------------------------------------------------------------------------- failures and bad input
def test_failed_solve_raises():
    with pytest.raises(RuntimeError, match="max_steps"):
        nqf.gradient_flow(_M0(3), _data(20, 3), TS, max_steps=3)


def test_bad_flow_input_is_named():
    data = _data(6, 3)
    with pytest.raises(TypeError, match="NQFData"):
        nqf.gradient_flow(_M0(3), (data.As, data.ys), TS)
    with pytest.raises(ValueError, match="ZGZ"):
        nqf.gradient_flow(_M0(3), NQFData(data.As, data.ys, gs=np.ones((6, 3))), TS)
    with pytest.raises(BAD_INPUT, match="M"):
        nqf.gradient_flow(_M0(4), data, TS)
    with pytest.raises(ValueError, match="ts"):
        nqf.gradient_flow(_M0(3), data, TS[::-1])
    with pytest.raises(ValueError, match="solver"):
        nqf.gradient_flow(_M0(3), data, TS, solver="euler")
    with pytest.raises(ValueError, match="time"):
        nqf.gradient_flow(_M0(3), data, TS, time="sqrt")
    with pytest.raises(TypeError, match="statistics"):
        nqf.gradient_flow(_M0(3), data, TS, statistics="yes")
    with pytest.raises(BAD_INPUT, match="M0s"):
        dynamics.gradient_flow_batch(np.stack([_M0(4)] * 2), data, TS)
    with pytest.raises(ValueError, match="one per initial"):
        dynamics.gradient_flow_batch(np.stack([_M0(3)] * 2), [data] * 3, TS)
    with pytest.raises(TypeError, match="mesh"):
        dynamics.gradient_flow_batch(np.stack([_M0(3)] * 2), data, TS, mesh="cpu")


# ----------------------------------------------------------------------------- compile counts
def _lv_args(seed):
    rng = np.random.default_rng(seed)
    C = np.diag(rng.uniform(0.5, 1.5, 3)) + 0.05 * rng.uniform(size=(3, 3))
    return rng.uniform(0.2, 1.0, 3), C, rng.uniform(1e-6, 1e-3, 3)


def _xi_args(seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.1, 1.0, (4, 3)), rng.uniform(0.5, 1.5, 4), np.full(3, 1e-4)


def _sweep_data(seed):
    rng = np.random.default_rng(seed)
    P = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    lam = rng.uniform(0.5, 1.5, (4, 3))
    return NQFData(np.einsum("ik,mk,jk->mij", P, lam, P), rng.uniform(0.5, 1.5, 4))


ENTRY_POINTS = {
    "gradient_flow, samples": lambda s: nqf.gradient_flow(_M0(3, s), _data(6, 3, s), TS),
    "gradient_flow, statistics": lambda s: nqf.gradient_flow(_M0(3, s), _data(30, 3, s), TS),
    "gradient_flow_batch, shared": lambda s: dynamics.gradient_flow_batch(
        np.stack([_M0(3, s), _M0(3, s + 1)]), _data(30, 3, s), TS),
    "gradient_flow_batch, per lane": lambda s: dynamics.gradient_flow_batch(
        np.stack([_M0(3, s), _M0(3, s + 1)]), [_data(6, 3, s), _data(6, 3, s + 1)], TS),
    "solve_ode": lambda s: dynamics.solve_ode(solutions._lotka_volterra._lv_field, np.log(_lv_args(s)[2]), TS,
                                              args=tuple(jnp.asarray(a) for a in (*_lv_args(s)[:2], np.ones(3, bool)))),
    "lv_flow": lambda s: solutions.lv_flow(*_lv_args(s), TS),
    "sample_xi_flow": lambda s: solutions.sample_xi_flow(TS, *_xi_args(s)),
    "singular_limit_sweep": lambda s: solutions.singular_limit_sweep(
        _sweep_data(s), np.array([1e-3, 1e-8]), np.linspace(0.0, 3.0, 20)),
}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_second_call_with_new_data_compiles_nothing(name):
    run = ENTRY_POINTS[name]
    jax.block_until_ready(run(0))
    with count_compilations() as n:
        out = run(1)
        jax.block_until_ready(out)
    assert n[0] == 0, f"{name}: {n[0]} compilation(s) on the second call"
    steps = np.asarray(out.num_steps)
    assert np.all(steps > 0)


def test_compile_counter_sees_a_compilation():
    with count_compilations() as n:
        jax.jit(lambda x: x * 3.0 + 1.0)(jnp.arange(7.0))
    assert n[0] >= 1
