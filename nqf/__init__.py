"""nqf — neural quadratic forms (arXiv 2608.13335) in JAX.

The public surface, by idea:

* structure matrices and modules — :mod:`nqf.structure`, :mod:`nqf.modules`
* the NQF model on ``(M, mu)`` — :mod:`nqf.model`
* dynamics: exact discrete SGD (Thm 2), gradient flow (Eq. 28), training W — :mod:`nqf.dynamics`
* Lotka–Volterra reduction and closed forms (Sec. 5–6) — :mod:`nqf.lotka_volterra`
* the book: claims, figure style, runner — :mod:`nqf.claims`, :mod:`nqf.style`, :mod:`nqf.runner`

The library never changes global JAX flags; enable float64 yourself with
``jax.config.update("jax_enable_x64", True)``.
"""

from .attention import multihead_attention as multihead_attention
from .attention import qk_attention as qk_attention
from .expansion import nqf_expansion as nqf_expansion
from .expansion import remainder_scaling as remainder_scaling
from .modules import Architecture as Architecture
from .modules import cnn as cnn
from .modules import diagonal_linear_network as diagonal_linear_network
from .modules import mixture_of_experts as mixture_of_experts
from .modules import phase_retrieval as phase_retrieval
from .modules import two_layer_mlp as two_layer_mlp
from .structure import StructureReport as StructureReport
from .structure import structure_error as structure_error
from .structure import structure_matrix as structure_matrix
from .structure import structure_report as structure_report
from .structure import structure_stack as structure_stack
from .theorem1 import check_theorem1 as check_theorem1
from .closure import MomentumState as MomentumState
from .closure import momentum_state as momentum_state
from .closure import nqf_momentum as nqf_momentum
from .closure import nqf_momentum_step as nqf_momentum_step
from .closure import same_statistics as same_statistics
from .closure import step_prediction_error as step_prediction_error
from .closure import weight_outputs as weight_outputs
from .closure import weights_from_statistics as weights_from_statistics
from .compression import Compressed as Compressed
from .compression import compress as compress
from .compression import compression_bound as compression_bound
from .compression import compression_error as compression_error
from .compression import structure_span as structure_span
from .compression import update_lipschitz as update_lipschitz
from .ntk import empirical_ntk as empirical_ntk
from .ntk import ntk as ntk
from .ntk import ntk_change as ntk_change
from .ntk import ntk_trajectory as ntk_trajectory
from .ntk import width_scaled as width_scaled
from .table3 import TABLE3 as TABLE3
from .table3 import Table3Row as Table3Row
from .table3 import check_row as check_row
from .table3 import to_nqf_weights as to_nqf_weights
from .quadratic_rows import bilinear_sequence_regression as bilinear_sequence_regression
from .quadratic_rows import linear_ssl_augmentation as linear_ssl_augmentation
from .quadratic_rows import matrix_completion as matrix_completion
from .quadratic_rows import psd_matrix_sensing as psd_matrix_sensing
from .quadratic_rows import quadratic_network as quadratic_network
from .quadratic_rows import rectangular_matrix_sensing as rectangular_matrix_sensing
from .quadratic_rows import word_context_embedding as word_context_embedding
from .attention_rows import single_head_attention_logits as single_head_attention_logits
from .attention_rows import tied_qk_attention as tied_qk_attention
from .feedforward import FeedforwardForm as FeedforwardForm
from .feedforward import effective_matrix as effective_matrix
from .feedforward import feedforward_form as feedforward_form
from .feedforward import representation as representation
from .feedforward import split_structure as split_structure
from .feedforward import split_weights as split_weights
from .dynamics import gradient_flow as gradient_flow
from .dynamics import log_times as log_times
from .dynamics import nqf_sgd as nqf_sgd
from .dynamics import nqf_sgd_step as nqf_sgd_step
from .dynamics import solve_ode as solve_ode
from .dynamics import train_weights as train_weights
from .lotka_volterra import LotkaVolterra as LotkaVolterra
from .lotka_volterra import commuting_eigenbasis as commuting_eigenbasis
from .lotka_volterra import features as features
from .lotka_volterra import logistic_solution as logistic_solution
from .lotka_volterra import lv_coefficients as lv_coefficients
from .lotka_volterra import lv_flow as lv_flow
from .lotka_volterra import saxe_learning_time as saxe_learning_time
from .lotka_volterra import switch_on_time as switch_on_time
from .lotka_volterra import switch_on_time_asymptotic as switch_on_time_asymptotic
from .model import flow_field as flow_field
from .model import h_matrix as h_matrix
from .model import mse_loss as mse_loss
from .model import outputs as outputs
from .model import residuals as residuals

__version__ = "0.1.0"
