r"""THE agreement rule: one gap (:func:`relative_gap`) and one first crossing (:func:`first_crossing`), which
every "when does a recorded quantity first reach a level" of the package and the book uses."""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, Real

from .._checks import check_int, check_option, invalid, wrong_kind
from .._types import ArrayLike


#: THE "never crossed" value of every first crossing, agreement window and plateau end: later than every record
NEVER = np.inf


def _reals(name: str, x) -> np.ndarray:
    """``x`` as a float NumPy array; ``TypeError`` naming ``name`` for strings, objects, complex numbers (instead
    of NumPy's "could not convert string to float" or a ComplexWarning)."""
    if isinstance(x, (str, bytes)) or x is None:
        raise wrong_kind(name, "be an array of real numbers", f"{type(x).__name__} {x!r:.40}")
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:
        raise wrong_kind(name, "be an array of real numbers", f"{type(x).__name__} ({err})") from None
    if arr.dtype.kind not in "biuf":
        raise wrong_kind(name, "be an array of real numbers", f"{type(x).__name__} of dtype {arr.dtype}")
    return arr.astype(float, copy=False)  # no copy of a float array (nothing here writes into it)


def _times(t: np.ndarray) -> np.ndarray:
    if t.ndim != 1 or t.size == 0:
        raise invalid("times", "be a non-empty 1-D array of record times (nothing was recorded?)", f"shape {t.shape}")
    if not np.all(np.isfinite(t)):
        raise invalid("times", "be finite record times", f"{int(np.sum(~np.isfinite(t)))} NaN/inf entries in {t[:5]}")
    if t.size > 1 and not np.all(np.diff(t) > 0):
        i = int(np.argmin(np.diff(t) > 0))
        raise invalid("times", "be strictly increasing (record times, in the order recorded)",
                      f"times[{i}] = {t[i]:g} then times[{i + 1}] = {t[i + 1]:g}")
    return t


def relative_gap(a: Float[ArrayLike, "..."], b: Float[ArrayLike, "..."], *, time_axis: int = 0,
                 reference: Float[ArrayLike, "..."] | None = None) -> np.ndarray:
    r"""$\|a_t - b_t\| / \|r_t\|$ at each recorded step $t$, norms over every axis after ``time_axis``.

    The reference $r$ is ``a`` (the module's quantity) unless ``reference`` is given (e.g. the
    targets of a probe set, shape ``(*B, ...)`` without a time axis: one norm per run). ``a`` and ``b``
    must have the same shape; ``time_axis`` counts the leading run axes (``0`` for one run).
    """
    a, b = _reals("a", a), _reals("b", b)
    if a.shape != b.shape:
        raise invalid("b", "have the shape of `a`", f"{a.shape} and {b.shape}")
    time_axis = check_int("time_axis", time_axis, minimum=0)
    if not 0 <= int(time_axis) < max(a.ndim, 1):
        raise invalid("time_axis", f"index an axis of `a` (ndim {a.ndim})", repr(time_axis))
    axes = tuple(range(int(time_axis) + 1, a.ndim))
    diff = np.sqrt(np.sum((a - b) ** 2, axis=axes)) if axes else np.abs(a - b)
    if reference is None:
        ref = np.sqrt(np.sum(a**2, axis=axes)) if axes else np.abs(a)
    else:
        r = _reals("reference", reference)  # (*B, ...): no time axis
        ref = np.sqrt(np.sum(r**2, axis=tuple(range(int(time_axis), r.ndim))))[..., None]
    with np.errstate(invalid="ignore", over="ignore"):
        return diff / np.maximum(ref, 1e-300)


def first_crossing(times: Real[ArrayLike, " T"], values: Real[ArrayLike, "..."], level: Real[ArrayLike, "..."] | float,
                   *, axis: int = 0, rising: bool = True, interpolate: bool = True, nan_crosses: bool = False
                   ) -> np.ndarray:
    r"""THE first-crossing rule: the first time a recorded quantity reaches a level.

    ``values`` carries the records on ``axis`` (one per entry of ``times``, strictly increasing); ``level``
    broadcasts against the other axes. The rule:

    * record $i$ has **crossed** when ``values[i] >= level`` (``rising``, the default) or ``<= level``
      (``rising=False``); a NaN counts as crossed only with ``nan_crosses=True`` (an agreement gap);
    * the result is the time of the first crossed record $i$, or with ``interpolate=True`` (the default) the
      time where the straight line between records $i-1$ and $i$ meets the level,
      $t_{i-1} + (t_i - t_{i-1})\,(\ell - v_{i-1})/(v_i - v_{i-1})$ (the record's own time $t_i$ when either
      value is not finite);
    * crossed **at the first record**: ``times[0]``;
    * **never** crossed: ``inf``, THE one "never" value of the package (``NEVER``).

    Returns:
        an array of the shape of ``values`` without ``axis`` (broadcast with ``level``), of floats.
    """
    t = _times(_reals("times", times))
    v = _reals("values", values)
    check_option("rising", rising, (True, False))
    axis = check_int("axis", axis, minimum=None)
    if v.ndim == 0 or not -v.ndim <= int(axis) < v.ndim or v.shape[int(axis)] != t.size:
        raise invalid("values", f"carry the {t.size} records on axis {axis}", f"shape {v.shape}")
    v = np.moveaxis(v, int(axis), 0)
    lv = _reals("level", level)
    shape = np.broadcast_shapes(v.shape[1:], lv.shape)
    v, lv = np.broadcast_to(v, (t.size,) + shape), np.broadcast_to(lv, shape)
    with np.errstate(invalid="ignore"):
        hit = (v >= lv) if rising else (v <= lv)
    if nan_crosses:
        hit = hit | np.isnan(v)
    crossed = hit.any(axis=0)
    first = np.argmax(hit, axis=0)
    out = t[first]
    if interpolate:
        prev = np.maximum(first - 1, 0)
        v0 = np.take_along_axis(v, prev[None], 0)[0]
        v1 = np.take_along_axis(v, first[None], 0)[0]
        ok = (first > 0) & np.isfinite(v0) & np.isfinite(v1) & (v1 != v0)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            frac = (lv - v0) / np.where(ok, v1 - v0, 1.0)
        out = np.where(ok, t[prev] + frac * (t[first] - t[prev]), out)
    return np.where(crossed, out, NEVER)

