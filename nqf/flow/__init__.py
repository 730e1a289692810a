r"""THE gradient flow of the NQF (Eq. 28): :func:`gradient_flow` (diffrax) under one :class:`ODEOptions`,
its export cache (a new process calls a stored program instead of tracing), and sharding of batched flows.
"""

from ._flow import log_times, ODEOptions, solve_ode, gradient_flow, trajectory_error, ODESolution
from ._sharding import batch_mesh, sharded_vmap

__all__ = [
    "batch_mesh", "gradient_flow", "log_times", "ODEOptions", "ODESolution", "sharded_vmap", "solve_ode",
    "trajectory_error",
]
