"""nqf's flow solver against scipy's ``solve_ivp`` (DOP853, hand-written numpy right-hand side).

    .venv/bin/python benchmarks/bench_flow.py [--quick] [--no-cold]

What a user pays (issue 21): the README's call with default options,
``nqf.gradient_flow(M0, nqf.NQFData(As, ys), ts)`` (default options: ``rtol=1e-10``), the data built inside the timing,
against ``solve_ivp(..., method="DOP853", rtol=1e-10, atol=1e-14)``; random non-commuting symmetric A
(Thm 7 fails, no closed form), realisable targets, 51 save times over t in [0, 5].

1. single solves, m in {16, 256, 4096, 65536}, p in {8, 32}: warm time of the default call and of
   scipy at the same rtol, interleaved, ratio scipy/nqf, and the error of each against a tight reference
   (nqf's Dopri8 at rtol 1e-13). Then the ratio at equal accuracy: the more accurate of the two at
   rtol 1e-10 stays, the other's rtol is tightened (3e-11 ... 3e-13) until its error is at most the
   first one's (scipy only where one of its solves takes under 3 s). Beside it, the profile of the
   default call: building ``NQFData``, the solve on prebuilt data (the "tuned" figure: data outside the
   timing), the steps and the time per step, and the other path (statistics vs samples) timed too,
   where it costs under about 5 s, to check the cost model; the load average at each row;
2. a sweep of 64 initial conditions sharing one dataset (m = 256, p = 8): one default call with
   ``M0`` of shape (64, p, p) against scipy's loop;
3. the singular-limit sweep of chapter 5 (Thm 6 data, eps = 1e-2 ... 1e-40, 20 values, rescaled
   time) against a scipy loop over eps solving the same equation (without the switch-on bisection,
   which nqf does on top);
4. cold starts in fresh processes: first default call with an empty persistent compilation cache,
   and again with the cache warm, each with nqf's export cache on and off (``NQF_EXPORT_CACHE=0``),
   three repeats, medians and the load average (import time reported apart).

Results go to ``benchmarks/flow-timings.json`` (commit it), with a markdown table
(``table_markdown``) that the reproduce page renders. Measures; asserts nothing.
Times are wall times on a possibly shared machine: compare the ratios of side-by-side runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "flow-timings.json"
CACHE = ROOT / "_build" / "jax_cache"
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
from scipy.integrate import solve_ivp  # noqa: E402

sys.path.insert(0, str(ROOT))
import nqf  # noqa: E402
from nqf import flow, solutions  # noqa: E402

RTOL, ATOL = 1e-10, 1e-14
TS = np.linspace(0.0, 5.0, 51)


def problem(m, p, seed=0):
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(m, p, p))
    As = (G + G.transpose(0, 2, 1)) / (2 * np.sqrt(p))
    W = rng.normal(size=(p, p)) / np.sqrt(p)
    return As, np.einsum("ij,mij->m", W @ W.T, As), 0.1 * np.eye(p)


def scipy_flow(As, ys, M0, ts, rtol=RTOL, atol=ATOL):
    """Eq. (28) with a hand-written numpy right-hand side (two BLAS matrix-vector products)."""
    m, p, _ = As.shape
    A2 = As.reshape(m, p * p)

    def rhs(t, y):
        M = y.reshape(p, p)
        H = (4.0 / m * ((A2 @ y - ys) @ A2)).reshape(p, p)
        return (-(H @ M + M @ H)).ravel()

    s = solve_ivp(rhs, (ts[0], ts[-1]), M0.ravel(), method="DOP853", t_eval=ts, rtol=rtol, atol=atol)
    assert s.success, s.message
    return s.y.T.reshape(len(ts), p, p), s.nfev


def timeit(fn, budget=0.6, max_reps=7):
    """Best of a few runs (at least one, until ``budget`` seconds are spent)."""
    best, spent, reps = np.inf, 0.0, 0
    while reps < max_reps and (reps == 0 or spent < budget):
        t0 = time.perf_counter()
        out = fn()
        jax.block_until_ready(out)
        dt_ = time.perf_counter() - t0
        best, spent, reps = min(best, dt_), spent + dt_, reps + 1
    return best, out


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


def user_call(As, ys, M0, ts=TS, rtol=RTOL, **kw):
    """What the README does: build the data, solve with default options at rtol 1e-10."""
    return nqf.gradient_flow(M0, nqf.NQFData(As, ys), ts, options=flow.ODEOptions(rtol=rtol), **kw)


SCIPY_TIGHTER = (3e-11, 1e-11, 3e-12, 1e-12, 3e-13)  # scipy's rtol, tightened until its error <= nqf's


def bench_single(m, p):
    """One row: the default call against scipy at the same rtol, interleaved, with each one's error
    against a tight reference; then scipy at the loosest tighter rtol whose error is at most nqf's
    (the ratio at equal accuracy), where one scipy solve takes under 3 s."""
    from nqf.flow._flow import _use_statistics

    As, ys, M0 = problem(m, p)
    data = nqf.NQFData(As, ys)
    ref = nqf.gradient_flow(M0, data, TS, options=flow.ODEOptions(solver="dopri8", rtol=1e-13, atol=1e-17)).ys
    big = m * p * p > 2e7
    t0 = time.perf_counter()
    jax.block_until_ready(user_call(As, ys, M0).ys)
    first = time.perf_counter() - t0
    reps = 1 if big else 7
    # side by side: scipy, the default call, its parts, interleaved rep by rep
    t_sc = t_nqf = t_data = t_solve = np.inf
    auto = _use_statistics(None, m, p)
    for _ in range(1 if big else 3):
        dt_, (M_sc, nfev) = timeit(lambda: scipy_flow(As, ys, M0, TS), budget=0.0 if big else 0.3, max_reps=reps)
        t_sc = min(t_sc, dt_)
        dt_, sol = timeit(lambda: user_call(As, ys, M0), budget=0.0 if big else 0.6, max_reps=reps)
        t_nqf = min(t_nqf, dt_)
        t_data = min(t_data, timeit(lambda: nqf.NQFData(As, ys).As, budget=0.0 if big else 0.6, max_reps=reps)[0])
        t_solve = min(t_solve, timeit(lambda: nqf.gradient_flow(M0, data, TS, options=flow.ODEOptions(rtol=RTOL)), budget=0.0 if big else 0.6,
                                      max_reps=reps)[0])
    load = os.getloadavg()[0]
    # the other path (statistics vs samples), to check the cost model, where it costs under ~5 s
    other_cost = t_solve * (8 if auto else 1)
    t_other = None
    if other_cost < 5 and not big:  # at the big sizes the statistics path wins by far (cost model)
        other = lambda: nqf.gradient_flow(M0, data, TS, statistics=not auto, options=flow.ODEOptions(rtol=RTOL))  # noqa: E731
        jax.block_until_ready(other().ys)  # compile first
        t_other = timeit(other, budget=0.0 if big else 0.3, max_reps=1 if big else 3)[0]
    steps = int(sol.num_steps)
    nqf_err, sc_err = rel(sol.ys, ref), rel(M_sc, ref)
    # equal accuracy: scipy at the loosest tighter rtol whose error is at most nqf's
    eq = None
    if nqf_err <= sc_err and t_sc < 3.0:
        for r in SCIPY_TIGHTER:
            dt_, (M_r, nfev_r) = timeit(lambda: scipy_flow(As, ys, M0, TS, rtol=r), budget=0.0 if t_sc > 0.3 else 0.3,
                                        max_reps=3)
            if rel(M_r, ref) <= nqf_err or r == SCIPY_TIGHTER[-1]:
                dt_n = timeit(lambda: user_call(As, ys, M0), max_reps=reps)[0]  # again, beside it
                eq = {"scipy_rtol": r, "scipy_s": dt_, "scipy_err": rel(M_r, ref), "scipy_nfev": int(nfev_r),
                      "nqf_s": dt_n, "ratio": dt_ / dt_n, "reached": bool(rel(M_r, ref) <= nqf_err)}
                break
    elif nqf_err <= sc_err:
        eq = {"skipped": "one scipy solve takes over 3 s"}
    else:  # nqf less accurate: tighten nqf's rtol instead (the call otherwise as the user makes it)
        for r in SCIPY_TIGHTER:
            dt_n, s_r = timeit(lambda: user_call(As, ys, M0, rtol=r), budget=0.0 if big else 0.6, max_reps=reps)
            if rel(s_r.ys, ref) <= sc_err or r == SCIPY_TIGHTER[-1]:
                eq = {"nqf_rtol": r, "nqf_s": dt_n, "nqf_err": rel(s_r.ys, ref), "scipy_s": t_sc, "ratio": t_sc / dt_n,
                      "reached": bool(rel(s_r.ys, ref) <= sc_err)}
                break
    row = {"m": m, "p": p, "load_average": load, "scipy_s": t_sc, "scipy_nfev": int(nfev), "scipy_err": sc_err,
           "nqf_s": t_nqf, "nqf_first_call_s": first, "nqf_err": nqf_err, "nqf_ratio": t_sc / t_nqf,
           "nqf_path": "statistics" if auto else "samples", "nqf_solver": nqf.flow._flow.choose_solver("auto", RTOL),
           "nqf_steps": steps, "nqf_data_s": t_data, "nqf_solve_s": t_solve, "nqf_tuned_ratio": t_sc / t_solve,
           "nqf_ms_per_step": 1e3 * t_solve / max(steps, 1), "nqf_other_path_s": t_other,
           "cost_model_right": None if t_other is None else bool(t_other >= t_solve),
           "scipy_ms_per_rhs": 1e3 * t_sc / nfev, "max_rel_diff_nqf_scipy": rel(sol.ys, M_sc), "equal_accuracy": eq}
    eqs = "ratio at equal accuracy " + _eq_cell(row)
    other = "not timed" if t_other is None else f"{t_other:.4f} s"
    print(f"  m={m:>6} p={p:>2}  scipy {t_sc:8.4f} s  nqf {t_nqf:8.4f} s  ratio {row['nqf_ratio']:6.1f}  "
          f"max rel diff {row['max_rel_diff_nqf_scipy']:.1e} (errors scipy {sc_err:.0e} / nqf {nqf_err:.0e}); {eqs}  "
          f"| NQFData {t_data:.4f} s + solve {t_solve:.4f} s ({row['nqf_path']}, {steps} steps x "
          f"{row['nqf_ms_per_step']:.3f} ms; other path {other})  scipy {nfev} RHS x "
          f"{row['scipy_ms_per_rhs']:.3f} ms  [load {load:.1f}]", flush=True)
    return row


def profile_row(row):
    """Where the time of one default call goes, each part timed side by side with the call itself
    (interleaved, best of several): building ``NQFData``, the argument checks, the statistics (or packed
    samples), the solve's steps; "dispatch" is what is left (jit dispatch, pytree flattening)."""
    from nqf.flow import _flow

    m, p = row["m"], row["p"]
    As, ys, M0 = problem(m, p)
    data = nqf.NQFData(As, ys)
    stats = row["nqf_path"] == "statistics"
    prep = jax.jit(lambda d: _flow._prepare(d, stats)[1])
    jax.block_until_ready(prep(data))
    best = dict.fromkeys(("total", "data", "checks", "prep", "solve"), np.inf)
    for _ in range(3):
        best["total"] = min(best["total"], timeit(lambda: user_call(As, ys, M0))[0])
        best["data"] = min(best["data"], timeit(lambda: nqf.NQFData(As, ys).As)[0])
        best["checks"] = min(best["checks"], timeit(lambda: (_flow._check_M0(M0, p), _flow._check_ts(TS)))[0])
        best["prep"] = min(best["prep"], timeit(lambda: prep(data))[0])
        best["solve"] = min(best["solve"], timeit(lambda: nqf.gradient_flow(M0, data, TS, options=flow.ODEOptions(rtol=RTOL)))[0])
    out = {"m": m, "p": p, "path": row["nqf_path"], "total_s": best["total"], "NQFData_s": best["data"],
           "input_checks_s": best["checks"], "prepare_s": best["prep"],
           "steps_s": max(best["solve"] - best["prep"] - best["checks"], 0.0), "steps": row["nqf_steps"],
           "dispatch_s": max(best["total"] - best["data"] - best["solve"], 0.0), "load_average": os.getloadavg()[0]}
    print(f"  profile of the slowest row (m = {m}, p = {p}): total {out['total_s']:.4f} s = NQFData "
          f"{out['NQFData_s']:.4f} s + checks {out['input_checks_s']:.4f} s + {row['nqf_path']} {out['prepare_s']:.4f} s + "
          f"{out['steps']} steps {out['steps_s']:.4f} s + dispatch {out['dispatch_s']:.4f} s [load {out['load_average']:.1f}]",
          flush=True)
    return out


def bench_sweep64():
    m, p, n = 256, 8, 64
    As, ys, _ = problem(m, p, seed=1)
    rng = np.random.default_rng(2)
    Ws = rng.normal(size=(n, p, p)) * np.geomspace(0.03, 0.5, n)[:, None, None] / np.sqrt(p)
    M0s = Ws @ Ws.transpose(0, 2, 1)
    data = nqf.NQFData(As, ys)

    def loop():
        return [scipy_flow(As, ys, M0, TS)[0] for M0 in M0s]

    t_sc, M_sc = timeit(loop, budget=0.0, max_reps=1)
    err_sc = max(rel(M_sc[i], nqf.gradient_flow(M0s[i], data, TS, options=flow.ODEOptions(solver="dopri8", rtol=1e-13, atol=1e-17)).ys)
                 for i in (0, n - 1))
    t0 = time.perf_counter()
    b = user_call(As, ys, M0s)
    jax.block_until_ready(b.ys)
    first = time.perf_counter() - t0
    t_nqf, b = timeit(lambda: user_call(As, ys, M0s))
    row = {"n": n, "m": m, "p": p, "scipy_loop_s": t_sc, "nqf_batch_s": t_nqf, "nqf_first_call_s": first,
           "ratio": t_sc / t_nqf, "max_rel_diff_nqf_scipy": max(rel(b.ys[i], M_sc[i]) for i in range(n)),
           "scipy_err": err_sc, "nqf_steps_max": int(np.max(b.num_steps)), "load_average": os.getloadavg()[0]}
    print(f"  sweep of {n}: scipy loop {t_sc:.3f} s, nqf (one call, M0 of shape ({n}, {p}, {p})) {t_nqf:.4f} s, "
          f"ratio {row['ratio']:.1f}, max rel diff {row['max_rel_diff_nqf_scipy']:.1e}", flush=True)
    return row


def bench_eps_sweep():
    from nqf import datasets

    r3 = np.array([1.0, 0.5, 0.25, 0.125, 0.0625])
    d3 = datasets.orthogonal_features_data(r3, 1.0, seed=0)
    rr3, CC3 = (np.asarray(v) for v in solutions.growth_and_competition(d3.lambdas, d3.ys))
    eps = np.logspace(-2, -40, 20)
    taus = np.linspace(0.0, 1.3 / rr3.min(), 600)
    data = nqf.NQFData(d3.As, d3.ys)
    As, ys = np.asarray(d3.As), np.asarray(d3.ys)
    m, p, _ = As.shape
    A2 = As.reshape(m, p * p)

    def one_scipy(e):
        L = np.log(1 / e)

        def rhs(t, y):
            N = y.reshape(p, p)
            H = (4.0 / m * ((e * (A2 @ y) - ys) @ A2)).reshape(p, p)
            return (-L * (H @ N + N @ H)).ravel()

        s = solve_ivp(rhs, (0.0, taus[-1]), np.eye(p).ravel(), method="DOP853", t_eval=taus, rtol=1e-10, atol=1e-12)
        assert s.success
        N = s.y.T.reshape(-1, p, p)
        return np.mean((e * np.einsum("tij,mij->tm", N, As) - ys) ** 2, axis=1)

    t_sc, loss_sc = timeit(lambda: [one_scipy(e) for e in eps], budget=0.0, max_reps=1)
    kw = dict(z_final=rr3 / np.diag(CC3), options=solutions.SweepOptions(pad_to=(10, 12)))
    t0 = time.perf_counter()
    sw = solutions.singular_limit_sweep(data, eps, taus, **kw)
    jax.block_until_ready(sw.loss)
    first = time.perf_counter() - t0
    t_nqf, sw = timeit(lambda: solutions.singular_limit_sweep(data, eps, taus, **kw), budget=0.0, max_reps=1)
    diff = max(rel(sw.loss[i], loss_sc[i]) for i in range(len(eps)))
    row = {"n_eps": len(eps), "eps_min": float(eps.min()), "eps_max": float(eps.max()), "n_tau": len(taus),
           "scipy_loop_s": t_sc, "nqf_sweep_s": t_nqf, "nqf_first_call_s": first, "ratio": t_sc / t_nqf,
           "max_rel_diff_loss": diff, "nqf_steps_max": int(np.max(sw.num_steps)), "load_average": os.getloadavg()[0]}
    print(f"  eps sweep 1e-2..1e-40 ({len(eps)} values): scipy loop {t_sc:.3f} s, nqf {t_nqf:.4f} s "
          f"(with switch-on bisection), ratio {row['ratio']:.1f}, max rel diff of the loss {diff:.1e}", flush=True)
    return row


COLD = """
import os, time, sys
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import nqf
t1 = time.perf_counter()
sys.path.insert(0, {bench!r})
from bench_flow import problem, TS
As, ys, M0 = problem(4096, 8)
load = os.getloadavg()[0]
t2 = time.perf_counter()
sol = nqf.gradient_flow(M0, nqf.NQFData(As, ys), TS, options=flow.ODEOptions(rtol=1e-10))
jax.block_until_ready(sol.ys)
t3 = time.perf_counter()
sol = nqf.gradient_flow(M0, nqf.NQFData(As * 1.001, ys), TS, options=flow.ODEOptions(rtol=1e-10))
jax.block_until_ready(sol.ys)
t4 = time.perf_counter()
print("COLD", t1 - t0, t3 - t2, t4 - t3, load)
"""

# Per repeat, in a new cache folder, four new processes in this order: the default call with the JAX
# cache and nqf's exported flows empty, again with both warm, then with the export cache off
# (NQF_EXPORT_CACHE=0, the plain jit path: its program is not the exported one's, so its first process
# compiles it) and again with that warm: the first call's time before and after nqf/flow/_export.py.
COLD_RUNS = (("empty_cache", {}), ("warm_cache", {}),
             ("empty_cache_no_export", {"NQF_EXPORT_CACHE": "0"}), ("warm_cache_no_export", {"NQF_EXPORT_CACHE": "0"}))
COLD_REPEATS = 3


def bench_cold(repeats: int = COLD_REPEATS):
    """First default call of new processes (m = 4096, p = 8): medians of ``repeats`` (the machine is shared)."""
    runs = {label: [] for label, _ in COLD_RUNS}
    for r in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            for label, extra in COLD_RUNS:
                env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=tmp, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                           JAX_ENABLE_X64="1", PYTHONPATH=str(ROOT), **extra)
                if not extra:
                    env.pop("NQF_EXPORT_CACHE", None)
                p = subprocess.run([sys.executable, "-c", COLD.format(bench=str(Path(__file__).parent))], env=env,
                                   capture_output=True, text=True, cwd=ROOT, timeout=600)
                if p.returncode:
                    raise RuntimeError(p.stderr[-2000:])
                imp, first, second, load = (float(v) for v in p.stdout.split("COLD")[1].split())
                runs[label].append({"import_s": imp, "first_call_s": first, "second_call_s": second, "load_average": load})
                print(f"  new process {r + 1}/{repeats}, {label.replace('_', ' ')}: import {imp:.2f} s, first call "
                      f"{first:.3f} s, second call (new data) {second:.4f} s, load {load:.1f}", flush=True)
    out = {}
    for label, rows in runs.items():
        out[label] = {k: float(np.median([row[k] for row in rows])) for k in rows[0]} | {"repeats": len(rows), "runs": rows}
        print(f"  median of {len(rows)}, {label.replace('_', ' ')}: first call {out[label]['first_call_s']:.3f} s "
              f"(load {out[label]['load_average']:.1f})", flush=True)
    return out


def _eq_cell(r) -> str:
    eq = r.get("equal_accuracy")
    if not eq:
        return "— (nqf less accurate)" if r["nqf_err"] > r["scipy_err"] else "—"
    if "ratio" not in eq:
        return f"— ({eq['skipped']})"
    if "nqf_rtol" in eq:
        note = "" if eq["reached"] else ", nqf error still larger"
        return f"{eq['ratio']:.1f} (nqf at rtol {eq['nqf_rtol']:g}: {eq['nqf_s']:.4f} s, error {eq['nqf_err']:.0e}{note})"
    note = "" if eq["reached"] else f", scipy error still {eq['scipy_err']:.0e}"
    return f"{eq['ratio']:.1f} (scipy at rtol {eq['scipy_rtol']:g}: {eq['scipy_s']:.4f} s, error {eq['scipy_err']:.0e}{note})"


def markdown(rec) -> str:
    lines = ["| problem | scipy DOP853 + numpy RHS | nqf default call (data built inside) | ratio scipy/nqf, same rtol | "
             "error vs reference: scipy / nqf | ratio at equal accuracy | nqf: NQFData + solve (path, steps) | "
             "ratio, data prebuilt | load |",
             "|---|---:|---:|---:|---|---|---|---:|---:|"]
    for r in rec["single"]:
        lines.append(f"| m = {r['m']}, p = {r['p']} | {r['scipy_s']:.4f} s | {r['nqf_s']:.4f} s | {r['nqf_ratio']:.1f} | "
                     f"{r['scipy_err']:.0e} / {r['nqf_err']:.0e} | {_eq_cell(r)} | "
                     f"{r['nqf_data_s']:.4f} + {r['nqf_solve_s']:.4f} s ({r['nqf_path']}, {r['nqf_steps']}) | "
                     f"{r['nqf_tuned_ratio']:.1f} | {r.get('load_average', float('nan')):.1f} |")
    s = rec.get("sweep64")
    if s:
        lines.append(f"| {s['n']} initial M, m = {s['m']}, p = {s['p']} | {s['scipy_loop_s']:.3f} s (loop) | "
                     f"{s['nqf_batch_s']:.4f} s (one call) | {s['ratio']:.1f} | {s['max_rel_diff_nqf_scipy']:.1e} | | | | {s.get('load_average', float('nan')):.1f} |")
    e = rec.get("eps_sweep")
    if e:
        lines.append(f"| {e['n_eps']} eps in 1e-2..1e-40 (ch05 sweep) | {e['scipy_loop_s']:.3f} s (loop) | "
                     f"{e['nqf_sweep_s']:.4f} s (one program) | {e['ratio']:.1f} | {e['max_rel_diff_loss']:.1e} (loss) | | | | {e.get('load_average', float('nan')):.1f} |")
    # after the sweep rows, which belong to the table above (a row after a paragraph is no table)
    pr = rec.get("profile_slowest")
    if pr:
        lines += ["", f"Profile of the slowest row (m = {pr['m']}, p = {pr['p']}): default call {pr['total_s']:.4f} s = "
                      f"NQFData {pr['NQFData_s']:.4f} s + argument checks {pr['input_checks_s']:.4f} s + "
                      f"{pr['path']} preparation {pr['prepare_s']:.4f} s + {pr['steps']} steps {pr['steps_s']:.4f} s + "
                      f"dispatch {pr.get('dispatch_s', 0.0):.4f} s.", ""]
    c = rec.get("cold")
    if c:
        lines += ["", "| first default call in a new process (m = 4096, p = 8), median of the repeats | import | first call | "
                      "second call, new data | load |", "|---|---:|---:|---:|---:|"]
        for k, v in c.items():
            lines.append(f"| {k.replace('_no_export', ', export cache off').replace('_', ' ')} ({v.get('repeats', 1)}x) | "
                         f"{v['import_s']:.2f} s | {v['first_call_s']:.3f} s | {v['second_call_s']:.4f} s | "
                         f"{v.get('load_average', float('nan')):.1f} |")
    lines += ["", f"Reference: nqf's Dopri8 at rtol 1e-13, atol 1e-17; errors are max |M - M_ref| / max |M_ref| over the "
                  f"save times. Load average at the start: {rec['machine']['load_average'][0]:.1f} on "
                  f"{rec['machine']['cpus']} cores (times are wall times on a shared machine).", ""]
    lines += ["", "| target | measured | met |", "|---|---|:---:|"]
    for t in rec["targets"]:
        lines.append(f"| {t['what']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="only m in {16, 4096}, no cold starts")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-start subprocesses")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    ms = (16, 4096) if args.quick else (16, 256, 4096, 65536)
    print("single solves (warm, best of several; equal accuracy):", flush=True)
    single = [bench_single(m, p) for p in (8, 32) for m in ms]
    slowest = profile_row(min(single, key=lambda r: r["nqf_ratio"]))
    print("sweeps:", flush=True)
    sweep64 = bench_sweep64()
    eps_sweep = bench_eps_sweep()
    cold = None if (args.quick or args.no_cold) else bench_cold()
    worst = min(single, key=lambda r: r["nqf_ratio"])
    eq_rows = [r for r in single if (r.get("equal_accuracy") or {}).get("ratio") is not None]
    worst_eq = min(eq_rows, key=lambda r: r["equal_accuracy"]["ratio"]) if eq_rows else None
    targets = [
        {"what": "default call (data built inside) >= 3x faster than scipy at the same rtol, every (m, p)",
         "measured": f"worst ratio {worst['nqf_ratio']:.1f} (m = {worst['m']}, p = {worst['p']}; errors scipy "
                     f"{worst['scipy_err']:.0e}, nqf {worst['nqf_err']:.0e})",
         "met": bool(worst["nqf_ratio"] >= 3)},
        {"what": "the same at equal accuracy (scipy's rtol tightened to nqf's error), every row where measured",
         "measured": (f"worst ratio {worst_eq['equal_accuracy']['ratio']:.1f} (m = {worst_eq['m']}, p = {worst_eq['p']}); "
                      f"measured on {len(eq_rows)} of {len(single)} rows") if worst_eq else "not measured",
         "met": bool(worst_eq and worst_eq["equal_accuracy"]["ratio"] >= 3 and len(eq_rows) == len(single))},
        {"what": "NQFData under 10% of the solve at m = 4096, p = 32",
         "measured": "; ".join(f"{r['nqf_data_s'] / r['nqf_solve_s']:.1%}" for r in single if (r["m"], r["p"]) == (4096, 32)),
         "met": all(r["nqf_data_s"] < 0.1 * r["nqf_solve_s"] for r in single if (r["m"], r["p"]) == (4096, 32))},
        {"what": "sweep of 64 initial conditions >= 10x faster than scipy's loop",
         "measured": f"ratio {sweep64['ratio']:.1f}", "met": bool(sweep64["ratio"] >= 10)},
    ]
    if cold:
        targets.append({"what": "first call in a new process < 1 s with the persistent cache warm",
                        "measured": f"median {cold['warm_cache']['first_call_s']:.2f} s (empty cache: "
                                    f"{cold['empty_cache']['first_call_s']:.2f} s; export cache off, warm: "
                                    f"{cold['warm_cache_no_export']['first_call_s']:.2f} s)",
                        "met": bool(cold["warm_cache"]["first_call_s"] < 1.0)})
    rec = {"date": dt.date.today().isoformat(),
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                       "jax": jax.__version__, "load_average": list(os.getloadavg())},
           "settings": {"rtol": RTOL, "atol": ATOL, "save_times": len(TS), "t_max": float(TS[-1]),
                        "nqf_call": "nqf.gradient_flow(M0, nqf.NQFData(As, ys), ts), default options (rtol=1e-10)",
                        "nqf_solver": nqf.flow._flow.choose_solver("auto", RTOL), "scipy_method": "DOP853"},
           "single": single, "profile_slowest": slowest, "sweep64": sweep64, "eps_sweep": eps_sweep, "cold": cold, "targets": targets,
           "seconds": time.perf_counter() - t_start}
    targets.append({"what": "the whole benchmark within 5 minutes", "measured": f"{rec['seconds']:.0f} s",
                    "met": bool(rec["seconds"] < 300)})
    rec["table_markdown"] = markdown(rec)
    # the committed record: the reproduce page renders its table (nqfbook.timings_markdown)
    tmp = RECORD.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, RECORD)
    print("\n" + rec["table_markdown"])
    print(f"bench_flow: {rec['seconds']:.0f} s; wrote {RECORD.relative_to(ROOT)} (commit it: the reproduce page renders it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
