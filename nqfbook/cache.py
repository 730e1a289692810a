"""The staleness key and the execution cache.

A chapter's key hashes what the chapter imports and is given: every file under ``nqf/`` (the
science) and ``nqfbook/kit/`` (the chapter kit), Python files next to the chapters, the
pins (``pyproject.toml``, ``requirements-lock.txt``), the notebook, its fidelity and parameters, ``XLA_FLAGS``,
``EQX_ON_ERROR`` (when not the runner's ``nan``), the module a ``-p`` import path names (``-p model=my_models:make``: its source file), and the
versions of Python, papermill and the normalisation. The runner itself (the rest of ``nqfbook/``) is
not part of it: editing the tool re-executes nothing.

A successful execution leaves a record (``_build/executed/{fidelity}/.records/{stem}.json``)
with its key, the content hash of the executed notebook and of every file it wrote; a chapter
is reused only while all of them still hold.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Optional

from .layout import KERNEL_NAME, ChapterResult, Layout, move, read_json, rm, sha256_file
from .normalise import NORMALISATION_VERSION

# what the chapters import (each hashed as a whole directory: the science and the book's chapter kit) and the
# pins of their environment; the runner (the rest of nqfbook/) is not among them
SOURCE_PACKAGES = ("nqf", "nqfbook/kit")
PIN_FILES = ("pyproject.toml", "requirements-lock.txt")


def source_tree_hash(root: Path) -> str:
    """Hash of every file under ``nqf/`` and ``nqfbook/kit/`` (not caches), Python files next to the chapters, and
    the pins.

    Every file of the package counts, not only the modules a chapter imports: a superset is never
    stale (an import added or made dynamic cannot be missed), at the price of re-executing every
    chapter after any change to ``nqf/`` or to the chapter kit. The runner (the rest of ``nqfbook/``) is not
    hashed.
    """
    root = Path(root)
    h = hashlib.sha256()
    files = []
    for pkg in (root / name for name in SOURCE_PACKAGES):
        for p in sorted(pkg.rglob("*")) if pkg.is_dir() else ():
            rel = p.relative_to(root)
            if p.is_file() and "__pycache__" not in rel.parts and p.suffix not in (".pyc", ".pyo"):
                files.append(p)
    nbdir = root / "notebooks"
    if nbdir.is_dir():
        files += [p for p in sorted(nbdir.rglob("*.py"))
                  if "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts]
    for extra in PIN_FILES:
        if (root / extra).is_file():
            files.append(root / extra)
    for p in files:
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(sha256_file(p).encode() + b"\n")
    return h.hexdigest()


def cache_key(notebook: Path, tree_hash: str, fidelity: str, parameters: dict, *,
              sources: Optional[dict] = None) -> str:
    """Content hash of one execution's inputs: the notebook, its parameters, the sources, the versions.

    ``sources`` (parameter -> file) adds the content of the module a parameter names (``-p model=mod:f``,
    declared ``"import path"``): a module outside ``nqf/`` and ``notebooks/`` that is edited re-executes the
    chapter. A missing file hashes as missing (the run then fails in the kernel, and is never cached)."""
    try:
        from importlib.metadata import version

        pm_version = version("papermill")
    except Exception:  # pragma: no cover - papermill is a dependency of the book
        pm_version = "?"
    payload = {
        "notebook": sha256_file(notebook),
        "nqf": tree_hash,
        "fidelity": fidelity,
        "parameters": sorted((k, repr(v)) for k, v in parameters.items()),
        "python": sys.version,
        "kernel": KERNEL_NAME,
        "papermill": pm_version,
        "normalisation": NORMALISATION_VERSION,
    }
    if os.environ.get("XLA_FLAGS"):  # compiler settings change results in the last digits (quick: QUICK_XLA_FLAG)
        payload["xla_flags"] = os.environ["XLA_FLAGS"]
    if os.environ.get("EQX_ON_ERROR", "nan") != "nan":  # equinox's error mode, when not the runner's own
        payload["eqx_on_error"] = os.environ["EQX_ON_ERROR"]
    if sources:  # only then: the keys of runs without such a parameter stay what they were
        payload["sources"] = sorted(
            (k, str(p), sha256_file(Path(p)) if Path(p).is_file() else "missing") for k, p in sources.items())
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def produced_files(out_dir: Path, since_ns: int) -> dict[str, str]:
    """Files under ``out_dir`` modified since ``since_ns`` (relative path -> sha256)."""
    out: dict[str, str] = {}
    if not out_dir.is_dir():
        return out
    for p in sorted(out_dir.rglob("*")):
        if p.is_file() and p.name != "timings.json" and p.stat().st_mtime_ns >= since_ns:
            out[p.relative_to(out_dir).as_posix()] = sha256_file(p)
    return out


def verify_executed(root: Path, notebook: Path, fidelity: str, *, tree_hash: Optional[str] = None,
                    parameters: Optional[dict] = None) -> tuple[Optional[bytes], str]:
    """The executed notebook of a chapter, if it is exactly what the runner last wrote for these inputs.

    Returns:
        ``(content, "")`` when the record's key equals the current inputs' key and the executed
        notebook's content hash equals the recorded one; ``(None, reason)`` otherwise.
    """
    lay = Layout(Path(root), fidelity)
    stem = Path(notebook).stem
    rec = read_json(lay.record(stem))
    if not rec:
        return None, "no record of a successful execution"
    tree_hash = tree_hash or source_tree_hash(lay.root)
    if rec.get("key") != cache_key(Path(notebook), tree_hash, fidelity, dict(parameters or {})):
        return None, "executed for other inputs (the notebook, nqf/ or the parameters changed since)"
    try:
        content = lay.executed_nb(stem).read_bytes()
    except OSError:
        return None, f"missing {lay.executed_nb(stem).relative_to(lay.root)}"
    if hashlib.sha256(content).hexdigest() != rec.get("executed_sha256"):
        return None, (f"{lay.executed_nb(stem).relative_to(lay.root)} was modified after the runner "
                      "wrote it (content hash differs from the record)")
    return content, ""


def cached_result(lay: Layout, stem: str, key: str) -> Optional[ChapterResult]:
    """The result of the last execution, if its record has ``key`` and its outputs are unchanged."""
    rec = read_json(lay.record(stem))
    if not rec or rec.get("key") != key:
        return None
    nb_path = lay.executed_nb(stem)
    if not nb_path.is_file() or sha256_file(nb_path) != rec.get("executed_sha256"):
        return None  # missing, hand-edited, or written by an older runner without a content hash
    for rel, digest in rec.get("produced", {}).items():
        p = lay.out_dir / rel
        if not p.is_file() or sha256_file(p) != digest:
            return None
    claims_rel = rec.get("claims")
    data = read_json(lay.out_dir / claims_rel) if claims_rel else None
    if not data or data.get("passed") is not True or data.get("fidelity") != lay.fidelity:
        return None
    return ChapterResult(stem, "cached", float(rec.get("seconds", 0.0)), n_claims=data.get("n_claims", 0))


# ------------------------------------------- the last good outputs, kept aside
def set_aside(lay: Layout, stem: str) -> None:
    """Move the chapter's last good outputs to ``previous(stem)`` (nothing is deleted)."""
    prev = lay.previous(stem)
    rm(prev)
    prev.mkdir(parents=True)
    for p in [lay.executed_nb(stem), lay.record(stem), *lay.chapter_outputs(stem)]:
        if p.exists() or p.is_symlink():
            move(p, prev / p.relative_to(lay.build))


def put_back(lay: Layout, stem: str) -> bool:
    """Undo ``set_aside`` after a failed or interrupted run; keep what that run wrote in ``failed/``.

    The restored outputs get no record: they stay visible, but the next run re-executes the
    chapter and ``--build`` refuses them until it does. Returns whether anything was restored.
    """
    prev = lay.previous(stem)
    if not prev.is_dir():
        return False
    failed = lay.failed_outputs(stem)
    for p in lay.chapter_outputs(stem):
        if p.exists():
            move(p, failed / p.relative_to(lay.out_dir))
    for p in [lay.executed_nb(stem), *lay.chapter_outputs(stem)]:
        src = prev / p.relative_to(lay.build)
        if src.exists():
            move(src, p)
    rm(lay.record(stem))
    rm(prev)
    return True


def recover_chapter(lay: Layout, stem: str) -> None:
    """Repair what a killed run of this chapter left behind (call with the chapter's lock held)."""
    running = lay.running_nb(stem)
    if running.exists():
        move(running, lay.failed_nb(stem))
    rec = read_json(lay.record(stem))
    nb_path = lay.executed_nb(stem)
    if (lay.previous(stem).is_dir() and rec and nb_path.is_file()
            and sha256_file(nb_path) == rec.get("executed_sha256")):
        rm(lay.previous(stem))  # the run had finished: only its last clean-up step was cut
    put_back(lay, stem)
