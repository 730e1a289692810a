r"""Exported flows on disk: the first call of a new process skips tracing diffrax's solve.

With JAX's persistent compilation cache warm, a new process still traces the flow in Python
(diffrax's loop, the Runge-Kutta stages, equinox's checks) and lowers it before the cache can hand
back the executable: about 0.85 s (0.6 s tracing, 0.25 s lowering) of the 0.9-1.3 s first call at
$m = 4096$, $p = 8$ (issue 21, profiled).
:func:`call` stores the lowered program instead, as a ``jax.export`` serialization (StableHLO and
its calling convention; needs the ``flatbuffers`` package), and a later process deserializes it
and calls it: no Python tracing of the solve, and the executable still comes from JAX's cache
(the program that ``Exported.call`` lowers is the same in every process, so its cache key is too).

**Why not the executable itself.** ``jax.experimental.serialize_executable`` would skip the lowering
and JAX's cache lookup too (0.15-0.25 s instead of 0.3-0.4 s), and runs the jit path's own program;
but with jaxlib 0.10.2 on CPU, an executable that JAX's persistent cache handed back serializes into
bytes that load and then fail to run (``NOT_FOUND: Function ... fusion not found``), and on a warm JAX
cache every compilation is such a hand-back. The exported StableHLO has no such state: the price is
that its portable form expands diffrax's 100 ``chlo.next_after`` into elementary ops (a larger program:
a compilation on a cold cache takes up to 25 % longer, a solve 0-4 % longer, measured at
$m = 4096$, $p = 8$; $m = 256$, $p = 32$; $m = 16$, $p = 8$).

**Where.** In a folder ``nqf-export`` inside JAX's cache folder (``jax.config.jax_compilation_cache_dir``;
JAX's own eviction only touches its ``*-cache`` files); with no cache folder, or
``NQF_EXPORT_CACHE=0`` in the environment, nothing is stored and the callers take their normal jit path.

**Keys.** A file is used only for the call that wrote it: its name is the SHA-256 of the function's
name, its static options, the shape, dtype and weak type of every input leaf and the input tree,
the versions of Python, jax, jaxlib, diffrax, equinox, flatbuffers and nqf, the SHA-256 of nqf's
source files (an edited package is a new key), the backend, the JAX options that change tracing
and equinox's error mode. The file repeats the full key and a SHA-256 of its payload.

**Falling back.** A missing, stale (other key), truncated or corrupted file, one that does not
deserialize, or whose input types differ, is never called: the function is traced and exported
afresh (one trace, as a normal call would make, and the result is the exported program's) and the
file rewritten atomically. If the export itself fails (a host callback, a sharded input), or the
folder cannot be written, the caller's normal path runs or the in-memory export serves; no error
reaches the user from the cache. The exported program is the traced one, so results are bitwise
those of the normal path (``tests/test_flow_export.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

_LOG = logging.getLogger(__name__)
FORMAT = b"nqf-export/1\n"  # first line of every file; a new layout gets a new one
FOLDER = "nqf-export"
_JAX_OPTIONS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_dtype_promotion",
                "jax_numpy_rank_promotion", "jax_use_shardy_partitioner", "jax_dynamic_shapes")

_calls: dict[tuple, Callable[..., Any] | None] = {}  # in-memory key -> jitted Exported.call (None: export failed)
_environment: str | None = None


def folder() -> Path | None:
    """The folder of exported flows (created on first write), or None when there is none to use."""
    if os.environ.get("NQF_EXPORT_CACHE", "1") == "0" or not jax.config.jax_enable_compilation_cache:
        return None
    return folder_in(jax.config.jax_compilation_cache_dir)


def folder_in(jax_cache_dir: Any) -> Path | None:
    """``<jax_cache_dir>/nqf-export``; None for no JAX cache folder or a remote one (only local folders here)."""
    if not jax_cache_dir or "://" in str(jax_cache_dir):
        return None
    return Path(jax_cache_dir) / FOLDER


def _source_digest() -> str:
    """SHA-256 of nqf's Python sources, in path order: any edit of the package is a new key."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


#: The digest of the sources this process loaded, taken when it imported nqf (``nqf/__init__`` imports every
#: room, this one among them). Read later, the digest would name sources edited after the import, and an export
#: traced from the loaded code would be filed under the edited code's key, where a new process would take it.
_LOADED_SOURCES = _source_digest()


def environment() -> str:
    """What besides the call decides the exported program (computed once per process; the modules'
    versions, not the packages' metadata, which costs 0.1 s to read)."""
    global _environment
    if _environment is None:
        import diffrax
        import equinox
        import jaxlib

        from .._version import __version__ as nqf_version

        try:
            import flatbuffers
        except ImportError:  # then serializing fails and the callers take their normal path
            flatbuffers = None
        versions = {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "diffrax": diffrax.__version__,
                    "equinox": equinox.__version__, "flatbuffers": getattr(flatbuffers, "__version__", None),
                    "nqf": nqf_version}
        _environment = json.dumps({"python": sys.version, "versions": versions, "nqf_sources": _LOADED_SOURCES},
                                  sort_keys=True)
    return _environment


def callback_free() -> bool:
    """Whether equinox traces its checks (diffrax's, of the save times) without host callbacks: its documented
    switch ``EQX_ON_ERROR`` is ``nan`` or ``off``. Under its default (``raise``) a check is a host callback, which
    neither ``jax.export`` nor JAX's persistent cache keeps. nqf never changes equinox's mode."""
    return os.environ.get("EQX_ON_ERROR", "raise") in ("nan", "off")


def _dynamic_environment() -> tuple:
    """The part of the environment a process can change between calls: JAX options, backend, equinox's mode."""
    options = tuple((name, str(getattr(jax.config, name, None))) for name in _JAX_OPTIONS)
    return options, jax.default_backend(), os.environ.get("EQX_ON_ERROR", "raise")


def _aval(x) -> tuple | None:
    """(shape, dtype, weak type) of a concrete single-device array, a NumPy array or a Python float
    (weakly typed, as ``jax.jit`` sees it); None otherwise."""
    if isinstance(x, jax.core.Tracer):
        return None
    if type(x) is float:
        return (), str(jax.dtypes.canonicalize_dtype(np.float64)), True
    if isinstance(x, jax.Array):
        if len(x.sharding.device_set) != 1:
            return None
        return tuple(x.shape), str(x.dtype), bool(x.weak_type)
    if isinstance(x, (np.ndarray, np.generic)):
        return tuple(x.shape), str(x.dtype), False
    return None


def _full_key(name: str, options: dict, treedef, avals: Sequence[tuple], dynamic: tuple) -> str:
    return json.dumps({
        "name": name, "options": {k: repr(v) for k, v in sorted(options.items())}, "tree": str(treedef),
        "avals": [[list(s), d, w] for s, d, w in avals], "dynamic": repr(dynamic), "environment": environment(),
    }, sort_keys=True)


def _path(base: Path, name: str, key: str) -> Path:
    return base / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:40]}.bin"


def _read(path: Path, key: str, avals: Sequence[tuple]) -> jax.export.Exported | None:
    """The Exported stored at ``path`` if it is whole and was written for ``key``; None otherwise."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    def ignore(why):
        _LOG.info("nqf export cache: ignoring %s (%s)", path, why)

    try:
        if not blob.startswith(FORMAT):
            return ignore("not an nqf export")
        header, payload = blob[len(FORMAT):].split(b"\n", 1)
        meta = json.loads(header)
        if meta["key"] != key:
            return ignore("written for another key")
        if meta["sha256"] != hashlib.sha256(payload).hexdigest():
            return ignore("payload checksum differs")
        exp = jax.export.deserialize(bytearray(payload))
        got = [(tuple(a.shape), str(a.dtype)) for a in exp.in_avals]
        if got != [(s, d) for s, d, _ in avals] or exp.nr_devices != 1 \
                or jax.default_backend() not in exp.platforms:
            return ignore("input types, devices or platform differ")
        return exp
    except Exception as err:  # noqa: BLE001 - any damage means: do not use it
        return ignore(err)


def _write(path: Path, key: str, payload: bytes) -> None:
    """Store ``payload`` under ``path`` atomically (a temporary file renamed); failures are only logged."""
    header = json.dumps({"key": key, "sha256": hashlib.sha256(payload).hexdigest()}).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(FORMAT + header + b"\n" + payload)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as err:
        _LOG.info("nqf export cache: could not write %s (%s)", path, err)


def call(name: str, fn: Callable[..., Any], args: tuple, options: dict) -> tuple | None:
    """``fn(*args, **options)`` flattened to a tuple of arrays, through the export cache; None when the
    cache cannot serve this call (no cache folder, equinox's checks as host callbacks, which cannot be
    serialized (:func:`callback_free`), a traced or sharded input, an export that failed): then the caller
    runs its normal path.

    ``fn`` is a jitted function whose keyword ``options`` are static and hashable and whose output is
    a tuple (or NamedTuple) of arrays; ``name`` names it in the key and the file name.
    """
    base = folder()
    if base is None or not callback_free():  # equinox's mode asked for: its checks as the user set them
        return None
    leaves, treedef = jax.tree.flatten(args)
    avals = [_aval(x) for x in leaves]
    if any(a is None for a in avals):
        return None
    dynamic = _dynamic_environment()
    memo = (name, tuple(sorted(options.items())), treedef, tuple(avals), dynamic)
    if memo not in _calls:
        _calls[memo] = _load_or_export(base, name, fn, treedef, leaves, avals, options, dynamic)
    run = _calls[memo]
    return None if run is None else tuple(run(*leaves))


def _load_or_export(base, name, fn, treedef, leaves, avals, options, dynamic) -> Callable[..., Any] | None:
    key = _full_key(name, options, treedef, avals, dynamic)
    path = _path(base, name, key)
    exp = _read(path, key, avals)
    if exp is None:
        def flat(*leaves):
            return tuple(fn(*jax.tree.unflatten(treedef, leaves), **options))

        try:
            payload = bytes(jax.export.export(jax.jit(flat))(*leaves).serialize())
            exp = jax.export.deserialize(bytearray(payload))  # what later processes will call, exactly
        except Exception as err:  # noqa: BLE001 - not exportable: the normal path serves this call
            _LOG.info("nqf export cache: %s not exported (%s)", name, err)
            return None
        _write(path, key, payload)
    return jax.jit(exp.call)
