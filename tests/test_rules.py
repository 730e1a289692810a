"""One home per rule (issue 27): each rule of training/ and structure/ is tested once, where it lives, and the
callers are shown to use it (same message, same numbers as the rule they used to write themselves)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from helpers import BAD_INPUT
from models_example import TwoLayerNet
from nqf import structure, training
from nqf._checks import check_float64, check_record_every
from nqf.structure._models import module_function
from nqf.structure._neurons import NeuronPacking
from nqf.structure import _probes
from nqf.training import Agreement, first_crossing
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

NQF = Path(nqf.__file__).resolve().parent


# ----------------------------------------------------------------- the first-crossing rule
T = np.array([0.0, 1.0, 2.0, 4.0])


def test_first_crossing_rule_never_first_record_and_interpolation():
    v = np.array([[0.0, 0.0, 0.0, 0.0],  # never reaches 0.5
                  [1.0, 1.0, 1.0, 1.0],  # already there at the first record
                  [0.0, 0.25, 0.75, 1.0],  # crosses between t = 1 and t = 2
                  [0.0, 0.0, 0.0, 0.5]]).T  # reaches it exactly at the last record
    out = first_crossing(T, v, 0.5)
    np.testing.assert_array_equal(out, [np.inf, 0.0, 1.5, 4.0])
    np.testing.assert_array_equal(first_crossing(T, v, 0.5, interpolate=False), [np.inf, 0.0, 2.0, 4.0])
    with pytest.raises(TypeError):  # one "never" value (inf), no per-call substitute
        first_crossing(T, v, 0.5, if_never=np.nan)
    # falling, per-column levels, time on another axis
    np.testing.assert_array_equal(first_crossing(T, 1.0 - v, 0.5, rising=False), [np.inf, 0.0, 1.5, 4.0])
    np.testing.assert_array_equal(first_crossing(T, v.T, np.array([0.5, 2.0, 0.5, 0.25]), axis=1),
                                  [np.inf, np.inf, 1.5, 3.0])


def test_first_crossing_nan_counts_only_when_asked():
    v = np.array([0.0, np.nan, 0.0, 1.0])
    assert first_crossing(T, v, 0.5) == 4.0 - 2.0 * 0.5  # NaN reaches nothing: crossed between t = 2 and 4
    assert first_crossing(T, v, 0.5, nan_crosses=True) == 1.0  # a NaN record is the crossing (no interpolation)
    assert first_crossing(T, np.array([0.0, np.inf, 0.0, 0.0]), 0.5) == 1.0  # inf compares as a number


def test_first_crossing_refuses_bad_records():
    with pytest.raises(ValueError, match="strictly increasing"):
        first_crossing(np.array([0.0, 2.0, 1.0]), np.zeros(3), 0.5)
    with pytest.raises(ValueError, match="values"):
        first_crossing(T, np.zeros(3), 0.5)
    with pytest.raises(BAD_INPUT, match="times"):  # the shape annotation, or the rule's own check
        first_crossing(np.zeros((2, 2)), np.zeros(2), 0.5)


def _old_halfway(times, values, levels, rising=True):  # solutions/_plateaus.py before the rule had one home
    t, v = np.asarray(times, float), np.asarray(values, float)
    lv = np.broadcast_to(np.asarray(levels, float), v.shape[1:])
    s = (v - lv) if rising else (lv - v)
    hit = s >= 0
    first = np.argmax(hit, axis=0)
    out = np.full(lv.shape, np.inf)
    for idx in np.ndindex(lv.shape):
        if not hit[(slice(None),) + idx].any():
            continue
        i = first[idx]
        if i == 0:
            out[idx] = t[0]
            continue
        a, b = s[(i - 1,) + idx], s[(i,) + idx]
        out[idx] = t[i - 1] + (t[i] - t[i - 1]) * (-a) / (b - a) if b != a else t[i]
    return out


def _old_crossing_time(t, x, level):  # pipeline/_measure.py:crossing_time before the rule had one home
    level = np.broadcast_to(np.asarray(level, dtype=float), x.shape[1:])
    above = x >= level
    first = np.argmax(above, axis=0)
    ok = above.any(axis=0) & (first > 0)
    i1 = np.where(ok, first, 1)
    i0 = i1 - 1
    x0 = np.take_along_axis(x, i0[None], 0)[0]
    x1 = np.take_along_axis(x, i1[None], 0)[0]
    frac = (level - x0) / np.where(x1 != x0, x1 - x0, 1.0)
    return np.where(ok, t[i0] + frac * (t[i1] - t[i0]), np.nan)


def test_the_four_old_versions_are_options_of_the_one_rule():
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.1, 1.0, 40))
    x = np.cumsum(rng.normal(size=(40, 6, 3)), axis=0)
    x[5, 0, 0] = np.nan
    lv = rng.normal(size=(6, 3)) * 3
    # plateau ends (interpolated, inf never, times[0] at the first record): to rounding
    for rising in (True, False):
        np.testing.assert_allclose(first_crossing(t, x, lv, rising=rising), _old_halfway(t, x, lv, rising),
                                   rtol=1e-13, atol=0)
    # measured crossing times (the old NaN never and at the first record, now inf and times[0]): bit for bit elsewhere
    new, old = first_crossing(t, x, lv), _old_crossing_time(t, x, lv)
    np.testing.assert_array_equal(np.where(np.isnan(old), new, old), new)
    assert np.all(np.isinf(new[np.isnan(old)]) | (new[np.isnan(old)] == t[0]))
    # Fig. 2's half-times (recorded step, inf never, time on axis -2)
    ratio = rng.uniform(0, 1, size=(3, 40, 4))
    old = np.where((ratio >= 0.5).any(axis=-2), t[np.argmax(ratio >= 0.5, axis=-2)], np.inf)
    np.testing.assert_array_equal(first_crossing(t, ratio, 0.5, axis=-2, interpolate=False), old)
    # the agreement window: recorded step, a NaN gap has parted
    gap = rng.uniform(0, 0.2, size=(5, 40))
    gap[1, 3] = np.nan
    old = np.where((~(gap <= 0.1)).any(-1), t[np.argmax(~(gap <= 0.1), axis=-1)], np.inf)
    np.testing.assert_array_equal(Agreement(0.1).window(t, gap), old)


# ----------------------------------------------------------------- record_every divides num_steps
def test_record_every_rule_and_its_callers_share_one_message():
    assert check_record_every(5, 20) == 5
    with pytest.raises(TypeError, match="record_every"):
        check_record_every(2.5, 20)
    with pytest.raises(ValueError, match="record_every"):
        check_record_every(0, 20)
    with pytest.raises(ValueError) as rule:
        check_record_every(3, 20)
    arch = nqf.architectures.two_layer_mlp(3)
    xs, ys = jnp.ones((5, 3)), jnp.ones(5)
    with pytest.raises(ValueError) as trainer:
        training.train(lambda w, b, a: jnp.sum(w**2), jnp.ones(3), optax.sgd(0.1), num_steps=20,
                       runs=training.Runs(record_every=3))
    with pytest.raises(ValueError) as compare:
        training.compare_with_nqf(arch, (xs, ys), optax.sgd(0.1), num_steps=20, params=0.01 * jnp.ones((arch.p, 4)),
                                  track=training.Track(record_every=3))
    assert str(trainer.value) == str(compare.value) == str(rule.value)


# ----------------------------------------------------------------- float64
def test_float64_rule_and_its_callers():
    check_float64("params", {"a": jnp.ones(2), "n": jnp.arange(3)})  # float64 and ints pass
    with pytest.raises(ValueError, match=r"`params` Net has float32 parameters.*need float64"):
        check_float64("params", {"a": jnp.ones(2, jnp.float32)}, "Net")
    with pytest.raises(ValueError, match=r"; or pass check=False"):
        check_float64("W0", [jnp.ones(2, jnp.float16)], also="pass check=False")
    net = TwoLayerNet(jnp.ones((4, 3), jnp.float32), jnp.ones((1, 4), jnp.float32))
    xs = jnp.ones((6, 3))
    with pytest.raises(ValueError, match=r"`model` TwoLayerNet has float32 parameters.*need float64"):
        nqf.diagnose(net, (xs, jnp.ones((6, 1))), optax.sgd(0.1), num_steps=10)
    with pytest.raises(ValueError, match=r"`params` of TwoLayerNet has float32 parameters.*need float64"):
        training.compare_with_nqf(net, (xs.astype(jnp.float32), jnp.ones((6, 1), jnp.float32)), optax.sgd(0.1),
                                  num_steps=10)


# ----------------------------------------------------------------- model resolution
def test_model_resolution_one_rule_typeerror_for_a_wrong_kind():
    params = {"w": jnp.ones((2, 3))}
    with pytest.raises(TypeError, match="module"):
        module_function(3)
    with pytest.raises(ValueError, match="`p`"):
        module_function(lambda W, x: jnp.sum(W))
    assert module_function(nqf.architectures.two_layer_mlp(3))[1] == nqf.architectures.two_layer_mlp(3).p
    x = jnp.ones(3)
    # every caller, the same kind of error
    with pytest.raises(TypeError, match="module"):
        nqf.structure_matrix(3, x, p=4)
    with pytest.raises(TypeError, match="params"):
        nqf.pytree_structure_matrix(None, params, x, 1)
    with pytest.raises(TypeError, match="model"):
        nqf.diagnose(params, (x[None], jnp.ones(1)), optax.sgd(0.1), num_steps=10)
    with pytest.raises(TypeError, match="model"):
        training.compare_with_nqf("mlp", (x[None], jnp.ones(1)), optax.sgd(0.1), num_steps=10, params=params)


# ----------------------------------------------------------------- the neuron packing
def test_neuron_packing_is_one_hashable_value_that_round_trips():
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    net = TwoLayerNet(normal(k1, (4, 3)), normal(k2, (1, 4)))
    W, layout = structure.neuron_weights(net, net.neuron_axes())
    pk = layout.packing
    assert isinstance(pk, NeuronPacking) and W.shape == (4, 4)
    np.testing.assert_array_equal(pk(net), W)
    np.testing.assert_array_equal(W, jnp.concatenate([net.U.T, net.V]))  # rows: U's 3 inputs, then V
    back = pk.unpack(2.0 * W, net)
    np.testing.assert_array_equal(back.U, 2.0 * net.U)
    np.testing.assert_array_equal(back.V, 2.0 * net.V)
    other = structure.neuron_weights(TwoLayerNet(net.U + 1, net.V), net.neuron_axes())[1].packing
    assert other == pk and hash(other) == hash(pk)  # by value: the trainer compiles once
    assert layout.unflatten(W).U.shape == net.U.shape


# ----------------------------------------------------------------- the Theorem-1 probes
def test_probe_step_constant_and_taylor_reading():
    np.testing.assert_array_equal(_probes.taylor_steps(jnp.float64), [1e-3, 5e-4, -1e-3, -5e-4])
    assert _probes.taylor_step(jnp.float32) == 3e-2
    h = 1e-3
    steps = _probes.taylor_steps(jnp.float64)
    quad = [t**2 for t in steps]  # C^3: r(t) = O(t^2), ratio 4
    kink = [abs(t) for t in steps]  # kink: r(t) = O(t), ratio 2
    assert _probes.taylor_ratio(quad, [1.0] * 4, 1.0, 1.0, h, 1e-13) == pytest.approx(4.0)
    assert _probes.taylor_ratio(kink, [1.0] * 4, 1.0, 1.0, h, 1e-13) == pytest.approx(2.0)
    assert _probes.taylor_ratio([1e-20] * 4, [1.0] * 4, 1.0, 1.0, h, 1e-13) == np.inf  # rounding level


def test_dense_and_matrix_free_probes_read_smoothness_alike():
    x = jnp.array([0.3, -0.7, 1.1])
    for act, smooth in ((jnp.tanh, True), (jax.nn.relu, False)):
        def f(W, x, act=act):
            return jnp.sum(W[3] * act(W[:3].T @ x))
        rep = nqf.structure_report(f, x, p=4)
        chk = nqf.check_hypotheses(f, 0.3 * jnp.ones((4, 3)), x)
        assert rep.smooth_at_zero == smooth == (chk.smooth_ratio >= _probes.SMOOTH_RATIO)


def test_the_matrix_free_probe_compiles_once_per_module_with_the_fast_options():
    """fast_filter_jit splits arrays from the rest as equinox.filter_jit does: new arrays of one module compile
    nothing, another module function compiles anew; the probe's readings are those of the default pipeline up
    to rounding (the permutation residual at rounding level either way, the Taylor ratio to 1e-6)."""
    from helpers import count_compilations
    from nqf.structure import _matrix_free

    x = jnp.array([0.3, -0.7, 1.1])

    def f(W, x):
        return jnp.sum(W[3] * jnp.tanh(W[:3].T @ x))

    def g(W, x):
        return jnp.sum(W[3] * jnp.sin(W[:3].T @ x))

    W = 0.3 * jnp.ones((4, 3))
    chk = nqf.check_hypotheses(f, W, x)
    W2, x2 = 0.5 * W, 2.0 * x
    with count_compilations() as seen:
        again = nqf.check_hypotheses(f, W2, x2)
    assert seen == [] and again.finite
    with count_compilations() as seen:
        nqf.check_hypotheses(g, W, x)
    assert len(seen) == 1
    import equinox as eqx

    from nqf.structure._neurons import split_params

    tr, frozen, ax_leaves, d = split_params(W, 1)
    draws = _matrix_free._draws(jax.random.PRNGKey(0), tr, jax.ShapeDtypeStruct((), x.dtype))
    args = (f, tr, frozen, x, draws, ax_leaves, d)
    ref = eqx.filter_jit(_matrix_free._probe.__wrapped__)(*args)  # the undecorated probe, default pipeline
    got = _matrix_free._probe(*args)
    assert float(ref[0]) < 1e-14 and float(got[0]) < 1e-14
    ratio = lambda out: _probes.taylor_ratio([r[0] for r in out[2]], [r[1] for r in out[2]], out[3], out[4],  # noqa: E731
                                             out[5], 1e-13)
    assert ratio(got) == pytest.approx(ratio(ref), rel=1e-6) and chk.smooth_ratio >= _probes.SMOOTH_RATIO


@pytest.mark.parametrize("make_key", [jax.random.PRNGKey, jax.random.key], ids=["raw key", "typed key"])
def test_the_probes_draws_are_the_draws_the_probe_made_inside(make_key):
    """check_hypotheses draws its random point, direction and output weights outside the compiled probe: they are
    the draws jax.random.normal made inside it, bit for bit (split into 2 L + 1 keys, W and V per leaf, then c)."""
    from nqf.structure import _matrix_free

    tr = {"a": np.zeros((5, 3)), "b": np.zeros((2, 3), np.float32)}
    out = jax.ShapeDtypeStruct((4,), jnp.float64)
    key = make_key(3)

    @jax.jit
    def inside(key):
        leaves = jax.tree_util.tree_leaves(tr)
        keys = jax.random.split(key, 2 * len(leaves) + 1)
        return ([jax.random.normal(k, l.shape, l.dtype) for k, l in zip(keys, leaves)],
                [jax.random.normal(k, l.shape, l.dtype) for k, l in zip(keys[len(leaves):], leaves)],
                jax.random.normal(keys[-1], out.shape, out.dtype))

    got, want = jax.tree_util.tree_leaves(_matrix_free._draws(key, tr, out)), jax.tree_util.tree_leaves(inside(key))
    assert len(got) == len(want) == 5
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_the_probe_constants_are_written_once():
    for path in (NQF / "structure").glob("*.py"):
        if path.name == "_probes.py":
            continue
        text = path.read_text()
        assert "3e-2" not in text and "1e-3 if" not in text, path.name
        assert ">= 3.0" not in text and "< 3.0" not in text, path.name


# ----------------------------------------------------------------- source hygiene
def test_no_control_characters_in_the_package_sources():
    bad = {}
    for path in NQF.rglob("*.py"):
        text = path.read_bytes().decode("utf-8")
        found = sorted({hex(ord(c)) for c in text if (ord(c) < 32 and c != "\n") or ord(c) == 127})
        if found:
            bad[str(path.relative_to(NQF))] = found
    assert bad == {}


def _private_cross_room_imports(paths):
    out = []
    for path in paths:
        room = path.parent.name
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level < 2:
                continue
            mod = node.module or ""
            target = mod.split(".")[0]
            if target == room:
                continue
            private_module = any(part.startswith("_") for part in mod.split(".")[1:])
            names = [a.name for a in node.names if a.name.startswith("_")]
            if private_module or names:
                out.append(f"{path.relative_to(NQF)}: from {'.' * node.level}{mod} import {[a.name for a in node.names]}")
    return out


def test_training_and_structure_import_only_public_names_of_other_rooms():
    mine = [NQF / "training" / f for f in ("_trainer.py", "_compare.py", "_report.py", "_agreement.py", "_losses.py")]
    mine += sorted((NQF / "structure").glob("*.py")) + [NQF / "solutions" / "_plateaus.py"]
    assert _private_cross_room_imports([p for p in mine if p.exists()]) == []
