r"""Plateau ends read off a flow, a training run or a loss curve, by one rule; and the one call
:func:`nqf.diagnose` that reports what the NQF says about a user's model.

From small initialisation the NQF learns its modes one after another (Secs. 5-6): the eigenvalues
$\lambda_k(t)$ of $M(t) = W(t)W(t)^\top$ sit near their tiny initial values, then rise sigmoidally to a
learned level $\lambda_k^\infty$ (Thm 6: exactly logistic when the data commute), and the loss drops
from one plateau to the next as each mode switches on.

**The rule** (:func:`nqf.solutions.halfway_crossing`, fixed before any run): a plateau ends when the quantity that
leaves it first gets **half-way** from the plateau's level to the next one, times between records
linearly interpolated. For a logistic switch-on this is exactly its midpoint $t_k$ (Eq. 158's switch-on
time, up to the $O(1)$ offset of the logistic), whatever its rate. Concretely:

* per mode (``mode_plateau_ends``): mode $k$ ($k$-th largest eigenvalue of $M$) switches on when
  $\lambda_k(t)$ first reaches $\tfrac12\lambda_k^\infty$, with $\lambda_k^\infty$ the level the NQF
  **flow** assigns it at the end of its horizon. A mode counts as learned when that level is at least
  ``GROWTH`` = 10 times the largest initial eigenvalue and has settled (it changed by less than
  ``SETTLED`` = 10 % over the last fifth of the horizon's time);
* on a loss curve with known plateau levels $L_0 > L_1 > \dots$ (``loss_plateau_ends``): plateau
  $k$ ends when the loss first falls below $(L_{k-1} + L_k)/2$.

The same levels (theory) serve the prediction and the measurement, so a measured end is never read with
a threshold taken from the measured run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from jaxtyping import Float

from .._types import ArrayLike
from ..model import mse_loss
from ..training import ModelRun
from ..training import first_crossing
from ..training import model_run

HALF = 0.5  #: the rule's fraction: half-way from one level to the next
GROWTH = 10.0  #: a learned mode ends at least this many times above the largest initial eigenvalue of M
SETTLED = 0.1  #: ... and changed by less than this (relative) over the last fifth of the flow's time


def halfway_crossing(times: Float[ArrayLike, " T"], values: Float[ArrayLike, "T *K"],
                     levels: Float[ArrayLike, "*K"], *, rising: bool = True) -> np.ndarray:
    """THE plateau reading: the first time ``values`` (time on axis 0) reaches ``levels`` (``>=`` when
    ``rising``, else ``<=``), linearly interpolated between the two records around the crossing: the package's
    one first-crossing rule, :func:`nqf.training.first_crossing` (interpolated, on axis 0).

    Returns an array of shape ``levels.shape`` (``inf`` where the level is never reached; ``times[0]`` where
    it is reached at the first record)."""
    return first_crossing(times, values, levels, axis=0, rising=rising)


def learned_levels(times: Float[ArrayLike, " T"], eigenvalues: Float[ArrayLike, "T r"]) -> np.ndarray:
    r"""The learned levels $\lambda_k^\infty$ of a flow's eigenvalue trajectories (descending, shape ``(T, r)``):
    the last values of the modes that grew by ``GROWTH`` over the largest initial eigenvalue and settled
    (module docstring); shape ``(K,)``, largest first."""
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
    return halfway_crossing(times, e, HALF * lv)


def loss_plateau_ends(times: Float[ArrayLike, " T"], loss: Float[ArrayLike, " T"],
                      levels: Float[ArrayLike, " K1"]) -> np.ndarray:
    r"""End of each plateau of a loss curve with plateau levels $L_0 > L_1 > \dots > L_K$ (``(K+1,)``): the
    first time the loss falls below $(L_{k-1}+L_k)/2$ (the rule); ``(K,)``."""
    lv = np.asarray(levels, dtype=float)
    mids = lv[:-1] + HALF * (lv[1:] - lv[:-1])
    L = np.asarray(loss, dtype=float)
    return halfway_crossing(times, np.repeat(L[:, None], mids.size, axis=1), mids, rising=False)


class PlateauEnds(NamedTuple):
    """Predicted and measured plateau ends of the learned modes (optimiser steps; flow time ``t = eta * step``)."""

    levels: np.ndarray  #: (K,) learned levels of the modes (eigenvalues of M at the flow's horizon)
    predicted_time: np.ndarray  #: (K,) switch-on times on the NQF flow (before training)
    predicted: np.ndarray  #: (K,) the same in optimiser steps
    nqf: np.ndarray  #: (K,) measured on the NQF trained with the optimiser (steps)
    module: np.ndarray  #: (K,) measured on the model itself (steps)
    valid: np.ndarray  #: (K,) bool: predicted before the flow's range of validity ends
    within_run: np.ndarray  #: (K,) bool: predicted within the run's num_steps
    tolerance: np.ndarray  #: (K,) relative tolerance of measured against predicted (``read_plateaus``)


class Diagnosis(NamedTuple):
    """The report of :func:`nqf.diagnose`: ``print(report)`` for the summary, ``report.plot()`` for the figure."""

    run: ModelRun  #: everything computed (hypotheses, A(x), NQF data, flow, comparison)
    plateaus: PlateauEnds

    @property
    def window(self) -> float:
        """Agreement window in steps: first recorded step where the outputs of model and NQF part (inf: never)."""
        return float(np.asarray(self.run.comparison.window))

    @property
    def valid_until_steps(self) -> float:
        """End of the prediction's range of validity, in steps (inf: the whole horizon)."""
        return self.run.valid_until / self.run.eta if self.run.eta else np.nan

    def __str__(self) -> str:  # noqa: D105
        r, pl = self.run, self.plateaus
        p, d = r.W0.shape
        o = r.data.num_outputs
        h = r.hypotheses
        lines = [
            f"NQF diagnosis of {r.name}: p = {p} parameters per neuron, d = {d} neurons, "
            f"{o} output{'s' if o > 1 else ''}, m = {r.data.m // o} samples",
            f"  Theorem 1 at x_1: permutation residual {h.permutation_residual:.1e}, ZGZ residual "
            f"{h.zgz_residual:.1e}, Taylor ratio {h.smooth_ratio:.3g} (C^3: >= 4): hypotheses hold",
            f"  A(x): {tuple(np.shape(r.As))}; NQF loss at W(0) {float(mse_loss(r.W0 @ r.W0.T, r.data)):.4g}",
        ]
        w = self.window
        wt = "never within the run" if not np.isfinite(w) else f"step {w:.0f}" + (
            f" (t = {w * r.eta:.4g})" if r.eta else "")
        lines.append(f"  agreement window (probe outputs, relative gap > {r.threshold:g}): {wt}")
        if r.eta is None:
            lines.append("  no step <-> time map for this optimiser (only plain SGD, with or without momentum): "
                         "no plateau prediction")
            return "\n".join(lines)
        v = self.valid_until_steps
        lines.append(f"  flow time per step eta = {r.eta:.4g}; prediction valid until "
                     + ("the end of the horizon" if not np.isfinite(v) else f"step {v:.0f} (t = {r.valid_until:.4g})")
                     + f" (model vs NQF at the flow's weights, gap > {r.threshold:g})")
        lines.append("  plateau ends, mode k = k-th eigenvalue of M = W W^T reaching half its learned level:")
        lines.append("    k     level   predicted step   NQF run   model run   model/predicted   tolerance")
        for k in range(pl.levels.size):
            ratio = pl.module[k] / pl.predicted[k] if np.isfinite(pl.module[k]) else np.nan
            note = "" if pl.valid[k] else "   (beyond the range of validity)"
            if not pl.within_run[k]:
                note += "   (after the run)"
            lines.append(f"    {k + 1:<3d} {pl.levels[k]:9.3g}   {pl.predicted[k]:14.0f}   {pl.nqf[k]:7.0f}   "
                         f"{pl.module[k]:9.0f}   {ratio:15.3f}   +-{pl.tolerance[k]:.3f}{note}")
        if not pl.levels.size:
            lines.append("    (no mode is learned within the flow's horizon)")
        return "\n".join(lines)

    def plot(self, axes: Any = None):
        """Loss and eigenvalues of $M$ against optimiser steps: model, NQF run, flow (at ``step = t/eta``),
        predicted plateau ends as vertical lines and measured ones as markers. ``axes``: two matplotlib axes to
        draw on (default: a new figure). Returns the figure."""
        import matplotlib.pyplot as plt

        r, pl = self.run, self.plateaus
        own = axes is None
        if own:
            fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        fig = axes[0].figure
        c = r.comparison
        st = np.asarray(c.steps, dtype=float)
        ok = st > 0
        ax = axes[0]
        ax.loglog(st[ok], np.asarray(c.module["loss"])[ok], color="C0", label="model (measured)")
        ax.loglog(st[ok], np.asarray(c.nqf["loss"])[ok], "--", color="C1", label="NQF, same optimiser")
        if r.eta:
            fs = r.flow_ts[1:] / r.eta
            ax.loglog(fs, r.flow_loss[1:], ":", color="k", label="NQF flow (predicted)")
        ax.set_xlabel("optimiser step")
        ax.set_ylabel("training loss (mse)")
        ax = axes[1]
        K = pl.levels.size
        for k in range(max(K, 1)):
            col = f"C{k % 10}"
            ax.loglog(st[ok], r.eigs_module[ok, k], color=col, label="model (measured)" if k == 0 else None)
            if r.eta:
                ax.loglog(r.flow_ts[1:] / r.eta, r.flow_eigs[1:, k], ":", color=col,
                          label="NQF flow (predicted)" if k == 0 else None)
        for k in range(K):
            for a in axes:
                a.axvline(pl.predicted[k], color=f"C{k % 10}", lw=0.8, alpha=0.6)
            if np.isfinite(pl.module[k]):
                axes[1].plot(pl.module[k], HALF * pl.levels[k], "o", color=f"C{k % 10}", ms=5,
                             label="measured plateau end" if k == 0 else None)
        if r.eta and np.isfinite(r.valid_until):
            for a in axes:
                a.axvspan(r.valid_until / r.eta, st[-1], color="0.9", zorder=0,
                          label="beyond the range of validity" if a is axes[0] else None)
        ax.set_xlabel("optimiser step")
        ax.set_ylabel(r"eigenvalues of $M = WW^\top$")
        for a in axes:
            a.set_xlim(st[ok][0], st[-1])
            a.legend(fontsize=7)
        if own:
            fig.tight_layout()
        return fig


def read_plateaus(run: ModelRun) -> PlateauEnds:
    r"""Apply the rule to a ``ModelRun``: levels and switch-on times from its flow, the
    measured ends on its two training runs (same levels).

    The tolerance of a measured end against the prediction is fixed by the run's settings, never by the
    measurement: the discretisation lag $\approx\eta a/2$ (``discretisation_tolerance``), plus one recording interval
    over the predicted step (the reading's resolution), plus ``run.threshold`` (the relative accuracy to
    which the NQF describes the model's outputs inside the range of validity)."""
    if run.eta is None:
        z = np.zeros((0,))
        return PlateauEnds(z, z, z, z, z, z.astype(bool), z.astype(bool), z)
    levels = learned_levels(run.flow_ts, run.flow_eigs)
    t_pred = mode_plateau_ends(run.flow_ts, run.flow_eigs, levels)
    steps = np.asarray(run.comparison.steps, dtype=float)
    nqf = mode_plateau_ends(steps, run.eigs_nqf, levels)
    mod = mode_plateau_ends(steps, run.eigs_module, levels)
    tol = discretisation_tolerance(run) + run.record_every / (t_pred / run.eta) + run.threshold
    return PlateauEnds(levels, t_pred, t_pred / run.eta, nqf, mod, t_pred < run.valid_until,
                       t_pred / run.eta <= run.num_steps, tol)


def discretisation_tolerance(run: ModelRun) -> float:
    r"""How late the optimiser may switch a mode on relative to the flow: ``run.lag``.

    In the exponential phase that sets a plateau's length, a mode of the flow grows as $e^{a t}$ and the same
    mode of gradient descent as $(1 + \eta a)^{\text{step}}$ (momentum: the largest root of its recursion), so GD
    needs $\eta a/\ln(1+\eta a) - 1 \approx \eta a/2$ more steps (``growth_lag``); $a$ is the
    fastest mode's rate (``run.rate``), a bound for the slower ones."""
    return run.lag if run.eta else np.nan


def diagnose(
    model: Any,
    data: tuple[Any, Any],
    optimizer: Any,
    num_steps: int,
    *,
    apply: Callable | None = None,
    neuron_axes: Any = None,
    **options: Any,
) -> Diagnosis:
    r"""What the NQF says about your model, in one call: Theorem 1's hypotheses, $A(x)$ on the data and the
    NQF data, the model and its NQF trained side by side (agreement window in steps and in time
    $t = \eta\cdot$step), and the plateau ends **predicted** from the NQF flow at the model's own $W(0)$,
    read by the rule of this module and converted to steps, beside the measured ones, with the flow's
    range of validity.

    Args:
        model: a callable ``equinox.Module`` (neurons along ``neuron_axes``, or its method ``neuron_axes()``),
            or the parameters of ``apply`` (a dict of arrays, a flax model's variables).
        data: ``(xs, ys)``, targets ``(m,)`` or ``(m, o)``; loss :func:`nqf.model.mse`, full batch.
        optimizer: ``nqf.training.optimizer("sgd", eta)`` (plateau ends predicted in steps), or any optax
            optimiser (then no step <-> time map: the report says so).
        num_steps: optimiser steps.
        apply: ``apply(params, x)`` (``None`` for an equinox Module; ``flax_model.apply`` for flax).
        neuron_axes: the neuron axis of each parameter leaf (as ``jax.vmap``'s ``in_axes``; ``None`` = shared).
        options: of :func:`nqf.training.model_run` (``record_every``, ``threshold``, ``n_probe``, ``horizon``,
            ``flow_points``).

    Returns:
        a :class:`nqf.solutions.Diagnosis` (``print`` it; ``.plot()``).
    """
    run = model_run(model, data, optimizer, num_steps, apply=apply, neuron_axes=neuron_axes, **options)
    return Diagnosis(run, read_plateaus(run))
