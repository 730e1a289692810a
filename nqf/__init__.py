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
from .implicit import fixed_point as fixed_point
from .implicit import implicit_time as implicit_time
from .implicit import implicit_xi as implicit_xi
from .solvable import SolvableData as SolvableData
from .solvable import ProportionalSolution as ProportionalSolution
from .solvable import OrthogonalSamplesSolution as OrthogonalSamplesSolution
from .solvable import commuting_dataset as commuting_dataset
from .solvable import proportional_dataset as proportional_dataset
from .solvable import orthogonal_samples_dataset as orthogonal_samples_dataset
from .solvable import orthogonal_features_data as orthogonal_features_data
from .lotka_volterra import growth_and_competition as growth_and_competition
from .solvable import breaking_direction as breaking_direction
from .solvable import gradient_flow_batch as gradient_flow_batch
from .solvable import trajectory_error as trajectory_error
from .solvable import proportional_solution as proportional_solution
from .solvable import proportional_M as proportional_M
from .solvable import orthogonal_samples_solution as orthogonal_samples_solution
from .solvable import orthogonal_samples_M as orthogonal_samples_M
from .solvable import slaved_M as slaved_M
from .solvable import orthogonal_features_M as orthogonal_features_M
from .riccati import IsotropicData as IsotropicData
from .riccati import LinearNetworkData as LinearNetworkData
from .riccati import ProjectorCoefficients as ProjectorCoefficients
from .riccati import isotropic_dataset as isotropic_dataset
from .riccati import isotropy_residual as isotropy_residual
from .riccati import target_matrix as target_matrix
from .riccati import riccati_solution as riccati_solution
from .riccati import riccati_eigenvalues as riccati_eigenvalues
from .riccati import projector_coefficients as projector_coefficients
from .riccati import projector_solution as projector_solution
from .riccati import projector_M as projector_M
from .riccati import linear_network_dataset as linear_network_dataset
from .riccati import balanced_init as balanced_init
from .riccati import mode_strengths as mode_strengths
from .riccati import linear_network_modes as linear_network_modes
from .riccati import saxe_mode_strength as saxe_mode_strength
from .riccati import saxe_time_in_nqf_units as saxe_time_in_nqf_units
from .sudden import GDRun as GDRun
from .sudden import SingularSweep as SingularSweep
from .sudden import fig4_dataset as fig4_dataset
from .sudden import sample_growth_rates as sample_growth_rates
from .sudden import sample_xi_flow as sample_xi_flow
from .sudden import sample_switch_on_times as sample_switch_on_times
from .sudden import sample_switch_on_logistic as sample_switch_on_logistic
from .sudden import feature_switch_on_time as feature_switch_on_time
from .sudden import rescaled_time as rescaled_time
from .sudden import feature_excess_loss as feature_excess_loss
from .sudden import feature_step_loss as feature_step_loss
from .sudden import sample_step_loss as sample_step_loss
from .sudden import singular_limit_sweep as singular_limit_sweep
from .sudden import intercept_fit as intercept_fit
from .sudden import step_deviation as step_deviation
from .sudden import crossing_time as crossing_time
from .sudden import full_batch_gd as full_batch_gd
from .sudden import gaussian_init as gaussian_init
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
