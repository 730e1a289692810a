r"""nqf — neural quadratic forms (arXiv 2608.13335) in JAX.

Near small initialisation a layer of $d$ interchangeable neurons $W\in\mathbb R^{p\times d}$ is
$f_x(W) = f_x(0) + \mathrm{Tr}[WW^\top A(x)] + O(\|W\|^3)$ (Theorem 1), and its training
closes on $M = WW^\top$ (Theorem 2). The top level holds the core surface for a reader's three questions:

* **what is A(x) of my layer?** :func:`structure_matrix` (a function ``apply(W, x)``),
  :func:`pytree_structure_matrix` (an equinox Module or a parameter pytree with ``neuron_axes``),
  :func:`structure_stack`, :func:`structure_report`, :func:`check_hypotheses`, and the modules of
  the paper's tables;
* **does the NQF describe my training?** :func:`compare_with_nqf` (the module and its NQF trained
  side by side), the one trainer :func:`train` with :func:`optimizer`, :func:`first_exceedance`;
* **when do its plateaus end?** the flow :func:`gradient_flow`, the Lotka-Volterra reduction
  (:func:`lv_coefficients`, :func:`lv_flow`), switch-on times (:func:`switch_on_time`, Thm 8's
  :func:`feature_switch_on_time`, Thm 10's :func:`sample_switch_on_times`).

Everything else lives in the namespaces, one room per idea:

* :mod:`nqf.architectures` — modules with closed-form $A(x)$ (Tables 1 and 3);
* :mod:`nqf.structure` — $A(x)$ by autodiff, Theorem 1's check, the expansion;
* :mod:`nqf.model` — the NQF on $(M, \mu)$: outputs, loss, $H$, NTK;
* :mod:`nqf.updates` — the exact discrete maps on $(M, \mu)$ (Thms 2, 14), compression;
* :mod:`nqf.flow` — the gradient flow (Eq. 28);
* :mod:`nqf.training` — the trainer, a module beside its NQF, the agreement rule;
* :mod:`nqf.solutions` — Lotka–Volterra and the closed forms of Secs. 5–6;
* :mod:`nqf.datasets` — data built to satisfy (or break) the assumptions;
* :mod:`nqf.pipeline` — what the chapters import (claims, figure style, measurement helpers).

The library never changes global JAX flags; enable float64 yourself with
``jax.config.update("jax_enable_x64", True)``.
"""

from . import architectures as architectures
from . import datasets as datasets
from . import flow as flow
from . import training as training
from . import updates as updates
from . import model as model
from . import solutions as solutions
from . import structure as structure
from .architectures import Architecture as Architecture
from .architectures import two_layer_mlp as two_layer_mlp
from .training import compare_with_nqf as compare_with_nqf
from .training import Comparison as Comparison
from .training import first_exceedance as first_exceedance
from .flow import gradient_flow as gradient_flow
from .flow import log_times as log_times
from .updates import nqf_sgd as nqf_sgd
from .updates import nqf_sgd_step as nqf_sgd_step
from .training import optimizer as optimizer
from .updates import same_statistics as same_statistics
from .updates import SGDState as SGDState
from .training import train as train
from .training import Training as Training
from .model import flow_field as flow_field
from .model import NQFData as NQFData
from .model import h_matrix as h_matrix
from .model import mse as mse
from .model import mse_loss as mse_loss
from .model import ntk as ntk
from .model import outputs as outputs
from .model import residuals as residuals
from .solutions import commuting_eigenbasis as commuting_eigenbasis
from .solutions import diagnose as diagnose
from .solutions import Diagnosis as Diagnosis
from .solutions import feature_switch_on_time as feature_switch_on_time
from .solutions import features as features
from .solutions import logistic_solution as logistic_solution
from .solutions import LotkaVolterra as LotkaVolterra
from .solutions import lv_coefficients as lv_coefficients
from .solutions import lv_flow as lv_flow
from .solutions import sample_switch_on_times as sample_switch_on_times
from .solutions import saxe_learning_time as saxe_learning_time
from .solutions import switch_on_time as switch_on_time
from .solutions import switch_on_time_asymptotic as switch_on_time_asymptotic
from .structure import check_hypotheses as check_hypotheses
from .structure import check_theorem1 as check_theorem1
from .structure import pytree_structure_matrix as pytree_structure_matrix
from .structure import structure_matrix as structure_matrix
from .structure import structure_report as structure_report
from .structure import StructureReport as StructureReport
from .structure import structure_stack as structure_stack

from ._version import __version__ as __version__
__all__ = [name for name in dir() if not name.startswith("_")]
