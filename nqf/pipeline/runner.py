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
  key: hash of (the notebook, every file under ``nqf/``, ``pyproject.toml``,
  ``requirements-lock.txt``, Python version, fidelity, parameters) *and* its
  executed notebook, claims file and the files it wrote are still there,
  unchanged. ``--force`` always re-executes.
* ``--build`` (all chapters, default parameters only) then stages the site
  under ``_build/stage`` (``_config.yml``, ``book/``, executed notebooks at
  ``notebooks/``), runs ``jupyter-book build --all -W --keep-going`` into a
  temporary directory, and only if that succeeds swaps it into
  ``_build/html`` (``_build/html-quick`` at quick fidelity). A failed or
  interrupted build leaves the previous site in place.

Exit status: 0 success, 1 a chapter failed (cell error or claim), 2 usage or
configuration error, 3 the site build failed. Messages name the chapter and
the failed claims or the cell error.

Environment given to the kernels: ``JAX_ENABLE_X64=1``,
``JAX_COMPILATION_CACHE_DIR=_build/jax_cache`` (unless already set),
``PYTHONPATH`` starting with the repository root (so the repository's own
``nqf`` is the one imported and hashed).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

__all__ = [
    "FIDELITIES",
    "RunnerError",
    "ChapterResult",
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
def parameter_names(nb) -> list[str]:
    """Names assigned in the notebook's ``parameters``-tagged cell.

    Raises:
        RunnerError: if there is no such code cell or it does not parse.
    """
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1 or cells[0].cell_type != "code":
        raise RunnerError(
            f"needs exactly one code cell tagged 'parameters' (found {len(cells)})"
        )
    try:
        tree = ast.parse(cells[0].source)
    except SyntaxError as exc:
        raise RunnerError(f"the parameters cell does not parse: {exc}") from exc
    names: list[str] = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for t in targets:
            if isinstance(t, ast.Name) and t.id not in names:
                names.append(t.id)
    return names


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
    """Hash of every file under ``nqf/`` (not caches) plus the dependency pins."""
    root = Path(root)
    h = hashlib.sha256()
    files = []
    pkg = root / "nqf"
    if pkg.is_dir():
        for p in sorted(pkg.rglob("*")):
            rel = p.relative_to(root)
            if p.is_file() and "__pycache__" not in rel.parts and p.suffix not in (".pyc", ".pyo"):
                files.append(p)
    for extra in ("pyproject.toml", "requirements-lock.txt"):
        if (root / extra).is_file():
            files.append(root / extra)
    for p in files:
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(_sha256_file(p).encode() + b"\n")
    return h.hexdigest()


def cache_key(notebook: Path, tree_hash: str, fidelity: str, parameters: dict) -> str:
    payload = {
        "notebook": _sha256_file(notebook),
        "nqf": tree_hash,
        "fidelity": fidelity,
        "parameters": sorted((k, repr(v)) for k, v in parameters.items()),
        "python": sys.version,
        "kernel": KERNEL_NAME,
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
    def timings(self) -> Path:
        return self.out_dir / "timings.json"

    @property
    def site(self) -> Path:
        return self.build / ("html" if self.fidelity == "full" else f"html-{self.fidelity}")

    def claim_candidates(self, stem: str) -> list[Path]:
        names = dict.fromkeys([chapter_id(stem), stem])
        return [self.out_dir / "claims" / f"{n}.json" for n in names]

    def figure_dirs(self, stem: str) -> list[Path]:
        names = dict.fromkeys([chapter_id(stem), stem])
        return [self.out_dir / "figures" / n for n in names]


def _produced_files(out_dir: Path, since_ns: int) -> dict[str, str]:
    """Files under ``out_dir`` modified since ``since_ns`` (relative path -> sha256)."""
    out: dict[str, str] = {}
    if not out_dir.is_dir():
        return out
    for p in sorted(out_dir.rglob("*")):
        if p.is_file() and p.name != "timings.json" and p.stat().st_mtime_ns >= since_ns:
            out[p.relative_to(out_dir).as_posix()] = _sha256_file(p)
    return out


def _cached_result(lay: _Layout, stem: str, key: str) -> Optional[ChapterResult]:
    rec = _read_json(lay.records / f"{stem}.json")
    if not rec or rec.get("key") != key:
        return None
    if not (lay.executed / f"{stem}.ipynb").is_file():
        return None
    for rel, digest in rec.get("produced", {}).items():
        p = lay.out_dir / rel
        if not p.is_file() or _sha256_file(p) != digest:
            return None
    claims_rel = rec.get("claims")
    data = _read_json(lay.out_dir / claims_rel) if claims_rel else None
    if not data or data.get("passed") is not True or data.get("fidelity") != lay.fidelity:
        return None
    return ChapterResult(stem, "cached", float(rec.get("seconds", 0.0)), n_claims=data.get("n_claims", 0))


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


def run_chapter(
    root: Path,
    notebook: Path,
    fidelity: str,
    parameters: Optional[dict] = None,
    *,
    force: bool = False,
    cell_timeout: Optional[float] = None,
    tree_hash: Optional[str] = None,
    progress_bar: bool = False,
) -> ChapterResult:
    """Execute one chapter notebook (or reuse a valid cached execution) and check its claims."""
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    parameters = dict(parameters or {})
    lay = _Layout(Path(root), fidelity)
    stem = notebook.stem
    tree_hash = tree_hash or source_tree_hash(lay.root)
    key = cache_key(notebook, tree_hash, fidelity, parameters)

    if not force:
        cached = _cached_result(lay, stem, key)
        if cached is not None:
            return cached

    # Invalidate everything the previous execution of this chapter left behind.
    final_nb = lay.executed / f"{stem}.ipynb"
    failed_nb = lay.executed / "failed" / f"{stem}.ipynb"
    for p in [final_nb, failed_nb, lay.records / f"{stem}.json",
              *lay.claim_candidates(stem), *lay.figure_dirs(stem)]:
        _rm(p)
    for d in (lay.out_dir, lay.executed / ".running", lay.records):
        d.mkdir(parents=True, exist_ok=True)
    running_nb = lay.executed / ".running" / f"{stem}.ipynb"

    # relative to the notebook's directory (the kernel's cwd): no path of the build machine on the page
    injected = {"fidelity": fidelity, "out_dir": os.path.relpath(lay.out_dir, notebook.parent), **parameters}
    since_ns = time.time_ns() - 1_000_000_000
    t0 = time.perf_counter()
    error: Optional[BaseException] = None
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
            failed_nb.parent.mkdir(parents=True, exist_ok=True)
            os.replace(running_nb, failed_nb)
            message += f"\n    executed notebook: {failed_nb.relative_to(lay.root)}"
        return ChapterResult(stem, "failed", seconds, message, n_claims, failed_claims)

    if error is not None:
        ename = getattr(error, "ename", type(error).__name__)
        evalue = _strip_ansi(str(getattr(error, "evalue", error))).strip()
        if ename == "ClaimError" or failed_claims:
            lines = [_describe_claim(c) for c in failed_claims] or [evalue]
            return fail("failed claims:\n    " + "\n    ".join(lines))
        where = ""
        if getattr(error, "exec_count", None) is not None:
            where = f"cell In [{error.exec_count}] (cell index {error.cell_index}) "
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
    _drop_stderr(nb)
    tmp_nb = running_nb.with_suffix(".tmp")
    nbformat.write(nb, tmp_nb)
    os.replace(tmp_nb, final_nb)
    running_nb.unlink(missing_ok=True)

    _write_json_atomic(
        lay.records / f"{stem}.json",
        {
            "key": key,
            "seconds": seconds,
            "parameters": parameters,
            "claims": claims_path.relative_to(lay.out_dir).as_posix(),
            "produced": _produced_files(lay.out_dir, since_ns),
        },
    )
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
    this = _read_json(Path(root) / "_build" / "output" / fidelity / "timings.json")
    if this and this.get("chapters"):
        parts = [
            f"`{s}` {_fmt_seconds(v.get('seconds'))}{' (cached)' if v.get('cached') else ''}"
            for s, v in sorted(this["chapters"].items())
        ]
        lines += ["", f"Execution times of the chapters on this page's build ({fidelity} fidelity): "
                  + "; ".join(parts) + "."]
    return "\n".join(lines) + "\n"


def _recover_site(target: Path) -> None:
    old = target.with_name(target.name + ".old")
    if not target.exists() and old.is_dir():
        os.rename(old, target)  # an earlier swap was interrupted between its two renames


def _swap_in(new: Path, target: Path) -> None:
    old = target.with_name(target.name + ".old")
    _recover_site(target)
    _rm(old)
    if target.exists():
        os.rename(target, old)
    os.rename(new, target)
    _rm(old)


def _stage(root: Path, lay: _Layout, chapters: list[Path]) -> Path:
    stage = lay.build / "stage"
    _rm(stage)
    stage.mkdir(parents=True)
    shutil.copy2(root / "_config.yml", stage / "_config.yml")
    shutil.copytree(root / "book", stage / "book",
                    ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints", "__pycache__"))
    nb_dir = stage / "notebooks"
    # Non-notebook files next to the chapters (images they reference), then the executed chapters.
    shutil.copytree(root / "notebooks", nb_dir,
                    ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__"))
    for nb in chapters:
        shutil.copy2(lay.executed / f"{nb.stem}.ipynb", nb_dir / f"{nb.stem}.ipynb")
    gen = stage / "book" / "_generated"
    gen.mkdir(exist_ok=True)
    (gen / "timings.md").write_text(_timings_markdown(root, lay.fidelity), encoding="utf-8")
    return stage


def build_site(root: Path, fidelity: str, chapters: list[Path], *, log=print) -> tuple[bool, str, float]:
    """Stage and build the HTML site; swap it in only on success.

    Returns:
        ``(ok, message, seconds)``.
    """
    root = Path(root)
    lay = _Layout(root, fidelity)
    t0 = time.perf_counter()
    problems = check_toc(root, chapters)
    if problems:
        return False, "\n    ".join(["toc problems:", *problems]), 0.0
    missing = [c.stem for c in chapters if not (lay.executed / f"{c.stem}.ipynb").is_file()]
    if missing:
        return False, f"no executed notebook for {', '.join(missing)}", 0.0
    in_toc = set(toc_documents(root))
    for c in chapters:
        if f"notebooks/{c.stem}" not in in_toc:
            log(f"  note: notebooks/{c.stem}.ipynb is executed and checked but not listed in book/_toc.yml")

    stage = _stage(root, lay, chapters)
    lay.build.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".site-", dir=lay.build))
    log_path = lay.build / "logs" / f"site-{fidelity}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-c", "from jupyter_book.cli.main import main; main()",
        "build", str(stage), "--path-output", str(tmp), "--builder", "html",
        "--toc", str(stage / "book" / "_toc.yml"), "--config", str(stage / "_config.yml"),
        "--all", "--warningiserror", "--keep-going",
    ]
    try:
        with open(log_path, "w", encoding="utf-8") as fh:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=os.environ.copy(),
                                  cwd=stage)
        html = tmp / "_build" / "html"
        text = log_path.read_text(encoding="utf-8", errors="replace")
        if proc.returncode != 0 or not (html / "index.html").is_file():
            issues = [ln for ln in _strip_ansi(text).splitlines() if "WARNING" in ln or "ERROR" in ln]
            tail = issues[:40] or _strip_ansi(text).splitlines()[-25:]
            msg = (f"jupyter-book build failed (exit {proc.returncode}); full log: "
                   f"{log_path.relative_to(root)}\n    " + "\n    ".join(tail))
            return False, msg, time.perf_counter() - t0
        _swap_in(html, lay.site)
    finally:
        _rm(tmp)
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
    p.add_argument("--cell-timeout", type=float, default=3600.0, metavar="SECONDS",
                   help="maximum time of one cell (default 3600)")
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
    # Pin the kernel to this interpreter: a user-level "python3" kernelspec (which
    # Jupyter would otherwise prefer) may point at another environment.
    spec_dir = root / "_build" / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": f"Python 3 (nqf, {sys.executable})", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    jp = os.environ.get("JUPYTER_PATH", "")
    os.environ["JUPYTER_PATH"] = os.pathsep.join([str(root / "_build" / "jupyter"), *([jp] if jp else [])])


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point of ``python -m nqf.pipeline.runner``; returns the exit status."""
    import nbformat

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
            nb = nbformat.read(nb_path, as_version=4)
            try:
                names[nb_path.stem] = parameter_names(nb)
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

    _prepare_environment(root)
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
            print("nqf.pipeline.runner: site not built; the previous site is unchanged", file=sys.stderr)
        return 1

    if args.build:
        print("nqf.pipeline.runner: building the site ...", flush=True)
        ok, msg, secs = build_site(root, args.fidelity, chapters)
        if not ok:
            print(f"nqf.pipeline.runner: site build FAILED; the previous site is unchanged.\n    {msg}", file=sys.stderr)
            return 3
        _record_timing(lay, None, params, site_seconds=secs)
        print(f"nqf.pipeline.runner: site built in {_fmt_seconds(secs)}: {msg}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
