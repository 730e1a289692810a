"""nqf._random.normal: jax.random.normal's numbers, bit for bit, compiled once per power-of-two size."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import count_compilations

from nqf._random import normal

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
