r"""Training dynamics: the exact discrete update on $(M, \mu)$ (Thm 2, Cor. 2), compression
(Thm 3, Cor. 3), the gradient flow (Eq. 28), and training of the weights with optax.
"""

from ._compression import structure_span as structure_span
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
from ._discrete import MomentumState as MomentumState
from ._discrete import momentum_state as momentum_state
from ._discrete import nqf_momentum_step as nqf_momentum_step
from ._discrete import nqf_momentum as nqf_momentum
from ._flow import log_times as log_times
from ._flow import solve_ode as solve_ode
from ._flow import gradient_flow as gradient_flow
from ._flow import trajectory_error as trajectory_error
from ._train import train_weights as train_weights
from ._train import GDRun as GDRun
from ._train import full_batch_gd as full_batch_gd
from ._discrete import SGDState as SGDState
from ._discrete import sgd_state as sgd_state
from ._compare import Comparison as Comparison
from ._compare import compare_with_nqf as compare_with_nqf
from ._report import model_run as model_run
from ._report import ModelRun as ModelRun
from ._flow import ODESolution as ODESolution
from ._flow import integrate as integrate
from ._flow import flow_statistics as flow_statistics
from ._sharding import batch_mesh as batch_mesh
from ._sharding import sharded_vmap as sharded_vmap
from ._online import OnlineRun as OnlineRun
from ._online import online_teacher_student as online_teacher_student
from ._online import relative_loss_gap as relative_loss_gap
from ._online import SideBySide as SideBySide
from ._online import train_side_by_side as train_side_by_side
from ._online import teacher_data as teacher_data
from ._online import log_loss_gap as log_loss_gap
from ._trainer import Optimizer as Optimizer
from ._trainer import optimizer as optimizer
from ._trainer import train as train
from ._trainer import Training as Training
from ._agreement import first_exceedance as first_exceedance
from ._agreement import relative_gap as relative_gap
from ._fourier import fourier_gd as fourier_gd
from ._fourier import fourier_nqf_gd as fourier_nqf_gd
from ._fourier import raw_mlp_gd as raw_mlp_gd
from ._deep import deep_nqf_sgd_step as deep_nqf_sgd_step
from ._deep import deep_nqf_sgd as deep_nqf_sgd
from ._deep import deep_nqf_gd as deep_nqf_gd
from ._fig2 import Fig2Run as Fig2Run
from ._fig2 import fig2_run as fig2_run
from ._fig2 import half_times as half_times

__all__ = sorted(name for name in dir() if not name.startswith("_"))
