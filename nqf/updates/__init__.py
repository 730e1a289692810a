r"""The exact discrete maps on the order parameters $(M, \mu)$: SGD on the NQF (Thm 2, Eqs. 23-24), momentum
and weight decay (Cor. 2), compression (Thm 3, Cor. 3) and the deep NQF's per-layer update (Thm 14,
Eqs. 222-225). No weights are trained here.
"""

from ._compression import Compressed, compress, compression_bound, compression_error, update_lipschitz
from ._deep import deep_nqf_sgd
from ._discrete import (
    nqf_sgd, same_statistics, statistics, step_prediction_error, weight_outputs, weights_from_statistics,
)

__all__ = [
    "statistics", "weight_outputs", "weights_from_statistics", "same_statistics",
    "nqf_sgd", "step_prediction_error", "deep_nqf_sgd",
    "compress", "Compressed", "compression_error", "compression_bound", "update_lipschitz",
]
