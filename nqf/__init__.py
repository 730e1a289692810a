r"""nqf — neural quadratic forms (arXiv 2608.13335) in JAX.

Near small initialisation a layer of $d$ interchangeable neurons $W\in\mathbb R^{p\times d}$ is
$f_x(W) = f_x(0) + \mathrm{Tr}[WW^\top A(x)] + O(\|W\|^3)$ (Theorem 1), and its training
closes on $M = WW^\top$ (Theorem 2). The top level holds the names that answer a reader's three
questions:

* **What is A(x) of my layer?** :func:`structure_matrix` (a function ``apply(W, x)``),
  :func:`pytree_structure_matrix` (an equinox Module or a parameter pytree with ``neuron_axes``),
  :func:`structure_report` (A(x) with the hypotheses of Theorem 1 measured), :func:`check_hypotheses`
  (the same, matrix-free, for a model too large for A(x)), and :class:`Architecture` (the modules of the
  paper's tables, in :mod:`nqf.architectures`); the remainder's order is :func:`nqf.structure.check_theorem1`.
* **Does the NQF describe my training?** :func:`quadratic_form` (the NQF of a model is itself a model, called
  like it, on the same parameters: train it in your own loop), :func:`compare_with_nqf` (a model and its NQF
  trained side by side) and the one trainer :func:`train` with :func:`optimizer`; the agreement rule (the first
  step at which their gap reaches a threshold) is :class:`nqf.training.Agreement`.
* **When do its plateaus end?** :func:`diagnose` (a user's model: the NQF trained from the model's
  W(0) by the user's own optimiser predicts its plateau ends in steps, with a measured range of
  validity) and the flow :func:`gradient_flow` on :class:`NQFData`; the Lotka-Volterra reduction
  (:func:`nqf.solutions.lv_coefficients`, :func:`nqf.solutions.lv_flow`) and the switch-on times (Eq. 158
  and Thm 8's :func:`nqf.solutions.switch_on_time` of a mode, Thm 10's
  :func:`nqf.solutions.sample_switch_on_times` of a sample) are in :mod:`nqf.solutions`.

Everything else lives in the namespaces, one room per idea:

* :mod:`nqf.architectures` — modules with closed-form $A(x)$ (Tables 1 and 3);
* :mod:`nqf.structure` — $A(x)$ by autodiff, Theorem 1's check, the expansion;
* :mod:`nqf.model` — the NQF on $(M, \mu)$: outputs, loss, $H$, NTK;
* :mod:`nqf.updates` — the exact discrete maps on $(M, \mu)$ (Thms 2, 14), compression;
* :mod:`nqf.flow` — the gradient flow (Eq. 28);
* :mod:`nqf.training` — the trainer, a module beside its NQF, the agreement rule;
* :mod:`nqf.solutions` — Lotka–Volterra and the closed forms of Secs. 5–6;
* :mod:`nqf.datasets` — data built to satisfy (or break) the assumptions.

The book's own machinery (claims, verdicts, chapter parameters, glue, tables, figure style) is not here: it
is the chapter kit :mod:`nqfbook.kit`, part of the book.

The library never changes global JAX flags; enable float64 yourself with
``jax.config.update("jax_enable_x64", True)``.
"""

from . import architectures as architectures
from . import datasets as datasets
from . import flow as flow
from . import model as model
from . import solutions as solutions
from . import structure as structure
from . import training as training
from . import updates as updates

# What is A(x) of my layer?
from .structure._autodiff import structure_matrix as structure_matrix
from .structure._pytree import pytree_structure_matrix as pytree_structure_matrix
from .structure._autodiff import structure_report as structure_report
from .structure._matrix_free import check_hypotheses as check_hypotheses
from .structure import quadratic_form as quadratic_form
from .architectures import Architecture as Architecture

# Does the NQF describe my training?
from .training import compare_with_nqf as compare_with_nqf
from .training import train as train
from .training import optimizer as optimizer

# When do its plateaus end?
from .solutions import diagnose as diagnose
from .flow import gradient_flow as gradient_flow
from .model import NQFData as NQFData

from ._version import __version__ as __version__

# The 12 names of the three questions; with the 8 rooms (``nqf.structure``, imported above), 20 names at the top
# level. The rooms are reached as attributes and are not re-exported: ``from nqf import *`` gives the answers.
__all__ = [
    "structure_matrix", "pytree_structure_matrix", "structure_report", "check_hypotheses", "quadratic_form",
    "Architecture",
    "compare_with_nqf", "train", "optimizer",
    "diagnose", "gradient_flow", "NQFData",
]
