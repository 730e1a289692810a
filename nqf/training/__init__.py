r"""THE trainer of weights: :func:`train` (one jitted ``lax.scan`` with an optax optimiser, :func:`optimizer`), THE
side-by-side runner (:func:`compare_with_nqf`: a model and its NQF, one :class:`Comparison`, options
:class:`Track` and :class:`Agreement`), and the agreement rule (one gap, one first crossing, one "never": ``inf``).
"""

from ._agreement import first_crossing, relative_gap
from ._compare import Agreement, Comparison, Track, compare_with_nqf
from ._trainer import BatchLoss, Minibatches, NQFLoss, Optimizer, Record, Runs, Stream, optimizer, train

__all__ = [
    "Agreement", "BatchLoss", "compare_with_nqf", "Comparison", "first_crossing", "Minibatches",
    "NQFLoss", "optimizer", "Optimizer", "Record", "relative_gap", "Runs", "Stream", "Track", "train",
]
