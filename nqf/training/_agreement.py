r"""One way to say where a module and its NQF part: a relative gap and its first exceedance.

Every agreement window of the book (Figs. 2, 6, 7, 8 and chapter 9) is :func:`first_exceedance` of a
:func:`relative_gap`: the first *recorded* step at which the gap exceeds a threshold. A non-finite
gap (a run that diverged) counts as parted, everywhere: a run that blew up does not agree.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, Real

from .._checks import check_real
from .._types import ArrayLike


def relative_gap(a: Float[ArrayLike, "..."], b: Float[ArrayLike, "..."], *, time_axis: int = 0,
                 reference: Float[ArrayLike, "..."] | None = None) -> np.ndarray:
    r"""$\|a_t - b_t\| / \|r_t\|$ at each recorded step $t$, norms over every axis after ``time_axis``.

    The reference $r$ is ``a`` (the module's quantity) unless ``reference`` is given (e.g. the
    targets of a probe set, shape ``(*B, ...)`` without a time axis: one norm per run). ``a`` and ``b``
    must have the same shape; ``time_axis`` counts the leading run axes (``0`` for one run).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"`a` and `b` must have the same shape; got {a.shape} and {b.shape}.")
    if not 0 <= int(time_axis) < max(a.ndim, 1):
        raise ValueError(f"`time_axis` must index an axis of `a` (ndim {a.ndim}); got {time_axis!r}.")
    axes = tuple(range(int(time_axis) + 1, a.ndim))
    diff = np.sqrt(np.sum((a - b) ** 2, axis=axes)) if axes else np.abs(a - b)
    if reference is None:
        ref = np.sqrt(np.sum(a**2, axis=axes)) if axes else np.abs(a)
    else:
        r = np.asarray(reference, dtype=float)  # (*B, ...): no time axis
        ref = np.sqrt(np.sum(r**2, axis=tuple(range(int(time_axis), r.ndim))))[..., None]
    with np.errstate(invalid="ignore", over="ignore"):
        return diff / np.maximum(ref, 1e-300)


def first_exceedance(steps: Real[ArrayLike, " T"], gap: Float[ArrayLike, "*B T"], threshold: float) -> np.ndarray:
    """The first recorded step at which ``gap`` (last axis: time) exceeds ``threshold`` or is not finite.

    Returns an array of shape ``gap.shape[:-1]`` of floats: the step, or ``inf`` where the gap never
    exceeds the threshold. A NaN or infinite gap (a diverged run) counts as exceeded.
    """
    steps, gap = np.asarray(steps), np.asarray(gap, dtype=float)
    check_real("threshold", threshold)
    if steps.ndim != 1 or gap.ndim < 1 or gap.shape[-1] != steps.shape[0]:
        raise ValueError(f"`gap` must have the recorded steps on its last axis ({steps.shape[0] if steps.ndim == 1 else '?'} "
                         f"of them, `steps` must be 1-D); got steps {steps.shape} and gap {gap.shape}.")
    exceeded = ~(gap <= threshold)
    first = np.argmax(exceeded, axis=-1)
    return np.where(exceeded.any(axis=-1), steps[first].astype(float), np.inf)
