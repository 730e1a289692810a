r"""The data of an NQF, $f_x(W) = f_x(0) + g(x)^\top\mu + \mu^\top B(x)\mu + \mathrm{Tr}[M A(x)]$ (Eq. 20), as one
pytree validated once, when it is built, in one pass over the data (a NumPy input is copied block by block
into an aligned buffer the JAX array then owns; each block's extremes and asymmetry are taken in cache).
"""

from __future__ import annotations

from typing import Optional

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import (is_concrete, shape_of, check_finite, check_shape, check_square_stack, check_symmetric,
    check_index_traced, as_real_array, invalid, wrong_kind)

_SYMMETRY_RTOL = 1e-10  # check_symmetric's default: max |A - A^T| <= 1e-10 max |A|
_BLOCK_BYTES = 1 << 21  # one block of the fused pass (measured: 2 MB blocks are the fastest here)
_FAST_MIN_SIZE = 1 << 14  # smaller arrays take the plain conversion (the fused pass pays from here on)


class _Extremes:
    """max, min and (for a square stack) max |A - A^T| of an array, NaN-propagating (NaN/inf show up
    as a non-finite max or min, exactly when ``check_finite`` would refuse the array)."""

    def __init__(self):
        self.hi, self.lo, self.asym = -np.inf, np.inf, 0.0

    def add(self, block: np.ndarray, square: bool, tmp: np.ndarray | None) -> None:
        self.hi = np.maximum(self.hi, block.max())
        self.lo = np.minimum(self.lo, block.min())
        if square:
            d = tmp[: block.shape[0]]
            with np.errstate(invalid="ignore"):  # inf - inf: the finiteness check refuses that array first
                np.subtract(block, np.swapaxes(block, -1, -2), out=d)
            # d is antisymmetric (d_ji = -d_ij exactly), so its largest entry is max |A - A^T|
            self.asym = np.maximum(self.asym, d.max())

    @property
    def finite(self) -> bool:
        return bool(np.isfinite(self.hi) and np.isfinite(self.lo))


def _blocks(shape, itemsize: int):
    rows = max(1, _BLOCK_BYTES // max(1, itemsize * int(np.prod(shape[1:], dtype=np.int64))))
    return range(0, shape[0], rows), rows


def _real_array(name: str, x, square: bool = False):
    """``as_real_array(name, x)`` and the extremes of the result (``None`` under a trace), in one pass.

    A NumPy array of real numbers is copied block by block into a fresh 64-byte-aligned NumPy buffer of
    the default float dtype, which ``jax.device_put(..., may_alias=True)`` then wraps without a second
    copy (the buffer is private, so the array stays immutable); anything else goes through
    ``as_real_array`` and its extremes are taken from a zero-copy view."""
    dtype = np.dtype(jax.dtypes.canonicalize_dtype(float))
    if isinstance(x, np.ndarray) and x.dtype.kind in "biuf" and x.ndim >= 1 and x.size >= _FAST_MIN_SIZE:
        raw = np.empty(x.size * dtype.itemsize + 64, dtype=np.uint8)
        off = (-raw.ctypes.data) % 64
        out = raw[off: off + x.size * dtype.itemsize].view(dtype).reshape(x.shape)
        src = x
    else:
        arr = as_real_array(name, x)
        if not is_concrete(arr):
            return arr, None
        out, src = None, np.asarray(arr)
        if src.size == 0:
            return arr, _Extremes()
    square = square and src.ndim == 3 and src.shape[1] == src.shape[2]
    starts, rows = _blocks(src.shape, dtype.itemsize) if src.ndim else (range(1), 1)
    tmp = np.empty((min(rows, src.shape[0]),) + src.shape[1:], dtype) if square else None
    ext = _Extremes()
    for i in starts:
        block = src[i: i + rows] if src.ndim else src
        if out is not None:
            np.copyto(out[i: i + rows], block, casting="unsafe")
            block = out[i: i + rows]
        ext.add(block, square, tmp)
    if out is not None:
        return jax.device_put(out, may_alias=True), ext
    return arr, ext


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

    **Vector outputs** (App. B.2, one $A^{(o)}(x)$ per output): ``As`` of shape ``(m, o, p, p)`` with
    ``ys`` (and ``f0``, if not a scalar) of shape ``(m, o)`` (ZGZ only). The loss is the package's one
    convention, :data:`nqf.model.mse`: the mean over the $m$ samples of the squared error summed over
    the $o$ outputs, $\mathcal L = \frac1m\sum_{\mu,o}\Delta_{\mu o}^2$, whose gradient flow is Eq. (28)
    with $H = \frac4m\sum_{\mu,o}\Delta_{\mu o}A^{(o)}(x_\mu)$; gradient descent on the weights at learning
    rate $\eta$ follows it at flow time $t = \eta\cdot$step. The data are stored as $m o$ rows, one per
    (sample, output) pair in C order, each scaled by $\sqrt o$ (``As``, ``ys``, ``f0``): then every
    function of the package on $(M, \mu)$ (:func:`~nqf.model.mse_loss`, :func:`~nqf.model.h_matrix`,
    :func:`~nqf.gradient_flow`, ...) computes exactly this loss and this clock (plain flattening would
    average over outputs and run the clock $o$ times faster). ``num_outputs`` is $o$; ``m`` counts rows;
    :meth:`per_output` maps row values (e.g. :func:`~nqf.model.outputs`) back to ``(m, o)``.
    """

    As: Float[Array, "m p p"]
    ys: Float[Array, " m"]
    gs: Optional[Float[Array, "m p"]]
    Bs: Optional[Float[Array, "m p p"]]
    f0: Float[Array, " m"]
    num_outputs: int = eqx.field(static=True, default=1)

    def __init__(self, As, ys, *, gs=None, Bs=None, f0=0.0):
        self.num_outputs = 1
        if len(shape_of("As", As)) == 4:
            As, ys, f0 = self._flatten_outputs(As, ys, gs, Bs, f0)
        As, ext_As = _real_array("As", As, square=True)
        m, p = check_square_stack("As", As)
        if m < 1 or p < 1:
            raise invalid("As", 'hold at least one (p, p) matrix with p >= 1', f'shape {As.shape}')
        ys, ext_ys = _real_array("ys", ys)
        check_shape("ys", ys, (m,), "one target per structure matrix in `As`")
        ext_gs = ext_Bs = None
        if gs is not None:
            gs, ext_gs = _real_array("gs", gs)
            check_shape("gs", gs, (m, p), "one linear term g(x) per sample")
        if Bs is not None:
            Bs, ext_Bs = _real_array("Bs", Bs)
            check_shape("Bs", Bs, (m, p, p), "one quadratic term B(x) per sample")
        f0, ext_f0 = _real_array("f0", f0)
        if f0.ndim == 0:
            f0 = jnp.full((m,), f0)
        check_shape("f0", f0, (m,), "one offset f_x(0) per sample, or a scalar")
        # the checks of check_finite and check_symmetric, decided from the one pass's extremes (they
        # raise, with their messages, only when an array fails; traced arrays are not checked)
        for name, x, ext in (("As", As, ext_As), ("ys", ys, ext_ys), ("gs", gs, ext_gs), ("Bs", Bs, ext_Bs),
                             ("f0", f0, ext_f0)):
            if x is not None and ext is not None and not ext.finite:
                check_finite(name, x)
        if ext_As is not None and ext_As.asym > _SYMMETRY_RTOL * max(max(ext_As.hi, -ext_As.lo), 1e-300):
            check_symmetric("As", As, rtol=_SYMMETRY_RTOL)
        self.As, self.ys, self.gs, self.Bs, self.f0 = As, ys, gs, Bs, f0

    def _flatten_outputs(self, As, ys, gs, Bs, f0):
        """Multi-output data ``(m, o, p, p)`` as ``m o`` rows scaled by ``sqrt(o)`` (class docstring)."""
        m, o, p, q = np.shape(As)
        if p != q:
            raise invalid("As", "have shape (m, o, p, p) for vector outputs", f"shape {np.shape(As)}")
        if gs is not None or Bs is not None:
            raise invalid("As", "be ZGZ data (no `gs`, no `Bs`) with vector outputs (m, o, p, p)", "`gs` or `Bs`")
        if np.shape(ys) != (m, o):
            raise invalid("ys", f'have shape (m, o) = ({m}, {o}), one target per output of each sample (`As` has shape {np.shape(As)})',
                          f'shape {np.shape(ys)}')
        if np.ndim(f0) and np.shape(f0) != (m, o):
            raise invalid("f0", f'be a scalar or have shape (m, o) = ({m}, {o})', f'shape {np.shape(f0)}')
        self.num_outputs = int(o)
        r = float(np.sqrt(o))
        f0 = jnp.broadcast_to(jnp.asarray(f0), (m, o))
        return (jnp.reshape(jnp.asarray(As), (m * o, p, p)) * r, jnp.reshape(jnp.asarray(ys), (m * o,)) * r,
                jnp.reshape(f0, (m * o,)) * r)

    def per_output(self, values: Float[Array, " rows"]) -> Float[Array, "samples o"]:
        """Row values (one per stored row, e.g. ``nqf.model.outputs(M, data)``) as ``(samples, o)`` in the units of
        the targets (the $\\sqrt o$ of the storage undone); the identity reshape for scalar outputs."""
        o = self.num_outputs
        v = jnp.asarray(values)
        return v if o == 1 else jnp.reshape(v, (-1, o)) / np.sqrt(o)

    @property
    def m(self) -> int:
        """Number of rows: samples, or (sample, output) pairs for vector outputs."""
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
        """The samples ``index`` (an int array, or a slice), as a new :class:`NQFData` (no re-validation
        needed). Indices must lie in ``[0, m)``: JAX would clamp or wrap others silently; traced indices are
        checked at run time (``equinox.error_if``)."""
        if not isinstance(index, slice):
            index = check_index_traced("index", index, self.As.shape[0])
        new = object.__new__(NQFData)
        object.__setattr__(new, "num_outputs", self.num_outputs)
        for name in ("As", "ys", "gs", "Bs", "f0"):
            x = getattr(self, name)
            object.__setattr__(new, name, None if x is None else x[index])
        return new


def require_data(data, *, name: str = "data") -> NQFData:
    """Return ``data`` if it is an :class:`NQFData`; otherwise raise a ``TypeError`` naming ``name``.

    Functions of :mod:`nqf` take the data of an NQF as one validated pytree; build it with
    ``nqf.NQFData(As, ys, gs=..., Bs=..., f0=...)``.
    """
    if not isinstance(data, NQFData):
        raise wrong_kind(name, 'be an nqf.NQFData (build it with nqf.NQFData(As, ys, gs=..., Bs=..., f0=...))',
                         f'{type(data).__name__}')
    return data
