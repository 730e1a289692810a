r"""Chapter 7's Fig. 5 verdict (Eq. 298 under each reading of erratum 9), as a recipe beside the notebook.

The paper prints settings for Fig. 5 that cannot give its power law (erratum 9); which printed setting is
wrong it does not say, so every reading is an option of the verdict (:data:`READINGS`). For one reading
and one $\theta$:

* :func:`bound` is the threshold, computed from theory alone before any run: at the *nominal*
  initialisation (each $z_k(0) = \frac12(a_k+W_k)^2$ at the geometric mean of its $\chi^2_1$ law,
  $\sigma^2\cdot2e^{\psi(1/2)}$), Eq. (158) gives the modes that switch on before the end of the run,
  the window is modes $2..n$ (the page's rule), and a slope fitted there differs from Eq. (298) by at most
  $|\delta| + $ the sharp-switch rule: $\delta$ is Eqs. (289)-(292) over the window with the sum stopped
  at $P$ (the finite-window curvature, the finite number of modes, the finite $\epsilon$) minus Eq. (298);
  the sharp-switch rule bounds the discreteness of the staircase (Euler-Maclaurin) and the width of the
  switch-ons. Also from theory: whether GD is stable at every mode's solution ($\eta\cdot4c_kb_k < 2$,
  the Hessian of $(c_ka_kW_k - b_k)^2$ at $a_k = W_k$, $c_ka_kW_k = b_k$).
* :func:`slopes` runs the NQF (GD in its eigenbasis, :func:`ch07_runs.fourier_nqf_gd`) for every seed
  and $\theta$ in one vmapped program and fits each loss over the window of the bound's modes, converted to
  times with the run's own switch-on times (Eq. 158 at its drawn $z_k(0)$).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from scipy.special import digamma

import nqf
from nqf import datasets, solutions
from nqfbook import kit

from ch07_runs import fourier_nqf_gd

#: Fig. 5 as printed (App. C): P, M, beta, eps (weight std), eta, steps, recording interval.
P, M, BETA, EPS, ETA, STEPS, EVERY = 64, 256, 1.5, 1e-4, 0.02, 30_000, 10
#: the geometric mean of a chi^2_1 variable: E ln chi^2_1 = psi(1/2) + ln 2
CHI2_GEOMEAN = float(2 * np.exp(digamma(0.5)))


class Reading(NamedTuple):
    """One reading of Fig. 5's printed settings: each changes one setting (or none)."""
    name: str
    normalise: bool = True       # the P^-1/2 of Eq. (50)
    summed: bool = False         # the loss summed over the M grid points (GD at M eta), not averaged
    step_factor: int = 1         # the steps in units of the printed 30 000
    eps_is_z0: bool = False      # eps the scale of z_k(0) (Sec. 6, erratum 4): weights N(0, eps), std sqrt(eps)

    @property
    def learning_rate(self) -> float:
        return ETA * (M if self.summed else 1)

    @property
    def num_steps(self) -> int:
        return STEPS * self.step_factor

    @property
    def record_every(self) -> int:
        return 1 if self.summed else EVERY * self.step_factor  # summed: switch-ons come M times sooner

    @property
    def std(self) -> float:
        return float(np.sqrt(EPS)) if self.eps_is_z0 else EPS

    @property
    def times(self) -> np.ndarray:
        return self.learning_rate * self.record_every * np.arange(self.num_steps // self.record_every + 1)


READINGS = (Reading("as printed"), Reading("no P^-1/2", normalise=False), Reading("summed loss", summed=True),
            Reading("8x steps", step_factor=8), Reading("eps as z(0) scale", eps_is_z0=True))


def couplings(reading: Reading, theta: float) -> np.ndarray:
    """c_k = s_k / sqrt(P) (or s_k without the P^-1/2), s_k = k^-theta."""
    return np.arange(1, P + 1) ** -float(theta) / (np.sqrt(P) if reading.normalise else 1.0)


class Bound(NamedTuple):
    """The threshold of one (reading, theta), from theory only."""
    n: int              # modes switched on before the end of the run at the nominal init (window: modes 2..n)
    eq298: float        # (2 beta - 1) / (theta + beta)
    pred: float         # Eqs. (289)-(292) over modes 2..n, sum stopped at P, nominal log-ratios
    sharp: float        # the sharp-switch rule (discreteness + width), without its fit floor
    threshold: float    # |pred - eq298| + sharp (nan when n < 3: no slope to fit)
    stability: float    # max_k eta * 4 c_k b_k (GD unstable at a mode's solution when > 2)

    @property
    def stable(self) -> bool:
        return self.stability < 2.0


def bound(reading: Reading, theta: float) -> Bound:
    d = datasets.fourier_dataset(P, M, beta=BETA, theta=theta, normalise=reading.normalise)
    z_nom = np.full(P, reading.std**2 * CHI2_GEOMEAN)
    ts = np.asarray(nqf.solutions.switch_on_time(d.r, d.C, z_nom))
    n = min(int(np.sum(ts < reading.times[-1])), P - 1)  # the last of the P modes has no tail after it
    eq298 = float(solutions.feature_exponent(2 * BETA, theta + BETA))
    stab = float(np.max(reading.learning_rate * 4 * couplings(reading, theta) * d.b))
    if n < 3:
        return Bound(n, eq298, np.nan, np.nan, np.nan, stab)
    ks = np.arange(2, n + 1)
    lr = np.log(d.r / (d.C * z_nom))[ks - 1]
    ks = ks.astype(float)
    pred = float(solutions.effective_exponent_window(2 * BETA, theta + BETA, ks, lr, K=float(P)))
    sharp = kit.sharp_switch_tolerance(lr.min(), pred, k_lo=2, k_hi=n, floor=0.0)
    return Bound(n, eq298, pred, sharp, abs(pred - eq298) + sharp, stab)


def init(seed: int, std: float) -> np.ndarray:
    """a_k, W_k ~ N(0, std^2): rows (a, W), shape (2, P)."""
    return np.asarray(std * jax.random.normal(jax.random.PRNGKey(int(seed)), (2, P)))


class Slopes(NamedTuple):
    slopes: np.ndarray   # (seeds, thetas): the NQF's fitted exponent (nan: no window)
    loss: np.ndarray     # (seeds, thetas, R)
    times: np.ndarray    # (R,)


def slopes(reading: Reading, thetas, seeds, bounds) -> Slopes:
    """The NQF of every (seed, theta) in one vmapped run; each loss fitted over modes 2..n of its bound."""
    thetas, seeds = list(thetas), list(seeds)
    p0 = np.stack([init(s, reading.std) for s in seeds])                        # (S, 2, P)
    ds = [datasets.fourier_dataset(P, M, beta=BETA, theta=th, normalise=reading.normalise) for th in thetas]
    S, T = len(seeds), len(thetas)
    params = np.repeat(p0, T, axis=0)                                           # (S*T, 2, P), seed-major
    b = np.tile(np.stack([d.b for d in ds]), (S, 1))
    c = np.tile(np.stack([couplings(reading, th) for th in thetas]), (S, 1))
    L = np.asarray(fourier_nqf_gd(params, b, c, products=False, learning_rate=reading.learning_rate,
                                  num_steps=reading.num_steps, record_every=reading.record_every)).reshape(S, T, -1)
    t = reading.times
    out = np.full((S, T), np.nan)
    for i in range(S):
        z0 = (p0[i, 0] + p0[i, 1]) ** 2 / 2
        for j, (d, bd) in enumerate(zip(ds, bounds)):
            if bd.n < 3 or not np.all(np.isfinite(L[i, j])):
                continue
            ts = np.sort(np.asarray(nqf.solutions.switch_on_time(d.r, d.C, z0)))
            lo, hi = ts[1], min(ts[bd.n - 1], t[-1])
            if hi > lo:
                out[i, j] = kit.power_law_fit(t[1:], L[i, j, 1:], lo, hi).exponent
    return Slopes(out, L, t)


#: How a reading is named on the page (typeset); its ``name`` stays the option's key in the claims.
LABELS = {"no P^-1/2": "no $P^{-1/2}$", "8x steps": "8× the steps", "eps as z(0) scale": "$\\epsilon$ as the scale of $z_k(0)$"}


def label(name: str) -> str:
    """The page's name of a reading."""
    return LABELS.get(name, name)


def theta_label(theta: float) -> str:
    return f"{float(theta):g}"


def bounds_table(bounds, thetas):
    """Per reading and theta, the predicted switch-ons, Eqs. (289)-(292), Eq. (298), the threshold: a
    :func:`nqfbook.kit.table`."""
    columns = ["reading", "GD stable ($\\max_k\\eta\\,4c_kb_k$)"] + [
        f"$\\theta = {theta_label(th)}$: $n$, Eqs. (289)-(292), threshold" for th in thetas]
    rows = []
    for R in READINGS:
        cells = []
        for th in thetas:
            b = bounds[(R.name, th)]
            cells.append(f"{b.n}, no slope" if b.n < 3 else f"{b.n}, {b.pred:.3f}, {b.threshold:.3f}")
        b0 = bounds[(R.name, thetas[0])]
        rows.append((label(R.name), f"{'yes' if b0.stable else 'no'} ({b0.stability:.2f})", *cells))
    return kit.table(rows, columns=columns)


def options(reading_slopes, bounds, theta, theta_index):
    """judge's inputs for one theta: per reading the statistic |slope - Eq. 298| per seed, the threshold, and
    the runs set aside (GD unstable: every run of that reading). Readings with fewer than 3 predicted
    switch-ons are left out (no window): returned separately."""
    values, thresholds, diverged, left_out = {}, {}, {}, []
    for R in READINGS:
        b = bounds[(R.name, theta)]
        if b.n < 3:
            left_out.append(R.name)
            continue
        s = reading_slopes[R.name].slopes[:, theta_index]
        values[R.name] = np.abs(s - b.eq298)
        thresholds[R.name] = b.threshold
        diverged[R.name] = np.full(s.shape, not b.stable)
    return values, thresholds, diverged, left_out


def _option(verdicts, theta, reading, left_out):
    """The reading's option verdict at ``theta``, or None where it was left out (fewer than 3 switch-ons)."""
    if reading.name in left_out[theta]:
        return None
    return next(o for o in verdicts[theta].options if o.option == reading.name)


def verdict_rows(verdicts, thetas, left_out):
    """Per reading and theta, the outcome with the mean statistic, margin and uncertainty: a
    :func:`nqfbook.kit.table`."""
    def cell(o):
        if o is None:
            return "left out (fewer than 3 switch-ons)"
        if o.reason:
            return f"{o.outcome}: {o.reason}"
        return f"**{o.outcome}**: {o.mean:.3f} vs {o.threshold:.3f}, margin {o.margin:+.3f} ± {o.uncertainty:.3f}"

    columns = ["reading"] + [f"$\\theta = {theta_label(th)}$" for th in thetas]
    rows = [(label(R.name), *(cell(_option(verdicts, th, R, left_out)) for th in thetas)) for R in READINGS]
    return kit.table(rows, columns=columns)


def reading_outcomes(verdicts, thetas, left_out) -> dict:
    """Per reading: "holds" (every theta holds), "against" (against at some theta, or left out at some theta:
    no power law to read), "not judged" (its runs set aside), or "partly" (holds or inconclusive)."""
    out = {}
    for R in READINGS:
        opts = [_option(verdicts, th, R, left_out) for th in thetas]
        outs = ["left out" if o is None else "not judged" if o.reason else o.outcome for o in opts]
        if all(o == "not judged" for o in outs):
            out[R.name] = "not judged"
        elif any(o in ("against", "left out") for o in outs):
            out[R.name] = "against"
        elif all(o == "holds" for o in outs):
            out[R.name] = "holds"
        else:
            out[R.name] = "partly"
    return out
