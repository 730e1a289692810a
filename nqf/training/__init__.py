r"""THE trainer of weights: :func:`train` (one jitted ``lax.scan`` with an optax optimiser, :func:`optimizer`), THE
side-by-side runner (:func:`compare_with_nqf`: a model and its NQF, one :class:`Comparison`, options
:class:`Track` and :class:`Agreement`), and the agreement rule (one gap, one first crossing, one "never": ``inf``).
"""

from ._agreement import first_crossing as first_crossing
from ._agreement import first_exceedance as first_exceedance
from ._agreement import relative_gap as relative_gap
from ._compare import Agreement as Agreement
from ._compare import Comparison as Comparison
from ._compare import compare_with_nqf as compare_with_nqf
from ._compare import Track as Track
from ._trainer import BatchLoss as BatchLoss
from ._trainer import Minibatches as Minibatches
from ._trainer import NQFLoss as NQFLoss
from ._trainer import Optimizer as Optimizer
from ._trainer import optimizer as optimizer
from ._trainer import Record as Record
from ._trainer import Runs as Runs
from ._trainer import Stream as Stream
from ._trainer import train as train
from ._trainer import Training as Training

__all__ = [
    "Agreement",
    "BatchLoss",
    "compare_with_nqf",
    "Comparison",
    "first_crossing",
    "first_exceedance",
    "Minibatches",
    "NQFLoss",
    "optimizer",
    "Optimizer",
    "Record",
    "relative_gap",
    "Runs",
    "Stream",
    "Track",
    "train",
    "Training",
]
