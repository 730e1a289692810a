"""Test-wide JAX settings: float64, strict numerics and the persistent compilation cache.

Strict numerics, as diffrax's and equinox's test suites do: ``jax_numpy_dtype_promotion="strict"``
(no implicit int -> float or float32 -> float64 promotion: a library line that mixes dtypes casts
explicitly) and ``jax_numpy_rank_promotion="raise"`` (no implicit broadcasting of a lower-rank
operand: a library line that broadcasts says so, with ``x[None]`` or ``x[..., None]``). They are set
through ``jax.config`` only, not the environment, so the chapters (papermill kernels, the runner)
run under JAX's defaults, as a reader's session does. A test that deliberately exercises loose
promotion opts out locally with the ``loose_promotion`` fixture.

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
# Every compilation goes to the cache, the eager ops' 30-50 ms programs too: the chapters' kernels, the
# runner's subprocesses and the two workers compile many of the same small programs, and a hit costs a
# fifth of a compile (make test: 905 s with 0.25, 732 s with 0, both from a cold cache; issue 31).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# The tests compile many programs and run each briefly, as the quick chapters do: XLA's compile-light CPU setting
# of the runner at quick fidelity (nqfbook.processes.QUICK_XLA_FLAG), set before jax starts XLA.
from nqfbook.processes import xla_flags  # noqa: E402

_flags = xla_flags("quick", os.environ.get("XLA_FLAGS", ""))
if _flags:
    os.environ["XLA_FLAGS"] = _flags

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
Path(os.environ["JAX_COMPILATION_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update(
    "jax_persistent_cache_min_compile_time_secs",
    float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]),
)


import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def unrolled_threefry():
    """JAX's threefry hash lowered unrolled on CPU, as the chapters run it (``nqfbook.kit.start_chapter``):
    the same draws, compiled in a third of the time (``nqfbook.kit.unroll_threefry_on_cpu``). A fixture, not a
    top-level call: importing ``nqf`` here would bypass the jaxtyping import hook."""
    from nqfbook.kit import unroll_threefry_on_cpu

    unroll_threefry_on_cpu()


@pytest.fixture
def loose_promotion():
    """JAX's default promotion (standard dtype lattice, implicit rank broadcasting) for one test,
    for tests of a user's loosely written module; the library itself must pass under the strict flags."""
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        yield


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """In-process tests solve flows on their jit path, without the export cache (``NQF_EXPORT_CACHE=0``,
    nqf/flow/_export.py): an exported flow compiles an expanded program (tests/test_flow.py: 58 s with the
    cache, 48 s without, from a cold JAX cache, alone) whose results are the jit path's bit for bit, which
    tests/test_flow_export.py checks with the cache on. The chapters (``notebook`` tests) keep it, as a
    reader's runs do. Set before any fixture of the test (a module-scoped one included), so a fixture's
    flow and its test's take the same path."""
    if item.get_closest_marker("notebook") is None and item.path.name != "test_flow_export.py":
        os.environ["NQF_EXPORT_CACHE"] = "0"
    else:
        os.environ.pop("NQF_EXPORT_CACHE", None)


def pytest_addoption(parser):
    parser.addoption("--shuffle", type=int, default=None, metavar="SEED",
                     help="run the tests in an order shuffled by SEED (tests must not depend on their order)")


def pytest_collection_modifyitems(config, items):
    """The chapter runs (``notebook`` marker, a minute each) first, the unit tests after.

    ``make test`` runs on two workers with work stealing; starting the longest tests first keeps
    both workers busy to the end instead of leaving one chapter running alone. The order is
    deterministic, as pytest-xdist requires of every worker's collection. ``--shuffle SEED``
    shuffles the order (the same on every worker for one seed), to show that no test depends on
    another having run first: ``make test-shuffled`` runs the unit tests under three seeds.
    """
    seed = config.getoption("--shuffle")
    if seed is not None:
        import random

        random.Random(seed).shuffle(items)
    items[:] = sorted(items, key=lambda item: item.get_closest_marker("notebook") is None)


def pytest_terminal_summary(terminalreporter):
    """One line per chapter run by ``tests/test_notebooks.py`` (its outcome, claims by kind, verdict counts
    and time), also under pytest-xdist: the test records its line as a user property, which the workers
    send back with the report."""
    lines = []
    for status in ("passed", "failed"):
        for report in terminalreporter.stats.get(status, []):
            if getattr(report, "when", "call") != "call":
                continue
            line = dict(getattr(report, "user_properties", ())).get("chapter")
            if line:
                lines.append(line)
    if lines:
        terminalreporter.section("chapters at quick fidelity")
        for line in sorted(lines):
            terminalreporter.write_line(line)
