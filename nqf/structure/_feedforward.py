r"""The feed-forward form, Eqs. (17)–(19): $A(x) = \frac12[0, C; C^\top, 0]$, $W = [Z_1; Z_2]$ split along its
rows, $f_x = \mathrm{Tr}[Z_2Z_1^\top C(x)]$; vector outputs (Cor. 1) carry a leading output axis."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from .._checks import check_finite, invalid, is_concrete
from .._types import ArrayLike, Input
from ..architectures import Architecture



def _check_split(n1, p: int) -> int:
    if not isinstance(n1, (int, np.integer)) or isinstance(n1, bool) or not 1 <= n1 < p:
        raise invalid("n1", f"be an int in [1, {p}) (the rows of C, the first parameter group)", repr(n1))
    return int(n1)


def split_structure(A: Float[ArrayLike, "*o p p"], n1: int, *, rtol: float = 1e-12) -> Float[Array, "*o n1 n2"]:
    r"""$C(x)$ of the feed-forward form (Eq. 17): $C = 2A_{[:n_1, n_1:]}$.

    Raises ``ValueError`` unless ``A`` (shape ``(p, p)`` or ``(o, p, p)``) is
    symmetric with zero diagonal blocks $A_{[:n_1,:n_1]}$ and $A_{[n_1:,n_1:]}$,
    i.e. unless it really has the feed-forward form at this split (tolerance
    ``rtol`` relative to $\max|A|$; checked on concrete arrays).
    """
    shape = tuple(np.shape(A))
    if len(shape) not in (2, 3) or shape[-1] != shape[-2]:
        raise invalid("A", "have shape (p, p) or (o, p, p)", f"shape {shape}")
    p = shape[-1]
    n1 = _check_split(n1, p)
    if not is_concrete(A):  # under jit: no value checks
        return 2.0 * jnp.asarray(A)[..., :n1, n1:]
    check_finite("A", A)
    arr = np.asarray(A)
    tol = rtol * max(float(np.max(np.abs(arr))), 1e-300)
    top, bottom = np.max(np.abs(arr[..., :n1, :n1])), np.max(np.abs(arr[..., n1:, n1:]))
    asym = np.max(np.abs(arr - np.swapaxes(arr, -1, -2)))
    if max(top, bottom, asym) > tol:
        raise invalid(
            "A", f"be of the feed-forward form of Eq. (17) at n1 = {n1} (tolerance {tol:.3g})",
            f"a matrix not of the feed-forward form of Eq. (17) at n1 = {n1}: max |A[:n1, :n1]| = {top:.3g}, "
            f"max |A[n1:, n1:]| = {bottom:.3g}, max |A - A^T| = {asym:.3g}")
    return jnp.asarray(2.0 * arr[..., :n1, n1:])  # numpy slicing: no per-shape compilation


def feedforward_splits(A: Float[ArrayLike, "*o p p"], *, rtol: float = 1e-12) -> list[int]:
    r"""Every $n_1$ at which ``A`` has the feed-forward form of Eq. (17), in increasing order.

    The splits at which :func:`split_structure` accepts ``A`` (same ``rtol``):
    empty for a structure matrix that is not feed-forward (e.g. $xx^\top$), one
    split for a generic layer, a range when $C(x)$ has zero rows or columns
    (e.g. a one-hot $e_ie_j^\top$).
    """
    shape = tuple(np.shape(A))
    if len(shape) not in (2, 3) or shape[-1] != shape[-2]:
        raise invalid("A", "have shape (p, p) or (o, p, p)", f"shape {shape}")
    check_finite("A", A)
    found = []
    for n1 in range(1, shape[-1]):
        try:
            split_structure(A, n1, rtol=rtol)
        except ValueError:
            continue
        found.append(n1)
    return found


def split_weights(W: Float[ArrayLike, "p d"], n1: int) -> tuple[Float[Array, "n1 d"], Float[Array, "n2 d"]]:
    r"""$(Z_1, Z_2) = (W_{[:n_1]}, W_{[n_1:]})$ of Eq. (18); neurons are the columns of ``W``."""
    if np.ndim(W) != 2:
        raise invalid("W", "have shape (p, d), one column per neuron", f"shape {np.shape(W)}")
    n1 = _check_split(n1, np.shape(W)[0])
    W = jnp.asarray(W)
    return W[:n1], W[n1:]


def _check_pair(W, C) -> tuple[Array, Array]:
    cshape = tuple(np.shape(C))
    if len(cshape) not in (2, 3):
        raise invalid("C", "have shape (n1, n2) or (o, n1, n2)", f"shape {cshape}")
    n1, n2 = cshape[-2:]
    if np.ndim(W) != 2 or np.shape(W)[0] != n1 + n2:
        raise invalid("W", f"have shape (n1 + n2, d) = ({n1 + n2}, *) to match `C` of shape {cshape} "
                           f"(one column per neuron)", f"shape {np.shape(W)}")
    return jnp.asarray(W), jnp.asarray(C)


def effective_matrix(W: Float[ArrayLike, "p d"], n1: int) -> Float[Array, "n2 n1"]:
    r"""The effective matrix $Z_2 Z_1^\top$ (Eq. 18): all the output depends on."""
    Z1, Z2 = split_weights(W, n1)
    return Z2 @ Z1.T


def feedforward_output(W: Float[ArrayLike, "p d"], C: Float[ArrayLike, "*o n1 n2"]) -> Float[Array, "*o"]:
    r"""$f_x = \mathrm{Tr}[Z_2 Z_1^\top C(x)]$ (text after Eq. 18), one value per output."""
    W, C = _check_pair(W, C)
    n1 = C.shape[-2]
    return jnp.einsum("ji,...ij->...", W[n1:] @ W[:n1].T, C)


def representation(W: Float[ArrayLike, "p d"], C: Float[ArrayLike, "*o n1 n2"]) -> Float[Array, "*o d n2"]:
    r"""The first-layer representation $h(x) = Z_1^\top C(x)$ (Eq. 19), shape ``(*o, d, n2)``.

    For the two-layer MLP, $C = \phi'(0)\,x$ and $h(x) = \phi'(0)\,U^\top x$:
    the linearised hidden layer. Then $f_x = \mathrm{Tr}[Z_2\,h(x)]$.
    """
    W, C = _check_pair(W, C)
    return jnp.einsum("id,...ij->...dj", W[: C.shape[-2]], C)


class FeedforwardForm(NamedTuple):
    """Eqs. (17)–(19) for one module, one input and one weight matrix."""

    C: Array  #: ``(*o, n1, n2)``: the block of Eq. (17)
    Z1: Array  #: (n1, d) first parameter group of every neuron
    Z2: Array  #: (n2, d) second parameter group
    effective: Array  #: (n2, n1) the effective matrix Z2 Z1^T
    h: Array  #: ``(*o, d, n2)``: the representation Z1^T C (Eq. 19)
    output: Array  #: ``(o,)`` or scalar: Tr[Z2 Z1^T C] = Tr[W W^T A]


def feedforward_form(arch: Architecture, x: Input, W: Float[ArrayLike, "p d"], n1: int) -> FeedforwardForm:
    r"""Split a feed-forward module (Eq. 17) at ``n1`` and evaluate Eqs. (18)–(19) at ``W``.

    Raises ``ValueError`` if ``arch``'s $A(x)$ is not feed-forward at this split
    or ``W`` does not have ``arch.p`` rows.
    """
    if not isinstance(arch, Architecture):
        raise invalid("arch", "be an nqf Architecture", type(arch).__name__)
    if np.ndim(W) != 2 or np.shape(W)[0] != arch.p:
        raise invalid("W", f"have shape (p, d) = ({arch.p}, *) for {arch.name!r}", f"shape {np.shape(W)}")
    C = split_structure(arch.structure(x), n1)
    Z1, Z2 = split_weights(W, n1)
    return FeedforwardForm(C, Z1, Z2, Z2 @ Z1.T, representation(W, C), feedforward_output(W, C))
