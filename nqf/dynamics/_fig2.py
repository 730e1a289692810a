r"""One panel of Fig. 2 (Sec. 7): a module of :func:`nqf.datasets.fig2_modules` and its NQF trained on a
low-rank teacher (:func:`nqf.datasets.low_rank_teacher`) at several initial scales at once, with
:func:`nqf.dynamics.compare_with_nqf` (one configuration of the trainer), read as recovered singular
values $\hat s_k(t)/s_k$ of the end-to-end linear map.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._compare import compare_with_nqf


class Fig2Run(NamedTuple):
    """One panel of Fig. 2 (one module, one optimiser), at several initial scales at once."""

    sigmas: np.ndarray  #: (B,) initial weight standard deviations
    steps: np.ndarray  #: (T,) recorded steps
    module: np.ndarray  #: (B, T, r) recovered singular values of the module over s_k
    nqf: np.ndarray  #: (B, T, r) the same for its NQF
    gap: np.ndarray  #: (B,) max over steps and modes of |module - nqf| (in units of s_k)
    half_module: np.ndarray  #: (B, r) first recorded step with ratio >= 1/2 (inf: never)
    half_nqf: np.ndarray  #: (B, r)
    window: np.ndarray  #: (B,) agreement window of the probe outputs (compare_with_nqf)
    loss_module: np.ndarray  #: (B, T) training loss
    loss_nqf: np.ndarray  #: (B, T)
    comparison: Any  #: the full :class:`~nqf.dynamics.Comparison`


def half_times(steps: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """First recorded step at which ``ratio`` (``(..., T, r)``) reaches 1/2, per mode (``inf``: never)."""
    above = np.asarray(ratio) >= 0.5
    first = np.argmax(above, axis=-2)
    return np.where(above.any(axis=-2), np.asarray(steps)[first].astype(float), np.inf)


def fig2_run(
    module: Any, teacher: Any, optimizer: Any, num_steps: int, sigmas: Any, *, key: Array,
    record_every: int = 1, threshold: float = 0.1, n_probe: int = 100,
) -> Fig2Run:
    r"""Train ``module`` and its NQF on ``teacher`` from $W(0) = \sigma Z$ (one Gaussian $Z$, entries
    $\mathcal N(0, 1)$, shared by all $\sigma$ so that only the scale changes) for every $\sigma$ in
    ``sigmas`` at once (one compile), with :func:`nqf.compare_with_nqf`; returns the recovered singular
    values $\hat s_k(t)/s_k$ of both runs (module docstring), their largest gap, the steps at which each
    ratio reaches 1/2, and the agreement window of the outputs on the first ``n_probe`` samples."""
    sig = np.asarray(sigmas, dtype=float)
    if sig.ndim != 1 or sig.size < 1 or np.any(sig <= 0):
        raise ValueError(f"`sigmas` must be a 1-D array of positive scales; got {sigmas!r}.")
    Z = jax.random.normal(key, (module.arch.p, module.d))
    W0 = jnp.asarray(sig)[:, None, None] * Z[None]
    probe = jax.tree_util.tree_map(lambda a: a[:n_probe], teacher.xs)
    res = compare_with_nqf(module.arch, W0, (teacher.xs, teacher.ys), optimizer, num_steps, probe=probe,
                           track=("loss", "outputs", "singular_values"), linear_map=module.linear_map,
                           record_every=record_every, threshold=threshold)
    r = teacher.s.size
    mod = res.module["singular_values"][..., :r] / teacher.s
    nq = res.nqf["singular_values"][..., :r] / teacher.s
    return Fig2Run(sig, res.steps, mod, nq, np.max(np.abs(mod - nq), axis=(1, 2)), half_times(res.steps, mod),
                   half_times(res.steps, nq), res.window, res.module["loss"], res.nqf["loss"], res)
