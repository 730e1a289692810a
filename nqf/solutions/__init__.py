r"""Closed forms: Lotka-Volterra (Eq. 32), Thms 4-7 and 16, Riccati, the implicit $\xi$,
switch-on times (Eq. 158) and the singular limit (Thms 8-10).
"""

from ._lotka_volterra import LotkaVolterra as LotkaVolterra
from ._plateaus import diagnose as diagnose
from ._plateaus import Diagnosis as Diagnosis
from ._lotka_volterra import lv_coefficients as lv_coefficients
from ._lotka_volterra import features as features
from ._lotka_volterra import lv_flow as lv_flow
from ._lotka_volterra import logistic_solution as logistic_solution
from ._lotka_volterra import switch_on_time as switch_on_time
from ._lotka_volterra import growth_and_competition as growth_and_competition
from ._lotka_volterra import saxe_learning_time as saxe_learning_time
from ._riccati import isotropy_residual as isotropy_residual
from ._riccati import riccati_solution as riccati_solution
from ._riccati import riccati_eigenvalues as riccati_eigenvalues
from ._riccati import projector_coefficients as projector_coefficients
from ._riccati import projector_M as projector_M
from ._riccati import linear_network_modes as linear_network_modes
from ._riccati import saxe_mode_strength as saxe_mode_strength
from ._solvable import proportional_solution as proportional_solution
from ._solvable import proportional_M as proportional_M
from ._solvable import orthogonal_samples_solution as orthogonal_samples_solution
from ._solvable import orthogonal_samples_M as orthogonal_samples_M
from ._solvable import slaved_M as slaved_M
from ._solvable import orthogonal_features_M as orthogonal_features_M
from ._sudden import sample_growth_rates as sample_growth_rates
from ._sudden import sample_xi_flow as sample_xi_flow
from ._sudden import sample_switch_on_times as sample_switch_on_times
from ._sudden import sample_switch_on_logistic as sample_switch_on_logistic
from ._sudden import feature_excess_loss as feature_excess_loss
from ._sudden import feature_step_loss as feature_step_loss
from ._sudden import sample_step_loss as sample_step_loss
from ._sudden import SingularSweep as SingularSweep
from ._sudden import singular_limit_sweep as singular_limit_sweep
from ._sudden import SweepOptions as SweepOptions
from ._scaling import feature_exponent as feature_exponent
from ._scaling import sample_exponent as sample_exponent
from ._scaling import effective_exponent as effective_exponent
from ._scaling import effective_exponent_window as effective_exponent_window
from ._scaling import logistic_excess_loss as logistic_excess_loss
from ._scaling import sample_wise_loss as sample_wise_loss
from ._sudden import XiFlow as XiFlow
from ._implicit import implicit_xi as implicit_xi
from ._plateaus import PlateauEnds as PlateauEnds

__all__ = [
    "diagnose",
    "Diagnosis",
    "effective_exponent",
    "effective_exponent_window",
    "feature_excess_loss",
    "feature_exponent",
    "feature_step_loss",
    "features",
    "growth_and_competition",
    "implicit_xi",
    "isotropy_residual",
    "linear_network_modes",
    "logistic_excess_loss",
    "logistic_solution",
    "LotkaVolterra",
    "lv_coefficients",
    "lv_flow",
    "orthogonal_features_M",
    "orthogonal_samples_M",
    "orthogonal_samples_solution",
    "PlateauEnds",
    "projector_coefficients",
    "projector_M",
    "proportional_M",
    "proportional_solution",
    "riccati_eigenvalues",
    "riccati_solution",
    "sample_exponent",
    "sample_growth_rates",
    "sample_step_loss",
    "sample_switch_on_logistic",
    "sample_switch_on_times",
    "sample_wise_loss",
    "sample_xi_flow",
    "saxe_learning_time",
    "saxe_mode_strength",
    "singular_limit_sweep",
    "SingularSweep",
    "SweepOptions",
    "slaved_M",
    "switch_on_time",
    "XiFlow",
]

# Importable as nqf.solutions.X by the rooms above and by the tests, but not the documented surface
# (not in __all__): the rest of the room is private.
from ._lotka_volterra import commuting_eigenbasis as commuting_eigenbasis
from ._lotka_volterra import switch_on_time_asymptotic as switch_on_time_asymptotic
from ._sudden import rescaled_time as rescaled_time
