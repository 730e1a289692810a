r"""The NQF model on $(M, \mu)$: outputs (Eq. 20), loss, $H$, the flow field (Eq. 28), and the NTK (Prop. 8).
"""

from ._model import outputs as outputs
from ._model import residuals as residuals
from ._model import mse_loss as mse_loss
from ._model import mse as mse
from ._model import MSE as MSE
from ._model import h_matrix as h_matrix
from ._ntk import ntk as ntk
from ._ntk import ntk_trajectory as ntk_trajectory
from ._ntk import empirical_ntk as empirical_ntk
from ._ntk import ntk_change as ntk_change
from ._ntk import width_scaled as width_scaled
from ._data import NQFData as NQFData
from ._data import require_data as require_data
from ._ntk import ntk_learning_rate as ntk_learning_rate
from ._deep import layer_statistics as layer_statistics
from ._deep import deep_nqf_apply as deep_nqf_apply
from ._deep import deep_nqf_loss as deep_nqf_loss
from ._deep import scale_forms as scale_forms
from ._deep import compress_statistics as compress_statistics

__all__ = [
    "compress_statistics",
    "deep_nqf_apply",
    "deep_nqf_loss",
    "empirical_ntk",
    "h_matrix",
    "layer_statistics",
    "mse",
    "MSE",
    "mse_loss",
    "NQFData",
    "ntk",
    "ntk_change",
    "ntk_learning_rate",
    "ntk_trajectory",
    "outputs",
    "require_data",
    "residuals",
    "scale_forms",
    "width_scaled",
]
