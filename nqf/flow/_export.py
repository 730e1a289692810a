r"""Exported flows on disk: the first call of a new process skips tracing diffrax's solve.

:func:`call` stores the lowered program as a ``jax.export`` serialization (StableHLO; needs ``flatbuffers``) in
``<jax cache dir>/nqf-export``; a later process deserializes and calls it, its executable still from JAX's
cache. No cache folder, or ``NQF_EXPORT_CACHE=0``: nothing is stored. A file serves only the call that wrote it:
its key hashes the function's name, static options, every input's shape, dtype and weak type, the input tree,
the versions of Python, jax, jaxlib, diffrax, equinox, flatbuffers and nqf, nqf's sources, the backend, the JAX
options that change tracing and equinox's error mode; the file repeats the key and a checksum of its payload.
A missing, stale, damaged or mismatched file is never called: the function is exported afresh (rewritten
atomically); if export fails the caller's normal path runs. Results are bitwise those of the normal path.
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
