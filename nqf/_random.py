r"""Eager Gaussian draws that compile once per power-of-two size, with ``jax.random.normal``'s numbers.

Under JAX's partitionable threefry (``jax_threefry_partitionable``, the default since JAX 0.5) the value at flat
index ``i`` depends only on the key and ``i``, so the first ``prod(shape)`` values of a larger draw, reshaped,
are the draw itself, bit for bit: :func:`normal` draws the next power of two and keeps that prefix (one
program per size class instead of one per shape). Where that is not guaranteed (another PRNG, a traced key or
shape) it is ``jax.random.normal``.
"""

from __future__ import annotations

import math

import jax
import numpy as np

_THREEFRY = "threefry2x32"


def _bucketable(key) -> bool:
    if isinstance(key, jax.core.Tracer) or not jax.config.jax_threefry_partitionable:
        return False
    if jax.dtypes.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key):
        return str(jax.random.key_impl(key)) == _THREEFRY and key.shape == ()
    impl = jax.config.jax_default_prng_impl
    return impl == _THREEFRY and np.shape(key) == (2,) and getattr(key, "dtype", None) == np.uint32


def normal(key, shape=(), dtype=None) -> jax.Array:
    """``jax.random.normal(key, shape, dtype)``, bit for bit; outside ``jit``, one compilation per size class."""
    shape = tuple(int(s) for s in shape)
    dtype = float if dtype is None else dtype
    size = math.prod(shape)
    if size == 0 or not _bucketable(key):
        return jax.random.normal(key, shape, dtype)
    flat = jax.random.normal(key, (1 << (size - 1).bit_length(),), dtype)
    return jax.device_put(np.asarray(flat)[:size].reshape(shape))  # (jnp.asarray would compile a copy per shape)


def split(key, num: int = 2) -> list:
    """``list(jax.random.split(key, num))``, the same keys, without the small programs that slicing a key array
    eagerly compiles per shape (unstack, slice, squeeze): raw keys go through NumPy; typed keys are sliced by JAX."""
    keys = jax.random.split(key, num)
    if getattr(keys, "dtype", None) == np.uint32:
        return list(np.asarray(keys))
    return list(keys)


def normals(pairs) -> tuple:
    """``tuple(jax.random.normal(key, shape) for key, shape in pairs)`` in the default float, bit for bit, as one
    vectorised draw: under the partitionable threefry each draw is the prefix of a draw of the largest size from its
    key, so inside ``jit`` the program holds one threefry and one inverse error function instead of one per shape
    (Fig. 8's data: half the compile time). The keys are raw keys ``(2,)``; elsewhere (another PRNG
    implementation, typed keys, the non-partitionable threefry) it is the separate draws."""
    pairs = [(key, tuple(int(s) for s in shape)) for key, shape in pairs]
    sizes = [math.prod(shape) for _, shape in pairs]
    plain = (not jax.config.jax_threefry_partitionable or jax.config.jax_default_prng_impl != _THREEFRY
             or not pairs or min(sizes) == 0
             or any(jax.dtypes.issubdtype(getattr(k, "dtype", None), jax.dtypes.prng_key) for k, _ in pairs))
    if plain:
        return tuple(jax.random.normal(key, shape) for key, shape in pairs)
    flat = jax.vmap(lambda k: jax.random.normal(k, (max(sizes),)))(jax.numpy.stack([key for key, _ in pairs]))
    return tuple(flat[i, :n].reshape(shape) for i, (n, (_, shape)) in enumerate(zip(sizes, pairs)))
