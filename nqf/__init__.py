r"""nqf — neural quadratic forms (arXiv 2608.13335) in JAX.

Near small initialisation a layer of $d$ interchangeable neurons $W\in\mathbb R^{p\times d}$ is
$f_x(W) = f_x(0) + \mathrm{Tr}[WW^\top A(x)] + O(\|W\|^3)$ (Theorem 1), and its training
closes on $M = WW^\top$ (Theorem 2). The top level holds the names that answer a reader's three
questions:

* **What is A(x) of my layer?** :func:`structure_matrix` (a function ``apply(W, x)``),
  :func:`pytree_structure_matrix` (an equinox Module or a parameter pytree with ``neuron_axes``),
  :func:`structure_report` (A(x) with the hypotheses of Theorem 1 measured), :func:`check_hypotheses`
  (the same, matrix-free, for a model too large for A(x)), :func:`check_theorem1` (the remainder's
  order), and :class:`Architecture` (the modules of the paper's tables, in :mod:`nqf.architectures`).
* **Does the NQF describe my training?** :func:`compare_with_nqf` (the module and its NQF trained side
  by side), the one trainer :func:`train` with :func:`optimizer`, and the agreement rule
  :func:`first_exceedance` (the first step at which their gap exceeds a threshold).
* **When do its plateaus end?** :func:`diagnose` (a user's model: the NQF trained from the model's
  W(0) by the user's own optimiser predicts its plateau ends in steps, with a measured range of
  validity), the flow :func:`gradient_flow` on :class:`NQFData`, the Lotka-Volterra
  reduction (:func:`lv_coefficients`, :func:`lv_flow`) and switch-on times (Eq. 158 and Thm 8's
  :func:`switch_on_time` of a mode, Thm 10's :func:`sample_switch_on_times` of a sample).

Everything else lives in the namespaces, one room per idea:

* :mod:`nqf.architectures` — modules with closed-form $A(x)$ (Tables 1 and 3);
* :mod:`nqf.structure` — $A(x)$ by autodiff, Theorem 1's check, the expansion;
* :mod:`nqf.model` — the NQF on $(M, \mu)$: outputs, loss, $H$, NTK;
* :mod:`nqf.updates` — the exact discrete maps on $(M, \mu)$ (Thms 2, 14), compression;
* :mod:`nqf.flow` — the gradient flow (Eq. 28);
* :mod:`nqf.training` — the trainer, a module beside its NQF, the agreement rule;
* :mod:`nqf.solutions` — Lotka–Volterra and the closed forms of Secs. 5–6;
* :mod:`nqf.datasets` — data built to satisfy (or break) the assumptions;
* :mod:`nqf.pipeline` — what the chapters import (claims, parameters, figure style, measurements).

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
from .structure import structure_matrix as structure_matrix
from .structure import pytree_structure_matrix as pytree_structure_matrix
from .structure import structure_report as structure_report
from .structure import check_hypotheses as check_hypotheses
from .structure import check_theorem1 as check_theorem1
from .architectures import Architecture as Architecture

# Does the NQF describe my training?
from .training import compare_with_nqf as compare_with_nqf
from .training import train as train
from .training import optimizer as optimizer
from .training import first_exceedance as first_exceedance

# When do its plateaus end?
from .solutions import diagnose as diagnose
from .flow import gradient_flow as gradient_flow
from .model import NQFData as NQFData
from .solutions import lv_coefficients as lv_coefficients
from .solutions import lv_flow as lv_flow
from .solutions import switch_on_time as switch_on_time
from .solutions import sample_switch_on_times as sample_switch_on_times

from ._version import __version__ as __version__

# The 17 names of the three questions. The rooms are reached as attributes (``nqf.structure``, imported above)
# and are not re-exported: ``from nqf import *`` gives the answers, not the namespaces.
__all__ = [
    "structure_matrix", "pytree_structure_matrix", "structure_report", "check_hypotheses", "check_theorem1",
    "Architecture",
    "compare_with_nqf", "train", "optimizer", "first_exceedance",
    "diagnose", "gradient_flow", "NQFData", "lv_coefficients", "lv_flow", "switch_on_time",
    "sample_switch_on_times",
]
