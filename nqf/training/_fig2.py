r"""One panel of Fig. 2 (Sec. 7): a module of :func:`nqf.datasets.fig2_modules` and its NQF trained on a
low-rank teacher (:func:`nqf.datasets.low_rank_teacher`) at several initial scales at once, with
:func:`nqf.training.compare_with_nqf` (one configuration of the trainer), read as recovered singular
values $\hat s_k(t)/s_k$ of the end-to-end linear map.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._checks import check_size
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
    comparison: Any  #: the full :class:`~nqf.training.Comparison` (lanes flattened: seed-major)

    def learning_phase_gap(self, t_end: Any) -> np.ndarray:
        r"""Largest gap $\max_{t\le t_\text{end},\,k}|\hat s_k^\text{module}(t) - \hat s_k^\text{NQF}(t)|$
        over the recorded steps up to ``t_end`` (a number of steps, e.g. the step at which the slowest
        mode of a reference run is half learned); the shape of ``gap``. Non-finite values count as
        parted (``inf``)."""
        sel = self.steps <= float(t_end)
        d = np.abs(self.module[..., sel, :] - self.nqf[..., sel, :])
        d = np.where(np.isfinite(d), d, np.inf)
        return np.max(d, axis=(-2, -1))

    def end_gap(self) -> np.ndarray:
        r"""Gap at the last recorded step, $\max_k|\hat s_k^\text{module}(T) - \hat s_k^\text{NQF}(T)|$."""
        d = np.abs(self.module[..., -1, :] - self.nqf[..., -1, :])
        return np.max(np.where(np.isfinite(d), d, np.inf), axis=-1)


def half_times(steps: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """First recorded step at which ``ratio`` (``(..., T, r)``) reaches 1/2, per mode (``inf``: never)."""
    above = np.asarray(ratio) >= 0.5
    first = np.argmax(above, axis=-2)
    return np.where(above.any(axis=-2), np.asarray(steps)[first].astype(float), np.inf)


def fig2_run(
    module: Any, teacher: Any, optimizer: Any, num_steps: int, sigmas: Any, *, key: Array,
    record_every: int = 1, threshold: float = 0.1, n_probe: int = 100, seeds: int | None = None,
    nqf_form: Any = "feature",
) -> Fig2Run:
    r"""Train ``module`` and its NQF on ``teacher`` from $W(0) = \sigma Z$ (one Gaussian $Z$, entries
    $\mathcal N(0, 1)$, shared by all $\sigma$ so that only the scale changes) for every $\sigma$ in
    ``sigmas`` at once (one compile), with :func:`nqf.compare_with_nqf`; returns the recovered singular
    values $\hat s_k(t)/s_k$ of both runs (module docstring), their largest gap, the steps at which each
    ratio reaches 1/2, and the agreement window of the outputs on the first ``n_probe`` samples.

    With ``seeds = S`` (an integer) the run has ``S`` independent draws of $Z$ (from
    ``jax.random.split(key, S)``), all lanes ``S x B`` in one vmapped compile, and every per-lane array
    of the result gains a leading seed axis: ``(S, B, ...)``. ``seeds=None`` (default) keeps one draw
    from ``key`` and shapes ``(B, ...)``.

    The NQF is evaluated through the module's linear feature (``nqf_form="feature"``, default): its
    output minus $f_x(0)$ is ``module.feature_output(W, x)``, $L(W)$ on a feature of $x$ (checked against
    the matrix-free NQF before the run, :func:`nqf.compare_with_nqf`); any ``nqf_form`` of
    :func:`nqf.compare_with_nqf` may be given instead (``"matrix-free"``: the same numbers, slower)."""
    sig = np.asarray(sigmas, dtype=float)
    if sig.ndim != 1 or sig.size < 1 or np.any(sig <= 0):
        raise ValueError(f"`sigmas` must be a 1-D array of positive scales; got {sigmas!r}.")
    if seeds is None:
        Z = jax.random.normal(key, (module.arch.p, module.d))[None]
    else:
        check_size("seeds", seeds)
        Z = jax.vmap(lambda k: jax.random.normal(k, (module.arch.p, module.d)))(jax.random.split(key, seeds))
    S, B = Z.shape[0], sig.size
    W0 = (jnp.asarray(sig)[None, :, None, None] * Z[:, None]).reshape(S * B, module.arch.p, module.d)
    probe = jax.tree_util.tree_map(lambda a: a[:n_probe], teacher.xs)
    res = compare_with_nqf(module.arch, W0, (teacher.xs, teacher.ys), optimizer, num_steps, probe=probe,
                           track=("loss", "outputs", "singular_values"), linear_map=module.linear_map,
                           record_every=record_every, threshold=threshold,
                           nqf_form=module.feature_output if nqf_form == "feature" else nqf_form)
    r = teacher.s.size
    mod = res.module["singular_values"][..., :r] / teacher.s
    nq = res.nqf["singular_values"][..., :r] / teacher.s
    shape = (B,) if seeds is None else (S, B)
    lane = lambda a: np.asarray(a).reshape(shape + np.shape(a)[1:])  # noqa: E731
    mod, nq = lane(mod), lane(nq)
    return Fig2Run(sig, res.steps, mod, nq, np.max(np.abs(mod - nq), axis=(-2, -1)), half_times(res.steps, mod),
                   half_times(res.steps, nq), lane(res.window), lane(res.module["loss"]), lane(res.nqf["loss"]), res)
