r"""Split a batch of independent solves over the devices of a ``jax.sharding`` mesh.

:func:`sharded_vmap` runs a vmapped function under ``jax.shard_map``: the batch axis is cut into one block per
device along the mesh's first axis (each device runs its own adaptive loop), unbatched arguments (the shared
dataset) are replicated. On one host the mesh spans the local devices; after ``jax.distributed.initialize()`` a
mesh over ``jax.devices()`` spans every host (see the README).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P
from .._checks import invalid, wrong_kind


def batch_mesh(*, devices: Sequence[Any] | None = None, axis_name: str = "batch") -> Mesh:
    """A one-axis mesh over ``devices`` (default: every local device, ``jax.local_devices()``)."""
    devices = list(jax.local_devices() if devices is None else devices)
    if not devices:
        raise invalid("devices", 'hold at least one device', 'an empty sequence')
    return Mesh(np.asarray(devices), (axis_name,))


def check_mesh(mesh: Any) -> None:
    """Raise a clear TypeError unless ``mesh`` is a ``jax.sharding.Mesh`` (or ``None``)."""
    if mesh is not None and not isinstance(mesh, Mesh):
        raise wrong_kind("mesh", 'be a jax.sharding.Mesh (e.g. nqf.flow.batch_mesh()) or None',
                         f'{type(mesh).__name__}')


def sharded_vmap(
    fn: Callable[..., Any], in_axes: Sequence[int | None], mesh: Mesh | None, *, sequential: bool = False
) -> Callable[..., Any]:
    """``jax.vmap(fn, in_axes)``, and with a ``mesh`` the same split over its first axis.

    ``sequential=True`` runs the lanes of each device one after the other (``jax.lax.map``)
    instead of in lock step: better when each lane carries large per-step buffers (a dense
    solution), whose batched in-place updates XLA cannot do in place, or when lanes need very
    different numbers of steps.

    Every batched argument (``in_axes`` entry ``0``) must share its leading size ``n``; the batch is
    padded to a multiple of the mesh size with copies of lane 0 (dropped from the result), so any
    ``n`` works. Outputs carry the batch on their leading axis. Traceable: call it inside ``jit``.
    """
    in_axes = tuple(in_axes)
    if sequential:
        def vf(*args):
            batched = tuple(a if ax == 0 else None for a, ax in zip(args, in_axes))

            def lane(b):
                return fn(*(bi if ax == 0 else a for bi, a, ax in zip(b, args, in_axes)))

            return jax.lax.map(lane, batched)
    else:
        vf = jax.vmap(fn, in_axes=in_axes)
    if mesh is None:
        return vf
    axis = mesh.axis_names[0]
    n_dev = mesh.shape[axis]

    def run(*args):
        sizes = {jax.tree_util.tree_leaves(a)[0].shape[0] for a, ax in zip(args, in_axes) if ax == 0}
        if len(sizes) != 1:
            raise invalid("args", "share their leading (batch) size", f"sizes {sorted(sizes)}")
        (n,) = sizes
        pad = (-n) % n_dev

        def padded(a):
            return jnp.concatenate([a, jnp.repeat(a[:1], pad, axis=0)]) if pad else a

        args = tuple(jax.tree.map(padded, a) if ax == 0 else a for a, ax in zip(args, in_axes))
        specs = tuple(jax.tree.map(lambda _: P(axis) if ax == 0 else P(), a) for a, ax in zip(args, in_axes))
        out = jax.shard_map(vf, mesh=mesh, in_specs=specs, out_specs=P(axis), check_vma=False)(*args)
        return jax.tree.map(lambda x: x[:n], out)

    return run
