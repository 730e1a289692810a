r"""Data built to satisfy (or break) an assumption, figure datasets and teachers.
"""

from ._digits import digits_odd_even as digits_odd_even
from ._digits import mnist_odd_even as mnist_odd_even
from ._general import teacher_dataset as teacher_dataset
from ._riccati import balanced_init as balanced_init
from ._riccati import isotropic_dataset as isotropic_dataset
from ._riccati import linear_network_dataset as linear_network_dataset
from ._riccati import mode_strengths as mode_strengths
from ._solvable import breaking_direction as breaking_direction
from ._solvable import broken_datasets as broken_datasets
from ._solvable import commuting_dataset as commuting_dataset
from ._solvable import fig4_dataset as fig4_dataset
from ._solvable import gaussian_init as gaussian_init
from ._solvable import orthogonal_features_data as orthogonal_features_data
from ._solvable import orthogonal_samples_dataset as orthogonal_samples_dataset
from ._solvable import proportional_dataset as proportional_dataset
from ._solvable import random_orthogonal as random_orthogonal
from ._spectra import fig3_right_spectrum as fig3_right_spectrum
from ._spectra import fourier_dataset as fourier_dataset
from ._spectra import nam_emergence_spectrum as nam_emergence_spectrum
from ._spectra import one_hot_dataset as one_hot_dataset
from ._spectra import sample_power_law as sample_power_law
from ._teachers import fig2_modules as fig2_modules
from ._teachers import low_rank_teacher as low_rank_teacher

__all__ = [
    # the solvable cases of Sec. 5 (Assumptions 1-2, Thms 4-7, Cor. 4), and breaking them
    "commuting_dataset", "proportional_dataset", "orthogonal_samples_dataset", "orthogonal_features_data",
    "isotropic_dataset", "linear_network_dataset", "balanced_init", "mode_strengths", "random_orthogonal",
    "breaking_direction", "broken_datasets",
    # sudden learning and scaling laws (Secs. 6-7: Figs. 3-5)
    "fig4_dataset", "gaussian_init", "fig3_right_spectrum", "one_hot_dataset", "sample_power_law",
    "nam_emergence_spectrum", "fourier_dataset",
    # teachers and images (Figs. 2, 7; Sec. 4)
    "teacher_dataset", "fig2_modules", "low_rank_teacher", "digits_odd_even", "mnist_odd_even",
]
