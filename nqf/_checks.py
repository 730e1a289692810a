"""Input validation shared by every public function of :mod:`nqf`.

Errors are plain ``ValueError`` raised at call (trace) time and always name
the argument, the expected shape or property, and what was received.
Value checks (symmetry, PSD, finiteness) need concrete arrays, so they are
skipped silently under ``jax.jit`` tracing; call the public functions
outside jit (they jit their own inner loops) to get them.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def check_ndim(name: str, x, ndim: int, meaning: str = "") -> None:
    """Raise unless ``x`` has ``ndim`` dimensions."""
    shape = np.shape(x)
    if len(shape) != ndim:
        what = f" ({meaning})" if meaning else ""
        raise ValueError(
            f"`{name}` must have {ndim} dimension(s){what}; got shape {shape}."
        )


def check_shape(name: str, x, expected: Sequence[int | None], meaning: str = "") -> None:
    """Raise unless ``x.shape`` matches ``expected`` (``None`` = any size)."""
    shape = tuple(np.shape(x))
    ok = len(shape) == len(expected) and all(
        e is None or s == e for s, e in zip(shape, expected)
    )
    if not ok:
        exp = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        what = f" ({meaning})" if meaning else ""
        raise ValueError(f"`{name}` must have shape {exp}{what}; got shape {shape}.")


def check_finite(name: str, x) -> None:
    """Raise if ``x`` holds NaN or infinite entries (concrete arrays only)."""
    if _is_concrete(x):
        arr = np.asarray(x)
        if not np.all(np.isfinite(arr)):
            bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
            raise ValueError(
                f"`{name}` must be finite; got {bad} NaN/inf entr{'y' if bad == 1 else 'ies'} "
                f"in an array of shape {arr.shape}."
            )


def check_square_stack(name: str, x) -> tuple[int, int]:
    """Check a stack of square matrices of shape ``(m, p, p)``; return ``(m, p)``."""
    shape = np.shape(x)
    if len(shape) != 3 or shape[1] != shape[2]:
        raise ValueError(
            f"`{name}` must be a stack of square matrices with shape (m, p, p); got shape {shape}."
        )
    return shape[0], shape[1]


def check_symmetric(name: str, x, rtol: float = 1e-10) -> None:
    """Raise unless the last two axes of ``x`` are symmetric (concrete arrays only)."""
    shape = np.shape(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"`{name}` must be square in its last two axes; got shape {shape}.")
    if _is_concrete(x):
        arr = np.asarray(x, dtype=float)
        asym = np.max(np.abs(arr - np.swapaxes(arr, -1, -2))) if arr.size else 0.0
        scale = max(np.max(np.abs(arr)) if arr.size else 0.0, 1e-300)
        if asym > rtol * scale:
            raise ValueError(
                f"`{name}` must be symmetric (A = A^T); got max |A - A^T| = {asym:.3g} "
                f"(relative {asym / scale:.3g}, tolerance {rtol:g})."
            )


def check_psd(name: str, x, rtol: float = 1e-10) -> None:
    """Raise unless ``x`` is symmetric positive semi-definite (concrete arrays only)."""
    check_symmetric(name, x, rtol=rtol)
    if _is_concrete(x):
        arr = np.asarray(x, dtype=float)
        eig = np.linalg.eigvalsh(0.5 * (arr + np.swapaxes(arr, -1, -2)))
        scale = max(np.max(np.abs(eig)) if eig.size else 0.0, 1e-300)
        if np.min(eig) < -rtol * scale:
            raise ValueError(
                f"`{name}` must be positive semi-definite (M = W W^T); got smallest "
                f"eigenvalue {np.min(eig):.3g} (largest |eigenvalue| {scale:.3g})."
            )


def check_positive(name: str, value, strict: bool = True) -> None:
    """Raise unless a scalar is positive (or non-negative with ``strict=False``)."""
    if _is_concrete(value):
        v = float(value)
        if not np.isfinite(v) or (v <= 0 if strict else v < 0):
            rel = "> 0" if strict else ">= 0"
            raise ValueError(f"`{name}` must be finite and {rel}; got {v!r}.")


def require_x64(what: str) -> None:
    """Raise unless JAX runs in float64 (the book's tolerances need it)."""
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            f"{what} needs float64: call `jax.config.update('jax_enable_x64', True)` "
            "(or set JAX_ENABLE_X64=1) before creating arrays."
        )
