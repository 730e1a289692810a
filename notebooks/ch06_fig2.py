"""Chapter 6's recipe: one panel of Fig. 2, a module of :func:`nqf.datasets.fig2_modules` and its NQF trained on a
low-rank teacher (:func:`nqf.datasets.low_rank_teacher`) from $W(0) = \\sigma Z$ at several scales $\\sigma$ (and seeds)
at once: one :func:`nqf.training.compare_with_nqf`, read as recovered singular values $\\hat s_k(t)/s_k$."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nqf.training import compare_with_nqf


def half_times(steps, ratio):
    """First recorded step at which ``ratio`` (``(..., T, r)``) reaches 1/2, per mode (``inf``: never)."""
    above = np.asarray(ratio) >= 0.5
    return np.where(above.any(axis=-2), np.asarray(steps)[np.argmax(above, axis=-2)].astype(float), np.inf)


def _parted(d):  # a non-finite gap (a diverged run) counts as parted
    return np.where(np.isfinite(d), d, np.inf)


class Fig2Run(NamedTuple):
    """Arrays ``(S, B, ...)``: seeds x scales (``(B, ...)`` without ``seeds``); ``comparison`` has the lanes flattened."""

    sigmas: np.ndarray  #: (B,) initial scales
    steps: np.ndarray  #: (T,) recorded steps
    module: np.ndarray  #: (S, B, T, r) recovered singular values of the module over s_k
    nqf: np.ndarray  #: (S, B, T, r) the same for its NQF
    half_module: np.ndarray  #: (S, B, r) first recorded step with ratio >= 1/2 (inf: never)
    half_nqf: np.ndarray  #: (S, B, r)
    loss_module: np.ndarray  #: (S, B, T) training loss
    loss_nqf: np.ndarray  #: (S, B, T)
    comparison: Any  #: the nqf.training.Comparison

    def learning_phase_gap(self, t_end):
        """max over recorded steps <= t_end and modes of |module - nqf| (units of s_k)."""
        sel = self.steps <= float(t_end)
        return np.max(_parted(np.abs(self.module[..., sel, :] - self.nqf[..., sel, :])), axis=(-2, -1))

    def end_gap(self):
        """max over modes of |module - nqf| at the last recorded step."""
        return np.max(_parted(np.abs(self.module[..., -1, :] - self.nqf[..., -1, :])), axis=-1)


def fig2_run(module, teacher, optimizer, *, num_steps: int, sigmas, key, seeds: int | None = None,
             record_every: int = 1, n_probe: int = 100, nqf_form=None) -> Fig2Run:
    """W(0) = sigma Z for every sigma (Z ~ N(0, 1) from ``key``, or from ``split(key, seeds)``: one per seed). The NQF
    runs through the module's linear feature (``module.feature_output``, checked against the matrix-free NQF by
    compare_with_nqf) unless ``nqf_form`` names another form of :func:`nqf.compare_with_nqf`."""
    sig, draw = np.asarray(sigmas, dtype=float), lambda k: jax.random.normal(k, (module.arch.p, module.d))
    Z = draw(key)[None] if seeds is None else jax.vmap(draw)(jax.random.split(key, seeds))
    shape = (sig.size,) if seeds is None else (seeds, sig.size)
    W0 = (jnp.asarray(sig)[None, :, None, None] * Z[:, None]).reshape(-1, module.arch.p, module.d)
    res = compare_with_nqf(module.arch, W0, (teacher.xs, teacher.ys), optimizer, num_steps=num_steps,
                           probe=jax.tree_util.tree_map(lambda a: a[:n_probe], teacher.xs),
                           track=("loss", "outputs", "singular_values"), linear_map=module.linear_map,
                           record_every=record_every, nqf_form=module.feature_output if nqf_form is None else nqf_form)
    lane = lambda a: np.asarray(a).reshape(shape + np.shape(a)[1:])  # noqa: E731
    mod, nq = (lane(r["singular_values"][..., :teacher.s.size] / teacher.s) for r in (res.module, res.nqf))
    return Fig2Run(sig, res.steps, mod, nq, half_times(res.steps, mod), half_times(res.steps, nq),
                   lane(res.module["loss"]), lane(res.nqf["loss"]), res)
