"""Where a chapter's time goes: its cells' wall times and JAX's compilations per jitted function.

    .venv/bin/python benchmarks/compile_profile.py ch08 [--fidelity quick] [--top 25] [--json out.json]

Runs the chapter's code cells in this process (as papermill would, with ``fidelity`` and an
``out_dir`` under a temporary directory injected after the parameters cell), with a listener on
JAX's compile events, and prints the cells by wall time and the jitted functions by XLA compile
seconds (count, lowering and backend seconds). Use a cold cache (``JAX_COMPILATION_CACHE_DIR``
unset, the default here) and nothing else running: compile times double under contention. A
profiling aid for issue 31, not a benchmark record.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapter", help="chapter id or stem, e.g. ch08")
    ap.add_argument("--fidelity", default="quick", choices=("quick", "full"))
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json", type=Path, default=None, help="write the profile here")
    ap.add_argument("--by-cell", action="store_true", help="also list each cell's compiled functions")
    ap.add_argument("--twice", action="store_true",
                    help="run the cells a second time in the same process and profile that pass (compiled programs "
                         "in memory: what is left is execution and Python)")
    args = ap.parse_args()

    import nbformat

    paths = sorted((ROOT / "notebooks").glob(f"{args.chapter}*.ipynb"))
    if len(paths) != 1:
        sys.exit(f"compile_profile: {args.chapter!r} names {len(paths)} chapters, expected 1")
    nb = nbformat.read(paths[0], as_version=4)

    os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)  # before jax is imported: a cold cache
    import jax

    from nqfbook.kit._chapter import _BACKEND, _LOWERING  # the events of the runner's compile counter

    jax.config.update("jax_enable_x64", True)
    per_fun: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    events: list[tuple[str, float]] = []  # (function, backend seconds) in order

    def listener(event: str, duration: float, fun_name: str = "?", **_) -> None:
        if event == _LOWERING:
            per_fun[fun_name][0] += 1
            per_fun[fun_name][1] += duration
        elif event == _BACKEND:
            per_fun[fun_name][2] += duration
            events.append((fun_name, duration))

    jax.monitoring.register_event_duration_secs_listener(listener)
    os.chdir(ROOT / "notebooks")
    sys.path.insert(0, str(ROOT / "notebooks"))
    import matplotlib

    matplotlib.use("Agg")
    cells = []
    with tempfile.TemporaryDirectory() as tmp:
        ns: dict = {"__name__": "__main__"}
        t_all = time.perf_counter()
        for i, cell in enumerate(nb.cells * (2 if args.twice else 1)):
            if args.twice and i == len(nb.cells):
                cells, t_all = [], time.perf_counter()
                per_fun.clear()
            i %= len(nb.cells)
            if cell.cell_type != "code":
                continue
            src = cell.source
            if "parameters" in cell.metadata.get("tags", []):
                src += f"\nfidelity = {args.fidelity!r}\nout_dir = {str(Path(tmp) / args.fidelity)!r}\n"
            before, n_events = {k: v[2] for k, v in per_fun.items()}, len(events)
            t0, c0 = time.perf_counter(), time.process_time()
            exec(compile(src, f"<cell {i}>", "exec"), ns)
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            comp = sum(v[2] - before.get(k, 0.0) for k, v in per_fun.items())
            first = next((line for line in src.splitlines() if line.strip()), "")
            cells.append({"cell": i, "seconds": round(dt, 2), "cpu_seconds": round(cpu, 2), "backend_compile_seconds": round(comp, 2),
                          "first_line": first[:90], "compiles": events[n_events:]})
        total = time.perf_counter() - t_all
    funs = sorted(({"fun": k, "count": v[0], "lowering_seconds": round(v[1], 2), "backend_seconds": round(v[2], 2)}
                   for k, v in per_fun.items()), key=lambda r: -r["backend_seconds"])
    print(f"{paths[0].stem} at {args.fidelity}: {total:.1f} s, {sum(r['count'] for r in funs)} lowerings, "
          f"{sum(r['backend_seconds'] for r in funs):.1f} s XLA compile, load {os.getloadavg()[0]:.2f}")
    print("\ncells by wall time (s; CPU s of the process; s of XLA compile):")
    for c in sorted(cells, key=lambda c: -c["seconds"])[: args.top]:
        print(f"  [{c['cell']:3d}] {c['seconds']:7.2f} {c['cpu_seconds']:7.2f} {c['backend_compile_seconds']:7.2f}  {c['first_line']}")
        if args.by_cell:
            for fun, secs in sorted(c["compiles"], key=lambda e: -e[1])[: args.top]:
                if secs >= 0.05:
                    print(f"          {secs:7.2f}  {fun}")
    print("\njitted functions by XLA compile seconds (count, lowering s, backend s):")
    for r in funs[: args.top]:
        print(f"  {r['count']:4d} {r['lowering_seconds']:7.2f} {r['backend_seconds']:7.2f}  {r['fun']}")
    if args.json:
        args.json.write_text(json.dumps({"chapter": paths[0].stem, "fidelity": args.fidelity, "seconds": total,
                                         "cells": cells, "functions": funs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
