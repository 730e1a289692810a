"""nqf._random.normal: jax.random.normal's numbers, bit for bit, compiled once per power-of-two size."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import count_compilations

from nqf._random import normal
from nqfbook.kit import unroll_threefry_on_cpu

SHAPES = [(), (1,), (3,), (4,), (5, 7), (8, 8), (2, 3, 5), (17,), (100, 3), (0, 4)]


@pytest.mark.parametrize("dtype", [None, jnp.float32, jnp.float64])
@pytest.mark.parametrize("make_key", [jax.random.PRNGKey, jax.random.key], ids=["raw key", "typed key"])
def test_normal_is_jax_random_normal_bit_for_bit(dtype, make_key):
    key = make_key(11)
    for shape in SHAPES:
        want = jax.random.normal(key, shape) if dtype is None else jax.random.normal(key, shape, dtype)
        got = normal(key, shape) if dtype is None else normal(key, shape, dtype)
        assert got.shape == want.shape and got.dtype == want.dtype and got.weak_type == want.weak_type
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_shapes_of_one_size_class_share_one_compilation():
    key = jax.random.PRNGKey(5)
    normal(key, (7, 9))  # 63 values: the size class 64
    with count_compilations() as seen:
        for shape in [(8, 8), (33,), (2, 2, 12), (5, 11)]:  # 64, 33, 48, 55 values
            normal(key, shape)
    assert seen == []


def test_under_jit_and_without_the_partitionable_threefry_it_is_the_plain_draw():
    key = jax.random.PRNGKey(2)
    traced = jax.jit(lambda k: normal(k, (3, 5)))(key)
    np.testing.assert_array_equal(np.asarray(traced), np.asarray(jax.random.normal(key, (3, 5))))
    with jax.threefry_partitionable(False):
        np.testing.assert_array_equal(np.asarray(normal(key, (3, 5))), np.asarray(jax.random.normal(key, (3, 5))))


def test_normals_are_the_separate_draws_bit_for_bit_under_jit_and_eagerly():
    from nqf._random import normals

    keys = jax.random.split(jax.random.PRNGKey(9), 4)
    shapes = [(24, 16), (17, 16), (3,), ()]
    want = [jax.random.normal(k, s) for k, s in zip(keys, shapes)]
    for got in (normals(zip(keys, shapes)), jax.jit(lambda ks: normals(zip(ks, shapes)))(keys)):
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    with jax.threefry_partitionable(False):
        for g, k, s in zip(normals(zip(keys, shapes)), keys, shapes):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(jax.random.normal(k, s)))


def _draws():
    key, typed = jax.random.PRNGKey(7), jax.random.key(8)
    return [jax.random.normal(key, (1000,)), jax.random.uniform(typed, (77, 5)), jax.random.bits(key, (33,), jnp.uint64),
            jax.random.key_data(jax.random.split(typed, 7)), jax.random.randint(key, (50,), 0, 1000),
            jax.random.permutation(key, 100), jax.vmap(lambda k: jax.random.normal(k, (3, 4)))(jax.random.split(key, 5)),
            jax.jit(lambda k: jax.random.normal(jax.random.fold_in(k, 3), (6, 2)))(key)]


def _rule(rolled: bool) -> None:
    from jax._src.interpreters import mlir
    from jax._src.random import threefry2x32 as threefry

    if rolled:
        mlir.register_lowering(threefry.threefry2x32_p, threefry._threefry2x32_cpu_lowering_rule, platform="cpu")
    else:
        assert unroll_threefry_on_cpu()
    jax.clear_caches()


def test_unrolled_threefry_gives_the_rolled_draws_bit_for_bit():
    bits = jax.jit(lambda k: jax.random.bits(k, (4,)))
    try:
        _rule(rolled=True)
        rolled, rolled_text = _draws(), bits.lower(jax.random.PRNGKey(0)).as_text()
        _rule(rolled=False)
        unrolled, unrolled_text = _draws(), bits.lower(jax.random.PRNGKey(0)).as_text()
    finally:
        _rule(rolled=False)  # the suite's setting (conftest), whatever happened
    assert "while" in rolled_text and "while" not in unrolled_text  # the two rules did differ
    for a, b in zip(rolled, unrolled):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
