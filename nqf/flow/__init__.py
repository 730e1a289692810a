r"""THE gradient flow of the NQF (Eq. 28): :func:`gradient_flow` (diffrax) under one :class:`ODEOptions`,
its export cache (a new process calls a stored program instead of tracing), and sharding of batched flows.
"""

from ._flow import log_times as log_times
from ._flow import ODEOptions as ODEOptions
from ._flow import solve_ode as solve_ode
from ._flow import gradient_flow as gradient_flow
from ._flow import trajectory_error as trajectory_error
from ._flow import ODESolution as ODESolution
from ._sharding import batch_mesh as batch_mesh
from ._sharding import sharded_vmap as sharded_vmap

__all__ = [
    "batch_mesh",
    "gradient_flow",
    "log_times",
    "ODEOptions",
    "ODESolution",
    "sharded_vmap",
    "solve_ode",
    "trajectory_error",
]
