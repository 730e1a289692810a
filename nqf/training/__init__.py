r"""THE trainer of weights: :func:`train` (one jitted ``lax.scan`` with an optax optimiser,
:func:`optimizer`), a module trained beside its NQF (:func:`compare_with_nqf`), a user's model
against its NQF and flow (:func:`model_run`), and the agreement rule (one gap, one first crossing).
"""

from ._compare import Comparison as Comparison
from ._compare import compare_with_nqf as compare_with_nqf
from ._report import model_run as model_run
from ._report import ModelRun as ModelRun
from ._losses import BatchLoss as BatchLoss
from ._losses import NQFLoss as NQFLoss
from ._losses import OutputLoss as OutputLoss
from ._losses import Record as Record
from ._trainer import Optimizer as Optimizer
from ._trainer import optimizer as optimizer
from ._trainer import train as train
from ._trainer import Training as Training
from ._agreement import first_crossing as first_crossing
from ._agreement import first_exceedance as first_exceedance
from ._agreement import relative_gap as relative_gap

__all__ = [
    "BatchLoss",
    "compare_with_nqf",
    "Comparison",
    "first_crossing",
    "first_exceedance",
    "model_run",
    "ModelRun",
    "NQFLoss",
    "optimizer",
    "Optimizer",
    "OutputLoss",
    "Record",
    "relative_gap",
    "train",
    "Training",
]
