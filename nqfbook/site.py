"""The site: staging, the jupyter-book build, the swap into ``_build/html``, and repairs.

:func:`build_site` publishes only executed notebooks whose record matches the current inputs,
builds a staged copy in a temporary ``_build/.site-*`` (jupyter-book in its own process group)
and swaps it in only on success, so a failed or interrupted build leaves the previous site.
:func:`housekeeping` (the first step of every run) repairs what a killed run left behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .cache import recover_chapter, source_tree_hash, verify_executed
from .chapters import check_toc, toc_documents
from .layout import FIDELITIES, PROG, Layout, fmt_seconds, read_json, rm, strip_ansi
from .processes import CHILD_GROUPS, SKIP_IMPORTS_SOURCE, end_children, locked, source_date_epoch
from .verdicts import verdicts_markdown

#: Where the site serves the figures' data beside the chapters: ``nqfbook.kit``'s ``SITE_DATA_DIR`` (the kit
#: links it under each figure; the runner does not import the kit's private modules, a test checks the two agree).
SITE_DATA_DIR = "figure-data"


def timings_markdown(root: Path, fidelity: str) -> str:
    """The measured-times snippet included by ``book/reproduce.md``: the last measurement of
    ``make bench`` (``benchmarks/bench_book.py``), committed as ``benchmarks/book-timings.json``."""
    bench = read_json(Path(root) / "benchmarks" / "book-timings.json")
    lines: list[str] = []
    if not bench:
        lines.append(
            "*Not measured yet.* Run `make bench` (it writes `benchmarks/book-timings.json`); "
            "the next build shows the numbers here."
        )
    else:
        m = bench.get("machine", {})
        load = bench.get("load_average_before")
        commit = (bench.get("commit") or "?")[:10]
        lines.append(
            f"Last measured by `make bench` on {bench.get('date', '?')}, at commit `{commit}`, in "
            f"{bench.get('where', 'this working tree')} ({m.get('cpus', '?')} CPU cores"
            + (f", {m['cpu']}" if m.get("cpu") else "") + f", Python {m.get('python', '?')}, JAX compilation cache "
            f"{'cold' if bench.get('cold_jax_cache', True) else 'warm'} at the start"
            + (f", load average {load[0]:.1f} when it started" if load else "") + ")."
        )
        ref = (bench.get("cpu_reference") or {}).get("before") or {}
        if "numpy_seconds" in ref:
            lines += ["", f"On that machine the fixed reference kernel of `benchmarks/bench_book.py` took "
                          f"{ref['numpy_seconds']:.2f} s (numpy) and {ref['jax_scan_seconds']:.2f} s (a jitted JAX "
                          "scan): a machine that is twice as slow on it should take about twice as long below."]
        lines += ["", "Quick times are each chapter's wall time inside `make test`, which runs on two workers "
                  "(a chapter shares the two cores with another chapter or the unit tests); full times are "
                  "from `make book`, one chapter at a time.",
                  "", "| chapter | quick fidelity | full fidelity |", "|---|---:|---:|"]
        ch = bench.get("chapters", {})
        for stem in sorted(ch):
            q, f = ch[stem].get("quick"), ch[stem].get("full")
            lines.append(f"| `{stem}` | {fmt_seconds(q)} | {fmt_seconds(f)} |")
        lines += ["", "| step | measured | budget | within budget |", "|---|---:|---:|:---:|"]
        for row in bench.get("budgets", []):
            mark = {True: "yes", False: "**no**", None: "—"}[row.get("passed")]
            if row.get("exit"):
                mark = f"**no: the command failed (exit {row['exit']})**"
            lines.append(
                f"| {row['what']} | {fmt_seconds(row.get('seconds'))} | "
                f"{fmt_seconds(row.get('budget_seconds'))} | {mark} |"
            )
    flow = read_json(Path(root) / "benchmarks" / "flow-timings.json")
    lines += ["", "### The flow solver against scipy", ""]
    if not flow or not flow.get("table_markdown"):
        lines.append("*Not measured yet.* Run `make bench` (`benchmarks/bench_flow.py` writes "
                     "`benchmarks/flow-timings.json`).")
    else:
        m = flow.get("machine", {})
        lines += [
            f"Last measured by `benchmarks/bench_flow.py` on {flow.get('date', '?')} "
            f"({m.get('cpus', '?')} CPU cores, Python {m.get('python', '?')}, JAX {m.get('jax', '?')}): "
            f"`{(flow.get('settings') or {}).get('nqf_call', 'nqf.gradient_flow')}` against scipy's "
            "`solve_ivp` with a hand-written numpy right-hand side, the data built inside the timing.",
            "",
            flow["table_markdown"].strip(),
        ]
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
        rm(old)  # the swap had finished; only the removal of the previous site was cut
    return False


def _swap_in(new: Path, target: Path) -> None:
    old = target.with_name(target.name + ".old")
    _recover_site(target)
    rm(old)
    # no signal between the two renames (a kill -9 there is repaired by the next run)
    blocked = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        if target.exists():
            os.rename(target, old)
        os.rename(new, target)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    rm(old)


SITE_TMP_PREFIX = ".site-"


def clean_site_temporaries(build: Path) -> list[Path]:
    """Remove ``_build/.site-*`` directories that no running build holds (their ``.lock``)."""
    removed = []
    if not build.is_dir():
        return removed
    for d in sorted(build.glob(SITE_TMP_PREFIX + "*")):
        if not d.is_dir():
            continue
        lock = d / ".lock"
        if not lock.exists():
            if time.time() - d.stat().st_mtime < 60:
                continue  # just created by a build that has not taken its lock yet
            rm(d)
            removed.append(d)
            continue
        with locked(lock, wait=False) as free:
            if free:
                rm(d)
                removed.append(d)
    return removed


def housekeeping(root: Path, *, log=print) -> None:
    """Repair what an interrupted or killed run left behind (every run calls this first).

    Restores a site whose swap was cut between its two renames, removes stale
    ``_build/.site-*`` temporaries, and puts back chapter outputs a killed run had set aside.
    """
    root = Path(root)
    for fidelity in FIDELITIES:
        lay = Layout(root, fidelity)
        with locked(lay.locks / f"site-{fidelity}.lock", wait=False) as free:
            if free and _recover_site(lay.site):
                log(f"{PROG}: restored {lay.site.relative_to(root)} "
                    "(a site swap had been interrupted)")
        prev_root = lay.executed / ".previous"
        stems = {p.name for p in prev_root.iterdir()} if prev_root.is_dir() else set()
        running = lay.executed / ".running"
        stems |= {p.stem for p in running.glob("*.ipynb")} if running.is_dir() else set()
        for stem in sorted(stems):
            with locked(lay.locks / f"chapter-{fidelity}-{stem}.lock", wait=False) as free:
                if free:
                    recover_chapter(lay, stem)
    for d in clean_site_temporaries(root / "_build"):
        log(f"{PROG}: removed the stale temporary {d.relative_to(root)}")


#: The repository address ``_config.yml`` names until the book is published. While it is this,
#: the site is built without launch, repository, issue and edit links (:func:`published_config`).
PLACEHOLDER_REPOSITORY = "https://github.com/nqf-book/nqf"

_UNPUBLISHED_INSTALL_CELL = """\
# Colab only: this cell would install nqf from the book's repository, but the book is not
# published yet (its repository address is a placeholder). Run this notebook from a clone of
# the repository instead: `make lab` (README).
import sys

if "google.colab" in sys.modules:
    raise RuntimeError("The nqf book is not published yet: run this notebook from a clone of its "
                       "repository (make lab), not on Colab.")
"""


def is_placeholder(url: object) -> bool:
    """Whether a ``repository.url`` is the placeholder (or empty): no link may point at it."""
    return str(url or "").rstrip("/").removesuffix(".git") in ("", PLACEHOLDER_REPOSITORY)


def published_config(cfg: dict) -> dict:
    """The Jupyter Book configuration to build with: ``cfg`` unchanged unless the repository is the placeholder.

    With the placeholder address, the configuration blanks the repository, switches off the
    repository, issue and edit buttons and the Binder and Colab launch buttons (the download
    button stays: it serves a file of the site), and blanks the sentences about launch buttons
    (``parse.myst_substitutions``).
    """
    import copy

    if not is_placeholder((cfg.get("repository") or {}).get("url")):
        return cfg
    cfg = copy.deepcopy(cfg)
    # an empty address, not none: Jupyter Book's default would name its own repository
    cfg["repository"] = {**(cfg.get("repository") or {}), "url": ""}
    html = cfg.setdefault("html", {})
    for key in ("use_repository_button", "use_issues_button", "use_edit_page_button"):
        html[key] = False
    launch = cfg.setdefault("launch_buttons", {})
    for key in ("binderhub_url", "colab_url", "jupyterhub_url", "thebe"):
        launch.pop(key, None)
    subs = cfg.setdefault("parse", {}).setdefault("myst_substitutions", {})
    subs["launch_buttons"] = " (buttons to open it on Binder or Colab appear once the book is published)"
    subs["launch_where"] = ""
    return cfg


def unpublished_notebook(content: bytes) -> bytes:
    """An executed chapter whose Colab install cell says the book is not published (placeholder address)."""
    import json

    nb = json.loads(content)
    for cell in nb.get("cells", []):
        src = "".join(cell.get("source", []))
        if cell.get("cell_type") == "code" and "google.colab" in src and PLACEHOLDER_REPOSITORY in src:
            cell["source"] = _UNPUBLISHED_INSTALL_CELL.splitlines(keepends=True)
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _stage(root: Path, lay: Layout, chapters: list[Path], executed: dict[str, bytes]) -> Path:
    import yaml

    stage = lay.stage
    rm(stage)
    stage.mkdir(parents=True)
    cfg = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    published = published_config(cfg)
    unpublished = published is not cfg
    if unpublished:
        (stage / "_config.yml").write_text(yaml.safe_dump(published, sort_keys=False, allow_unicode=True),
                                           encoding="utf-8")
    else:
        shutil.copy2(root / "_config.yml", stage / "_config.yml")
    shutil.copytree(root / "book", stage / "book",
                    ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints", "__pycache__"))
    if (root / "CITATION.cff").is_file():  # book/cite.md includes it
        shutil.copy2(root / "CITATION.cff", stage / "CITATION.cff")
    nb_dir = stage / "notebooks"
    # Non-notebook files next to the chapters (images they reference), then the executed chapters
    # (exactly the bytes whose hash was checked against the record).
    shutil.copytree(root / "notebooks", nb_dir,
                    ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__"))
    for nb in chapters:
        content = executed[nb.stem]
        (nb_dir / f"{nb.stem}.ipynb").write_bytes(unpublished_notebook(content) if unpublished else content)
    # every figure's data, served beside the chapters (the line under each figure links it)
    for npz in sorted((lay.out_dir / "figures").glob("*/*.npz")):
        target = nb_dir / SITE_DATA_DIR / npz.parent.name / npz.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(npz, target)
    gen = stage / "book" / "_generated"
    gen.mkdir(exist_ok=True)
    (gen / "timings.md").write_text(timings_markdown(root, lay.fidelity), encoding="utf-8")
    (gen / "verdicts.md").write_text(verdicts_markdown(root, lay.fidelity), encoding="utf-8")
    return stage


def build_site(root: Path, fidelity: str, chapters: list[Path], *, log=print) -> tuple[bool, str, float]:
    """Stage and build the HTML site; swap it in only on success.

    Every executed notebook is checked against the record the runner wrote with it (content hash
    and the key of the current inputs): an edited, stale or missing one is refused, never published.

    Returns:
        ``(ok, message, seconds)``.
    """
    root = Path(root)
    lay = Layout(root, fidelity)
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
    with locked(lay.locks / f"site-{fidelity}.lock", log=log):
        stage = _stage(root, lay, chapters, executed)
        tmp = Path(tempfile.mkdtemp(prefix=SITE_TMP_PREFIX, dir=lay.build))
        log_path = lay.build / "logs" / f"site-{fidelity}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable, "-c", f"import sys; {SKIP_IMPORTS_SOURCE}from jupyter_book.cli.main import main; main()",
            "build", str(stage), "--path-output", str(tmp), "--builder", "html",
            "--toc", str(stage / "book" / "_toc.yml"), "--config", str(stage / "_config.yml"),
            "--all", "--warningiserror", "--keep-going",
        ]
        env = os.environ.copy()
        epoch = source_date_epoch(root)
        if epoch:
            env.setdefault("SOURCE_DATE_EPOCH", epoch)
        try:
            with locked(tmp / ".lock"), open(log_path, "w", encoding="utf-8") as fh:
                # its own process group: on SIGTERM/SIGINT the runner ends the group as a whole
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=stage,
                                        start_new_session=True)
                CHILD_GROUPS.add(proc.pid)
                try:
                    returncode = proc.wait()
                finally:
                    if proc.poll() is None:
                        end_children()
                    CHILD_GROUPS.discard(proc.pid)
            html = tmp / "_build" / "html"
            text = log_path.read_text(encoding="utf-8", errors="replace")
            if returncode != 0 or not (html / "index.html").is_file():
                issues = [ln for ln in strip_ansi(text).splitlines() if "WARNING" in ln or "ERROR" in ln]
                tail = issues[:40] or strip_ansi(text).splitlines()[-25:]
                msg = (f"jupyter-book build failed (exit {returncode}); full log: "
                       f"{log_path.relative_to(root)}\n    " + "\n    ".join(tail))
                return False, msg, time.perf_counter() - t0
            _swap_in(html, lay.site)
        finally:
            rm(tmp)
            rm(stage)
    return True, str(lay.site.relative_to(root) / "index.html"), time.perf_counter() - t0
