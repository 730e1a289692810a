"""The one ODE entry point: statistics path vs sample path, batches, log time, step counts,
automatic choices against every explicit one, failures, the validation of NQFData, and compile
counts (a second call with new data of the same shapes compiles nothing)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nqf
from nqf import NQFData
from nqf import flow
from nqf import solutions
from helpers import BAD_INPUT
from helpers import count_compilations


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


# ----------------------------------------------------------------------------- statistics vs samples
@pytest.mark.parametrize("m, p", [(40, 3), (7, 4)])
def test_statistics_path_equals_sample_path(m, p):
    data = _data(m, p)
    M0 = _M0(p)
    a = nqf.gradient_flow(M0, data, TS, statistics=True, options=flow.ODEOptions(rtol=1e-12, atol=1e-16))
    b = nqf.gradient_flow(M0, data, TS, statistics=False, options=flow.ODEOptions(rtol=1e-12, atol=1e-16))
    assert flow.trajectory_error(a.ys, b.ys) < 1e-10
    assert int(a.num_steps) > 0 and int(b.num_steps) > 0
    # both are Eq. (28): compare with the model's own right-hand side at t = 0 through one tiny step
    H = nqf.model.h_matrix(jnp.asarray(M0), data)
    f = -(H @ M0 + M0 @ H)
    from nqf.flow._flow import _flow_field_samples, _packed_stack, _prepare
    from nqf.flow._flow import pack, unpack

    u0 = pack(jnp.asarray(M0))
    np.testing.assert_allclose(unpack(u0), M0, rtol=1e-15, atol=1e-17)  # the packed state holds M (to rounding)
    samples = (_packed_stack(data.As), data.ys - data.f0, 4.0 / m)
    np.testing.assert_allclose(unpack(_flow_field_samples(0.0, u0, samples)), f, rtol=1e-12, atol=1e-14)
    field, statistics = _prepare(data, True)
    np.testing.assert_allclose(unpack(field(0.0, u0, statistics)), f, rtol=1e-10, atol=1e-13)


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
    batch = nqf.gradient_flow(M0s, data, TS, options=flow.ODEOptions(solver="tsit5"))
    assert batch.ys.shape == (5, len(TS), 3, 3) and batch.num_steps.shape == (5,)
    for i in (0, 4):
        one = nqf.gradient_flow(M0s[i], data, TS, options=flow.ODEOptions(solver="tsit5"))
        np.testing.assert_allclose(batch.ys[i], one.ys, rtol=1e-12, atol=1e-15)
        assert int(batch.num_steps[i]) == int(one.num_steps)
    # diffrax's Dopri8 (the default at rtol 1e-10) under vmap differs from its single solve at the
    # level of the tolerance (the same on nqf 0.2), with the same steps
    batch, one = nqf.gradient_flow(M0s, data, TS), nqf.gradient_flow(M0s[0], data, TS)
    assert flow.trajectory_error(batch.ys[0], one.ys) < 1e-8 and int(batch.num_steps[0]) == int(one.num_steps)


def test_batch_with_one_dataset_per_lane():
    datas = [_data(6, 3, seed=s) for s in range(3)]
    M0s = np.stack([_M0(3)] * 3)
    batch = nqf.gradient_flow(M0s, datas, TS, options=flow.ODEOptions(solver="tsit5"))
    np.testing.assert_allclose(batch.ys[2], nqf.gradient_flow(M0s[2], datas[2], TS, options=flow.ODEOptions(solver="tsit5")).ys,
                               rtol=1e-12, atol=1e-15)


def test_log_time_solves_the_same_flow():
    data = _data(20, 3, seed=3)
    ts = nqf.flow.log_times(50.0, 30, t_min=1e-3)
    M0 = _M0(3)
    lin = nqf.gradient_flow(M0, data, ts, options=flow.ODEOptions(rtol=1e-12, atol=1e-16))
    log = nqf.gradient_flow(M0, data, ts, options=flow.ODEOptions(rtol=1e-12, atol=1e-16, time="log"))
    auto = nqf.gradient_flow(M0, data, ts, options=flow.ODEOptions(rtol=1e-12, atol=1e-16, time="auto"))  # spans > 3 decades: log
    assert flow.trajectory_error(log.ys, lin.ys) < 1e-9
    np.testing.assert_array_equal(auto.ys, log.ys)
    dop = nqf.gradient_flow(M0, data, ts, options=flow.ODEOptions(rtol=1e-12, atol=1e-16, solver="dopri8"))
    tsit = nqf.gradient_flow(M0, data, ts, options=flow.ODEOptions(rtol=1e-12, atol=1e-16, solver="tsit5"))
    assert flow.trajectory_error(dop.ys, tsit.ys) < 1e-9
    assert int(dop.num_steps) < int(tsit.num_steps)  # order 8: fewer steps
    np.testing.assert_array_equal(tsit.ys, lin.ys)  # the default is Tsit5 (module docstring: equal error costs the same)


# ----------------------------------------------------------------------------- failures and bad input
def test_failed_solve_raises():
    with pytest.raises(RuntimeError, match="max_steps"):
        nqf.gradient_flow(_M0(3), _data(20, 3), TS, options=flow.ODEOptions(max_steps=3))


def _blow_up(t, y, args):
    return y**2  # y(t) = 1 / (1 - t) from y(0) = 1: infinite at t = 1


def test_a_failed_solve_says_which_way_out_fits():
    """Out of steps: the budget is named with the two causes (a blow-up, which no budget or looser `rtol`
    cures, or a long span); issue 30 found the old advice "loosen rtol/atol" after rtol=2.0 ran 10^6 steps."""
    with pytest.raises(RuntimeError, match=r"`max_steps` = 3: either the solution blows up") as info:
        nqf.gradient_flow(_M0(3), _data(20, 3), TS, options=flow.ODEOptions(max_steps=3))
    assert "looser `rtol` does not help" in str(info.value)
    with pytest.raises(RuntimeError, match="blows up"):
        flow.solve_ode(_blow_up, np.ones(1), np.linspace(0.0, 2.0, 5), options=flow.ODEOptions(max_steps=2000))


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
        nqf.gradient_flow(_M0(3), data, TS, options=flow.ODEOptions(solver="euler"))
    with pytest.raises(ValueError, match="time"):
        nqf.gradient_flow(_M0(3), data, TS, options=flow.ODEOptions(time="sqrt"))
    with pytest.raises(TypeError, match="statistics"):
        nqf.gradient_flow(_M0(3), data, TS, statistics="yes")
    with pytest.raises(BAD_INPUT, match="M0"):
        nqf.gradient_flow(np.stack([_M0(4)] * 2), data, TS)
    with pytest.raises(ValueError, match="one per initial"):
        nqf.gradient_flow(np.stack([_M0(3)] * 2), [data] * 3, TS)
    with pytest.raises(ValueError, match="share their shapes"):
        nqf.gradient_flow(np.stack([_M0(3)] * 2), [data, _data(7, 3)], TS)
    with pytest.raises(TypeError, match="NQFData"):
        nqf.gradient_flow(np.stack([_M0(3)] * 2), [data, (data.As, data.ys)], TS)
    with pytest.raises(TypeError, match="mesh"):
        nqf.gradient_flow(np.stack([_M0(3)] * 2), data, TS, mesh="cpu")
    with pytest.raises(ValueError, match="mesh"):
        nqf.gradient_flow(_M0(3), data, TS, mesh=flow.batch_mesh())
    for M0 in (_M0(3), np.stack([_M0(3)] * 2)):  # the same option checks with and without a batch
        for bad, exc in ((0, ValueError), (2.5, TypeError), ("10", TypeError)):
            with pytest.raises(exc, match="max_steps"):
                nqf.gradient_flow(M0, data, TS, options=flow.ODEOptions(max_steps=bad))
        with pytest.raises(ValueError, match="rtol"):
            nqf.gradient_flow(M0, data, TS, options=flow.ODEOptions(rtol=0.0))
        with pytest.raises(TypeError, match="progress"):
            nqf.gradient_flow(M0, data, TS, options=flow.ODEOptions(progress=None))
    with pytest.raises(ValueError, match="M0"):
        nqf.gradient_flow(np.stack([_M0(3), -_M0(3)]), data, TS)  # lane 1 not PSD
    with pytest.raises(ValueError, match="max_steps"):
        flow.solve_ode(solutions._lotka_volterra._lv_field, np.zeros(3), TS,
                           args=tuple(jnp.asarray(a) for a in (*_lv_args(0)[:2], np.ones(3, bool))), options=flow.ODEOptions(max_steps=0))


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
    "gradient_flow, new rtol": lambda s: nqf.gradient_flow(_M0(3, s), _data(30, 3, s), TS, options=flow.ODEOptions(rtol=10.0 ** (-9 - s))),
    "gradient_flow, large data (fused validation)": lambda s: nqf.gradient_flow(_M0(4, s), _data(2048, 4, s), TS),
    "gradient_flow, batch, shared": lambda s: nqf.gradient_flow(
        np.stack([_M0(3, s), _M0(3, s + 1)]), _data(30, 3, s), TS),
    "gradient_flow, batch, per lane": lambda s: nqf.gradient_flow(
        np.stack([_M0(3, s), _M0(3, s + 1)]), [_data(6, 3, s), _data(6, 3, s + 1)], TS),
    "sample_wise_loss (new data, new rtol)": lambda s: _sample_wise(s),
    "solve_ode": lambda s: flow.solve_ode(solutions._lotka_volterra._lv_field, np.log(_lv_args(s)[2]), TS,
                                              args=tuple(jnp.asarray(a) for a in (*_lv_args(s)[:2], np.ones(3, bool)))),
    "lv_flow": lambda s: solutions.lv_flow(*_lv_args(s), TS),
    "sample_xi_flow": lambda s: solutions.sample_xi_flow(TS, *_xi_args(s)),
    "singular_limit_sweep": lambda s: solutions.singular_limit_sweep(
        _sweep_data(s), np.array([1e-3, 1e-8]), np.linspace(0.0, 3.0, 20)),
}


class _Steps:
    """What the compile-count test needs of a result: its step counts (here: the losses' size)."""

    def __init__(self, loss):
        self.loss, self.num_steps = loss, np.full(1, np.size(loss))


def _sample_wise(seed):
    rng = np.random.default_rng(seed)
    lam = rng.uniform(0.5, 1.5, (4, 2))
    return _Steps(solutions.sample_wise_loss(TS, lam, rng.uniform(0.5, 1.5, 4), np.full((4, 2), 1e-6),
                                             rtol=10.0 ** (-10 + seed)))


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_second_call_with_new_data_compiles_nothing(name):
    run = ENTRY_POINTS[name]
    jax.block_until_ready(run(0))
    with count_compilations() as n:
        out = run(1)
        jax.block_until_ready(out)
    assert len(n) == 0, f"{name}: {len(n)} compilation(s) on the second call"
    steps = np.asarray(out.num_steps)
    assert np.all(steps > 0)


def test_compile_counter_sees_a_compilation():
    with count_compilations() as n:
        jax.jit(lambda x: x * 3.0 + 1.0)(jnp.arange(7.0))
    assert len(n) >= 1


def test_one_diffeqsolve_call_in_the_package():
    from pathlib import Path

    root = Path(nqf.__file__).parent
    calls = {str(f.relative_to(root)): f.read_text().count("diffrax.diffeqsolve(") for f in root.rglob("*.py")}
    assert {k: v for k, v in calls.items() if v} == {"flow/_flow.py": 1}


# ----------------------------------------------------------------------------- automatic choices
@pytest.mark.parametrize("m, p", [(40, 3), (7, 4), (300, 8)])
def test_automatic_choices_give_the_flow_of_every_explicit_choice(m, p):
    data = _data(m, p, seed=4)
    M0 = _M0(p, seed=5)
    ref = nqf.gradient_flow(M0, data, TS, statistics=False, options=flow.ODEOptions(solver="dopri8", rtol=1e-13, atol=1e-17)).ys
    # every solver at the first shape; at the others (where the automatic statistics path changes with m and p)
    # the automatic solver on both paths: each (solver, path, shape) is its own compiled program
    solvers = ("auto", "dopri8", "tsit5", "dopri5") if (m, p) == (40, 3) else ("auto",)
    for rtol, tol in ((1e-10, 1e-8), (1e-5, 1e-3)):
        auto = nqf.gradient_flow(M0, data, TS, options=flow.ODEOptions(rtol=rtol))
        assert flow.trajectory_error(auto.ys, ref) < tol
        for solver in solvers:
            for statistics in (None, True, False):
                sol = nqf.gradient_flow(M0, data, TS, statistics=statistics, options=flow.ODEOptions(rtol=rtol, solver=solver))
                assert flow.trajectory_error(sol.ys, ref) < tol, (rtol, solver, statistics)
                assert flow.trajectory_error(sol.ys, auto.ys) < 2 * tol, (rtol, solver, statistics)
    # the automatic choices are explicit choices: the same program gives the same numbers
    from nqf.flow._flow import _use_statistics, choose_solver

    for rtol in (1e-10, 1e-5):
        explicit = nqf.gradient_flow(M0, data, TS,
                                     statistics=_use_statistics(None, m, p), options=flow.ODEOptions(rtol=rtol, solver=choose_solver("auto", rtol)))
        np.testing.assert_array_equal(explicit.ys, nqf.gradient_flow(M0, data, TS, options=flow.ODEOptions(rtol=rtol)).ys)
    # a batch (shared data, one dataset per lane) follows each lane's own flow
    M0s = np.stack([M0, 2.0 * M0])
    for lanes in (data, [data, data]):
        b = nqf.gradient_flow(M0s, lanes, TS)
        assert flow.trajectory_error(b.ys[0], ref) < 1e-8


def test_the_automatic_choices_follow_their_rules():
    from nqf.flow._flow import _use_statistics, choose_solver

    assert choose_solver("auto", 1e-10) == "tsit5" and choose_solver("auto", 1e-4) == "tsit5"
    assert choose_solver("tsit5", 1e-12) == "tsit5"
    with pytest.raises(ValueError, match="solver"):
        choose_solver("rk4", 1e-8)
    # the cost model: few samples or large p -> samples; many samples -> statistics; a batch sharing
    # the data pays the statistics once for all lanes
    assert not _use_statistics(None, 16, 8) and _use_statistics(None, 256, 8)
    assert not _use_statistics(None, 256, 32) and _use_statistics(None, 4096, 32)
    assert not _use_statistics(None, 300, 32) and _use_statistics(None, 300, 32, lanes=64)
    # where the faster path changes, measured side by side (default call, rtol 1e-10; _flow's cost-model
    # comment): p = 32 between m = 256 and 384, p = 8 between m = 16 and 32
    assert _use_statistics(None, 384, 32) and not _use_statistics(None, 16, 8) and _use_statistics(None, 32, 8)
    assert _use_statistics(True, 1, 30) and not _use_statistics(False, 10**6, 2)


@pytest.mark.parametrize("m", [256, 384])  # either side of the cost model's switch at p = 32
def test_automatic_path_at_the_switch_gives_the_flow_of_both_paths(m):
    from nqf.flow._flow import _use_statistics

    p = 32
    data = _data(m, p, seed=8)
    M0 = _M0(p, seed=9)
    auto = nqf.gradient_flow(M0, data, TS)
    paths = {st: nqf.gradient_flow(M0, data, TS, statistics=st) for st in (True, False)}
    np.testing.assert_array_equal(auto.ys, paths[_use_statistics(None, m, p)].ys)  # the same program
    assert flow.trajectory_error(paths[True].ys, paths[False].ys) < 1e-9


# ----------------------------------------------------------------------------- NQFData validation
@pytest.mark.parametrize("m", [3, 4096])  # below and above the size of the fused one-pass check
def test_nqfdata_refuses_what_it_refused(m):
    p = 3
    data = _data(m, p, seed=6)
    As, ys = np.asarray(data.As), np.asarray(data.ys)
    for name, bad in (("As", lambda A: A.__setitem__((m - 1, 0, 1), np.nan)),
                      ("As", lambda A: A.__setitem__((0, 2, 2), -np.inf))):
        A = As.copy()
        bad(A)
        with pytest.raises(ValueError, match=f"`{name}` must be finite; got 1 NaN/inf entry"):
            NQFData(A, ys)
    A = As.copy()
    A[m // 2, 0, 2] += 1e-6
    with pytest.raises(ValueError, match=r"`As` must be symmetric \(A = A\^T\); got max \|A - A\^T\| = 1e-06"):
        NQFData(A, ys)
    A = As.copy()
    A[m // 2, 0, 2] *= 1 + 1e-12  # within the tolerance of check_symmetric: accepted, as before
    NQFData(A, ys)
    y = ys.copy()
    y[-1] = np.inf
    with pytest.raises(ValueError, match="`ys` must be finite"):
        NQFData(As, y)
    for kw, name in (({"f0": np.full(m, np.nan)}, "f0"), ({"gs": np.full((m, p), np.inf)}, "gs"),
                     ({"Bs": np.full((m, p, p), np.nan)}, "Bs")):
        with pytest.raises(ValueError, match=f"`{name}` must be finite"):
            NQFData(As, ys, **kw)
    with pytest.raises(BAD_INPUT, match="ys"):
        NQFData(As, ys[:-1])
    with pytest.raises(BAD_INPUT, match="As"):
        NQFData(As[:, :2], ys)
    with pytest.raises(TypeError, match="As"):
        NQFData(As.astype(complex), ys)
    with pytest.raises(TypeError, match="ys"):
        NQFData(As, "ys")
    with pytest.raises(ValueError, match="`As` must be finite"):  # finiteness before symmetry, as before
        A = As.copy()
        A[0, 0, 1], A[0, 1, 0] = np.nan, 1.0
        NQFData(A, ys)


def test_nqfdata_arrays_are_exact_private_copies():
    data = _data(4096, 3, seed=7)
    As = np.asarray(data.As).copy()
    Ai = np.rint(As * 100).astype(np.int64)
    Ai = Ai + np.swapaxes(Ai, 1, 2)
    for A in (As, As.astype(np.float32), Ai):
        d = NQFData(A, data.ys)
        assert isinstance(d.As, jax.Array) and d.As.dtype == jnp.float64
        np.testing.assert_array_equal(d.As, jnp.asarray(A, dtype=float))
        before = np.asarray(d.As).copy()
        A[0, 0, 0] += 1.0  # the caller's array changes; the dataset does not
        np.testing.assert_array_equal(d.As, before)
    traced = jax.jit(lambda A, y: NQFData(A, y).As.sum())(jnp.asarray(As), data.ys)  # built under jit: no check
    assert np.isfinite(float(traced))
