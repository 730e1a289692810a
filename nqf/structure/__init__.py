r"""$A(x)$ by autodiff, the Theorem-1 report and check, the expansion and its remainder
(Thm 1, Eq. 3), and the feed-forward form (Eqs. 17-19). Compiled functions are cached by the
architecture's value, never by a plain callable (which may read mutable state).
"""

from ._autodiff import StructureReport as StructureReport
from ._autodiff import structure_report as structure_report
from ._autodiff import structure_matrix as structure_matrix
from ._autodiff import structure_stack as structure_stack
from ._expansion import RemainderScaling as RemainderScaling
from ._expansion import remainder_scaling as remainder_scaling
from ._feedforward import split_structure as split_structure
from ._feedforward import effective_matrix as effective_matrix
from ._feedforward import feedforward_output as feedforward_output
from ._feedforward import representation as representation
from ._feedforward import FeedforwardForm as FeedforwardForm
from ._feedforward import feedforward_form as feedforward_form
from ._theorem1 import Theorem1Check as Theorem1Check
from ._theorem1 import check_theorem1 as check_theorem1
from ._feedforward import feedforward_splits as feedforward_splits
from ._pytree import neuron_weights as neuron_weights
from ._pytree import pytree_structure_matrix as pytree_structure_matrix
from ._autodiff import structure_reports as structure_reports
from ._matrix_free import HypothesisCheck as HypothesisCheck
from ._matrix_free import check_hypotheses as check_hypotheses
from ._matrix_free import nqf_output as nqf_output
from ._quadratic import QuadraticForm as QuadraticForm
from ._quadratic import quadratic_form as quadratic_form

__all__ = [
    "check_hypotheses",
    "check_theorem1",
    "effective_matrix",
    "feedforward_form",
    "feedforward_output",
    "feedforward_splits",
    "FeedforwardForm",
    "HypothesisCheck",
    "neuron_weights",
    "nqf_output",
    "pytree_structure_matrix",
    "quadratic_form",
    "QuadraticForm",
    "remainder_scaling",
    "RemainderScaling",
    "representation",
    "split_structure",
    "structure_matrix",
    "structure_report",
    "structure_reports",
    "structure_stack",
    "StructureReport",
    "Theorem1Check",
]

# Importable as nqf.structure.X by the rooms above and by the tests, but not the documented surface
# (not in __all__): the rest of the room is private.
from ._autodiff import structure_error as structure_error
from ._expansion import nqf_expansion as nqf_expansion
from ._feedforward import split_weights as split_weights
