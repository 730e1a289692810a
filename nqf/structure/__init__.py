r"""$A(x)$ by autodiff, the Theorem-1 report and check, the expansion and its remainder
(Thm 1, Eq. 3), and the feed-forward form (Eqs. 17-19). Compiled functions are cached by the
architecture's value, never by a plain callable (which may read mutable state).
"""

from ._autodiff import structure_matrix, structure_report
from ._expansion import remainder_scaling
from ._feedforward import effective_matrix, feedforward_form, feedforward_output, feedforward_splits, split_structure
from ._matrix_free import HypothesisCheck, check_hypotheses, nqf_output
from ._pytree import neuron_weights
from ._quadratic import QuadraticForm, quadratic_form
from ._theorem1 import check_theorem1

__all__ = [
    "check_hypotheses", "check_theorem1", "effective_matrix", "feedforward_form", "feedforward_output",
    "feedforward_splits", "HypothesisCheck", "neuron_weights", "nqf_output", "quadratic_form",
    "QuadraticForm", "remainder_scaling", "split_structure", "structure_matrix",
    "structure_report",
]
