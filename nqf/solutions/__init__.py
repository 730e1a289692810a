r"""Closed forms: Lotka-Volterra (Eq. 32), Thms 4-7 and 16, Riccati, the implicit $\xi$,
switch-on times (Eq. 158) and the singular limit (Thms 8-10).
"""

from ._implicit import implicit_xi
from ._lotka_volterra import (features, growth_and_competition, logistic_solution, lv_coefficients, lv_flow,
                              saxe_learning_time, switch_on_time)
from ._plateaus import diagnose
from ._riccati import (isotropy_residual, linear_network_modes, projector_coefficients, projector_M,
                       riccati_eigenvalues, riccati_solution, saxe_mode_strength)
from ._scaling import (effective_exponent, effective_exponent_window, feature_exponent, logistic_excess_loss,
                       sample_exponent, sample_wise_loss)
from ._solvable import (orthogonal_features_M, orthogonal_samples_M, orthogonal_samples_solution, proportional_M,
                        proportional_solution, slaved_M)
from ._sudden import (SweepOptions, feature_excess_loss, feature_step_loss, sample_growth_rates, sample_step_loss,
                      sample_switch_on_times, sample_xi_flow, singular_limit_sweep)

__all__ = [
    "diagnose", "effective_exponent", "effective_exponent_window", "feature_excess_loss", "feature_exponent",
    "feature_step_loss", "features", "growth_and_competition", "implicit_xi", "isotropy_residual",
    "linear_network_modes", "logistic_excess_loss", "logistic_solution", "lv_coefficients", "lv_flow",
    "orthogonal_features_M", "orthogonal_samples_M", "orthogonal_samples_solution", "projector_coefficients", "projector_M",
    "proportional_M", "proportional_solution", "riccati_eigenvalues", "riccati_solution", "sample_exponent",
    "sample_growth_rates", "sample_step_loss", "sample_switch_on_times", "sample_wise_loss", "sample_xi_flow",
    "saxe_learning_time", "saxe_mode_strength", "singular_limit_sweep", "SweepOptions", "slaved_M",
    "switch_on_time",
]
