"""Shared test data and conventions (imported by the test modules; pytest puts tests/ on sys.path)."""

import contextlib

import jax.numpy as jnp
import numpy as np
from jaxtyping import TypeCheckError

# Shape errors surface as jaxtyping's TypeCheckError under the test-time type checker
# (pytest --jaxtyping-packages) and as nqf's ValueError otherwise; both name the argument.
BAD_INPUT = (ValueError, TypeCheckError)


def general_nqf_data(seed=0, m=6, p=4):
    """A general NQF dataset (Eq. 20) without ZGZ: random symmetric A, B, and g, f0, y."""
    rng = np.random.default_rng(seed)
    sym = lambda a: 0.5 * (a + np.swapaxes(a, -1, -2))  # noqa: E731
    As = sym(rng.normal(size=(m, p, p)))
    Bs = 0.3 * sym(rng.normal(size=(m, p, p)))
    gs = 0.5 * rng.normal(size=(m, p))
    f0 = 0.1 * rng.normal(size=m)
    ys = rng.normal(size=m)
    return [jnp.asarray(a) for a in (As, Bs, gs, f0, ys)]


# ----------------------------------------------------------------------------- THE compile counter
LOWERING = "/jax/core/compile/jaxpr_to_mlir_module_duration"


@contextlib.contextmanager
def count_compilations():
    """Yield a list that collects one entry per compilation (lowering to MLIR) inside the block.

    Lowering runs on every cache miss of ``jax.jit`` (also when the persistent cache then finds the
    executable on disk), so a second call that reuses the compiled program adds nothing.
    """
    import jax

    seen: list[float] = []

    def listener(event: str, duration: float, **_) -> None:
        if event == LOWERING:
            seen.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
