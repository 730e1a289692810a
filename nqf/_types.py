r"""Shared array-shape aliases (jaxtyping): ``p`` parameters per neuron, ``d`` neurons (width), ``m``
samples, ``o`` outputs (App. B.2), ``T`` saved times.
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

# Names an argument takes one or several of (``vmap=("params", "key")``, ``track="loss"``). Annotated by the
# container only: the caller checks every item and names the argument in its error, whereas a type checker
# (beartype, run by the tests through jaxtyping's hook) checks one random item of a ``tuple[str, ...]``,
# so a tuple with one bad item would get that checker's unnamed error or ours at random.
Names = Union[str, tuple, list]
