r"""Data built to satisfy (or break) an assumption, figure datasets and teachers.
"""

from ._random import random_orthogonal as random_orthogonal
from ._riccati import IsotropicData as IsotropicData
from ._riccati import isotropic_dataset as isotropic_dataset
from ._riccati import LinearNetworkData as LinearNetworkData
from ._riccati import linear_network_dataset as linear_network_dataset
from ._riccati import balanced_init as balanced_init
from ._riccati import mode_strengths as mode_strengths
from ._solvable import SolvableData as SolvableData
from ._solvable import commuting_dataset as commuting_dataset
from ._solvable import proportional_dataset as proportional_dataset
from ._solvable import orthogonal_samples_dataset as orthogonal_samples_dataset
from ._solvable import orthogonal_features_data as orthogonal_features_data
from ._sudden import fig4_dataset as fig4_dataset
from ._sudden import gaussian_init as gaussian_init
from ._digits import DigitsData as DigitsData
from ._digits import digits_odd_even as digits_odd_even
from ._mnist import mnist_odd_even as mnist_odd_even
from ._general import TeacherData as TeacherData
from ._general import teacher_dataset as teacher_dataset
from ._solvable import broken_datasets as broken_datasets
from ._spectra import FeatureSpectrum as FeatureSpectrum
from ._spectra import fig3_right_spectrum as fig3_right_spectrum
from ._spectra import OneHotData as OneHotData
from ._spectra import one_hot_dataset as one_hot_dataset
from ._spectra import nam_emergence_spectrum as nam_emergence_spectrum
from ._spectra import SampleSpectrum as SampleSpectrum
from ._spectra import sample_power_law as sample_power_law
from ._spectra import FourierData as FourierData
from ._spectra import fourier_dataset as fourier_dataset
from ._teachers import Fig2Module as Fig2Module
from ._teachers import fig2_modules as fig2_modules
from ._teachers import TeacherSet as TeacherSet
from ._teachers import low_rank_teacher as low_rank_teacher
from ._solvable import breaking_direction as breaking_direction

__all__ = [
    "balanced_init",
    "breaking_direction",
    "broken_datasets",
    "commuting_dataset",
    "digits_odd_even",
    "DigitsData",
    "FeatureSpectrum",
    "fig2_modules",
    "Fig2Module",
    "fig3_right_spectrum",
    "fig4_dataset",
    "fourier_dataset",
    "FourierData",
    "gaussian_init",
    "isotropic_dataset",
    "IsotropicData",
    "linear_network_dataset",
    "LinearNetworkData",
    "low_rank_teacher",
    "mnist_odd_even",
    "mode_strengths",
    "nam_emergence_spectrum",
    "one_hot_dataset",
    "OneHotData",
    "orthogonal_features_data",
    "orthogonal_samples_dataset",
    "proportional_dataset",
    "random_orthogonal",
    "sample_power_law",
    "SampleSpectrum",
    "SolvableData",
    "teacher_dataset",
    "TeacherData",
    "TeacherSet",
]

# Importable as nqf.datasets.X by the rooms above and by the tests, but not the documented surface
# (not in __all__): the rest of the room is private.
from ._random import orthogonal_features_dataset as orthogonal_features_dataset
from ._mnist import read_idx as read_idx
from ._mnist import load_mnist as load_mnist
from ._general import subspace_inputs as subspace_inputs
from ._spectra import power_law_spectrum as power_law_spectrum
from ._spectra import sample_dataset as sample_dataset
from ._teachers import FIG2_SINGULAR_VALUES as FIG2_SINGULAR_VALUES
