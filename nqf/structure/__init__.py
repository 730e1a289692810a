r"""The NQF of a model (:func:`quadratic_form`), Theorem 1's check, the expansion and its remainder (Eq. 3), the
feed-forward form (Eqs. 17-19). $A(x)$ by autodiff and Theorem 1's hypotheses are the top level's
:func:`nqf.structure_matrix`, :func:`nqf.structure_report` and :func:`nqf.check_hypotheses`. Compiled functions
are cached by the architecture's value, never by a plain callable (which may read mutable state).
"""

from ._expansion import remainder_scaling
from ._feedforward import effective_matrix, feedforward_form, feedforward_output, feedforward_splits, split_structure
from ._matrix_free import HypothesisCheck, nqf_output
from ._neurons import Blocks
from ._pytree import neuron_weights
from ._quadratic import QuadraticForm, quadratic_form
from ._theorem1 import check_theorem1

__all__ = [
    "Blocks", "check_theorem1", "effective_matrix", "feedforward_form", "feedforward_output", "feedforward_splits",
    "HypothesisCheck", "neuron_weights", "nqf_output", "quadratic_form", "QuadraticForm", "remainder_scaling",
    "split_structure",
]
