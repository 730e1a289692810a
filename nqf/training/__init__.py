r"""THE trainer of weights: :func:`train` (one jitted ``lax.scan`` with an optax optimiser,
:func:`optimizer`), a module trained beside its NQF (:func:`compare_with_nqf`), a user's model
against its NQF and flow (:func:`model_run`), and the agreement rule (one gap, one first crossing).
"""

from ._train import train_weights as train_weights
from ._train import GDRun as GDRun
from ._train import full_batch_gd as full_batch_gd
from ._compare import Comparison as Comparison
from ._compare import compare_with_nqf as compare_with_nqf
from ._report import model_run as model_run
from ._report import ModelRun as ModelRun
from ._online import OnlineRun as OnlineRun
from ._online import online_teacher_student as online_teacher_student
from ._online import relative_loss_gap as relative_loss_gap
from ._online import SideBySide as SideBySide
from ._online import train_side_by_side as train_side_by_side
from ._online import teacher_data as teacher_data
from ._online import log_loss_gap as log_loss_gap
from ._losses import BatchLoss as BatchLoss
from ._losses import NQFLoss as NQFLoss
from ._losses import OutputLoss as OutputLoss
from ._losses import Record as Record
from ._trainer import Optimizer as Optimizer
from ._trainer import optimizer as optimizer
from ._trainer import train as train
from ._trainer import Training as Training
from ._agreement import first_exceedance as first_exceedance
from ._agreement import relative_gap as relative_gap
from ._fourier import fourier_gd as fourier_gd
from ._fourier import fourier_nqf_gd as fourier_nqf_gd
from ._fourier import raw_mlp_gd as raw_mlp_gd
from ._deep import deep_nqf_gd as deep_nqf_gd
from ._fig2 import Fig2Run as Fig2Run
from ._fig2 import fig2_run as fig2_run
from ._fig2 import half_times as half_times

__all__ = sorted(name for name in dir() if not name.startswith("_"))
