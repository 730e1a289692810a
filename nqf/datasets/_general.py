r"""General NQF data (Eq. 20, ZGZ not assumed) from a module's own expansion at $W = 0$, measured by
:func:`nqf.structure_report` (App. B.1), with targets from a teacher NQF of a few neurons (Sec. 4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import check_size, invalid
from ..model._data import NQFData
from ..structure._autodiff import structure_reports
from ..updates import weight_outputs


class TeacherData(NamedTuple):
    """An NQF dataset measured from a module (see :func:`teacher_dataset`)."""

    data: NQFData  # (A, g, B, f0) of each input, teacher targets
    xs: Float[Array, "m k"]  # the inputs
    W_teacher: Float[Array, "p t"]  # the teacher's weights
    zgz: bool  # True if every input's expansion has g = 0 and no cross term


def subspace_inputs(k: int, m: int, *, rank: int | None = None, rng: np.random.Generator) -> np.ndarray:
    r"""``m`` Gaussian inputs in $\mathbb R^k$ of norm about 1, in a random ``rank``-dimensional
    subspace if given (then the data subspace of Eq. (102) is small, Thm 3)."""
    check_size("k", k)
    check_size("m", m)
    r = int(k) if rank is None else int(rank)
    if not 1 <= r <= int(k):
        raise invalid("rank", f'lie in [1, k={k}]', f'{rank!r}')
    z = rng.normal(size=(int(m), r))
    basis = np.linalg.qr(rng.normal(size=(int(k), r)))[0]
    return z @ basis.T / np.sqrt(r)


def teacher_dataset(module: Callable, k: int, m: int, *, p: int, seed: int, rank: int | None = None,
                    teacher_width: int = 3, teacher_scale: float = 0.5) -> TeacherData:
    r"""The general NQF (Eq. 20) of ``module`` on ``m`` random inputs in $\mathbb R^k$, with teacher targets.

    Inputs come from ``subspace_inputs``; each input's $(A, g, B, f_x(0))$ is measured by
    :func:`nqf.structure_report` (App. B.1); the targets are the outputs of the same
    NQF at teacher weights $W^* \in \mathbb R^{p\times t}$ with entries $\mathcal N(0, s^2)$,
    $s$ = ``teacher_scale``, so a width-$t$ student can fit them exactly
    (:func:`nqf.updates.weight_outputs`). One numpy generator from ``seed`` draws the inputs,
    then the teacher.

    Args:
        module: ``apply(W, x)`` with ``W`` of shape ``(p, d)`` and ``x`` of shape ``(k,)``.
        k, m: input dimension and number of samples. p: parameters per neuron.
        seed: seed of the generator. rank: dimension of the input subspace (default ``k``).
        teacher_width, teacher_scale: the teacher's width $t$ and weight scale.
    """
    check_size("teacher_width", teacher_width)
    rng = np.random.default_rng(seed)
    xs = subspace_inputs(k, m, rank=rank, rng=rng)
    reps = structure_reports(module, [jnp.asarray(x) for x in xs], p=int(p))  # one compilation for all inputs
    As, gs, Bs, f0 = (jnp.stack([getattr(r, key) for r in reps]) for key in ("A", "g", "B", "f0"))
    data0 = NQFData(As, jnp.zeros(int(m)), gs=gs, Bs=Bs, f0=f0)
    W_teacher = teacher_scale * jnp.asarray(rng.normal(size=(int(p), int(teacher_width))))
    ys = weight_outputs(W_teacher, data0)
    return TeacherData(NQFData(As, ys, gs=gs, Bs=Bs, f0=f0), jnp.asarray(xs), W_teacher, all(r.zgz for r in reps))
