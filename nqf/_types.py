"""Shared array-shape aliases (jaxtyping) used across :mod:`nqf`.

Dimension names follow the paper's conventions (PAPER.md):
``p`` parameters per neuron, ``d`` neurons (width), ``m`` samples,
``o`` outputs (vector-valued modules, App. B.2), ``T`` saved times.
"""

from __future__ import annotations

from typing import Union

from jaxtyping import Array, Float, PyTree
import numpy as np

ArrayLike = Union[Array, np.ndarray]

Scalar = Float[ArrayLike, ""]
Weights = Float[ArrayLike, "p d"]
Matrix = Float[ArrayLike, "p p"]
Vector = Float[ArrayLike, "p"]
StructureStack = Float[ArrayLike, "m p p"]
Targets = Float[ArrayLike, "m"]
Input = PyTree  # a module input: an array or a tuple of arrays (e.g. query and context)
