"""Architectures are values: rebuilding one and recomputing its A on new inputs compiles nothing.

Compilations are counted with a ``jax.monitoring`` listener on the lowering
event (``/jax/core/compile/jaxpr_to_mlir_module_duration``): it fires on every
miss of jax's in-memory compilation cache, whether or not the persistent cache
(tests/conftest.py) then supplies the executable. This is the pattern of
optax's ``test_utils.log_compilations``.
"""

import time

import jax
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import nqf  # noqa: E402
from typing import ClassVar  # noqa: E402

from nqf.architectures import REGISTRY, Architecture, multihead_attention, qk_attention, two_layer_mlp  # noqa: E402
from nqf import structure_matrix  # noqa: E402
from nqf.structure._autodiff import structure_stack  # noqa: E402
from helpers import BAD_INPUT, count_compilations  # noqa: E402

def _inputs(arch, seed, m=None):
    if m is None:
        return arch.sample_input(jax.random.PRNGKey(seed))
    xs = [arch.sample_input(k) for k in jax.random.split(jax.random.PRNGKey(seed), m)]
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *xs)


def _everything(make, seed):
    """Build the architecture and compute its A every way nqf offers, on inputs drawn from ``seed``."""
    arch = make()
    x = _inputs(arch, seed)
    A = arch.structure(x)
    structure_matrix(arch, x)
    structure_stack(arch, _inputs(arch, seed, 3))  # checks Theorem 1 on the first input, closed form
    structure_stack(arch, _inputs(arch, seed, 3), method="autodiff", check=False)
    nqf.structure.check_theorem1(arch, x=x, seed=seed, rays=1, scales=np.logspace(-3, -1, 4))
    return A


# --------------------------------------------------------------- values, not closures
def test_architectures_are_equal_and_hash_alike_by_value():
    for row in REGISTRY:
        a, b = row.build(), row.build()
        assert a is not b and a == b and hash(a) == hash(b), row.key
    assert two_layer_mlp(4) != two_layer_mlp(5)
    assert two_layer_mlp(4) != two_layer_mlp(4, activation=jax.nn.gelu)
    assert qk_attention(3, 4, 2, c=jnp.array([1.0, 0.0, 0.0])) != qk_attention(3, 4, 2)
    assert qk_attention(3, 4, 2, c=jnp.array([1.0, 0.0, 0.0])) == qk_attention(3, 4, 2, c=np.array([1.0, 0, 0]))


@pytest.mark.parametrize("make", [lambda: two_layer_mlp(4), lambda: multihead_attention(3, 4, 2, 2),
                                  lambda: qk_attention(3, 5, 2, c=jnp.array([0.3, -1.2, 0.7]))],
                         ids=["mlp", "mha", "qk"])
def test_rebuilding_and_new_inputs_compile_nothing(make):
    t0 = time.perf_counter()
    with count_compilations() as first:
        A1 = _everything(make, seed=0)
    t1 = time.perf_counter()
    with count_compilations() as second:
        A2 = _everything(make, seed=1)  # a new object, new inputs of the same shapes
    t2 = time.perf_counter()
    print(f"\n{make().name}: first build {len(first)} compilations, {t1 - t0:.2f} s; "
          f"second build {len(second)} compilations, {t2 - t1:.3f} s")
    assert len(first) > 0  # the counter sees compilations at all
    assert len(second) == 0
    assert not np.allclose(A1, A2)  # really new inputs


# ---------------------------------------------------------------- no stale A
_SCALE = {"value": 1.0}


def _global_reading_module(W, x):
    """A plain module that reads mutable global state: f = s * sum_i v_i tanh(u_i . x)."""
    return _SCALE["value"] * jnp.sum(W[-1] * jnp.tanh(W[:-1].T @ x))


def test_plain_callable_reading_a_global_is_never_served_a_stale_A():
    """Regression: a cache keyed on the function object returned the A of the old global."""
    x = jnp.array([0.7, -1.3, 0.4])
    _SCALE["value"] = 1.0
    A1 = structure_matrix(_global_reading_module, x, p=4)
    S1 = structure_stack(_global_reading_module, x[None], p=4, check=False)
    _SCALE["value"] = 2.0
    try:
        A2 = structure_matrix(_global_reading_module, x, p=4)
        S2 = structure_stack(_global_reading_module, x[None], p=4, check=False)
        R2 = nqf.structure_report(_global_reading_module, x, p=4)
    finally:
        _SCALE["value"] = 1.0
    np.testing.assert_allclose(A2, 2.0 * A1, rtol=1e-14)
    np.testing.assert_allclose(S2, 2.0 * S1, rtol=1e-14)
    np.testing.assert_allclose(R2.A, 2.0 * A1, rtol=1e-14)


_MLP3 = two_layer_mlp(3)


class _ScaledMLP(Architecture):
    """A module of one's own whose callables read mutable state: ``cache_by_value = False``."""

    name = "scaled MLP"
    p = 4
    cache_by_value: ClassVar[bool] = False

    def apply(self, W, x):
        return _global_reading_module(W, x)

    def structure(self, x):
        return _SCALE["value"] * _MLP3.structure(x)

    def sample_input(self, key):
        return _MLP3.sample_input(key)


def test_an_architecture_not_cached_by_value_is_traced_afresh():
    """An Architecture that reads mutable state (``cache_by_value = False``) is not cached by value either."""
    x = jnp.array([0.7, -1.3, 0.4])
    arch = _ScaledMLP()
    _SCALE["value"] = 1.0
    c1 = nqf.structure.check_theorem1(arch, x=x, rays=1, scales=np.logspace(-3, -1, 4), seed=0)
    _SCALE["value"] = 3.0
    try:
        c3 = nqf.structure.check_theorem1(arch, x=x, rays=1, scales=np.logspace(-3, -1, 4), seed=0)
        B3 = structure_stack(arch, x[None], method="closed", check=False)
    finally:
        _SCALE["value"] = 1.0
    np.testing.assert_allclose(c3.A_autodiff, 3.0 * c1.A_autodiff, rtol=1e-14)
    np.testing.assert_allclose(B3[0], 3.0 * c1.A, rtol=1e-14)
    assert c1.closed_form_error < 1e-12 and c3.closed_form_error < 1e-12


def test_structure_reports_compile_a_plain_callable_once_per_call():
    xs = normal(jax.random.PRNGKey(3), (4, 3))
    _SCALE["value"] = 1.0
    with count_compilations() as seen:
        reps = nqf.structure._autodiff.structure_reports(_global_reading_module, xs, p=4)
    probes = len(seen)
    assert len(reps) == 4
    for x, rep in zip(xs, reps):
        np.testing.assert_allclose(rep.A, nqf.structure_report(_global_reading_module, x, p=4).A, rtol=1e-14)
    with count_compilations() as seen:  # a new call traces afresh (no stale A) ...
        nqf.structure._autodiff.structure_reports(_global_reading_module, xs, p=4)
    assert 1 <= len(seen) <= probes  # ... but once for all its inputs
    with pytest.raises(ValueError, match="`xs` must hold at least one input"):
        nqf.structure._autodiff.structure_reports(_global_reading_module, [], p=4)
