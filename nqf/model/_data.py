r"""The data of an NQF as one validated pytree.

A dataset of $m$ samples is the stack of structure matrices $A(x_\mu)$, the targets
$y_\mu$ and, where the ZGZ condition fails (Eq. 20), the linear terms $g(x_\mu)$, the
quadratic terms in $\mu$, $B(x_\mu)$, and the offsets $f_{x_\mu}(0)$:

$$ f_{x}(W) = f_x(0) + g(x)^\top\mu + \mu^\top B(x)\mu + \mathrm{Tr}[M A(x)]. $$

:class:`NQFData` checks shapes, finiteness and symmetry **once**, when it is built;
every function that takes it trusts it. It is an ``equinox.Module`` (a pytree), so it
passes through ``jit``/``vmap``/``diffeqsolve(args=...)`` as data: a new dataset of
the same shape reuses every compiled function.
"""

from __future__ import annotations

from typing import Optional

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import _is_concrete, check_finite, check_shape, check_square_stack, check_symmetric
from .._checks import as_real_array


class NQFData(eqx.Module):
    r"""Structure matrices, targets and (optionally) the general terms of Eq. (20).

    Attributes:
        As: the stack $A(x_\mu)$, shape ``(m, p, p)``, symmetric.
        ys: targets $y_\mu$, shape ``(m,)``.
        gs: linear terms $g(x_\mu)$, shape ``(m, p)``; ``None`` when ZGZ holds.
        Bs: quadratic terms $B(x_\mu)$ in $\mu$, shape ``(m, p, p)``; ``None`` when ZGZ holds.
        f0: offsets $f_{x_\mu}(0)$, shape ``(m,)`` (zeros by default).

    Build it with ``NQFData(As, ys, gs=..., Bs=..., f0=...)``; arrays are converted to
    the default float dtype and validated (shapes, finite entries, symmetric ``As``),
    with errors that name the argument, the expected and the actual shape.
    """

    As: Float[Array, "m p p"]
    ys: Float[Array, " m"]
    gs: Optional[Float[Array, "m p"]]
    Bs: Optional[Float[Array, "m p p"]]
    f0: Float[Array, " m"]

    def __init__(self, As, ys, *, gs=None, Bs=None, f0=0.0):
        As = as_real_array("As", As)
        m, p = check_square_stack("As", As)
        if m < 1 or p < 1:
            raise ValueError(f"`As` must hold at least one (p, p) matrix with p >= 1; got shape {As.shape}.")
        ys = as_real_array("ys", ys)
        check_shape("ys", ys, (m,), "one target per structure matrix in `As`")
        if gs is not None:
            gs = as_real_array("gs", gs)
            check_shape("gs", gs, (m, p), "one linear term g(x) per sample")
        if Bs is not None:
            Bs = as_real_array("Bs", Bs)
            check_shape("Bs", Bs, (m, p, p), "one quadratic term B(x) per sample")
        f0 = as_real_array("f0", f0)
        if f0.ndim == 0:
            f0 = jnp.full((m,), f0)
        check_shape("f0", f0, (m,), "one offset f_x(0) per sample, or a scalar")
        for name, x in (("As", As), ("ys", ys), ("gs", gs), ("Bs", Bs), ("f0", f0)):
            if x is not None:
                check_finite(name, x)
        if _is_concrete(As):
            check_symmetric("As", As)
        self.As, self.ys, self.gs, self.Bs, self.f0 = As, ys, gs, Bs, f0

    @property
    def m(self) -> int:
        """Number of samples."""
        return self.As.shape[0]

    @property
    def p(self) -> int:
        """Parameters per neuron (side of each $A$)."""
        return self.As.shape[-1]

    @property
    def zgz(self) -> bool:
        """True when the data has no $g$ and no $B$ terms (the ZGZ case, $f = f(0) + \\mathrm{Tr}[MA]$)."""
        return self.gs is None and self.Bs is None

    def subset(self, index) -> "NQFData":
        """The samples ``index`` (an int array), as a new :class:`NQFData` (no re-validation needed)."""
        new = object.__new__(NQFData)
        for name in ("As", "ys", "gs", "Bs", "f0"):
            x = getattr(self, name)
            object.__setattr__(new, name, None if x is None else x[index])
        return new


def require_data(data, name: str = "data") -> NQFData:
    """Return ``data`` if it is an :class:`NQFData`; otherwise raise a ``TypeError`` naming ``name``.

    Functions of :mod:`nqf` take the data of an NQF as one validated pytree; build it with
    ``nqf.NQFData(As, ys, gs=..., Bs=..., f0=...)``.
    """
    if not isinstance(data, NQFData):
        raise TypeError(
            f"`{name}` must be an nqf.NQFData (build it with nqf.NQFData(As, ys, gs=..., Bs=..., f0=...)); "
            f"got {type(data).__name__}."
        )
    return data
