"""nqf — neural quadratic forms (arXiv 2608.13335) in JAX.

The public surface, by idea:

* structure matrices and modules — :mod:`nqf.structure`, :mod:`nqf.modules`
* the NQF model on ``(M, mu)`` — :mod:`nqf.model`
* dynamics: exact discrete SGD (Thm 2), gradient flow (Eq. 28), training W — :mod:`nqf.dynamics`
* Lotka–Volterra reduction and closed forms (Sec. 5–6) — :mod:`nqf.lotka_volterra`
* the book: claims, figure style, runner — :mod:`nqf.claims`, :mod:`nqf.style`, :mod:`nqf.runner`

The library never changes global JAX flags; enable float64 yourself with
``jax.config.update("jax_enable_x64", True)``.
"""

from .dynamics import gradient_flow as gradient_flow
from .dynamics import log_times as log_times
from .dynamics import nqf_sgd as nqf_sgd
from .dynamics import nqf_sgd_step as nqf_sgd_step
from .dynamics import solve_ode as solve_ode
from .dynamics import train_weights as train_weights
from .lotka_volterra import LotkaVolterra as LotkaVolterra
from .lotka_volterra import commuting_eigenbasis as commuting_eigenbasis
from .lotka_volterra import features as features
from .lotka_volterra import logistic_solution as logistic_solution
from .lotka_volterra import lv_coefficients as lv_coefficients
from .lotka_volterra import lv_flow as lv_flow
from .lotka_volterra import saxe_learning_time as saxe_learning_time
from .lotka_volterra import switch_on_time as switch_on_time
from .lotka_volterra import switch_on_time_asymptotic as switch_on_time_asymptotic
from .model import flow_field as flow_field
from .model import h_matrix as h_matrix
from .model import mse_loss as mse_loss
from .model import outputs as outputs
from .model import residuals as residuals

__version__ = "0.1.0"
