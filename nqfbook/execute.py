"""Executing one chapter with papermill and checking its claims.

:func:`run_chapter` reuses a valid cached execution, or sets the chapter's last good outputs
aside, runs the notebook in a fresh kernel (``_build/executed/{fidelity}/.running/``), reads
its claims file, and keeps the normalised notebook with a record of its inputs only if every
claim holds; otherwise the last good outputs come back and the message names the chapter, the
failed claims, or the failed cell by its index in the source notebook.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from .cache import cache_key, cached_result, produced_files, put_back, recover_chapter, set_aside, source_tree_hash
from .layout import (FIDELITIES, KERNEL_NAME, ChapterResult, Layout, chapter_id, fmt_seconds, move, read_json, rm,
                     strip_ansi, write_bytes_atomic, write_json_atomic)
from .normalise import hide_injected_parameters, normalise_executed
from .processes import kernel_manager_class, locked


def _describe_claim(c: dict) -> str:
    """One line for a failed claim: its kind, name, the measured value and what was required.

    Claims files record the comparison as ``test`` and the kind (paper, finding, sanity) as
    ``kind``; files written before claims had kinds held the comparison in ``kind``.
    """
    test = c.get("test", c.get("kind"))
    if test == "close":
        tols = ", ".join(f"{k} {c[k]:.3g}" for k in ("rtol", "atol") if c.get(k) is not None)
        req = f"≈ {c.get('predicted')} ({tols})"
    elif test == "less":
        req = f"< {c.get('hi')}"
    elif test == "greater":
        req = f"> {c.get('lo')}"
    else:
        req = f"in [{c.get('lo')}, {c.get('hi')}]"
    kind = f"{c['kind']} " if "test" in c and c.get("kind") else ""
    return f"{kind}claim {c.get('name')!r}: measured {c.get('measured')}, required {req}"


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
    sources: Optional[dict] = None,
) -> ChapterResult:
    """Execute one chapter notebook (or reuse a valid cached execution) and check its claims.

    ``sources`` maps a parameter that names an import path (``-p model=...``) to its module's file: that
    file's content is part of the cache key (an edited module re-executes the chapter).

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
    lay = Layout(Path(root), fidelity)
    with locked(lay.locks / f"chapter-{fidelity}-{notebook.stem}.lock", log=log):
        recover_chapter(lay, notebook.stem)
        return _run_chapter_locked(lay, notebook, fidelity, dict(parameters or {}), force=force,
                                   cell_timeout=cell_timeout, tree_hash=tree_hash, progress_bar=progress_bar,
                                   sources=sources, log=log)


def _run_chapter_locked(lay: Layout, notebook: Path, fidelity: str, parameters: dict, *, force: bool,
                        cell_timeout: Optional[int], tree_hash: Optional[str],
                        progress_bar: bool, sources: Optional[dict] = None, log=print) -> ChapterResult:
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    stem = notebook.stem
    tree_hash = tree_hash or source_tree_hash(lay.root)
    key = cache_key(notebook, tree_hash, fidelity, parameters, sources=sources)

    if not force:
        cached = cached_result(lay, stem, key)
        if cached is not None:
            return cached

    final_nb, failed_nb, running_nb = lay.executed_nb(stem), lay.failed_nb(stem), lay.running_nb(stem)
    rm(failed_nb)
    rm(lay.failed_outputs(stem))
    set_aside(lay, stem)
    for d in (lay.out_dir, running_nb.parent, lay.records):
        d.mkdir(parents=True, exist_ok=True)

    # relative to the notebook's directory (the kernel's cwd): no path of the build machine on the page
    injected = {"fidelity": fidelity, "out_dir": os.path.relpath(lay.out_dir, notebook.parent), **parameters}
    since_ns = time.time_ns() - 1_000_000_000
    t0 = time.perf_counter()
    error: Optional[BaseException] = None
    try:
        try:
            with _progress_lines(running_nb, stem, log if not progress_bar else None):
                papermill.execute_notebook(
                    str(notebook),
                    str(running_nb),
                    parameters=injected,
                    kernel_name=KERNEL_NAME,
                    kernel_manager_class=kernel_manager_class(),
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
        claims = read_json(claims_path) if claims_path else None
        failed_claims = [c for c in (claims or {}).get("claims", []) if not c.get("passed")]
        n_claims = int((claims or {}).get("n_claims", 0))

        def fail(message: str) -> ChapterResult:
            if running_nb.exists():
                move(running_nb, failed_nb)
                message += f"\n    executed notebook: {failed_nb.relative_to(lay.root)}"
            if put_back(lay, stem):
                message += "\n    the last good outputs of this chapter are kept (it re-executes next time)"
            if lay.failed_outputs(stem).exists():
                message += f"\n    outputs of this run: {lay.failed_outputs(stem).relative_to(lay.root)}/"
            return ChapterResult(stem, "failed", seconds, message, n_claims, failed_claims)

        if error is not None:
            ename = getattr(error, "ename", type(error).__name__)
            evalue = strip_ansi(str(getattr(error, "evalue", error))).strip()
            if ename == "ClaimError" or failed_claims:
                lines = [_describe_claim(c) for c in failed_claims] or [evalue]
                return fail("failed claims:\n    " + "\n    ".join(lines))
            where = _source_cell(notebook, running_nb, getattr(error, "cell_index", None))
            tb = getattr(error, "traceback", None) or []
            tail = strip_ansi("\n".join(tb)).strip().splitlines()[-12:]
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
        hide_injected_parameters(nb)
        normalise_executed(nb, {c.get("id") for c in nbformat.read(notebook, as_version=4).cells})
        content = nbformat.writes(nb).encode("utf-8")
        produced = produced_files(lay.out_dir, since_ns)
        write_bytes_atomic(final_nb, content)
        write_json_atomic(
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
            move(running_nb, failed_nb)
        put_back(lay, stem)
        raise
    running_nb.unlink(missing_ok=True)
    rm(lay.previous(stem))
    return ChapterResult(stem, "passed", seconds, n_claims=n_claims)


#: Seconds between two progress lines of a chapter still running (no progress bar: not a terminal).
PROGRESS_EVERY = 30.0


@contextlib.contextmanager
def _progress_lines(running_nb: Path, stem: str, log, every: float = PROGRESS_EVERY):
    """While the block runs, print ``    ch06: 1.0 min, cell 14 of 31`` every ``every`` seconds (``log``
    None: nothing), read from the notebook papermill saves after each cell."""
    if log is None:
        yield
        return
    done, t0 = threading.Event(), time.perf_counter()

    def report() -> None:
        while not done.wait(every):
            log(f"    {chapter_id(stem)}: {fmt_seconds(time.perf_counter() - t0)}{_cells_done(running_nb)}")
            sys.stdout.flush()

    thread = threading.Thread(target=report, name=f"progress-{stem}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _cells_done(running_nb: Path) -> str:
    """``", cell 14 of 31"`` from the saved running notebook (papermill's own cell metadata), or ``""``."""
    import nbformat

    try:
        cells = [c for c in nbformat.read(running_nb, as_version=4).cells if c.get("cell_type") == "code"]
    except Exception:  # not written yet, or caught mid-write
        return ""
    status = [c.get("metadata", {}).get("papermill", {}).get("status") for c in cells]
    running = next((i for i, st in enumerate(status) if st == "running"), None)
    return f", cell {running + 1} of {len(cells)}" if running is not None else ""


def chapter_summary(lay: Layout, stem: str) -> str:
    """``"52 claims hold (18 paper, 12 finding, 22 sanity); verdicts: 40 holds, 1 against, 5 depends on X, 6 too few
    runs"``
    from the chapter's claims file (``""`` if it has none)."""
    path = next((p for p in lay.claim_candidates(stem) if p.is_file()), None)
    data = read_json(path) if path else None
    if not data:
        return ""
    kinds = ", ".join(f"{data[f'n_{k}']} {k}" for k in ("paper", "finding", "sanity") if data.get(f"n_{k}"))
    text = f"{data.get('n_claims', 0)} claims hold" + (f" ({kinds})" if kinds else "")
    # the four kinds (holds, against, depends on X, too few runs) where the claims file has them
    counts = {k: v for k, v in (data.get("verdict_kinds") or data.get("verdict_counts") or {}).items() if v}
    if counts:
        text += "; verdicts: " + ", ".join(f"{v} {k}" for k, v in counts.items())
    return text


def record_timing(lay: Layout, result: Optional[ChapterResult], parameters: dict,
                  site_seconds: Optional[float] = None) -> None:
    """Add a chapter's wall time (or the site build's) to ``_build/output/{fidelity}/timings.json``.

    Chapters run in parallel (``make test`` runs them on two workers) each add their entry, so the
    read-modify-write holds a lock: no entry is lost.
    """
    with locked(lay.locks / f"timings-{lay.fidelity}.lock"):
        _record_timing_locked(lay, result, parameters, site_seconds)


def _record_timing_locked(lay: Layout, result: Optional[ChapterResult], parameters: dict,
                          site_seconds: Optional[float]) -> None:
    data = read_json(lay.timings) or {}
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
            # JAX's compilations in the chapter's kernel (nqfbook.kit.start_chapter counts them)
            "compilations": read_json(lay.out_dir / "claims" / f"{result.stem.split('_')[0]}.compilations.json"),
        }
        data["chapters"] = dict(sorted(data["chapters"].items()))
    if site_seconds is not None:
        data["site_build_seconds"] = round(site_seconds, 3)
    write_json_atomic(lay.timings, data)
