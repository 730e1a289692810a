r"""Data built to satisfy (or break) an assumption, figure datasets and teachers (Fig. 2's modules and teachers are
chapter 6's own: notebooks/ch06_modules.py).
"""

from ._digits import digits_odd_even, mnist_odd_even
from ._general import teacher_dataset
from ._riccati import balanced_init, isotropic_dataset, linear_network_dataset, mode_strengths
from ._solvable import (
    breaking_direction, broken_datasets, commuting_dataset, fig4_dataset, gaussian_init,
    orthogonal_features_data, orthogonal_samples_dataset, proportional_dataset, random_orthogonal,
)
from ._spectra import fig3_right_spectrum, fourier_dataset, nam_emergence_spectrum, one_hot_dataset, sample_power_law

__all__ = [
    # the solvable cases of Sec. 5 (Assumptions 1-2, Thms 4-7, Cor. 4), and breaking them
    "commuting_dataset", "proportional_dataset", "orthogonal_samples_dataset", "orthogonal_features_data",
    "isotropic_dataset", "linear_network_dataset", "balanced_init", "mode_strengths", "random_orthogonal",
    "breaking_direction", "broken_datasets",
    # sudden learning and scaling laws (Secs. 6-7: Figs. 3-5)
    "fig4_dataset", "gaussian_init", "fig3_right_spectrum", "one_hot_dataset", "sample_power_law",
    "nam_emergence_spectrum", "fourier_dataset",
    # teachers and images (Fig. 7; Sec. 4)
    "teacher_dataset", "digits_odd_even", "mnist_odd_even",
]
