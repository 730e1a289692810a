r"""Plateau ends by one rule, and :func:`nqf.diagnose` (Secs. 5-6).

**The rule**: mode $k$ ($k$-th largest eigenvalue of $M = WW^\top$) switches on when $\lambda_k(t)$ first reaches
``HALF`` of its learned level $\lambda_k^\infty$ (:func:`nqf.training.first_crossing`, interpolated): a logistic's
midpoint (Eq. 158). The levels, the tolerances and the range of validity come from the prediction, never from the
measured run.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Float

from .._checks import check_float64, invalid, wrong_kind
from .._types import ArrayLike
from ..flow import ODEOptions, gradient_flow, log_times
from ..model import MSE, NQFData, mse, mse_loss
from ..structure import HypothesisCheck, QuadraticForm, neuron_weights, quadratic_form
from ..training import Agreement, Comparison, Track, compare_with_nqf, first_crossing
from ._drive import drive_spectrum, driven_count, driven_modes, factor_stack
from ._regimes import REGIMES, check_regimes, describes, half_way, linearised_run, valid_until

HALF = 0.5  #: the rule's fraction: half-way from one level to the next
GROWTH = 10.0  #: a learned mode ends at least this many times above the largest initial eigenvalue of M
SETTLED = 0.1  #: ... and changed by less than this (relative) over the last fifth of the record


def learned_levels(times: Float[ArrayLike, " T"], eigenvalues: Float[ArrayLike, "T r"]) -> np.ndarray:
    r"""The learned levels $\lambda_k^\infty$ of a flow's eigenvalue trajectories (descending, shape ``(T, r)``):
    the last values of the modes that grew by ``GROWTH`` over the largest initial eigenvalue and settled
    (``SETTLED`` over the last fifth); shape ``(K,)``, largest first."""
    t = np.asarray(times, dtype=float)
    e = np.asarray(eigenvalues, dtype=float)
    end = e[-1]
    late = e[int(np.searchsorted(t, 0.8 * t[-1]))]
    grown = end >= GROWTH * max(float(e[0].max()), 1e-300)
    settled = np.abs(end - late) <= SETTLED * np.abs(end)
    keep = grown & settled
    # a mode that has not settled ends the list: the later ones are not resolved by the horizon either
    k = int(np.argmin(keep)) if not keep.all() else keep.size
    return end[:k]


def mode_plateau_ends(times: Float[ArrayLike, " T"], eigenvalues: Float[ArrayLike, "T r"],
                      levels: Float[ArrayLike, " K"]) -> np.ndarray:
    r"""Switch-on time of each learned mode: the first time the $k$-th largest eigenvalue of $M$ reaches
    ``HALF`` of its level $\lambda_k^\infty$ (the rule); ``(K,)``, ``inf``: not within the record."""
    lv = np.asarray(levels, dtype=float)
    e = np.asarray(eigenvalues, dtype=float)[:, : lv.size]
    return first_crossing(times, e, HALF * lv)


class PlateauEnds(NamedTuple):
    """Predicted and measured plateau ends of the learned modes, in optimiser steps."""

    levels: np.ndarray  #: (K,) learned levels of the modes (eigenvalues of M at the end of the prediction)
    predicted: np.ndarray  #: (K,) switch-on steps of the NQF trained by the user's optimiser (the prediction)
    module: np.ndarray  #: (K,) measured on the model itself (steps)
    flow: np.ndarray  #: (K,) the same on the NQF's gradient flow at step = t / eta (nan: no flow reference)
    lag: np.ndarray  #: (K,) predicted / flow - 1: the optimiser's lag behind the flow (nan: no flow)
    divergence: np.ndarray  #: (K,) mean quadratic-regime error e(s) along the prediction up to its end
    valid: np.ndarray  #: (K,) bool: inside the range of validity (2 * divergence <= threshold) and the run
    within_run: np.ndarray  #: (K,) bool: predicted within the run's num_steps
    tolerance: np.ndarray  #: (K,) allowed |measured / predicted - 1|: 2 * divergence + two recording intervals
    driven: np.ndarray = np.zeros((0,), bool)  #: (K,) bool: driven by the data (``nqf.solutions._drive``'s rule)
    floor: float = float("nan")  #: the undriven modes' largest end level (0: none; nan: no drive computed)
    resolved: np.ndarray = np.zeros((0,), bool)  #: (K,) bool: the prediction rises through its half-way band in time


def running_mean(steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The mean of ``values`` over ``[0, s]`` at every recorded step ``s`` (trapezoid; ``values[0]`` at ``s = 0``)."""
    s = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    area = np.concatenate([[0.0], np.cumsum(0.5 * (v[1:] + v[:-1]) * np.diff(s))])
    with np.errstate(all="ignore"):
        return np.where(s > s[0], area / np.where(s > s[0], s - s[0], 1.0), v[0])


def validity_end(run: ModelRun) -> float:
    r"""End of the prediction's range of validity, in steps: the first recorded step of the prediction at which
    twice the mean quadratic-regime error so far exceeds ``run.threshold`` (``inf``: never within the
    prediction; ``nan``: a diverged run). Twice: a relative error $e$ in the model's value is about $2e$ in its
    gradient (an order-4 remainder), so in each mode's growth rate."""
    if run.diverged:
        return float("nan")
    bound = 2.0 * running_mean(run.nqf_steps, run.divergence)
    return float(Agreement(run.threshold).window(run.nqf_steps, bound))


class Diagnosis(NamedTuple):
    """The report of :func:`nqf.diagnose`: ``print(report)`` for the summary, ``report.plot()`` for the figure."""

    run: ModelRun  #: everything computed (hypotheses, the prediction, the measurement, the flow reference)
    plateaus: PlateauEnds  #: per mode: predicted and measured ends, tolerance, and whether the prediction is valid

    @property
    def window(self) -> float:
        """The measured agreement window, in steps (the first recorded step at which the outputs of the
        trained model and of the prediction part; inf: never)."""
        return float(np.asarray(self.run.comparison.window))

    @property
    def valid_until_steps(self) -> float:
        """The end of the prediction's range of validity, in steps (inf: the whole prediction)."""
        return validity_end(self.run)

    @property
    def not_small(self) -> bool:
        """True when W(0) is outside the quadratic regime, that is when twice the quadratic-regime error at
        W(0) exceeds the threshold (then no prediction is valid)."""
        return not 2.0 * self.run.quadratic_error <= self.run.threshold

    @property
    def regime_validity(self) -> dict:
        """Each surrogate's range of validity in steps, by name (``"nqf"``, and ``"linearised"`` when it was
        trained); ``nan`` for a surrogate whose loss blew up (the rule is in ``nqf/solutions/_regimes.py``)."""
        r = self.run
        nqf_bad = bool(r.diverged) and "model's loss" not in r.diverged
        out = {"nqf": float("nan") if nqf_bad else validity_end(r)}
        if r.linearised is not None:
            lin = r.linearised
            out["linearised"] = float("nan") if lin.diverged else valid_until(lin.steps, lin.error, r.threshold)
        return out

    @property
    def regime_reached(self) -> dict:
        """The step at which each surrogate's loss first reaches the model's half-way loss (inf: never)."""
        r = self.run
        L = np.asarray(r.comparison.module["step_loss"], dtype=float)
        level = L[-1] + HALF * (L[0] - L[-1])
        out = {"nqf": half_way(r.nqf_steps, r.nqf_loss, level)}
        if r.linearised is not None:
            out["linearised"] = half_way(r.linearised.steps, r.linearised.loss, level)
        return out

    def _describes(self, k: str) -> bool:
        h = self.half_way_step
        tol = self.run.threshold + 2.0 * self.run.record_every / h if np.isfinite(h) and h > 0 else 0.0
        return describes(self.regime_validity[k], self.regime_reached[k], h, tol)

    @property
    def half_way_step(self) -> float:
        """The step at which the model's loss is half-way (log) from its start to its end (nan: it does not fall)."""
        return half_way(self.run.comparison.steps, self.run.comparison.module["step_loss"])

    @property
    def regime(self) -> str:
        """The surrogate that describes the training by the rule, ``"nqf"``, ``"linearised"``, ``"both"`` or
        ``"neither"`` (``"nqf"`` or ``"neither"`` when the linearised model was not trained)."""
        ok = [k for k in self.regime_validity if self._describes(k)]
        return "both" if len(ok) == 2 else (ok[0] if ok else "neither")

    def __str__(self) -> str:  # noqa: D105
        r, pl = self.run, self.plateaus
        p, d = r.W0.shape
        h = r.hypotheses
        o = int(np.prod(np.shape(r.comparison.module["outputs"])[2:], dtype=int))
        lines = [
            f"NQF diagnosis of {r.name}: p = {p} parameters per neuron, d = {d} neurons, "
            f"{o} output{'s' if o > 1 else ''}",
            f"  Theorem 1 at x_1: permutation residual {h.permutation_residual:.1e}, ZGZ residual "
            f"{h.zgz_residual:.1e}, Taylor ratio {h.smooth_ratio:.3g} (C^3: >= 4): hypotheses hold",
        ]
        if r.frozen:
            lines.append("  frozen (no neuron axis: shared by all neurons, held fixed in both runs): "
                         + ", ".join(f"{path} {shape}" for path, shape in r.frozen))
        else:
            lines.append("  frozen leaves: none (every leaf has a neuron axis)")
        form = {"rank-two": "through rank-two factors of A(x), a(x)^T W W^T b_o",
                "low-rank": "through low-rank factors of A(x) = (U(x) V_o^T + V_o U(x)^T)/2, Tr[V_o^T W W^T U(x)]",
                "structure": "through the A(x) stack, Tr[W W^T A(x)]"}.get(
                    r.form, "matrix-free (nested jvp of the model at 0)")
        stack = (("also formed, from the factors" if r.form in ("rank-two", "low-rank") else "also formed")
                 + " (for the flow reference and the drive)" if r.As is not None else "not formed (too large)")
        lines.append(f"  NQF trained {form}; the full A(x) stack {stack}")
        lines.append(f"  loss: {r.loss}")
        lines.append(f"  optimiser: {r.optimizer.describe()}"
                     + (f"; flow time per step {r.eta:.4g}" if r.eta else ""))
        lines.append(f"  quadratic-regime error at W(0): {r.quadratic_error:.2e} (|f - f(0) - Q| / |Q| of the model "
                     "against its NQF on the probe inputs)")
        lines += _regime_lines(self)
        if r.diverged:
            lines.append(f"  DIVERGED: {r.diverged}. No plateau prediction from a diverged run.")
            return "\n".join(lines)
        if self.not_small:
            lines.append(f"  W(0) is not small: the model is {r.quadratic_error:.3g} (relative) away from its NQF at "
                         f"the initial weights (twice that exceeds {r.threshold:g}); the NQF does not describe this "
                         "training, and no plateau end below is a valid prediction. Initialise smaller (and the "
                         "biases too).")
        w = self.window
        lines.append(f"  measured agreement (trained model vs prediction, probe outputs): " + (
            f"they agree over the whole run (the relative gap never reached {r.threshold:g})" if not np.isfinite(w)
            else f"they agree until step {w:.0f} (where the relative gap first reached {r.threshold:g})"))
        v = self.valid_until_steps
        lines.append("  prediction valid until " + ("the end of the prediction" if not np.isfinite(v) else f"step {v:.0f}")
                     + f" (twice the mean quadratic-regime error along the prediction <= {r.threshold:g})")
        if not pl.levels.size:
            mod_levels = learned_levels(np.asarray(r.comparison.steps, dtype=float), r.eigs_module)
            lines.append("  the prediction learns no mode from this W(0) (no eigenvalue of M grows "
                         f"{GROWTH:g}-fold and settles within {r.nqf_steps[-1]:.0f} steps)")
            L = np.asarray(r.comparison.module["loss"])
            if mod_levels.size:
                lines.append(f"  measured: the model learns {mod_levels.size} mode(s) (loss {L[0]:.4g} -> {L[-1]:.4g})"
                             ", which the NQF does not predict")
            elif L[-1] < HALF * L[0]:
                lines.append(f"  measured: the model learns (loss {L[0]:.4g} -> {L[-1]:.4g}) without plateaus: its "
                             "modes start near their learned levels, so there is no plateau end to predict")
            else:
                lines.append(f"  measured: no mode is learned by the model either (no eigenvalue of its M grows "
                             f"{GROWTH:g}-fold; loss {L[0]:.4g} -> {L[-1]:.4g})")
            return "\n".join(lines)
        return "\n".join(lines + _table_lines(r, pl))
        return "\n".join(lines)

    def plot(self, axes: Any = None):
        """Loss and eigenvalues of $M$ against optimiser steps: model (measured: open markers), the NQF trained by the same
        optimiser (the prediction), the flow (at ``step = t/eta``, when there is one), predicted plateau ends as
        vertical lines and measured ones as markers. ``axes``: two matplotlib axes to draw on (default: a new
        figure). Returns the figure."""
        import matplotlib.pyplot as plt

        r, pl = self.run, self.plateaus
        own = axes is None
        if own:
            fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")  # with or without nqf's style
        fig = axes[0].figure
        c = r.comparison
        st = np.asarray(c.steps, dtype=float)
        ok = st > 0
        qs = np.asarray(r.nqf_steps, dtype=float)
        qk = (qs > 0) & (qs <= st[-1])
        ax = axes[0]
        # measurements as open markers (spaced evenly on the log axis, a thin guide line between them)
        measured = {"marker": "o", "markerfacecolor": "none", "markersize": 4, "markevery": 0.05, "linewidth": 0.6}
        ax.loglog(st[ok], np.asarray(c.module["loss"])[ok], color="C0", **measured, label="model (measured)")
        ax.loglog(qs[qk], np.asarray(r.nqf_loss)[qk], "--", color="C1", label="NQF, same optimiser (predicted)")
        if r.eta and r.flow_ts.size:
            fs = r.flow_ts[1:] / r.eta
            keep = fs <= st[-1]
            ax.loglog(fs[keep], r.flow_loss[1:][keep], ":", color="k", label="NQF flow (reference)")
        if r.linearised is not None and not r.linearised.diverged:
            ls = np.asarray(r.linearised.steps, dtype=float)
            ax.loglog(ls[ls > 0], np.asarray(r.linearised.loss)[ls > 0], "-.", color="C2",
                      label="linearised at W(0), same optimiser (predicted)")
        ax.set_xlabel("optimiser step")
        ax.set_ylabel("training loss")
        ax = axes[1]
        K = pl.levels.size
        for k in range(max(K, 1)):
            col = f"C{k % 10}"
            ax.loglog(st[ok], r.eigs_module[ok, k], color=col, **measured, label="model (measured)" if k == 0 else None)
            ax.loglog(qs[qk], r.nqf_eigs[qk, k], "--", color=col, label="NQF, same optimiser (predicted)" if k == 0
                      else None)
        for k in range(K):
            for a in axes:
                a.axvline(pl.predicted[k], color=f"C{k % 10}", lw=0.8, alpha=0.6)
            if np.isfinite(pl.module[k]):
                axes[1].plot(pl.module[k], HALF * pl.levels[k], "o", color=f"C{k % 10}", ms=5,
                             label="measured plateau end" if k == 0 else None)
        v = self.valid_until_steps
        if np.isfinite(v) and v < st[-1]:
            for a in axes:
                a.axvspan(max(v, st[ok][0]), st[-1], color="0.9", zorder=0,
                          label="beyond the range of validity" if a is axes[0] else None)
        ax.set_xlabel("optimiser step")
        ax.set_ylabel(r"eigenvalues of $M = WW^\top$")
        for a in axes:
            a.set_xlim(st[ok][0], st[-1])
            a.legend(fontsize=7)
        return fig



def _regime_lines(rep: Diagnosis) -> list[str]:
    """The two regimes: each surrogate's range of validity and agreement, the rule, and which describes the
    training."""
    r, valid, h = rep.run, rep.regime_validity, rep.half_way_step
    names = {"nqf": "NQF at W = 0 (quadratic regime)", "linearised": "model linearised at W(0) (kernel regime)"}
    half = "nowhere (the model's loss does not fall)" if not np.isfinite(h) else f"at step {h:.0f}"
    lines = [f"  regimes (the model's loss is half-way to its end {half}; a surrogate describes the training when its "
             f"range of validity, twice its mean error so far <= {r.threshold:g}, reaches past that step and its own "
             f"loss reaches the same level within {r.threshold:g} of it, plus two recording intervals):"]
    for k, v in valid.items():
        w = rep.regime_reached[k]
        verdict = "describes it" if rep._describes(k) else "does not describe it"
        what = ("its loss blew up" if np.isnan(v) else "valid over its whole run" if not np.isfinite(v)
                else f"valid until step {v:.0f}")
        what += ", half-way loss " + ("never reached" if not np.isfinite(w) else f"at step {w:.0f}")
        lines.append(f"    {names[k]:<42s} {what}: {verdict}")
    if r.linearised is not None:
        lin, L = r.linearised, np.asarray(r.comparison.module["step_loss"], dtype=float)
        lines.append(f"    loss at the end of the run: model {L[-1]:.4g} (measured), linearised model {lin.loss[-1]:.4g}"
                     f" (predicted; from {L[0]:.4g})")
    which = {"nqf": "the NQF (plateau ends below)", "linearised": "the linearised model (its loss curve; no "
             "plateaus)", "both": "both (the NQF's plateau ends below)", "neither": "neither surrogate: each "
             "leaves its range of validity, or misses the model's half-way step, first"}[rep.regime]
    lines.append(f"  which describes this training: {which}")
    return lines


def _table_lines(r: ModelRun, pl: PlateauEnds) -> list[str]:
    """The plateau table: the modes the data drive (judged), then the others (listed apart, never judged)."""
    n_plus = driven_count(r.drive)
    if n_plus is None:
        lines = ["  modes the data drive: not computed (neither the A(x) stack nor factors of it): every learned "
                 "mode is judged"]
    else:
        lines = [f"  modes the data drive: {n_plus} (positive eigenvalues of the drive -dL/dM at W = 0); a mode is "
                 f"judged when it is one of them and its level exceeds {1 / HALF:g}x the largest level of the others "
                 f"({pl.floor:.3g})"]
    head = "    k     level   predicted   flow (lag)        measured   measured/predicted-1   tolerance"
    rows, apart = [], []
    for k in range(pl.levels.size):
        err = pl.module[k] / pl.predicted[k] - 1 if np.isfinite(pl.module[k]) else np.nan
        if not pl.driven[k]:
            note = "not judged"
        elif not pl.within_run[k]:
            note = "after the run"
        elif pl.resolved.size and not pl.resolved[k] and 2.0 * pl.divergence[k] <= r.threshold:
            note = "slow crossing (not judged)"
        elif not pl.valid[k]:
            note = "beyond the range of validity"
        else:
            note = "valid: within" if abs(err) <= pl.tolerance[k] else "valid: MISSES"
        fl = "-" if not np.isfinite(pl.flow[k]) else f"{pl.flow[k]:.0f} ({100 * pl.lag[k]:+.1f}%)"
        row = (f"    {k + 1:<3d} {pl.levels[k]:9.3g}   {pl.predicted[k]:9.0f}   {fl:<16s}  {pl.module[k]:8.0f}"
               f"   {err:+20.3f}   +-{pl.tolerance[k]:.3f}   {note}")
        (rows if pl.driven[k] else apart).append(row)
    if rows:
        lines += ["  plateau ends (steps), mode k = k-th eigenvalue of M = W W^T reaching half its learned level:",
                  head, *rows]
    if apart:
        lines += ["  modes the data do not drive (lifted by the optimiser or by noise; listed apart, never judged):",
                  head, *apart]
    return lines

def read_plateaus(run: ModelRun) -> PlateauEnds:
    r"""Apply the rule to a ``ModelRun``: levels and ends from the prediction, the measured and flow ends at the same
    levels; tolerance: twice the mean quadratic-regime error up to the predicted end plus two recording intervals."""
    if run.diverged:
        z = np.zeros((0,))
        return PlateauEnds(z, z, z, z, z, z, z.astype(bool), z.astype(bool), z, z.astype(bool))
    qs = np.asarray(run.nqf_steps, dtype=float)
    levels = learned_levels(qs, run.nqf_eigs)
    pred = mode_plateau_ends(qs, run.nqf_eigs, levels)
    steps = np.asarray(run.comparison.steps, dtype=float)
    mod = mode_plateau_ends(steps, run.eigs_module, levels)
    if run.eta and run.flow_ts.size:
        flow = mode_plateau_ends(run.flow_ts, run.flow_eigs, levels) / run.eta
    else:
        flow = np.full(levels.shape, np.nan)
    with np.errstate(all="ignore"):
        lag = pred / flow - 1.0
        mean_e = running_mean(qs, run.divergence)
        div = np.interp(np.where(np.isfinite(pred), pred, qs[-1]), qs, mean_e)
        tol = 2.0 * div + 2.0 * run.record_every / pred
    within = pred <= run.num_steps
    driven, floor = driven_modes(levels, run.nqf_eigs[-1], driven_count(run.drive), HALF)
    resolved = crossing_resolved(qs, run.nqf_eigs, levels, div, tol * pred)
    valid = within & driven & resolved & (2.0 * div <= run.threshold)
    return PlateauEnds(levels, pred, mod, flow, lag, div, valid, within, tol, driven, floor, resolved)


def crossing_resolved(times, eigenvalues, levels, error, allowed) -> np.ndarray:
    r"""``(K,)`` bool: the prediction's mode $k$ rises through the band $\mathrm{HALF}\,\lambda_k^\infty
    (1 \pm 2\bar e_k)$ within ``allowed[k]`` steps (its tolerance in steps). The tolerance assumes a switch-on: a
    level known to $2\bar e$ (what the quadratic-regime error allows) moves a steep crossing by less than that. An
    eigenvalue that creeps through its half-way line (the largest one after a mode of half its level switched on
    first) would turn the same level error into hundreds of steps: such an end is not judged. From the prediction
    alone, never the measurement."""
    lv, e = np.asarray(levels, dtype=float), np.asarray(error, dtype=float)
    eig = np.asarray(eigenvalues, dtype=float)[:, : lv.size]
    band = 2.0 * np.where(np.isfinite(e), e, np.inf)
    lo = first_crossing(times, eig, HALF * lv * np.maximum(1.0 - band, 0.0))
    hi = first_crossing(times, eig, HALF * lv * (1.0 + band))
    with np.errstate(invalid="ignore"):
        return np.asarray((hi - lo) <= np.asarray(allowed, dtype=float), dtype=bool)


class StepMap(NamedTuple):
    """What probing the optimiser found: the SGD family (with the flow time per step) or not."""

    kind: str | None  #: ``"sgd"``, ``"heavy-ball momentum"``, ``"nesterov momentum"`` or ``None`` (Adam, ...)
    learning_rate: float  #: eta (nan outside the SGD family)
    momentum: float  #: beta (0 for plain SGD; nan outside the family)
    per_step: float | None  #: flow time per step of the summed loss, eta / (1 - beta) (None: no step <-> time map)

    def describe(self) -> str:
        """One line for the report."""
        if self.kind is None:
            return "not of the SGD family (e.g. Adam): no step <-> time map, no flow reference"
        mom = "" if self.kind == "sgd" else f", momentum {self.momentum:g}"
        return f"{self.kind}, learning rate {self.learning_rate:g}{mom}"


def step_map(name: str, optimizer: Any) -> StepMap:
    r"""Recognise an optimiser of the SGD family by what it does: feed its optax transformation four fixed generic
    gradients (twice, the second time doubled) at fixed parameters and fit the updates to
    $u_k = -\sum_j c_j g_{k-j}$. Plain SGD is $c = (\eta, 0, \dots)$, heavy-ball momentum
    $c_j = \eta\beta^j$, Nesterov $c_0 = \eta(1+\beta)$, $c_j = \eta\beta^{j+1}$ (``optax.sgd``'s ``trace``). Any
    other transformation (Adam: not linear in the gradients; weight decay: not homogeneous) gets
    ``kind=None``. ``ValueError`` (naming ``name``) for a member of the family that cannot descend: a
    learning rate <= 0 or a momentum outside [0, 1)."""
    tx = optimizer.build() if hasattr(optimizer, "build") else optimizer
    g = _generic((4, 5), 0.7)  # fixed generic gradients and parameters (no key to carry)
    p0 = _generic((5,), 1.9)
    none = StepMap(None, float("nan"), float("nan"), None)

    def updates(scale):
        state, out = tx.init(p0), []
        for k in range(4):
            u, state = tx.update(scale * g[k], state, p0)
            out.append(np.asarray(u, dtype=float))
        return np.stack(out)

    try:
        u, u2 = updates(1.0), updates(2.0)
    except Exception:  # noqa: BLE001  (a transformation that needs extra arguments: not plain SGD)
        return none
    gn = np.asarray(g)
    if not np.all(np.isfinite(u)) or not np.allclose(u2, 2.0 * u, rtol=1e-9, atol=1e-300):
        return none
    # -u_k = sum_j c_j g_{k-j} for every coordinate: 20 equations in the 4 coefficients (least squares)
    X = np.zeros((4, gn.shape[1], 4))
    for k in range(4):
        for j in range(k + 1):
            X[k, :, j] = gn[k - j]
    X, rhs = X.reshape(-1, 4), -u.reshape(-1)
    c, *_ = np.linalg.lstsq(X, rhs, rcond=None)
    if np.linalg.norm(X @ c - rhs) > 1e-9 * max(np.linalg.norm(rhs), 1e-300):
        return none  # a linear filter of the gradients, but not a time-invariant one of this length
    c = [float(v) for v in c]
    c0, c1, c2, c3 = c
    tol = 1e-8 * max(abs(c0), 1e-300)
    if abs(c1) <= tol and abs(c2) <= tol and abs(c3) <= tol:
        kind, eta, beta = "sgd", c0, 0.0
    elif abs(c1) > tol:
        beta = c2 / c1
        if abs(c3 - beta * c2) > 1e-6 * max(abs(c2), 1e-300):
            return none
        if abs(c1 - beta * c0) <= 1e-6 * abs(c1):
            kind, eta = "heavy-ball momentum", c0
        elif beta != 0 and abs(c0 - (c1 / beta**2) * (1 + beta)) <= 1e-6 * abs(c0):
            kind, eta = "nesterov momentum", c1 / beta**2
        else:
            return none
    else:
        return none
    if not eta > 0:
        raise invalid(name, "descend (a positive learning rate)", f"an SGD optimiser with learning rate {eta:g}")
    if not 0.0 <= beta < 1.0:
        raise invalid(name, "have a momentum in [0, 1) (at 1 or above the velocity never settles and the run "
                            "does not descend)", f"{kind} with momentum {beta:g}")
    return StepMap(kind, float(eta), float(beta), float(eta / (1.0 - beta)))


def _generic(shape, phase: float):
    """A fixed, generic array: entries ``sin(phase + 1e3 * sqrt(2) * i)`` (``i`` the flat index, from 1)."""
    n = int(np.prod(shape, dtype=int))
    return jnp.asarray(np.sin(phase + 1e3 * np.sqrt(2.0) * np.arange(1, n + 1)).reshape(shape), jnp.float64)


class ModelRun(NamedTuple):
    """What :func:`nqf.diagnose` computed (optimiser steps ``step``; flow time ``t = eta * step``): the prediction (the
    NQF trained by the user's optimiser from the model's own $W(0)$, ``horizon`` times the run), how far the model is
    from it along that path (``divergence``), the measurement (the model trained the same way), side by side in
    ``comparison``, and the flow as a continuum reference."""

    name: str  #: the model's class (or ``apply``'s) name
    hypotheses: HypothesisCheck  #: Theorem 1's probes at the first input
    As: Any  #: ``(m, p, p)`` or ``(m, o, p, p)``: A(x) on the data (None when too large to hold)
    data: Any  #: the :class:`~nqf.model.NQFData` built from ``As`` (None with ``As``)
    W0: np.ndarray  #: ``(p, d)`` the model's initial weights in the neuron packing
    frozen: tuple  #: ``(path, shape)`` of every leaf shared by all neurons (held fixed in both runs)
    form: str  #: how the NQF was evaluated: ``"rank-two"`` or ``"matrix-free"``
    optimizer: StepMap  #: what probing the optimiser found (its kind, step size and momentum)
    loss: str  #: the loss convention, in words
    eta: float | None  #: flow time per optimiser step (None: no step <-> time map or a user's loss)
    num_steps: int  #: the model's training steps
    quadratic_error: float  #: e(0): |f(W0) - f_x(0) - Q(W0)| / |Q(W0)| on the probe set
    nqf_steps: np.ndarray  #: ``(S,)`` steps of the prediction's records (to horizon * num_steps)
    nqf_eigs: np.ndarray  #: ``(S, r)`` eigenvalues of M along the prediction, descending
    nqf_loss: np.ndarray  #: ``(S,)`` the prediction's loss (the user's convention)
    divergence: np.ndarray  #: ``(S,)`` e(s): the model at the predicted weights against the NQF there
    comparison: Comparison  #: the predicted (NQF) and measured (model) runs side by side
    eigs_module: np.ndarray  #: ``(T, r)`` eigenvalues of M = W W^T of the trained model at comparison.steps
    eigs_nqf: np.ndarray  #: ``(T, r)`` the same for the prediction (its first T records)
    flow_ts: np.ndarray  #: ``(F,)`` flow save times (empty without a flow)
    flow_loss: np.ndarray  #: ``(F,)`` NQF loss along the flow
    flow_eigs: np.ndarray  #: ``(F, r)`` eigenvalues of M(t), descending
    threshold: float  #: the relative gap that ends the measured agreement window
    record_every: int  #: recording interval of the runs (steps)
    diverged: str | None  #: why a run diverged (None: neither did)
    drive: np.ndarray | None = None  #: ``(p,)`` eigenvalues of the drive -dL/dM at W = 0, descending (None: not computed)
    linearised: Any = None  #: the model linearised at W(0), trained the same way (``LinearisedRun``; None: not asked)


FLOW_POINTS = 160  #: save times of the flow reference (log-spaced from one step)
STACK_WORK = 200_000_000  #: m o p^2 d up to which the A(x) stack is formed (a 1024-wide MLP on 600 samples: 55 s)
STACK_CHUNK = 20_000_000  #: entries (o p^2 d per sample) of the A(x) stack formed at once (see _stack)
DENSE_LIMIT = 20_000_000  #: A(x) entries (m * o * p^2, 160 MB) up to which the (m, o, p, p) stack is formed
DIVERGED = 1e3  #: a run whose loss exceeds this many times its initial loss (or is not finite) has diverged


def _default_every(num_steps: int, target: int) -> int:
    lo = max(1, -(-num_steps // target))
    return next(k for k in range(lo, num_steps + 1) if num_steps % k == 0)


def _loss_words(loss, o: int) -> tuple[str, float | None]:
    """The loss in words and the factor of its flow time over :data:`nqf.model.mse`'s (None: a user's loss)."""
    outs = f"the {o} outputs" if o > 1 else "the output"
    if isinstance(loss, MSE) and loss.samples == "mean":
        if loss.outputs == "sum":
            return f"mean over samples of the squared error summed over {outs} (nqf.model.mse, Eq. 26, no 1/2)", 1.0
        return f"mean over samples and over {outs} of the squared error (no 1/2)", 1.0 / o
    if not callable(loss):
        raise wrong_kind("loss", "be an nqf.model.MSE or a callable loss(outputs, targets) -> scalar",
                         type(loss).__name__)
    return f"the user's loss {getattr(loss, '__name__', type(loss).__name__)}(outputs, targets)", None


def _eigs(grams):
    g = np.asarray(grams, dtype=float)
    with np.errstate(all="ignore"):
        ok = np.all(np.isfinite(g), axis=(-1, -2))
        e = np.full(g.shape[:-1], np.nan)
        if ok.any():
            e[ok] = np.linalg.eigvalsh(g[ok])[..., ::-1]
    return e


def _divergence(f, q, f0):
    """e(s) = |f - q| / |q - f0| over the probe set at each record (records on axis 0)."""
    f, q, f0 = (np.asarray(v, dtype=float) for v in (f, q, f0))
    T = f.shape[0]
    num = np.linalg.norm((f - q).reshape(T, -1), axis=1)
    den = np.linalg.norm((q - f0[None]).reshape(T, -1), axis=1)
    with np.errstate(all="ignore"):
        e = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, np.inf, 0.0))
    return e


def _run_diverged(label, batch_loss, final, lr_note):
    bl = np.asarray(batch_loss, dtype=float)
    allv = np.concatenate([bl, [float(final)]])
    L0 = allv[0]
    bad = ~np.isfinite(allv)
    big = np.abs(allv) > DIVERGED * max(abs(L0), 1e-300)
    if not (bad.any() or big.any()):
        return None
    k = int(np.argmax(bad | big))
    what = "became non-finite" if bad[k] else f"grew from {L0:.4g} to {allv[k]:.3g}"
    return f"the {label}'s loss {what} by step {k}: the optimiser diverges ({lr_note})"


def _surrogate_diverged(label, batch_loss, final, model_loss, model_final, regime):
    """Why a surrogate diverged while the model trained: its regime, never the learning rate (None: it did not)."""
    why = _run_diverged(label, batch_loss, final, "")
    if why is None:
        return None
    L = np.asarray(model_loss, dtype=float)
    return (why.split(": the optimiser diverges")[0] + f" while the model trained with the same optimiser (loss "
            f"{L[0]:.4g} -> {float(model_final):.4g}): the {label} diverges because W(0) lies outside "
            f"{regime} (the error above), not because of the learning rate, which suits the model")


def _stack(q, params, xs, sizes):
    """The A(x) stack, in chunks of samples: one neuron's Hessian is taken in a model of all ``d`` neurons, so a
    sample holds about ``o p^2 d`` entries while it is formed (a 1024-wide MLP on 600 samples asked for 53 GB at
    once); a chunk holds at most :data:`STACK_CHUNK` of them (the last chunk padded: one compilation)."""
    m, o, p, d = sizes
    n = int(max(1, min(m, STACK_CHUNK // max(o * p * p * d, 1))))
    call = (lambda x: q.structure(x, batch=True)) if q.model is not None else (
        lambda x: q.structure(params, x, batch=True))
    if n >= m:
        return call(xs)
    pad = -m % n
    padded = jax.tree_util.tree_map(lambda v: jnp.concatenate([v, jnp.repeat(v[-1:], pad, axis=0)]), xs)
    parts = [call(jax.tree_util.tree_map(lambda v, i=i: v[i:i + n], padded)) for i in range(0, m + pad, n)]
    return jnp.concatenate(parts)[:m]


def _flow(run_inputs, q, xs, ys, f0, W0, eta, t_end, flow_points, time_factor):
    """The dense A(x) stack (when small enough: from a factored form's factors, else from Hessians) and the NQF's
    flow from M(0) (when ``eta`` is known)."""
    params, m, o, p, (kind, a, B) = run_inputs
    As = nqf_data = None
    fts = floss = feigs = np.zeros((0,))
    if m * o * p * p <= DENSE_LIMIT and kind in ("rank-two", "low-rank") and a is not None:
        As = jnp.reshape(factor_stack(kind, a, B), jnp.shape(f0) + (p, p))
    elif m * o * p * p <= DENSE_LIMIT and m * o * p * p * W0.shape[1] <= STACK_WORK:
        As = _stack(q, params, xs, (m, o, p, W0.shape[1]))
    if As is not None and As.ndim <= 4:
        nqf_data = NQFData(As, ys, f0=f0)
    if eta is not None and nqf_data is not None:
        fts = log_times(t_end, int(flow_points), t_min=eta)
        sol = gradient_flow(W0 @ W0.T, nqf_data, fts, options=ODEOptions(rtol=1e-6, atol=1e-12, solver="tsit5"))
        Ms = np.asarray(sol.ys)
        floss = np.asarray(jax.vmap(lambda M: mse_loss(M, nqf_data))(jnp.asarray(Ms))) * time_factor
        feigs, fts = _eigs(Ms)[:, : min(W0.shape)], np.asarray(fts)
    return As, nqf_data, fts, floss, feigs


def diagnose(model: Any, data: tuple[Any, Any], optimizer: Any, *, num_steps: int, params: Any = None,
             loss: Callable = mse, track: Track | None = None, regimes: Any = REGIMES) -> "Diagnosis":
    r"""What the NQF says about your model, in one call: Theorem 1's hypotheses; the **prediction**, the NQF
    $f_x(0) + \mathrm{Tr}[WW^\top A(x)]$ trained by your own optimiser and loss from the model's own $W(0)$ (the
    exact discrete NQF dynamics: SGD, momentum and Adam alike), with its plateau ends read by the rule of this
    module, in steps; the **measurement**, the model trained the same way (both by
    :func:`nqf.compare_with_nqf`); how far the model is from its NQF along the prediction (the quadratic-regime
    error, which sets the range of validity and each tolerance); and, for SGD-family optimisers, the NQF's gradient
    flow as the continuum reference with the optimiser's lag behind it. Only the modes the data drive are judged
    (``nqf.solutions._drive``: positive eigenvalues of $-\partial\mathcal L/\partial M$ at $W = 0$, above twice the
    others' level); the rest are listed apart. Beside the NQF, the model linearised at its own $W(0)$ (the kernel
    regime) is trained the same way and the report says which describes the training (``nqf.solutions._regimes``).
    A diverged run is flagged with a warning that names the cause (a surrogate that blows up while the model trains:
    its regime, not the learning rate), and gets no plateau table.

    Args:
        model: an equinox Module (neurons along its method ``neuron_axes()``), or
            :func:`nqf.structure.quadratic_form` of any model (an ``apply`` with ``neuron_axes``; ``form``:
            ``"auto"``, rank-two factors when the model has them, or ``"matrix-free"``).
        data: ``(xs, ys)``, targets ``(m,)`` or ``(m, o)``; full batch.
        optimizer: any optax optimiser or :func:`nqf.training.optimizer`.
        num_steps: optimiser steps of the model's run.
        params: the parameters of an ``apply`` (``None`` for an equinox Module).
        loss: :data:`nqf.model.mse` (summed over outputs), ``nqf.model.MSE(outputs="mean")`` or your own
            ``loss(outputs, targets) -> scalar``.
        track: the probe (default: the first 64 inputs), ``record_every`` (default: about 1000 records, 200
            when ``min(p, d) > 64``), ``horizon`` (default 2: the prediction runs twice the model's steps) and
            the agreement rule (:class:`nqf.training.Agreement`: its threshold also bounds twice the mean
            quadratic-regime error inside the range of validity); its quantities are the diagnosis's own.
        regimes: the surrogates that judge the training (``nqf.solutions._regimes``): ``"nqf"`` (always: its run is
            the plateau prediction) and ``"linearised"``, the model linearised at its own $W(0)$ (the kernel
            regime), trained by the same optimiser and loss; the report says which describes the training.

    Returns:
        a :class:`~nqf.solutions._plateaus.Diagnosis` (``print`` it; ``.plot()``).
    """
    run = _model_run(model, data, optimizer, num_steps, params, loss, track, check_regimes(regimes))
    return Diagnosis(run, read_plateaus(run))


#: The fewest optimiser steps a diagnosis reads anything from: a plateau end is read where a mode, recorded
#: along the run, crosses half its learned level, and the regimes where the model's loss is half-way down; a run
#: of a few steps shows neither (``diagnose(num_steps=1)`` used to return an empty report without a word).
MIN_STEPS = 10


def _model_run(model, data, optimizer, num_steps, params, loss, track, regimes) -> ModelRun:
    if not isinstance(num_steps, bool) and isinstance(num_steps, (int, np.integer)) and 0 < num_steps < MIN_STEPS:
        raise invalid("num_steps", f"be at least {MIN_STEPS}: a plateau end is read off a mode's rise to its learned "
                                   "level along the recorded run, which a few steps cannot show", repr(num_steps))
    q = model if isinstance(model, QuadraticForm) else quadratic_form(model)
    params = q.model if q.model is not None else params
    check_float64("model", params, q.name, also="for a flax model, create its parameters in float64: "
                  "nn.Dense(..., param_dtype=jnp.float64) (linen) or nnx.Linear(..., param_dtype=jnp.float64, "
                  "rngs=...) (nnx)")
    W0, layout = neuron_weights(params, q.neuron_axes(params))
    p, d = layout.p, layout.d
    every = None if track is None else track.record_every
    if every is None or track is None:
        every = _default_every(num_steps, 1000 if min(p, d) <= 64 else 200)
    track = Track(("step_loss", "outputs", "model_outputs", "gram"), 64 if track is None else track.probe,
                  record_every=every, horizon=2.0 if track is None else track.horizon,
                  agreement=Track().agreement if track is None else track.agreement)
    sm = step_map("optimizer", optimizer)
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise invalid("data", "be a pair (xs, ys) (full batch)", type(data).__name__)
    ys = jnp.asarray(data[1])
    o = int(np.prod(np.shape(ys)[1:], dtype=int))
    loss_text, time_factor = _loss_words(loss, o)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # divergence is reported below, naming its cause
        try:
            c = compare_with_nqf(q, data, optimizer, num_steps=num_steps,
                                 params=None if q.model is not None else params, loss=loss, track=track)
        except ValueError as err:  # Theorem 1 refused: a deep stack gets the way to describe it
            if q.deep_stack():
                raise invalid("model", "be one layer of interchangeable neurons", f"{q.deep_stack()}; the neuron "
                              f"axes given fail Theorem 1: {str(err).rstrip('.')}") from err
            raise
    lr_note = (f"learning rate {sm.learning_rate:g}: lower it" if sm.kind else "lower the learning rate")
    rm, rq = c.module, c.nqf
    diverged = (_run_diverged("model", c.batch_loss["module"], rm["step_loss"][-1], lr_note)
                or _surrogate_diverged("NQF", c.batch_loss["nqf"], rq["step_loss"][-1], c.batch_loss["module"],
                                       rm["step_loss"][-1], "the quadratic regime"))
    if diverged:
        warnings.warn(f"nqf.diagnose of {q.name}: {diverged}; no plateau prediction is made", RuntimeWarning,
                      stacklevel=3)
    with np.errstate(over="ignore", invalid="ignore"):  # a diverged run was reported above, with its cause
        div = _divergence(rq["model_outputs"], rq["outputs"], np.asarray(c.offsets[1]))
        T = len(c.steps)
        eig_q, eig_m = _eigs(rq["gram"])[:, : min(p, d)], _eigs(rm["gram"])[:, : min(p, d)]
    rm["loss"], steps_q = rm["step_loss"], np.arange(0, every * len(rq["gram"]), every)
    xs = jax.tree_util.tree_map(jnp.asarray, data[0])
    eta = None if (sm.per_step is None or time_factor is None) else sm.per_step * time_factor
    flow_eta = None if diverged else eta
    As, nqf_data, fts, floss, feigs = _flow((params, len(ys), o, p, (c.form, *c.factors)), q, xs, ys, c.offsets[0], W0,
                                            flow_eta,
                                            None if eta is None else eta * steps_q[-1], FLOW_POINTS, time_factor)
    drive = None if diverged else _drive(ys, loss, As, c)
    lin = None
    if "linearised" in regimes:
        n = track.probe if isinstance(track.probe, (int, np.integer)) else None
        probe = jax.tree_util.tree_map(lambda v: v[:n], xs) if n else jax.tree_util.tree_map(jnp.asarray, track.probe)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lin = linearised_run(q, params, (xs, ys), optimizer, loss, num_steps, every, probe)
    axes = q.leaf_axes(params)  # one per leaf of params (a None field is no leaf)
    frozen = tuple((jax.tree_util.keystr(path) or "(root)", tuple(np.shape(leaf)))
                   for (path, leaf), a in zip(jax.tree_util.tree_flatten_with_path(params)[0], axes)
                   if a is None and eqx.is_array(leaf))
    return ModelRun(q.name, c.hypotheses, As, nqf_data, np.asarray(W0), frozen, c.form, sm, loss_text,
                    eta, num_steps, float(div[0]), steps_q, eig_q,
                    np.asarray(rq["step_loss"]), div, c, eig_m, eig_q[:T], fts, floss, feigs,
                    float(track.agreement.threshold), int(every), diverged, drive, lin)


def _drive(ys, loss, As, c):
    """The drive's spectrum (``nqf.solutions._drive``) from the A(x) stack, else from the factors of a factored form
    (rank-two or low-rank: the ones the runs used, ``c.factors``)."""
    if As is not None:
        return drive_spectrum(loss, c.offsets[0], ys, stack=As)
    if c.form not in ("rank-two", "low-rank") or c.factors[0] is None:
        return None
    return drive_spectrum(loss, c.offsets[0], ys, factors=c.factors)
