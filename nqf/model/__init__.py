r"""The NQF model on $(M, \mu)$: outputs (Eq. 20), loss, $H$ (Eq. 27; the flow is $\dot M = -HM - MH$, Eq. 28),
and the NTK (Prop. 8).
"""

from ._model import outputs, residuals, mse_loss, mse, MSE, h_matrix
from ._ntk import ntk, ntk_trajectory, empirical_ntk, ntk_change, width_scaled, ntk_learning_rate
from ._data import NQFData, require_data
from ._deep import layer_statistics, deep_nqf_apply, deep_nqf_loss, scale_forms, compress_statistics

__all__ = [
    "compress_statistics", "deep_nqf_apply", "deep_nqf_loss", "empirical_ntk", "h_matrix", "layer_statistics",
    "mse", "MSE", "mse_loss", "NQFData", "ntk", "ntk_change", "ntk_learning_rate", "ntk_trajectory", "outputs",
    "require_data", "residuals", "scale_forms", "width_scaled",
]
