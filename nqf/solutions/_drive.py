r"""Which modes the data drive: the rule :func:`nqf.diagnose` applies before judging a plateau end.

At $W = 0$ the NQF's loss $\mathcal L(M)$, $M = WW^\top$, is pulled by the **drive** $D = -\partial\mathcal L/\partial M$
(symmetrised; for the package's loss $D = -\frac2m\sum_\mu\Delta_\mu A(x_\mu)$, so $\dot M = DM + MD$ near $M = 0$,
Eq. 28). Near $W = 0$ a mode grows only along a positive eigenvalue of $D$: the data drive at most
$n_+ = \#\{\lambda_k(D) > \text{RANK\_TOL}\cdot\max_k|\lambda_k(D)|\}$ modes. An optimiser that is not a linear filter
of the gradients (Adam) also lifts the others, to a level set by its step, not by the data: their learned levels are
the noise floor.

**The rule** (fixed before the runs of issue 51, on its exploration seeds): mode $k$ of the prediction (levels in
descending order) is *driven* when $k \le n_+$ and its level exceeds the floor (the largest end level of the modes
$k > n_+$, zero when there are none) divided by ``HALF``: its plateau end is read where it reaches ``HALF`` its
level, which no undriven mode then reaches. Other modes are listed apart and never judged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

RANK_TOL = 1e-9  #: eigenvalues of D below this fraction of the largest |eigenvalue| count as zero (float64 rounding)


def factor_stack(kind: str, a, B):
    r"""The stack $A^{(o)}(x_\mu)$, ``(m, o, p, p)``, of a factored form (the form search verified the factors against
    the matrix-free NQF): ``"rank-two"``, $\tfrac12(a\,b_o^\top + b_o a^\top)$ from ``a`` ``(m, p)``, ``B`` ``(p, o)``;
    ``"low-rank"``, $\tfrac12\sum_k(u_k v_{k,o}^\top + v_{k,o} u_k^\top)$ from ``U`` ``(m, p, r)``, ``V``
    ``(p, r, o)``. Products of factors: no Hessian through the model."""
    outer = jnp.einsum("mi,jo->moij", a, B) if kind == "rank-two" else jnp.einsum("mik,jko->moij", a, B)
    return 0.5 * (outer + jnp.swapaxes(outer, -1, -2))


def drive_spectrum(loss: Callable, f0: Any, ys: Any, *, stack: Any = None, factors: Any = None) -> np.ndarray | None:
    r"""Eigenvalues of the drive $D = -\mathrm{sym}\,\partial\mathcal L/\partial M$ at $M = 0$, descending, ``(p,)``;
    from the $A(x)$ ``stack`` ``(m, *o, p, p)`` or the ``factors`` of a factored form: rank-two ``(a, B)``
    ($\mathrm{Tr}[MA^{(o)}(x_\mu)] = a_\mu^\top M b_o$) or low-rank ``(U, V)``, ``U`` ``(m, p, r)``
    ($\sum_k u_{\mu k}^\top M v_{k,o}$); None when neither is given."""
    f0 = jnp.asarray(f0)
    if stack is not None:
        p = stack.shape[-1]

        def L(M):
            return loss(f0 + jnp.einsum("m...ij,ij->m...", stack, M), ys)
    elif factors is not None:
        a, B = factors
        p = a.shape[1]

        def L(M):
            Q = (a @ M) @ B if a.ndim == 2 else jnp.einsum("mik,ij,jko->mo", a, M, B)
            return loss(f0 + jnp.reshape(Q, f0.shape), ys)
    else:
        return None
    G = np.asarray(jax.grad(L)(jnp.zeros((p, p), f0.dtype)), dtype=float)
    return np.linalg.eigvalsh(-0.5 * (G + G.T))[::-1]


def driven_count(spectrum: np.ndarray | None) -> int | None:
    """$n_+$: the number of positive eigenvalues of the drive above the rounding floor (None: not computed)."""
    if spectrum is None:
        return None
    s = np.asarray(spectrum, dtype=float)
    top = float(np.max(np.abs(s))) if s.size else 0.0
    return int(np.sum(s > RANK_TOL * top)) if top > 0 else 0


def driven_modes(levels: np.ndarray, end: np.ndarray, n_plus: int | None, half: float) -> tuple[np.ndarray, float]:
    """``(driven, floor)``: which of the learned ``levels`` (descending) the rule judges, and the noise floor (the
    largest of the prediction's ``end`` eigenvalues beyond the first ``n_plus``; 0 when none). ``n_plus`` None (no
    drive computed): every learned mode is judged, floor nan."""
    lv = np.asarray(levels, dtype=float)
    if n_plus is None:
        return np.ones(lv.shape, bool), float("nan")
    e = np.asarray(end, dtype=float)
    rest = e[n_plus:]
    floor = float(np.nanmax(rest)) if rest.size and np.isfinite(rest).any() else 0.0
    return (np.arange(lv.size) < n_plus) & (lv > floor / half), floor
