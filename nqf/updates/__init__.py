r"""The exact discrete maps on the order parameters $(M, \mu)$: SGD on the NQF (Thm 2, Eqs. 23-24), momentum
and weight decay (Cor. 2), compression (Thm 3, Cor. 3) and the deep NQF's per-layer update (Thm 14,
Eqs. 222-225). No weights are trained here.
"""

from ._compression import Compressed as Compressed
from ._compression import compress as compress
from ._compression import compression_bound as compression_bound
from ._compression import compression_error as compression_error
from ._compression import update_lipschitz as update_lipschitz
from ._deep import deep_nqf_sgd as deep_nqf_sgd
from ._discrete import nqf_sgd as nqf_sgd
from ._discrete import same_statistics as same_statistics
from ._discrete import statistics as statistics
from ._discrete import step_prediction_error as step_prediction_error
from ._discrete import weight_outputs as weight_outputs
from ._discrete import weights_from_statistics as weights_from_statistics

__all__ = [
    "statistics", "weight_outputs", "weights_from_statistics", "same_statistics",
    "nqf_sgd", "step_prediction_error", "deep_nqf_sgd",
    "compress", "Compressed", "compression_error", "compression_bound", "update_lipschitz",
]
