"""Measure the book's cost against its budgets (BOOK.md), and record it.

    .venv/bin/python benchmarks/bench_book.py [--warm] [--skip-test] [--skip-book] [--no-refresh]

Steps (each timed with a wall clock, on whatever machine runs it):

1. unless ``--warm``, empty the persistent JAX compilation cache
   (``_build/jax_cache``), so the numbers include compilation as on a fresh clone;
2. ``make test`` (unit tests + every chapter at quick fidelity, re-executed);
   the per-chapter quick times come from ``_build/output/quick/timings.json``,
   which that run writes (with ``--skip-test``, the runner is called at quick
   fidelity instead);
3. ``make book RUNNER_FLAGS=--force`` (every chapter re-executed at full
   fidelity, then the site build); per-chapter full times from
   ``_build/output/full/timings.json``;
4. writes ``_build/output/benchmarks.json`` and prints a table against the
   budgets: every chapter at quick fidelity < 60 s, ``make test`` < 15 min,
   ``make book`` < 20 min;
5. unless ``--no-refresh``, rebuilds the site (chapters are reused from step 3)
   so that the "Reproduce it yourself" page shows these numbers.

Creating the virtual environment (``make venv``) is not timed: it is bound by
the network, not by the book. This script measures; it asserts nothing and
exits 0 even when a budget is exceeded (it exits 1 only if a command failed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "output"
PY = sys.executable

QUICK_CHAPTER_BUDGET = 60.0
MAKE_TEST_BUDGET = 15 * 60.0
MAKE_BOOK_BUDGET = 20 * 60.0


def timed(cmd: list[str], label: str) -> tuple[float, int]:
    print(f"\n=== {label}: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    rc = subprocess.call(cmd, cwd=ROOT)
    secs = time.perf_counter() - t0
    print(f"=== {label}: exit {rc} after {secs:.1f} s", flush=True)
    return secs, rc


def chapter_times(fidelity: str) -> dict[str, float]:
    path = OUT / fidelity / "timings.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        stem: float(v["seconds"])
        for stem, v in data.get("chapters", {}).items()
        if v.get("status") == "passed" and not v.get("cached") and not v.get("parameters")
    }


def fmt(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", action="store_true", help="keep the JAX compilation cache")
    ap.add_argument("--skip-test", action="store_true", help="do not time `make test`")
    ap.add_argument("--skip-book", action="store_true", help="do not time `make book`")
    ap.add_argument("--no-refresh", action="store_true", help="do not rebuild the site afterwards")
    args = ap.parse_args(argv)

    cache = ROOT / "_build" / "jax_cache"
    if not args.warm and cache.exists():
        shutil.rmtree(cache)
        print(f"emptied {cache.relative_to(ROOT)} (cold start)")

    results: dict[str, dict] = {}
    failed_commands = []
    for fid in ("quick", "full"):  # stale timings of earlier runs must not be reported
        (OUT / fid / "timings.json").unlink(missing_ok=True)

    if args.skip_test:
        secs, rc = timed([PY, "-m", "nqfbook", "--fidelity", "quick", "--force"], "chapters at quick fidelity")
    else:
        secs, rc = timed(["make", "test"], "make test")
        results["make test"] = {"seconds": secs, "exit": rc}
    if rc:
        failed_commands.append("make test" if not args.skip_test else "runner --fidelity quick")

    if not args.skip_book:
        secs, rc = timed(["make", "book", "RUNNER_FLAGS=--force"], "make book")
        results["make book"] = {"seconds": secs, "exit": rc}
        if rc:
            failed_commands.append("make book")

    quick, full = chapter_times("quick"), chapter_times("full")
    full_timings = OUT / "full" / "timings.json"
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

    try:
        jax_version = metadata.version("jax")
    except metadata.PackageNotFoundError:  # pragma: no cover
        jax_version = "?"
    record = {
        "date": dt.date.today().isoformat(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "jax": jax_version},
        "cold_jax_cache": not args.warm,
        "chapters": {s: {"quick": quick.get(s), "full": full.get(s)} for s in sorted(set(quick) | set(full))},
        "commands": results,
        "site_build_seconds": site_secs,
        "budgets": budgets,
        "failed_commands": failed_commands,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = OUT / ".benchmarks.json.tmp"
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, OUT / "benchmarks.json")

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
    print(f"\nwrote {(OUT / 'benchmarks.json').relative_to(ROOT)}")

    if not args.no_refresh and not args.skip_book and "make book" not in failed_commands:
        timed([PY, "-m", "nqfbook", "--fidelity", "full", "--build"], "refresh the site with these numbers")
    if failed_commands:
        print(f"failed: {', '.join(failed_commands)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
