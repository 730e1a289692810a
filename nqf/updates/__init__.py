r"""The exact discrete maps on the order parameters $(M, \mu)$: one SGD step of the NQF
(Thm 2, Eqs. 23-24), momentum and weight decay (Cor. 2), compression (Thm 3, Cor. 3) and the
deep NQF's per-layer update (Thm 14, Eqs. 222-225). No weights are trained here.
"""

from ._compression import Compressed as Compressed
from ._compression import compress as compress
from ._compression import compression_error as compression_error
from ._compression import compression_bound as compression_bound
from ._compression import update_lipschitz as update_lipschitz
from ._discrete import nqf_sgd_step as nqf_sgd_step
from ._discrete import nqf_sgd as nqf_sgd
from ._discrete import weights_from_statistics as weights_from_statistics
from ._discrete import same_statistics as same_statistics
from ._discrete import statistics as statistics
from ._discrete import weight_outputs as weight_outputs
from ._discrete import step_prediction_error as step_prediction_error
from ._discrete import SGDState as SGDState
from ._deep import deep_nqf_sgd_step as deep_nqf_sgd_step
from ._deep import deep_nqf_sgd as deep_nqf_sgd

__all__ = [
    "compress",
    "Compressed",
    "compression_bound",
    "compression_error",
    "deep_nqf_sgd",
    "deep_nqf_sgd_step",
    "nqf_sgd",
    "nqf_sgd_step",
    "same_statistics",
    "SGDState",
    "statistics",
    "step_prediction_error",
    "update_lipschitz",
    "weight_outputs",
    "weights_from_statistics",
]

# Importable as nqf.updates.X by the rooms above and by the tests, but not the documented surface
# (not in __all__): the rest of the room is private.
from ._compression import structure_span as structure_span
from ._discrete import sgd_state as sgd_state
