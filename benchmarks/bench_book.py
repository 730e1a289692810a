"""Measure the book's cost against its budgets (BOOK.md) on a fresh clone, and record it.

    .venv/bin/python benchmarks/bench_book.py [--here] [--warm] [--keep] [--skip-test] [--skip-book]

What a new reader pays, measured as CI does it:

1. ``git clone`` of this repository's ``HEAD`` into a temporary folder (unless ``--here``, which
   measures this working tree), and ``make venv`` there (timed apart: it is bound by pip, not by
   the book); the clone starts with an empty JAX compilation cache (``--here`` empties this
   tree's ``_build/jax_cache`` unless ``--warm``);
2. ``make test`` (unit tests + every chapter at quick fidelity, re-executed); the per-chapter quick
   times come from the ``_build/output/quick/timings.json`` that run writes;
3. ``make book RUNNER_FLAGS=--force`` (every chapter at full fidelity, then the site build); the
   per-chapter full times from ``_build/output/full/timings.json``;
4. writes ``benchmarks/book-timings.json`` (commit it: the "Reproduce it yourself" page renders the
   last measurement from it, with its date, commit and the machine's load) and prints a table
   against the budgets of BOOK.md: every chapter at quick fidelity < 45 s, ``make test`` < 10 min,
   ``make book`` < 15 min, on 2 cores;
5. times a fixed CPU reference kernel (a numpy matrix product and a jitted JAX ``lax.scan``, the
   same work on every machine) before and after the runs, so that records of different machines
   compare: a machine twice as slow on the kernel is expected to be about twice as slow on the book.

This script measures; it asserts nothing and exits 0 even when a budget is exceeded (it exits 1
only if a command failed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "book-timings.json"

# BOOK.md's budgets (2-core CPU).
QUICK_CHAPTER_BUDGET = 45.0
MAKE_TEST_BUDGET = 10 * 60.0
MAKE_BOOK_BUDGET = 15 * 60.0


def timed(cmd: list[str], label: str, where: Path) -> tuple[float, int, float]:
    """Run ``cmd`` in ``where``: its wall seconds, exit code and CPU seconds (user + system of every
    process it waited for; CPU / (wall x cores) is how busy it kept the machine)."""
    print(f"\n=== {label}: {' '.join(cmd)}  (in {where})", flush=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "PYTEST_", "VIRTUAL_ENV"))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.call(cmd, cwd=where, env=env)
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"=== {label}: exit {rc} after {secs:.1f} s, {cpu:.0f} CPU s "
          f"(load average {os.getloadavg()[0]:.1f})", flush=True)
    return secs, rc, cpu


def chapter_times(out: Path, fidelity: str) -> dict[str, float]:
    path = out / fidelity / "timings.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        stem: float(v["seconds"])
        for stem, v in data.get("chapters", {}).items()
        if v.get("status") == "passed" and not v.get("cached") and not v.get("parameters")
    }


def chapter_compilations(out: Path, fidelity: str) -> dict[str, dict]:
    """Per chapter run (passed, not cached): JAX's compilations in its kernel (from the runner's timings)."""
    path = out / fidelity / "timings.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {stem: v["compilations"] for stem, v in data.get("chapters", {}).items()
            if v.get("status") == "passed" and not v.get("cached") and v.get("compilations")}


_REFERENCE = r"""
import time, numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
a = np.random.default_rng(0).standard_normal((600, 600))
t0 = time.perf_counter()
for _ in range(20):
    a = np.tanh(a @ a.T / 600.0)
t_np = time.perf_counter() - t0
@jax.jit
def run(x):
    return jax.lax.scan(lambda c, _: (jnp.tanh(c @ c.T / 200.0), None), x, None, length=2000)[0]
x = jnp.asarray(np.random.default_rng(1).standard_normal((200, 200)))
run(x).block_until_ready()
t0 = time.perf_counter()
run(x).block_until_ready()
t_jax = time.perf_counter() - t0
print(f"{t_np:.6f} {t_jax:.6f}")
"""


def cpu_reference(python: Path) -> dict:
    """The fixed reference kernel, timed in a fresh process: numpy (20 products 600x600, float64) and a
    jitted JAX ``lax.scan`` (2000 products 200x200, float64, compile excluded), best of 3."""
    best = [float("inf"), float("inf")]
    for _ in range(3):
        out = subprocess.run([str(python), "-c", _REFERENCE], capture_output=True, text=True)
        if out.returncode:
            return {"error": out.stderr.strip().splitlines()[-1:] or ["?"]}
        vals = [float(v) for v in out.stdout.split()]
        best = [min(b, v) for b, v in zip(best, vals)]
    return {"numpy_seconds": round(best[0], 4), "jax_scan_seconds": round(best[1], 4),
            "load_average": round(os.getloadavg()[0], 2)}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def fmt(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--here", action="store_true", help="measure this working tree, not a fresh clone")
    ap.add_argument("--keep", action="store_true", help="keep the fresh clone afterwards (e.g. to run make check-site in it)")
    ap.add_argument("--warm", action="store_true", help="with --here: keep the JAX compilation cache")
    ap.add_argument("--skip-test", action="store_true", help="do not time `make test`")
    ap.add_argument("--skip-book", action="store_true", help="do not time `make book`")
    args = ap.parse_args(argv)

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    results: dict[str, dict] = {}
    failed_commands = []
    load_before = os.getloadavg()
    scratch = None
    if args.here:
        where = ROOT
        cache = ROOT / "_build" / "jax_cache"
        if not args.warm and cache.exists():
            shutil.rmtree(cache)
            print(f"emptied {cache.relative_to(ROOT)} (cold start)")
    else:
        if dirty:
            print("note: the working tree has uncommitted changes; the clone measures HEAD without them")
        scratch = Path(tempfile.mkdtemp(prefix="nqf-bench-"))
        where = scratch / "nqf"
        subprocess.check_call(["git", "clone", "-q", str(ROOT), str(where)])
        secs, rc, cpu = timed(["make", "venv"], "make venv (not a budget)", where)
        results["make venv"] = {"seconds": secs, "exit": rc, "cpu_seconds": round(cpu, 1)}
        if rc:
            print("make venv failed in the clone", file=sys.stderr)
            return 1
    python = where / ".venv" / "bin" / "python"
    reference_before = cpu_reference(python)
    print(f"CPU reference kernel before the runs: {reference_before}", flush=True)
    out = where / "_build" / "output"
    for fid in ("quick", "full"):  # stale timings of earlier runs must not be reported
        (out / fid / "timings.json").unlink(missing_ok=True)

    if args.skip_test:
        secs, rc, cpu = timed([str(where / ".venv" / "bin" / "python"), "-m", "nqfbook", "--fidelity", "quick",
                          "--force"], "chapters at quick fidelity", where)
    else:
        secs, rc, cpu = timed(["make", "test"], "make test", where)
        results["make test"] = {"seconds": secs, "exit": rc, "cpu_seconds": round(cpu, 1)}
    if rc:
        failed_commands.append("make test" if not args.skip_test else "runner --fidelity quick")

    if not args.skip_book:
        secs, rc, cpu = timed(["make", "book", "RUNNER_FLAGS=--force"], "make book", where)
        results["make book"] = {"seconds": secs, "exit": rc, "cpu_seconds": round(cpu, 1)}
        if rc:
            failed_commands.append("make book")

    reference_after = cpu_reference(python)
    print(f"CPU reference kernel after the runs: {reference_after}", flush=True)
    quick, full = chapter_times(out, "quick"), chapter_times(out, "full")
    full_timings = out / "full" / "timings.json"
    site_secs = None
    if full_timings.is_file():
        site_secs = json.loads(full_timings.read_text()).get("site_build_seconds")

    budgets = []
    for stem in sorted(set(quick) | set(full)):
        q = quick.get(stem)
        budgets.append({
            "what": f"`{stem}` at quick fidelity",
            "seconds": q,
            "budget_seconds": QUICK_CHAPTER_BUDGET,
            "passed": None if q is None else q < QUICK_CHAPTER_BUDGET,
        })
    for what, budget in (("make test", MAKE_TEST_BUDGET), ("make book", MAKE_BOOK_BUDGET)):
        r = results.get(what)
        ok = None if r is None else (r["exit"] == 0 and r["seconds"] < budget)
        budgets.append({"what": f"`{what}`", "seconds": None if r is None else r["seconds"],
                        "budget_seconds": budget, "passed": ok,
                        "exit": None if r is None else r["exit"]})

    from nqfbook.processes import xla_flags  # what the runner sets for each fidelity (and conftest for the tests)

    try:
        jax_version = metadata.version("jax")
    except metadata.PackageNotFoundError:  # pragma: no cover
        jax_version = "?"
    record = {
        "date": dt.date.today().isoformat(),
        "commit": commit,
        "where": "this working tree" if args.here else "a fresh clone of HEAD",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "machine": {"cpus": os.cpu_count(), "cpu": cpu_model(), "system": platform.system(),
                    "python": platform.python_version(), "jax": jax_version},
        "cpu_reference": {"before": reference_before, "after": reference_after},
        "cold_jax_cache": not (args.here and args.warm),
        "xla_flags": {fid: xla_flags(fid, os.environ.get("XLA_FLAGS", "")) for fid in ("quick", "full")},
        "chapters": {s: {"quick": quick.get(s), "full": full.get(s)} for s in sorted(set(quick) | set(full))},
        "compilations": {fid: chapter_compilations(out, fid) for fid in ("quick", "full")},
        "commands": results,
        "site_build_seconds": site_secs,
        "budgets": budgets,
        "failed_commands": failed_commands,
    }
    tmp = RECORD.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, RECORD)

    print("\nchapter                                  quick        full")
    for stem, v in record["chapters"].items():
        print(f"  {stem:<38} {fmt(v['quick']):>9}  {fmt(v['full']):>9}")
    if site_secs is not None:
        print(f"  {'site build (full)':<38} {'':>9}  {fmt(site_secs):>9}")
    print("\nbudget                                              measured     budget   result")
    for b in budgets:
        mark = {True: "PASS", False: "FAIL", None: "not measured"}[b["passed"]]
        if b.get("exit"):
            mark += f" (command failed, exit {b['exit']})"
        print(f"  {b['what']:<48} {fmt(b['seconds']):>9}  {fmt(b['budget_seconds']):>9}   {mark}")
    print(f"\nwrote {RECORD.relative_to(ROOT)} (commit it: the reproduce page renders it)")
    if scratch is not None and not failed_commands and not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    elif scratch is not None:
        print(f"the clone is kept for inspection: {where}")
    if failed_commands:
        print(f"failed: {', '.join(failed_commands)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
