"""The book runner: execute the chapters with papermill, check their claims, build the site.

Command line (from the repository root)::

    python -m nqf.pipeline.runner [--fidelity quick|full] [--only ch01 ...] [-p name=value ...]
                         [--build] [--force] [--fail-fast] [--list]
                         [--cell-timeout SECONDS] [--root PATH]

* The chapters are ``notebooks/ch*.ipynb`` (sorted). Each must have a cell
  tagged ``parameters`` assigning at least ``fidelity`` and ``out_dir``;
  the runner injects ``fidelity`` and the absolute
  ``out_dir = _build/output/{fidelity}`` plus any ``-p name=value``
  (the value is read as a Python literal if it is one, else as a string).
* Executed notebooks go to ``_build/executed/{fidelity}/``; a failed one to
  ``_build/executed/{fidelity}/failed/``. After each chapter the runner reads
  ``{out_dir}/claims/{chNN or stem}.json`` and fails if it is missing, was
  written for another fidelity, or records a failed claim. Wall times go to
  ``_build/output/{fidelity}/timings.json``.
* A chapter is re-executed unless a previous successful execution had the same
  key: content hash of (the notebook, its parameters, every file under
  ``nqf/`` -- a superset of the sources it imports --, ``pyproject.toml``,
  ``requirements-lock.txt``, Python version, fidelity) *and* its executed
  notebook (content hash recorded when it was written), claims file and the
  files it wrote are still there, unchanged. A hand-edited executed notebook
  is never "up to date". ``--force`` always re-executes.
* A re-execution first sets the chapter's last good outputs (executed
  notebook, claims, figures) aside under ``_build/executed/{fidelity}/.previous/``
  and puts them back if the run fails or is interrupted; the failed run's
  notebook and outputs go to ``_build/executed/{fidelity}/failed/``. Nothing
  is deleted before the new outputs exist.
* Executed notebooks are normalised before they are kept (timing metadata and
  machine paths removed, stderr dropped, consecutive stdout chunks merged), so
  that the same commit gives byte-identical pages. Wall times go to
  ``timings.json``, never onto a page.
* ``--build`` (all chapters, default parameters only) then stages the site
  under ``_build/stage/{fidelity}`` (``_config.yml``, ``book/``, executed
  notebooks at ``notebooks/``, each checked against its recorded hash), runs
  ``jupyter-book build --all -W --keep-going`` (in its own process group) into
  a temporary directory ``_build/.site-*``, and only if that succeeds swaps it
  into ``_build/html`` (``_build/html-quick`` at quick fidelity). A failed or
  interrupted build leaves the previous site in place.
* SIGTERM and SIGINT end the child processes (kernel, jupyter-book) with their
  whole process groups, restore the chapter being run, remove temporary
  directories, and exit with 128 + the signal number. Every run (of any kind)
  first repairs what a killed run left behind: a site swap cut between its two
  renames, stale ``_build/.site-*`` directories, a chapter's outputs set aside.

Exit status: 0 success, 1 a chapter failed (cell error or claim), 2 usage or
configuration error, 3 the site build failed, 130/143 interrupted by
SIGINT/SIGTERM. Messages name the chapter and the failed claims, or the cell
error with its index in the source notebook.

Environment given to the kernels: ``JAX_ENABLE_X64=1``,
``JAX_COMPILATION_CACHE_DIR=_build/jax_cache`` (unless already set),
``PYTHONPATH`` starting with the repository root (so the repository's own
``nqf`` is the one imported and hashed).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

__all__ = [
    "FIDELITIES",
    "RunnerError",
    "Interrupted",
    "ChapterResult",
    "positive_int",
    "find_root",
    "discover_chapters",
    "select_chapters",
    "parameter_names",
    "parse_parameter",
    "toc_documents",
    "check_toc",
    "run_chapter",
    "build_site",
    "main",
]

FIDELITIES = ("quick", "full")
REQUIRED_PARAMETERS = ("fidelity", "out_dir")
KERNEL_NAME = "python3"
_CHID_RE = re.compile(r"^(ch\d+)")


class RunnerError(Exception):
    """A usage or configuration error (exit status 2)."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT arrived (raised by the CLI's signal handler)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def signame(self) -> str:
        return signal.Signals(self.signum).name


def positive_int(text) -> int:
    """Parse a positive whole number of seconds (``--cell-timeout``).

    Raises:
        argparse.ArgumentTypeError: for anything else (``2.5``, ``nan``, ``inf``, ``0``, ``-1``, ``x``).
    """
    if isinstance(text, bool):
        raise argparse.ArgumentTypeError(f"expected a positive integer number of seconds; got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        try:
            value = int(str(text).strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a positive integer number of seconds; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer number of seconds; got {text!r}")
    return value


@dataclasses.dataclass
class ChapterResult:
    """Outcome of one chapter."""

    stem: str
    status: str  # "passed" | "cached" | "failed"
    seconds: float
    message: str = ""
    n_claims: int = 0
    failed_claims: list = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("passed", "cached")


# --------------------------------------------------------------------- paths
def find_root(start: Optional[os.PathLike] = None) -> Path:
    """The repository root: ``start`` if given, else the first directory upwards
    from the current one that holds ``_config.yml`` and ``notebooks/``."""
    if start is not None:
        root = Path(start).resolve()
        if not (root / "notebooks").is_dir():
            raise RunnerError(f"--root {root}: no notebooks/ directory there")
        return root
    here = Path.cwd().resolve()
    for cand in (here, *here.parents):
        if (cand / "_config.yml").is_file() and (cand / "notebooks").is_dir():
            return cand
    pkg_parent = Path(__file__).resolve().parent.parent
    if (pkg_parent / "notebooks").is_dir():
        return pkg_parent
    raise RunnerError(
        "cannot find the repository root (a directory with _config.yml and notebooks/); "
        "run from the repository or pass --root"
    )


def chapter_id(stem: str) -> str:
    """``"ch01_neural_quadratic_form"`` -> ``"ch01"``."""
    m = _CHID_RE.match(stem)
    return m.group(1) if m else stem


def discover_chapters(root: Path) -> list[Path]:
    """``notebooks/ch*.ipynb``, sorted by name."""
    return sorted(p for p in (Path(root) / "notebooks").glob("ch*.ipynb") if p.is_file())


def select_chapters(chapters: list[Path], only: list[str]) -> list[Path]:
    """Chapters matching ``--only`` values (``ch01``, a full stem, or a path)."""
    if not only:
        return list(chapters)
    selected: list[Path] = []
    for want in only:
        key = Path(want).name
        key = key[: -len(".ipynb")] if key.endswith(".ipynb") else key
        hits = [p for p in chapters if p.stem == key] or [
            p for p in chapters if chapter_id(p.stem) == key
        ]
        if len(hits) != 1:
            avail = ", ".join(p.stem for p in chapters) or "(none)"
            what = "matches no chapter" if not hits else "is ambiguous"
            raise RunnerError(f"--only {want!r} {what}; chapters: {avail}")
        if hits[0] not in selected:
            selected.append(hits[0])
    return sorted(selected)


# ------------------------------------------------------------- parameters
def parameter_names(notebook) -> list[str]:
    """Names assigned in the notebook's ``parameters``-tagged cell (through ``papermill.inspect_notebook``).

    Args:
        notebook: path of a notebook, or a notebook node (``nbformat.read``).

    Raises:
        RunnerError: if there is not exactly one such code cell or it does not parse.
    """
    import nbformat
    import papermill

    nb = nbformat.read(notebook, as_version=4) if isinstance(notebook, (str, os.PathLike)) else notebook
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1 or cells[0].cell_type != "code":
        raise RunnerError(
            f"needs exactly one code cell tagged 'parameters' (found {len(cells)})"
        )
    try:
        ast.parse(cells[0].source)
    except SyntaxError as exc:
        raise RunnerError(f"the parameters cell does not parse: {exc}") from exc
    if isinstance(notebook, (str, os.PathLike)):
        return list(papermill.inspect_notebook(str(notebook)))
    with tempfile.TemporaryDirectory(prefix="nqf-inspect-") as tmp:
        path = Path(tmp) / "notebook.ipynb"
        nbformat.write(nb, path)
        return list(papermill.inspect_notebook(str(path)))


def parse_parameter(text: str) -> tuple[str, Any]:
    """``"n=100"`` -> ``("n", 100)``; non-literal values stay strings (like papermill's ``-p``)."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise RunnerError(f"-p expects name=value with a Python identifier as name; got {text!r}")
    if name in REQUIRED_PARAMETERS:
        raise RunnerError(
            f"-p {name}=... is set by the runner; use --fidelity (out_dir is _build/output/<fidelity>)"
        )
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return name, value


# ------------------------------------------------------------------ hashing
def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_tree_hash(root: Path) -> str:
    """Hash of every file under ``nqf/`` (not caches), Python files next to the chapters, and the pins.

    Every file of the package counts, not only the modules a chapter imports: a superset is never
    stale (an import added or made dynamic cannot be missed), at the price of re-executing every
    chapter after any change to ``nqf/``.
    """
    root = Path(root)
    h = hashlib.sha256()
    files = []
    pkg = root / "nqf"
    if pkg.is_dir():
        for p in sorted(pkg.rglob("*")):
            rel = p.relative_to(root)
            if p.is_file() and "__pycache__" not in rel.parts and p.suffix not in (".pyc", ".pyo"):
                files.append(p)
    nbdir = root / "notebooks"
    if nbdir.is_dir():
        files += [p for p in sorted(nbdir.rglob("*.py"))
                  if "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts]
    for extra in ("pyproject.toml", "requirements-lock.txt"):
        if (root / extra).is_file():
            files.append(root / extra)
    for p in files:
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(_sha256_file(p).encode() + b"\n")
    return h.hexdigest()


def cache_key(notebook: Path, tree_hash: str, fidelity: str, parameters: dict) -> str:
    """Content hash of one execution's inputs: the notebook, its parameters, the sources, the versions."""
    try:
        from importlib.metadata import version

        pm_version = version("papermill")
    except Exception:  # pragma: no cover - papermill is a dependency of the book
        pm_version = "?"
    payload = {
        "notebook": _sha256_file(notebook),
        "nqf": tree_hash,
        "fidelity": fidelity,
        "parameters": sorted((k, repr(v)) for k, v in parameters.items()),
        "python": sys.version,
        "kernel": KERNEL_NAME,
        "papermill": pm_version,
        "normalisation": _NORMALISATION_VERSION,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


# -------------------------------------------------------------- small utils
def _write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False, default=repr)
            fh.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _read_json(path: Path) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _rm(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _move(src: Path, dest: Path) -> None:
    """Rename ``src`` to ``dest`` (replacing it), creating parents."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    _rm(dest)
    os.rename(src, dest)


_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _strip_ansi(text: str) -> str:
    return _ANSI_RE.sub("", text)


def _fmt_seconds(s: Optional[float]) -> str:
    if s is None:
        return "—"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def _describe_claim(c: dict) -> str:
    kind = c.get("kind")
    if kind == "close":
        tols = ", ".join(f"{k} {c[k]:.3g}" for k in ("rtol", "atol") if c.get(k) is not None)
        req = f"≈ {c.get('predicted')} ({tols})"
    elif kind == "less":
        req = f"< {c.get('hi')}"
    elif kind == "greater":
        req = f"> {c.get('lo')}"
    else:
        req = f"in [{c.get('lo')}, {c.get('hi')}]"
    return f"claim {c.get('name')!r}: measured {c.get('measured')}, required {req}"


@contextlib.contextmanager
def _locked(path: Path, *, wait: bool = True, log=None):
    """Hold an exclusive ``flock`` on ``path`` (created if needed); yields False if not ``wait`` and busy."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if not wait:
                yield False
                return
            if log is not None:
                log(f"  waiting for another runner that holds {path.name} ...")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)


# --------------------------------------------------------------- chapters
@dataclasses.dataclass
class _Layout:
    root: Path
    fidelity: str

    @property
    def build(self) -> Path:
        return self.root / "_build"

    @property
    def out_dir(self) -> Path:
        return self.build / "output" / self.fidelity

    @property
    def executed(self) -> Path:
        return self.build / "executed" / self.fidelity

    @property
    def records(self) -> Path:
        return self.executed / ".records"

    @property
    def locks(self) -> Path:
        return self.build / ".locks"

    @property
    def timings(self) -> Path:
        return self.out_dir / "timings.json"

    @property
    def site(self) -> Path:
        return self.build / ("html" if self.fidelity == "full" else f"html-{self.fidelity}")

    @property
    def stage(self) -> Path:
        return self.build / "stage" / self.fidelity

    def executed_nb(self, stem: str) -> Path:
        return self.executed / f"{stem}.ipynb"

    def record(self, stem: str) -> Path:
        return self.records / f"{stem}.json"

    def running_nb(self, stem: str) -> Path:
        return self.executed / ".running" / f"{stem}.ipynb"

    def previous(self, stem: str) -> Path:
        """Where a re-execution keeps the chapter's last good outputs until it succeeds."""
        return self.executed / ".previous" / stem

    def failed_nb(self, stem: str) -> Path:
        return self.executed / "failed" / f"{stem}.ipynb"

    def failed_outputs(self, stem: str) -> Path:
        return self.executed / "failed" / stem

    def claim_candidates(self, stem: str) -> list[Path]:
        names = dict.fromkeys([chapter_id(stem), stem])
        return [self.out_dir / "claims" / f"{n}.json" for n in names]

    def figure_dirs(self, stem: str) -> list[Path]:
        names = dict.fromkeys([chapter_id(stem), stem])
        return [self.out_dir / "figures" / n for n in names]

    def chapter_outputs(self, stem: str) -> list[Path]:
        """The chapter's own files under ``out_dir`` (claims and figures)."""
        return [*self.claim_candidates(stem), *self.figure_dirs(stem)]


def _produced_files(out_dir: Path, since_ns: int) -> dict[str, str]:
    """Files under ``out_dir`` modified since ``since_ns`` (relative path -> sha256)."""
    out: dict[str, str] = {}
    if not out_dir.is_dir():
        return out
    for p in sorted(out_dir.rglob("*")):
        if p.is_file() and p.name != "timings.json" and p.stat().st_mtime_ns >= since_ns:
            out[p.relative_to(out_dir).as_posix()] = _sha256_file(p)
    return out


def verify_executed(root: Path, notebook: Path, fidelity: str, *, tree_hash: Optional[str] = None,
                    parameters: Optional[dict] = None) -> tuple[Optional[bytes], str]:
    """The executed notebook of a chapter, if it is exactly what the runner last wrote for these inputs.

    Returns:
        ``(content, "")`` when the record's key equals the current inputs' key and the executed
        notebook's content hash equals the recorded one; ``(None, reason)`` otherwise.
    """
    lay = _Layout(Path(root), fidelity)
    stem = Path(notebook).stem
    rec = _read_json(lay.record(stem))
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


def _cached_result(lay: _Layout, stem: str, key: str) -> Optional[ChapterResult]:
    rec = _read_json(lay.record(stem))
    if not rec or rec.get("key") != key:
        return None
    nb_path = lay.executed_nb(stem)
    if not nb_path.is_file() or _sha256_file(nb_path) != rec.get("executed_sha256"):
        return None  # missing, hand-edited, or written by an older runner without a content hash
    for rel, digest in rec.get("produced", {}).items():
        p = lay.out_dir / rel
        if not p.is_file() or _sha256_file(p) != digest:
            return None
    claims_rel = rec.get("claims")
    data = _read_json(lay.out_dir / claims_rel) if claims_rel else None
    if not data or data.get("passed") is not True or data.get("fidelity") != lay.fidelity:
        return None
    return ChapterResult(stem, "cached", float(rec.get("seconds", 0.0)), n_claims=data.get("n_claims", 0))


def _set_aside(lay: _Layout, stem: str) -> None:
    """Move the chapter's last good outputs to ``previous(stem)`` (nothing is deleted)."""
    prev = lay.previous(stem)
    _rm(prev)
    prev.mkdir(parents=True)
    for p in [lay.executed_nb(stem), lay.record(stem), *lay.chapter_outputs(stem)]:
        if p.exists() or p.is_symlink():
            _move(p, prev / p.relative_to(lay.build))


def _put_back(lay: _Layout, stem: str) -> bool:
    """Undo ``_set_aside`` after a failed or interrupted run; keep what that run wrote in ``failed/``.

    The restored outputs get no record: they stay visible, but the next run re-executes the
    chapter and ``--build`` refuses them until it does. Returns whether anything was restored.
    """
    prev = lay.previous(stem)
    if not prev.is_dir():
        return False
    failed = lay.failed_outputs(stem)
    for p in lay.chapter_outputs(stem):
        if p.exists():
            _move(p, failed / p.relative_to(lay.out_dir))
    for p in [lay.executed_nb(stem), *lay.chapter_outputs(stem)]:
        src = prev / p.relative_to(lay.build)
        if src.exists():
            _move(src, p)
    _rm(lay.record(stem))
    _rm(prev)
    return True


def _recover_chapter(lay: _Layout, stem: str) -> None:
    """Repair what a killed run of this chapter left behind (call with the chapter's lock held)."""
    running = lay.running_nb(stem)
    if running.exists():
        _move(running, lay.failed_nb(stem))
    rec = _read_json(lay.record(stem))
    nb_path = lay.executed_nb(stem)
    if (lay.previous(stem).is_dir() and rec and nb_path.is_file()
            and _sha256_file(nb_path) == rec.get("executed_sha256")):
        _rm(lay.previous(stem))  # the run had finished: only its last clean-up step was cut
    _put_back(lay, stem)


_NORMALISATION_VERSION = 2
_VOLATILE_NB_KEYS = ("start_time", "end_time", "duration", "input_path", "output_path",
                     "environment_variables", "exception")
_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _drop_stderr(nb) -> None:
    """Remove stderr streams (progress bars, warnings) from the published notebook and its download."""
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell.outputs = [o for o in cell.get("outputs", [])
                            if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]


def _hide_injected_parameters(nb) -> None:
    """Collapse papermill's injected-parameters cell on the published page."""
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and "hide-cell" not in tags:
            cell.metadata["tags"] = [*tags, "hide-cell"]


def normalise_executed(nb, source_ids: Optional[set] = None) -> None:
    """Make an executed notebook a function of its inputs only (byte-reproducible pages).

    Removes per-cell timing metadata (nbclient ``execution``, papermill start/end/duration), the
    notebook-level run times and machine paths papermill records, progress-bar widgets (random
    model ids, wall-clock rates) and stderr; merges consecutive stdout chunks (how a kernel splits
    its stream into messages depends on timing); gives cells that are not in the source notebook
    (papermill's injected-parameters cell, random ids otherwise) an id from their position.
    """
    for i, cell in enumerate(nb.cells):
        if "id" in cell and (source_ids is None or cell["id"] not in source_ids):
            tags = cell.get("metadata", {}).get("tags", [])
            if "injected-parameters" in tags:
                cell["id"] = "injected-parameters"
            elif source_ids is not None:
                cell["id"] = f"cell-{i}"
    pm = nb.metadata.get("papermill")
    if isinstance(pm, dict):
        for k in _VOLATILE_NB_KEYS:
            pm.pop(k, None)
    nb.metadata.pop("widgets", None)
    _drop_stderr(nb)
    for cell in nb.cells:
        md = cell.get("metadata", {})
        md.pop("execution", None)
        md.pop("papermill", None)
        if cell.get("cell_type") != "code":
            continue
        merged = []
        for o in cell.get("outputs", []):
            if o.get("output_type") == "display_data" and _WIDGET_MIME in o.get("data", {}):
                continue
            if (o.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                    and merged[-1].get("name") == o.get("name")):
                merged[-1]["text"] = merged[-1]["text"] + o["text"]
                continue
            merged.append(o)
        cell.outputs = merged


def _source_cell(notebook: Path, executed_nb: Optional[Path], cell_index: Optional[int]) -> str:
    """Name the cell of the SOURCE notebook that failed (papermill inserts a parameters cell)."""
    if cell_index is None:
        return ""
    import nbformat

    index = int(cell_index)
    try:
        ex = nbformat.read(executed_nb, as_version=4) if executed_nb and executed_nb.exists() else None
    except Exception:
        ex = None
    if ex is not None:
        injected = [i for i, c in enumerate(ex.cells)
                    if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
        index -= sum(1 for i in injected if i < cell_index)
    first = ""
    try:
        src = nbformat.read(notebook, as_version=4)
        if 0 <= index < len(src.cells):
            lines = [ln for ln in src.cells[index].source.splitlines() if ln.strip()]
            first = f', starting "{lines[0].strip()[:70]}"' if lines else ""
    except Exception:
        pass
    return f"source cell {index} (0-based index in notebooks/{notebook.name}{first}) "


def run_chapter(
    root: Path,
    notebook: Path,
    fidelity: str,
    parameters: Optional[dict] = None,
    *,
    force: bool = False,
    cell_timeout: Optional[int] = None,
    tree_hash: Optional[str] = None,
    progress_bar: bool = False,
    log=print,
) -> ChapterResult:
    """Execute one chapter notebook (or reuse a valid cached execution) and check its claims.

    The chapter's last good outputs are set aside, not deleted, while it runs; they come back if
    the run fails or is interrupted (``KeyboardInterrupt``/``Interrupted`` propagate after that).

    Raises:
        ValueError: if ``cell_timeout`` is not ``None`` or a positive integer, or ``fidelity`` is unknown.
    """
    if cell_timeout is not None and (isinstance(cell_timeout, bool) or not isinstance(cell_timeout, int)
                                     or cell_timeout < 1):
        raise ValueError(f"`cell_timeout` must be None or a positive integer number of seconds; "
                         f"got {cell_timeout!r}")
    if fidelity not in FIDELITIES:
        raise ValueError(f"`fidelity` must be one of {FIDELITIES}; got {fidelity!r}")
    notebook = Path(notebook)
    lay = _Layout(Path(root), fidelity)
    with _locked(lay.locks / f"chapter-{fidelity}-{notebook.stem}.lock", log=log):
        _recover_chapter(lay, notebook.stem)
        return _run_chapter_locked(lay, notebook, fidelity, dict(parameters or {}), force=force,
                                   cell_timeout=cell_timeout, tree_hash=tree_hash, progress_bar=progress_bar)


def _run_chapter_locked(lay: _Layout, notebook: Path, fidelity: str, parameters: dict, *, force: bool,
                        cell_timeout: Optional[int], tree_hash: Optional[str],
                        progress_bar: bool) -> ChapterResult:
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    stem = notebook.stem
    tree_hash = tree_hash or source_tree_hash(lay.root)
    key = cache_key(notebook, tree_hash, fidelity, parameters)

    if not force:
        cached = _cached_result(lay, stem, key)
        if cached is not None:
            return cached

    final_nb, failed_nb, running_nb = lay.executed_nb(stem), lay.failed_nb(stem), lay.running_nb(stem)
    _rm(failed_nb)
    _rm(lay.failed_outputs(stem))
    _set_aside(lay, stem)
    for d in (lay.out_dir, running_nb.parent, lay.records):
        d.mkdir(parents=True, exist_ok=True)

    # relative to the notebook's directory (the kernel's cwd): no path of the build machine on the page
    injected = {"fidelity": fidelity, "out_dir": os.path.relpath(lay.out_dir, notebook.parent), **parameters}
    since_ns = time.time_ns() - 1_000_000_000
    t0 = time.perf_counter()
    error: Optional[BaseException] = None
    try:
        try:
            papermill.execute_notebook(
                str(notebook),
                str(running_nb),
                parameters=injected,
                kernel_name=KERNEL_NAME,
                language="python",
                cwd=str(notebook.parent),
                progress_bar=progress_bar,
                log_output=False,
                request_save_on_cell_execute=True,
                start_timeout=120,
                execution_timeout=cell_timeout,
            )
        except PapermillExecutionError as exc:
            error = exc
        except Exception as exc:  # dead kernel, timeout, missing kernel, ...
            error = exc
        seconds = time.perf_counter() - t0

        claims_path = next((p for p in lay.claim_candidates(stem) if p.is_file()), None)
        claims = _read_json(claims_path) if claims_path else None
        failed_claims = [c for c in (claims or {}).get("claims", []) if not c.get("passed")]
        n_claims = int((claims or {}).get("n_claims", 0))

        def fail(message: str) -> ChapterResult:
            if running_nb.exists():
                _move(running_nb, failed_nb)
                message += f"\n    executed notebook: {failed_nb.relative_to(lay.root)}"
            if _put_back(lay, stem):
                message += "\n    the last good outputs of this chapter are kept (it re-executes next time)"
            if lay.failed_outputs(stem).exists():
                message += f"\n    outputs of this run: {lay.failed_outputs(stem).relative_to(lay.root)}/"
            return ChapterResult(stem, "failed", seconds, message, n_claims, failed_claims)

        if error is not None:
            ename = getattr(error, "ename", type(error).__name__)
            evalue = _strip_ansi(str(getattr(error, "evalue", error))).strip()
            if ename == "ClaimError" or failed_claims:
                lines = [_describe_claim(c) for c in failed_claims] or [evalue]
                return fail("failed claims:\n    " + "\n    ".join(lines))
            where = _source_cell(notebook, running_nb, getattr(error, "cell_index", None))
            tb = getattr(error, "traceback", None) or []
            tail = _strip_ansi("\n".join(tb)).strip().splitlines()[-12:]
            detail = ("\n      " + "\n      ".join(tail)) if tail else ""
            return fail(f"{where}raised {ename}: {evalue}{detail}")

        expected = " or ".join(str(p.relative_to(lay.root)) for p in lay.claim_candidates(stem))
        if claims is None:
            return fail(f"wrote no claims file (expected {expected}; end the chapter with Claims(...).finish())")
        if claims.get("fidelity") != fidelity:
            return fail(f"claims file {claims_path.name} is for fidelity {claims.get('fidelity')!r}, not {fidelity!r}")
        if failed_claims or claims.get("passed") is not True:
            lines = [_describe_claim(c) for c in failed_claims] or ["no claims recorded"]
            return fail("failed claims:\n    " + "\n    ".join(lines))

        nb = nbformat.read(running_nb, as_version=4)
        _hide_injected_parameters(nb)
        normalise_executed(nb, {c.get("id") for c in nbformat.read(notebook, as_version=4).cells})
        content = nbformat.writes(nb).encode("utf-8")
        produced = _produced_files(lay.out_dir, since_ns)
        _write_bytes_atomic(final_nb, content)
        _write_json_atomic(
            lay.record(stem),
            {
                "key": key,
                "executed_sha256": hashlib.sha256(content).hexdigest(),
                "seconds": seconds,
                "parameters": parameters,
                "claims": claims_path.relative_to(lay.out_dir).as_posix(),
                "produced": produced,
            },
        )
    except BaseException:
        # interrupted (SIGTERM/SIGINT) or a bug above: the last good outputs come back first
        if running_nb.exists():
            _move(running_nb, failed_nb)
        _put_back(lay, stem)
        raise
    running_nb.unlink(missing_ok=True)
    _rm(lay.previous(stem))
    return ChapterResult(stem, "passed", seconds, n_claims=n_claims)


def _record_timing(lay: _Layout, result: Optional[ChapterResult], parameters: dict,
                   site_seconds: Optional[float] = None) -> None:
    data = _read_json(lay.timings) or {}
    if data.get("fidelity") != lay.fidelity:
        data = {}
    data["fidelity"] = lay.fidelity
    data.setdefault("chapters", {})
    data["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                       "python": platform.python_version()}
    if result is not None:
        data["chapters"][result.stem] = {
            "seconds": round(result.seconds, 3),
            "status": result.status,
            "cached": result.status == "cached",
            "n_claims": result.n_claims,
            "parameters": parameters,
        }
        data["chapters"] = dict(sorted(data["chapters"].items()))
    if site_seconds is not None:
        data["site_build_seconds"] = round(site_seconds, 3)
    _write_json_atomic(lay.timings, data)


# ------------------------------------------------------------------ the toc
def toc_documents(root: Path) -> list[str]:
    """Document names (no suffix) listed in ``book/_toc.yml``, in order."""
    import yaml

    toc_path = Path(root) / "book" / "_toc.yml"
    if not toc_path.is_file():
        raise RunnerError(f"missing {toc_path}")
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8")) or {}
    docs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in ("root", "file"):
                if isinstance(node.get(k), str):
                    docs.append(node[k])
            for k in ("parts", "chapters", "sections", "subtrees", "entries"):
                if k in node:
                    walk(node[k])
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return [d[: -len(Path(d).suffix)] if Path(d).suffix in (".md", ".ipynb") else d for d in docs]


def _resolve_doc(root: Path, doc: str) -> Optional[Path]:
    for suffix in (".md", ".ipynb", ".rst"):
        p = Path(root) / f"{doc}{suffix}"
        if p.is_file():
            return p
    return None


def check_toc(root: Path, chapters: list[Path]) -> list[str]:
    """Problems with the toc: entries that do not exist, notebooks the runner does not execute."""
    root = Path(root)
    problems = []
    stems = {c.stem for c in chapters}
    for doc in toc_documents(root):
        path = _resolve_doc(root, doc)
        if path is None:
            problems.append(f"book/_toc.yml lists {doc!r}, but no {doc}.md/.ipynb exists")
        elif path.suffix == ".ipynb" and not (path.parent == root / "notebooks" and path.stem in stems):
            problems.append(
                f"book/_toc.yml lists notebook {doc!r}, which the runner does not execute "
                "(only notebooks/ch*.ipynb are executed; it would be published unexecuted)"
            )
    return problems


# ----------------------------------------------------------------- the site
def _timings_markdown(root: Path, fidelity: str) -> str:
    """The measured-times snippet included by ``book/reproduce.md``."""
    bench = _read_json(Path(root) / "_build" / "output" / "benchmarks.json")
    lines: list[str] = []
    if not bench:
        lines.append(
            "*Not measured yet in this build.* Run `make bench` (it writes "
            "`_build/output/benchmarks.json`); the next `make book` shows the numbers here."
        )
    else:
        m = bench.get("machine", {})
        lines.append(
            f"Measured by `make bench` on {bench.get('date', '?')} "
            f"({m.get('cpus', '?')} CPU cores, {m.get('platform', '?')}, Python {m.get('python', '?')}, "
            f"JAX compilation cache {'cold' if bench.get('cold_jax_cache') else 'warm'} at the start)."
        )
        lines += ["", "| chapter | quick fidelity | full fidelity |", "|---|---:|---:|"]
        ch = bench.get("chapters", {})
        for stem in sorted(ch):
            q, f = ch[stem].get("quick"), ch[stem].get("full")
            lines.append(f"| `{stem}` | {_fmt_seconds(q)} | {_fmt_seconds(f)} |")
        lines += ["", "| step | measured | budget | within budget |", "|---|---:|---:|:---:|"]
        for row in bench.get("budgets", []):
            mark = {True: "yes", False: "**no**", None: "—"}[row.get("passed")]
            if row.get("exit"):
                mark = f"**no: the command failed (exit {row['exit']})**"
            lines.append(
                f"| {row['what']} | {_fmt_seconds(row.get('seconds'))} | "
                f"{_fmt_seconds(row.get('budget_seconds'))} | {mark} |"
            )
    # The execution times of this build are not shown: they change from build to build and
    # pages must be byte-reproducible (they are in _build/output/<fidelity>/timings.json).
    return "\n".join(lines) + "\n"


def _recover_site(target: Path) -> bool:
    """Finish or undo a site swap that was cut short; returns whether the site had to be restored."""
    old = target.with_name(target.name + ".old")
    if not target.exists() and old.is_dir():
        os.rename(old, target)  # an earlier swap was interrupted between its two renames
        return True
    if target.is_dir() and old.exists():
        _rm(old)  # the swap had finished; only the removal of the previous site was cut
    return False


def _swap_in(new: Path, target: Path) -> None:
    old = target.with_name(target.name + ".old")
    _recover_site(target)
    _rm(old)
    # no signal between the two renames (a kill -9 there is repaired by the next run)
    blocked = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        if target.exists():
            os.rename(target, old)
        os.rename(new, target)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    _rm(old)


_SITE_TMP_PREFIX = ".site-"


def _clean_site_temporaries(build: Path) -> list[Path]:
    """Remove ``_build/.site-*`` directories that no running build holds (their ``.lock``)."""
    removed = []
    if not build.is_dir():
        return removed
    for d in sorted(build.glob(_SITE_TMP_PREFIX + "*")):
        if not d.is_dir():
            continue
        lock = d / ".lock"
        if not lock.exists():
            if time.time() - d.stat().st_mtime < 60:
                continue  # just created by a build that has not taken its lock yet
            _rm(d)
            removed.append(d)
            continue
        with _locked(lock, wait=False) as free:
            if free:
                _rm(d)
                removed.append(d)
    return removed


def housekeeping(root: Path, *, log=print) -> None:
    """Repair what an interrupted or killed run left behind (every run calls this first).

    Restores a site whose swap was cut between its two renames, removes stale
    ``_build/.site-*`` temporaries, and puts back chapter outputs a killed run had set aside.
    """
    root = Path(root)
    for fidelity in FIDELITIES:
        lay = _Layout(root, fidelity)
        with _locked(lay.locks / f"site-{fidelity}.lock", wait=False) as free:
            if free and _recover_site(lay.site):
                log(f"nqf.pipeline.runner: restored {lay.site.relative_to(root)} "
                    "(a site swap had been interrupted)")
        prev_root = lay.executed / ".previous"
        stems = {p.name for p in prev_root.iterdir()} if prev_root.is_dir() else set()
        running = lay.executed / ".running"
        stems |= {p.stem for p in running.glob("*.ipynb")} if running.is_dir() else set()
        for stem in sorted(stems):
            with _locked(lay.locks / f"chapter-{fidelity}-{stem}.lock", wait=False) as free:
                if free:
                    _recover_chapter(lay, stem)
    for d in _clean_site_temporaries(root / "_build"):
        log(f"nqf.pipeline.runner: removed the stale temporary {d.relative_to(root)}")


# child processes started by this runner in their own process group (jupyter-book)
_CHILD_GROUPS: set[int] = set()


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _group_alive(pgid: int) -> bool:
    return _signal_group(pgid, 0)


def _own_children() -> list[int]:
    """PIDs whose parent is this process (Linux /proc; empty elsewhere)."""
    me, kids = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return kids
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            kids.append(int(e))
    return kids


def end_children(grace: float = 5.0) -> None:
    """End every child process of the runner with its whole process group: SIGTERM, then SIGKILL.

    The jupyter-book child and the papermill kernel each lead their own process group, so
    a signal to the runner alone would orphan them (and anything they started).
    """
    groups = set(_CHILD_GROUPS)
    mine = os.getpgrp()
    singles = set()
    for pid in _own_children():
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            continue
        if pgid == pid and pgid != mine:
            groups.add(pgid)
        else:
            singles.add(pid)
    for pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    for pid in singles:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
        time.sleep(0.05)
    for pgid in groups:
        _signal_group(pgid, signal.SIGKILL)
    for pid in singles:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in _own_children():  # reap
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _stage(root: Path, lay: _Layout, chapters: list[Path], executed: dict[str, bytes]) -> Path:
    stage = lay.stage
    _rm(stage)
    stage.mkdir(parents=True)
    shutil.copy2(root / "_config.yml", stage / "_config.yml")
    shutil.copytree(root / "book", stage / "book",
                    ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints", "__pycache__"))
    nb_dir = stage / "notebooks"
    # Non-notebook files next to the chapters (images they reference), then the executed chapters
    # (exactly the bytes whose hash was checked against the record).
    shutil.copytree(root / "notebooks", nb_dir,
                    ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__"))
    for nb in chapters:
        (nb_dir / f"{nb.stem}.ipynb").write_bytes(executed[nb.stem])
    gen = stage / "book" / "_generated"
    gen.mkdir(exist_ok=True)
    (gen / "timings.md").write_text(_timings_markdown(root, lay.fidelity), encoding="utf-8")
    return stage


def _source_date_epoch(root: Path) -> Optional[str]:
    """The commit time of HEAD (for reproducible dates in Sphinx and matplotlib), if git knows it."""
    try:
        out = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%ct"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    value = out.stdout.strip()
    return value if out.returncode == 0 and value.isdigit() else None


def build_site(root: Path, fidelity: str, chapters: list[Path], *, log=print) -> tuple[bool, str, float]:
    """Stage and build the HTML site; swap it in only on success.

    Every executed notebook is checked against the record the runner wrote with it (content hash
    and the key of the current inputs): an edited, stale or missing one is refused, never published.

    Returns:
        ``(ok, message, seconds)``.
    """
    root = Path(root)
    lay = _Layout(root, fidelity)
    t0 = time.perf_counter()
    problems = check_toc(root, chapters)
    if problems:
        return False, "\n    ".join(["toc problems:", *problems]), 0.0
    tree_hash = source_tree_hash(root)
    executed: dict[str, bytes] = {}
    refused = []
    for c in chapters:
        content, reason = verify_executed(root, c, fidelity, tree_hash=tree_hash)
        if content is None:
            refused.append(f"{c.stem}: {reason}")
        else:
            executed[c.stem] = content
    if refused:
        return False, ("not publishing chapters that were not just computed for these inputs "
                       "(run them first):\n    " + "\n    ".join(refused)), 0.0
    in_toc = set(toc_documents(root))
    for c in chapters:
        if f"notebooks/{c.stem}" not in in_toc:
            log(f"  note: notebooks/{c.stem}.ipynb is executed and checked but not listed in book/_toc.yml")

    lay.build.mkdir(parents=True, exist_ok=True)
    with _locked(lay.locks / f"site-{fidelity}.lock", log=log):
        stage = _stage(root, lay, chapters, executed)
        tmp = Path(tempfile.mkdtemp(prefix=_SITE_TMP_PREFIX, dir=lay.build))
        log_path = lay.build / "logs" / f"site-{fidelity}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable, "-c", "from jupyter_book.cli.main import main; main()",
            "build", str(stage), "--path-output", str(tmp), "--builder", "html",
            "--toc", str(stage / "book" / "_toc.yml"), "--config", str(stage / "_config.yml"),
            "--all", "--warningiserror", "--keep-going",
        ]
        env = os.environ.copy()
        epoch = _source_date_epoch(root)
        if epoch:
            env.setdefault("SOURCE_DATE_EPOCH", epoch)
        try:
            with _locked(tmp / ".lock"), open(log_path, "w", encoding="utf-8") as fh:
                # its own process group: on SIGTERM/SIGINT the runner ends the group as a whole
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=stage,
                                        start_new_session=True)
                _CHILD_GROUPS.add(proc.pid)
                try:
                    returncode = proc.wait()
                finally:
                    if proc.poll() is None:
                        end_children()
                    _CHILD_GROUPS.discard(proc.pid)
            html = tmp / "_build" / "html"
            text = log_path.read_text(encoding="utf-8", errors="replace")
            if returncode != 0 or not (html / "index.html").is_file():
                issues = [ln for ln in _strip_ansi(text).splitlines() if "WARNING" in ln or "ERROR" in ln]
                tail = issues[:40] or _strip_ansi(text).splitlines()[-25:]
                msg = (f"jupyter-book build failed (exit {returncode}); full log: "
                       f"{log_path.relative_to(root)}\n    " + "\n    ".join(tail))
                return False, msg, time.perf_counter() - t0
            _swap_in(html, lay.site)
        finally:
            _rm(tmp)
            _rm(stage)
    return True, str(lay.site.relative_to(root) / "index.html"), time.perf_counter() - t0


# --------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m nqf.pipeline.runner",
        description="Execute the book's chapter notebooks with papermill, check their claims, "
        "and optionally build the HTML site.",
    )
    p.add_argument("--fidelity", choices=FIDELITIES, default="full",
                   help="problem sizes to run at (default: full)")
    p.add_argument("--only", action="append", default=[], metavar="CHAPTER",
                   help="run only this chapter (ch01, or the notebook's name); repeatable")
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="extra papermill parameter for the selected chapters; repeatable")
    p.add_argument("--build", action="store_true",
                   help="after running every chapter, build the HTML site "
                   "(_build/html, or _build/html-quick at quick fidelity)")
    p.add_argument("--force", action="store_true", help="re-execute even if a valid cached execution exists")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failed chapter")
    p.add_argument("--list", action="store_true", help="list the chapters and their parameters, then exit")
    p.add_argument("--cell-timeout", type=positive_int, default=3600, metavar="SECONDS",
                   help="maximum time of one cell, a positive integer (default 3600)")
    p.add_argument("--root", default=None, help="repository root (default: found from the current directory)")
    return p


def _prepare_environment(root: Path) -> None:
    """Environment inherited by the kernels and the site build (only the CLI calls this)."""
    os.environ["JAX_ENABLE_X64"] = "1"
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(root / "_build" / "jax_cache"))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.25")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    pp = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(root), *([pp] if pp else [])])
    Path(os.environ["JAX_COMPILATION_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)
    epoch = _source_date_epoch(root)
    if epoch:  # reproducible dates in figure files and pages
        os.environ.setdefault("SOURCE_DATE_EPOCH", epoch)
    # The kernel is this interpreter's own, installed by `make venv` (`ipykernel install
    # --sys-prefix`); JUPYTER_PATH puts it before a user-level "python3" kernelspec, which
    # Jupyter would otherwise prefer and which may point at another environment.
    prefix_share = str(Path(sys.prefix) / "share" / "jupyter")
    jp = [d for d in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if d and d != prefix_share]
    os.environ["JUPYTER_PATH"] = os.pathsep.join([prefix_share, *jp])
    _check_kernel()


def _check_kernel() -> None:
    """Raise RunnerError unless the ``python3`` kernel Jupyter finds runs this interpreter."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        raise RunnerError(f"no Jupyter kernel {KERNEL_NAME!r} for {sys.executable}; run `make venv` "
                          f"(it runs `{sys.executable} -m ipykernel install --sys-prefix`)") from None
    exe = spec.argv[0] if spec.argv else ""
    # jupyter_client runs a bare "python"/"python3" as the interpreter that starts the kernel (this one)
    bare = {"python", f"python{sys.version_info[0]}", "python%i.%i" % sys.version_info[:2]}
    same = exe in bare or (os.path.exists(exe) and os.path.samefile(exe, sys.executable))
    if not same:
        raise RunnerError(f"the Jupyter kernel {KERNEL_NAME!r} ({spec.resource_dir}) runs {exe}, not "
                          f"{sys.executable}; run `make venv` (`ipykernel install --sys-prefix`)")


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point of ``python -m nqf.pipeline.runner``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        root = find_root(args.root)
        chapters = discover_chapters(root)
        if not chapters:
            raise RunnerError(f"no chapters: {root / 'notebooks'} holds no ch*.ipynb")
        selected = select_chapters(chapters, args.only)
        if args.build and (args.only or args.parameter):
            raise RunnerError("--build publishes every chapter at its default parameters; "
                              "drop --only/-p (or run them without --build)")
        params = dict(parse_parameter(t) for t in args.parameter)
        names = {}
        for nb_path in selected:
            try:
                names[nb_path.stem] = parameter_names(nb_path)
            except RunnerError as exc:
                raise RunnerError(f"{nb_path.stem}: {exc}") from None
            absent = [n for n in REQUIRED_PARAMETERS if n not in names[nb_path.stem]]
            if absent:
                raise RunnerError(f"{nb_path.stem}: the parameters cell must assign {', '.join(absent)}")
            unknown = [k for k in params if k not in names[nb_path.stem]]
            if unknown:
                raise RunnerError(f"{nb_path.stem} has no parameter {', '.join(unknown)}; "
                                  f"its parameters are {', '.join(names[nb_path.stem])}")
        if args.list:
            for nb_path in selected:
                print(f"{nb_path.stem}: {', '.join(names[nb_path.stem])}")
            return 0
        if args.build:
            problems = check_toc(root, chapters)
            if problems:
                raise RunnerError("\n  ".join(["book/_toc.yml:", *problems]))
    except RunnerError as exc:
        print(f"nqf.pipeline.runner: error: {exc}", file=sys.stderr)
        return 2

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in handlers:
        signal.signal(sig, _on_signal)
    try:
        return _main(args, root, chapters, selected, params)
    except Interrupted as exc:
        for sig in handlers:  # a second signal does not interrupt the clean-up
            signal.signal(sig, signal.SIG_IGN)
        end_children()
        _clean_site_temporaries(root / "_build")
        for fidelity in FIDELITIES:
            _rm(_Layout(root, fidelity).stage)
        site = _Layout(root, args.fidelity).site
        state = ("the previous site is unchanged" if site.is_dir() else "there was no site")
        print(f"\nnqf.pipeline.runner: interrupted by {exc.signame}; child processes ended, temporary "
              f"directories removed, the last good outputs kept; {state}", file=sys.stderr, flush=True)
        return 128 + exc.signum
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)


def _on_signal(signum, frame):
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


def _main(args, root: Path, chapters: list[Path], selected: list[Path], params: dict) -> int:
    try:
        _prepare_environment(root)
    except RunnerError as exc:
        print(f"nqf.pipeline.runner: error: {exc}", file=sys.stderr)
        return 2
    housekeeping(root)
    lay = _Layout(root, args.fidelity)
    tree_hash = source_tree_hash(root)
    n = len(selected)
    print(f"nqf.pipeline.runner: {n} chapter(s) at {args.fidelity} fidelity, root {root}", flush=True)
    results: list[ChapterResult] = []
    t_all = time.perf_counter()
    for i, nb_path in enumerate(selected, 1):
        print(f"[{i}/{n}] {nb_path.stem} ({args.fidelity}) ...", flush=True)
        res = run_chapter(root, nb_path, args.fidelity, params, force=args.force,
                          cell_timeout=args.cell_timeout, tree_hash=tree_hash,
                          progress_bar=sys.stdout.isatty())
        results.append(res)
        _record_timing(lay, res, params)
        if res.status == "passed":
            print(f"[{i}/{n}] {res.stem}: ok, {res.n_claims} claims hold, {_fmt_seconds(res.seconds)}", flush=True)
        elif res.status == "cached":
            print(f"[{i}/{n}] {res.stem}: up to date (cached; executed in {_fmt_seconds(res.seconds)}), "
                  f"{res.n_claims} claims hold", flush=True)
        else:
            print(f"[{i}/{n}] {res.stem}: FAILED after {_fmt_seconds(res.seconds)}", flush=True)
            if args.fail_fast:
                break
    print(f"nqf.pipeline.runner: chapters done in {_fmt_seconds(time.perf_counter() - t_all)}", flush=True)

    failed = [r for r in results if not r.ok]
    if failed:
        print(f"\nnqf.pipeline.runner: {len(failed)} chapter(s) failed at {args.fidelity} fidelity:", file=sys.stderr)
        for r in failed:
            print(f"  {r.stem}: {r.message}", file=sys.stderr)
        if args.build:
            print(f"nqf.pipeline.runner: site not built; {_site_state(lay)}", file=sys.stderr)
        return 1

    if args.build:
        print("nqf.pipeline.runner: building the site ...", flush=True)
        ok, msg, secs = build_site(root, args.fidelity, chapters)
        if not ok:
            print(f"nqf.pipeline.runner: site build FAILED; {_site_state(lay)}.\n    {msg}", file=sys.stderr)
            return 3
        _record_timing(lay, None, params, site_seconds=secs)
        print(f"nqf.pipeline.runner: site built in {_fmt_seconds(secs)}: {msg}", flush=True)
    return 0


def _site_state(lay: _Layout) -> str:
    if lay.site.is_dir():
        return "the previous site is unchanged"
    return f"there is no previous site ({lay.site.relative_to(lay.root)} does not exist)"


if __name__ == "__main__":
    sys.exit(main())
