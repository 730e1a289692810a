"""Test-wide JAX settings: float64 and the persistent compilation cache.

The library never flips global JAX flags on import (STYLE.md); the tests do it
here, once. Do not import ``nqf`` at the top of this file: conftest is loaded
before the jaxtyping import hook (``--jaxtyping-packages`` in pyproject.toml)
is installed, and an early import would bypass the runtime shape checks.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JAX_CACHE = ROOT / "_build" / "jax_cache"

# Environment first, so subprocesses (the runner, papermill kernels) inherit it.
os.environ["JAX_ENABLE_X64"] = "1"
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(JAX_CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.25")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
Path(os.environ["JAX_COMPILATION_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update(
    "jax_persistent_cache_min_compile_time_secs",
    float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]),
)


def pytest_collection_modifyitems(config, items):
    """The chapter runs (``notebook`` marker, a minute each) first, the unit tests after.

    ``make test`` runs on two workers with work stealing; starting the longest tests first keeps
    both workers busy to the end instead of leaving one chapter running alone. The order is
    deterministic, as pytest-xdist requires of every worker's collection.
    """
    items[:] = sorted(items, key=lambda item: item.get_closest_marker("notebook") is None)
