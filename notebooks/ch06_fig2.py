"""Chapter 6's recipe: one panel of Fig. 2, a module of ``ch06_modules.fig2_modules`` and its NQF trained on a
low-rank teacher (``ch06_modules.low_rank_teacher``) from $W(0) = \\sigma Z$ at several scales $\\sigma$ (and seeds)
at once: one :func:`nqf.training.compare_with_nqf`, read as recovered singular values $\\hat s_k(t)/s_k$."""

from typing import Any, NamedTuple

import equinox as eqx
import jax
import numpy as np

from nqf import quadratic_form
from nqf.training import Track, compare_with_nqf, first_crossing
from nqfbook.kit import seed_mean_reading


def half_times(steps, ratio):
    """First recorded step at which ``ratio`` (``(..., T, r)``) reaches 1/2, per mode: the package's one first
    crossing (:func:`nqf.training.first_crossing`, on the recording grid; ``inf``: never)."""
    return first_crossing(steps, ratio, 0.5, axis=-2, interpolate=False)


def censor(times, never):
    """The rules' one censoring step: a time never reached (``inf``, the first crossing's one "never" value) counts as
    ``never``, one recording interval beyond the run; a difference involving it is then a lower bound."""
    return np.minimum(np.asarray(times, dtype=float), float(never))


# ---------------------------------------------------------------- lanes: one run per (seed, sigma), issue 28
def seed_directions(module, seeds):
    """The initial directions ``Z`` of integer ``seeds``, ``(S, p, d)``: seed ``s`` draws ``Z ~ N(0, 1)`` from
    ``jax.random.PRNGKey(s)`` (a seed names its run, so a fresh confirmation seed is a fresh draw). One draw per
    seed: jax.random.normal's compiled program for the shape ``(p, d)`` serves every seed and every other draw of
    that shape (a vmapped draw would compile its own)."""
    shape = (module.arch.p, module.d)
    return np.stack([np.asarray(jax.random.normal(jax.random.PRNGKey(int(s)), shape)) for s in np.ravel(seeds)])


@eqx.filter_jit
def _outputs(arch, W, xs):  # W an argument: XLA (CPU, jax 0.10.2) turned a constant zero W into NaN for the CNN
    return jax.vmap(lambda x: arch.apply(W, x))(xs)


class Fig2Lanes(NamedTuple):
    """One Fig. 2 panel as a flat list of lanes, lane ``i`` the run of seed ``seeds[i]`` at scale ``sigmas[i]``."""

    seeds: np.ndarray  #: (L,) integer seed of each lane
    sigmas: np.ndarray  #: (L,) initial scale of each lane
    steps: np.ndarray  #: (T,) recorded steps
    module: np.ndarray  #: (L, T, r) recovered singular values of the module over s_k
    nqf: np.ndarray  #: (L, T, r) the same for its NQF
    half_module: np.ndarray  #: (L, r) first recorded step with ratio >= 1/2 (inf: never)
    half_nqf: np.ndarray  #: (L, r)
    out_module: np.ndarray  #: (L, T, n, o) module outputs on the probe inputs
    out_nqf: np.ndarray  #: (L, T, n, o) NQF outputs on the probe inputs
    signal: float  #: ||y - f(0)|| on the probe inputs (the scale of the probe gap)
    diverged: np.ndarray  #: (L,) a non-finite loss (at some step) or probe output (at some recorded step), module or NQF
    comparison: Any  #: the nqf.training.Comparison

    def lanes(self, seeds, sigma):
        """Indices of the lanes of ``seeds`` (in that order) at scale ``sigma``."""
        idx = {(int(s), float(g)): i for i, (s, g) in enumerate(zip(self.seeds, self.sigmas))}
        return np.array([idx[int(s), float(sigma)] for s in seeds], dtype=int)

    def probe_gap(self):
        r"""(L, T) relative probe output gap $\|f^\text{module} - f^\text{NQF}\| / \|y - f(0)\|$ on the probe inputs."""
        d = self.out_module - self.out_nqf
        return np.sqrt(np.sum(d * d, axis=(-2, -1))) / self.signal

    def sv_gap(self, t_end):
        """(L,) max over recorded steps <= t_end and modes of |module - nqf| (units of s_k); NaN if diverged."""
        sel = self.steps <= float(t_end)
        g = np.max(np.abs(self.module[:, sel] - self.nqf[:, sel]), axis=(-2, -1))
        return np.where(self.diverged, np.nan, g)

    def output_gap(self, t_end):
        """(L,) max over recorded steps <= t_end of the probe output gap; NaN if diverged."""
        sel = self.steps <= float(t_end)
        return np.where(self.diverged, np.nan, np.max(self.probe_gap()[:, sel], axis=-1))


def fig2_lanes(module, teacher, optimizer, *, num_steps: int, seeds, sigmas, record_every: int = 1,
               n_probe: int = 100, check_seed: int = 17) -> Fig2Lanes:
    """Lane ``i``: ``W(0) = sigmas[i] Z(seeds[i])`` (:func:`seed_directions`), the module and its NQF (its linear
    feature form, which compare_with_nqf checks against the matrix-free NQF at the first lane's ``W(0)`` and at a random
    ``W`` of unit scale drawn from ``jax.random.PRNGKey(check_seed)``: ``comparison.form_gap``) trained with
    ``optimizer``; all lanes
    vmapped in one compare_with_nqf. Records singular values of ``L(W)`` and the probe outputs; a lane diverged if a
    step's (full-batch) loss or a recorded probe output is not finite (the trainer's batch losses: recording the
    loss again would evaluate the same full batch a second time each step)."""
    seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
    sig = np.asarray(sigmas, dtype=float).reshape(-1)
    if seeds.shape != sig.shape:
        raise ValueError(f"seeds and sigmas must have one entry per lane, got {seeds.shape} and {sig.shape}")
    # host-side (numpy) gather, scale and slice: eager jax ops would compile one small program each, per shape
    uniq, inv = np.unique(seeds, return_inverse=True)
    W0 = sig[:, None, None] * seed_directions(module, uniq)[inv]
    probe = jax.tree_util.tree_map(lambda a: np.asarray(a)[:n_probe], teacher.xs)
    res = compare_with_nqf(quadratic_form(module.arch, form=module.feature_output), (teacher.xs, teacher.ys), optimizer,
                           num_steps=num_steps, params=W0, key=jax.random.PRNGKey(int(check_seed)),
                           track=Track(("outputs", "singular_values"), probe=probe, linear_map=module.linear_map,
                                       record_every=record_every))
    f0 = np.asarray(_outputs(module.arch, np.zeros((module.arch.p, module.d)), probe))
    signal = float(np.sqrt(np.sum((np.asarray(teacher.ys)[:n_probe] - f0) ** 2)))
    r = teacher.s.size
    mod, nq = (np.asarray(x["singular_values"])[..., :r] / teacher.s for x in (res.module, res.nqf))
    om, on = np.asarray(res.module["outputs"]), np.asarray(res.nqf["outputs"])
    om, on = om.reshape(om.shape[:2] + (n_probe, -1)), on.reshape(on.shape[:2] + (n_probe, -1))
    bad = ~(np.all(np.isfinite(np.asarray(res.batch_loss["module"])), axis=-1) & np.all(np.isfinite(np.asarray(res.batch_loss["nqf"])), axis=-1)
            & np.all(np.isfinite(om), axis=(1, 2, 3)) & np.all(np.isfinite(on), axis=(1, 2, 3)))
    return Fig2Lanes(seeds, sig, np.asarray(res.steps), mod, nq, half_times(res.steps, mod), half_times(res.steps, nq),
                     om, on, signal, bad, res)


def nqf_seed_to_seed(run: Fig2Lanes, seeds, sigma, t_end):
    """The NQF's own seed-to-seed gaps up to ``t_end`` at ``sigma``, mean over pairs of ``seeds``:
    ``(singular values: max_{t,k} |s^NQF,s - s^NQF,s'| / s_k, probe outputs: max_t ||f^NQF,s - f^NQF,s'|| / ||y - f(0)||)``."""
    i = run.lanes(seeds, sigma)
    sel = run.steps <= float(t_end)
    q, f = run.nqf[i][:, sel], run.out_nqf[i][:, sel]
    pairs = [(a, b) for a in range(len(i)) for b in range(a + 1, len(i))]
    sv = [np.max(np.abs(q[a] - q[b])) for a, b in pairs]
    out = [np.max(np.sqrt(np.sum((f[a] - f[b]) ** 2, axis=(-2, -1)))) / run.signal for a, b in pairs]
    return float(np.mean(sv)), float(np.mean(out))


# ---------------------------------------------------------------- the statistics of the rules (per seed)
def judged_modes(half_nqf_explore, num_steps, band):
    """(r,) bool: modes the NQF half-learns in every exploration seed at least ``band`` steps before the end."""
    return np.all(np.asarray(half_nqf_explore) <= float(num_steps) - float(band), axis=0)


def learning_phase_end(half_nqf_explore, judged):
    """T_L: the exploration-seed mean half-time of the slowest judged mode of the NQF (steps)."""
    h = np.mean(np.asarray(half_nqf_explore, dtype=float), axis=0)
    return float(np.max(h[np.asarray(judged)])) if np.any(judged) else float("nan")


def switch_on_band(half_nqf_explore, judged):
    """tau = 2 x the root-mean-square over the judged modes of the NQF half-time's sd over exploration seeds."""
    sd = np.std(np.asarray(half_nqf_explore, dtype=float)[:, np.asarray(judged)], axis=0, ddof=1)
    return float(2.0 * np.sqrt(np.mean(sd ** 2)))


def switch_on_stat(half_module, half_nqf, judged, never):
    """(S,) max over judged modes of |t_half^module - t_half^NQF| per seed; a half-time never reached is
    :func:`censor`-ed (one interval beyond the run: the difference is then a lower bound)."""
    hm, hn = censor(half_module, never), censor(half_nqf, never)
    return np.max(np.abs(hm - hn)[:, np.asarray(judged)], axis=-1)


def order_stat(half, judged, never):
    """(S,) max over consecutive judged modes of t_half,k - t_half,k+1 (negative: the modes switch on in the order of
    s_k, by that many steps at the closest pair)."""
    h = censor(half, never)[:, np.asarray(judged)]
    return np.max(h[:, :-1] - h[:, 1:], axis=-1)


def window_growth(windows, never):
    """(S,) max over neighbouring scales (sorted by sigma) of w(sigma_j+1) - w(sigma_j); a pair censored at the same end
    (both never part, ``>= never``, or both part at step 0) carries no information and is left out (NaN if every pair is)."""
    w = censor(windows, never)
    a, b = w[:, :-1], w[:, 1:]
    keep = ~(((a >= never) & (b >= never)) | ((a <= 0) & (b <= 0)))
    d = np.where(keep, b - a, -np.inf)
    out = np.max(d, axis=-1)
    return np.where(np.any(keep, axis=-1), out, np.nan)


def seed_mean_stats(run: Fig2Lanes, lanes, *, judged, never, t_end):
    """The seed-mean readings of the rules, as Fig. 2's curves would be read if they were seed means: the switch-on
    statistic, the order statistic and the singular-value gap, each computed once from the mean over ``lanes`` of the
    module's and the NQF's $\\hat s_k(t)/s_k$ (every recorded step, no smoothing), with a jackknife standard error over
    the lanes (:func:`nqfbook.kit.seed_mean_reading`); diverged lanes are left out. Returns
    ``{"switch", "order", "sv gap"}`` -> :class:`nqfbook.kit.SeedMean` (``"order"`` ``None`` with fewer than two
    judged modes)."""
    lanes = np.asarray(lanes, dtype=int)
    mod, nqf, div, judged = run.module[lanes], run.nqf[lanes], run.diverged[lanes], np.asarray(judged)
    seeds = [int(s) for s in run.seeds[lanes]]

    def half(curve):  # (T, r) -> (r,) censored half-times
        return censor(half_times(run.steps, curve), never)

    def switch(m, q):
        return float(np.max(np.abs(half(m) - half(q))[judged]))

    def order(m):
        h = half(m)[judged]
        return float(np.max(h[:-1] - h[1:]))

    sel = run.steps <= float(t_end)

    def gap(m, q):
        return float(np.max(np.abs(m[sel] - q[sel])))

    return {"switch": seed_mean_reading((mod, nqf), switch, seeds=seeds, diverged=div),
            "order": seed_mean_reading(mod, order, seeds=seeds, diverged=div) if judged.sum() >= 2 else None,
            "sv gap": seed_mean_reading((mod, nqf), gap, seeds=seeds, diverged=div)}
