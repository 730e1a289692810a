r"""Two regimes, one report (issue 51): the NQF (the model's quadratic form at $W = 0$) and the model linearised at
its own $W(0)$ (the kernel, lazy regime), each trained by the user's optimiser and loss.

**The rule** (fixed before the runs; round 2's range of validity, and the package's one half-way rule): a
surrogate's error at step $s$ is $e(s) = |f(W_s) - \tilde f(W_s)| / |\tilde f(W_s) - f_{\mathrm{ref}}|$ on the probe
inputs, the model $f$ at the surrogate's own weights $W_s$ against the surrogate $\tilde f$, relative to what the
surrogate has moved ($f_{\mathrm{ref}} = f_x(0)$ for the NQF, $f_x(W_0)$ for the linearisation). Its range of
validity ends at the first record where twice the mean of $e$ so far exceeds the agreement threshold (twice: a
relative error in the outputs is about twice that in the gradients). A surrogate **describes** the training when
its range of validity reaches past the step at which the model's loss is half-way, on a log scale, from its start
to its end. Neither describes it when both ranges end before. A surrogate whose loss blows up while the model
trains does not describe it: its regime is left, whatever the learning rate.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import invalid
from ..model._linearised import LinearisedFit, LinearisedKernelFit, LinearisedRecord, kernel_form
from ..training import Agreement, Runs, train

HALF = 0.5  #: the package's one half-way rule (``nqf.solutions._plateaus.HALF``)
REGIMES = ("nqf", "linearised")  #: the surrogates diagnose can train


def check_regimes(regimes: Any) -> tuple:
    """``regimes`` as a tuple of names from :data:`REGIMES`, ``"nqf"`` included (its run is the plateau
    prediction); ``ValueError`` naming ``regimes`` otherwise."""
    if isinstance(regimes, str) or not isinstance(regimes, (tuple, list)):
        raise invalid("regimes", f"be a tuple of names among {REGIMES}", repr(regimes))
    bad = [r for r in regimes if r not in REGIMES]
    if bad:
        raise invalid("regimes", f"hold only names among {REGIMES}", f"{bad!r} in {tuple(regimes)!r}")
    if "nqf" not in regimes:
        raise invalid("regimes", "hold 'nqf' (the NQF's run is the plateau prediction); add 'linearised' for the "
                                 "kernel regime", repr(tuple(regimes)))
    return tuple(dict.fromkeys(regimes))


class LinearisedRun(NamedTuple):
    """The model linearised at its own W(0), trained by the user's optimiser and loss (records every ``every``)."""

    steps: np.ndarray  #: (T,) recorded steps
    loss: np.ndarray  #: (T,) the surrogate's loss before each recorded step (the last: at the end)
    outputs: np.ndarray  #: (T, n, *o) the surrogate's outputs on the probe
    error: np.ndarray  #: (T,) e(s): the model at the surrogate's weights against it (relative to its change)
    diverged: bool  #: its loss blew up (non-finite or 1e3 times the initial)


def linearised_run(q, params, data, optimizer, loss, num_steps: int, every: int, probe) -> LinearisedRun:
    """Train the model linearised at ``params`` (its W(0)) for ``num_steps`` and record its error on ``probe``; in the
    exact Gauss-Newton form under an MSE loss when its Jacobian is small enough (``nqf.model._linearised``),
    matrix-free otherwise."""
    tr0, frozen, _ = q.split(params)
    xs = jax.tree_util.tree_map(jnp.asarray, data[0])
    ys = jnp.asarray(data[1])
    args = {"tr0": tr0, "frozen": frozen, "probe": probe}
    kernel = kernel_form(q.apply, tr0, frozen, (xs, ys), probe, loss)
    fit, batch = (LinearisedFit(q.apply, loss), (xs, ys)) if kernel is None else (LinearisedKernelFit(), None)
    args.update(kernel or {})
    run = train(fit, tr0, optimizer, num_steps=num_steps, data=batch, args=args,
                record=LinearisedRecord(q.apply), runs=Runs(every, (), "ignore"))
    rec = run.record
    with np.errstate(all="ignore"):
        lin, mod = np.asarray(rec["outputs"], dtype=float), np.asarray(rec["model_outputs"], dtype=float)
        T = lin.shape[0]
        num = np.linalg.norm((mod - lin).reshape(T, -1), axis=1)
        den = np.linalg.norm((lin - lin[:1]).reshape(T, -1), axis=1)
        err = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, np.inf, 0.0))
    err[0] = 0.0  # at W(0) the surrogate is the model by construction (a rounding difference over 0 change is no error)
    bl = np.asarray(run.batch_loss, dtype=float)
    end = float(fit(run.params, batch, args))
    L = np.concatenate([bl[::every], [end]])[:T]
    allv = np.concatenate([bl, [end]])
    diverged = bool(not np.all(np.isfinite(allv)) or np.max(np.abs(allv)) > 1e3 * max(abs(allv[0]), 1e-300))
    return LinearisedRun(np.asarray(run.steps), L, lin, err, diverged)


def valid_until(steps, error, threshold: float) -> float:
    """A surrogate's range of validity, in steps: the first record at which twice the mean of its error so far
    exceeds ``threshold`` (``inf``: never within its records); the NQF's is :func:`validity_end`'s."""
    s, e = np.asarray(steps, dtype=float), np.asarray(error, dtype=float)
    area = np.concatenate([[0.0], np.cumsum(0.5 * (e[1:] + e[:-1]) * np.diff(s))])
    with np.errstate(all="ignore"):
        mean = np.where(s > s[0], area / np.where(s > s[0], s - s[0], 1.0), e[0])
    return float(Agreement(threshold).window(s, 2.0 * mean))


def half_way(steps, loss, level: float | None = None) -> float:
    """The first recorded step at which ``loss`` is at most ``level``; default: half-way from its start to its end
    (the package's one half-way rule, ``HALF``). ``nan``: a loss that does not fall; ``inf``: never reached."""
    s, L = np.asarray(steps, dtype=float), np.asarray(loss, dtype=float)
    if level is None:
        if not (np.all(np.isfinite(L)) and L[-1] < L[0]):
            return float("nan")
        level = L[-1] + HALF * (L[0] - L[-1])
    hit = np.isfinite(L) & (L <= level)
    return float(s[int(np.argmax(hit))]) if hit.any() else float("inf")


def describes(valid: float, reached: float, half: float, tolerance: float) -> bool:
    """The rule: the surrogate's range of validity reaches past the model's half-way step ``half``, and the surrogate
    reaches the model's half-way loss at ``reached`` with ``|reached / half - 1| <= tolerance``."""
    return bool(np.isfinite(half) and valid > half and abs(reached / half - 1.0) <= tolerance)
