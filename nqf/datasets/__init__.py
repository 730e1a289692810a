r"""Data built to satisfy (or break) an assumption, figure datasets and teachers.
"""

from ._random import random_orthogonal as random_orthogonal
from ._random import orthogonal_features_dataset as orthogonal_features_dataset
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
from ._solvable import breaking_direction as breaking_direction
from ._sudden import fig4_dataset as fig4_dataset
from ._sudden import gaussian_init as gaussian_init
from ._digits import DigitsData as DigitsData
from ._digits import digits_odd_even as digits_odd_even
from ._mnist import read_idx as read_idx
from ._mnist import load_mnist as load_mnist
from ._mnist import mnist_odd_even as mnist_odd_even
from ._general import TeacherData as TeacherData
from ._general import subspace_inputs as subspace_inputs
from ._general import teacher_dataset as teacher_dataset
from ._solvable import broken_datasets as broken_datasets
from ._spectra import FeatureSpectrum as FeatureSpectrum
from ._spectra import power_law_spectrum as power_law_spectrum
from ._spectra import fig3_right_spectrum as fig3_right_spectrum
from ._spectra import OneHotData as OneHotData
from ._spectra import one_hot_dataset as one_hot_dataset
from ._spectra import nam_emergence_spectrum as nam_emergence_spectrum
from ._spectra import SampleSpectrum as SampleSpectrum
from ._spectra import sample_power_law as sample_power_law
from ._spectra import sample_dataset as sample_dataset
from ._spectra import FourierData as FourierData
from ._spectra import fourier_dataset as fourier_dataset
from ._teachers import FIG2_SINGULAR_VALUES as FIG2_SINGULAR_VALUES
from ._teachers import Fig2Module as Fig2Module
from ._teachers import fig2_modules as fig2_modules
from ._teachers import TeacherSet as TeacherSet
from ._teachers import low_rank_teacher as low_rank_teacher

__all__ = sorted(name for name in dir() if not name.startswith("_"))
