"""Compare two runs' claims files, claim by claim and verdict by verdict (issue 48's "identical" check).

    python benchmarks/compare_claims.py OLD_DIR NEW_DIR [--rtol 0]
    python benchmarks/compare_claims.py --record benchmarks/verdicts-full.json _build/output/full/claims [--rtol 1e-9]
    python benchmarks/compare_claims.py --changes OLD_RECORD.json NEW_RECORD.json

``OLD_DIR`` and ``NEW_DIR`` hold ``chNN.json`` claims files (``_build/output/quick/claims``). For each chapter
it reports claims and verdicts present in one run only, outcomes that differ, and numbers (measured,
predicted, bounds; a verdict's per-option mean, threshold, margin, uncertainty) that differ by more than
``rtol`` relative (0: bit for bit). With ``--record``, the full build's verdicts are compared with the committed
record of ``benchmarks/record_verdicts.py`` instead: outcomes, per-option outcomes and seeds exactly, the evidence
(n, diverged runs, mean, threshold, margin, uncertainty) within ``rtol``. Exits 1 if anything differs beyond
``rtol``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

CLAIM_NUMBERS = ("measured", "predicted", "lo", "hi", "rtol", "atol", "error", "allowed")
OPTION_NUMBERS = ("n", "mean", "se", "threshold", "margin", "uncertainty")


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flat(item)]
    return [x]


def _differs(a, b, rtol: float) -> float | None:
    """The relative difference of two values (numbers or nested lists), or None when they agree within rtol."""
    fa, fb = _flat(a), _flat(b)
    if len(fa) != len(fb):
        return math.inf
    worst = 0.0
    for u, v in zip(fa, fb):
        if isinstance(u, (int, float)) and isinstance(v, (int, float)) and not isinstance(u, bool):
            if (math.isnan(u) and math.isnan(v)) or u == v:
                continue
            rel = abs(u - v) / max(abs(u), abs(v), 1e-300)
            worst = max(worst, rel)
        elif u != v:
            return math.inf
    return worst if worst > rtol else None


def compare(old: Path, new: Path, rtol: float = 0.0) -> list[str]:
    out = []
    for f in sorted(old.glob("ch[0-9][0-9].json")):
        g = new / f.name
        if not g.is_file():
            out.append(f"{f.stem}: missing in {new}")
            continue
        a, b = json.loads(f.read_text()), json.loads(g.read_text())
        ca = {c["name"]: c for c in a["claims"]}
        cb = {c["name"]: c for c in b["claims"]}
        for name in sorted(set(ca) ^ set(cb)):
            out.append(f"{f.stem}: claim only in {'old' if name in ca else 'new'}: {name}")
        for name in sorted(set(ca) & set(cb)):
            x, y = ca[name], cb[name]
            if x.get("passed") != y.get("passed") or x.get("kind") != y.get("kind"):
                out.append(f"{f.stem}: claim {name!r}: passed/kind {x.get('passed')}/{x.get('kind')} -> "
                           f"{y.get('passed')}/{y.get('kind')}")
            for k in CLAIM_NUMBERS:
                d = _differs(x.get(k), y.get(k), rtol)
                if d is not None:
                    out.append(f"{f.stem}: claim {name!r}: {k} {x.get(k)!r} -> {y.get(k)!r} (relative {d:.1e})")
        va = {v["name"]: v for v in a.get("verdicts", [])}
        vb = {v["name"]: v for v in b.get("verdicts", [])}
        for name in sorted(set(va) ^ set(vb)):
            out.append(f"{f.stem}: verdict only in {'old' if name in va else 'new'}: {name}")
        for name in sorted(set(va) & set(vb)):
            x, y = va[name], vb[name]
            for k in ("outcome", "kind", "depends_on", "seeds"):
                if x.get(k) != y.get(k):
                    out.append(f"{f.stem}: verdict {name!r}: {k} {x.get(k)!r} -> {y.get(k)!r}")
            oa = {o["option"]: o for o in x.get("options", [])}
            ob = {o["option"]: o for o in y.get("options", [])}
            if set(oa) != set(ob):
                out.append(f"{f.stem}: verdict {name!r}: options {sorted(oa)} -> {sorted(ob)}")
            for opt in sorted(set(oa) & set(ob)):
                if oa[opt].get("outcome") != ob[opt].get("outcome"):
                    out.append(f"{f.stem}: verdict {name!r} [{opt}]: outcome {oa[opt].get('outcome')} -> "
                               f"{ob[opt].get('outcome')}")
                for k in OPTION_NUMBERS:
                    d = _differs(oa[opt].get(k), ob[opt].get(k), rtol)
                    if d is not None:
                        out.append(f"{f.stem}: verdict {name!r} [{opt}]: {k} {oa[opt].get(k)!r} -> "
                                   f"{ob[opt].get(k)!r} (relative {d:.1e})")
    return out


def compare_record(record: Path, new: Path, rtol: float = 0.0) -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from record_verdicts import collect

    old, now = json.loads(record.read_text())["chapters"], collect(new)
    out = [f"{ch}: chapter only in {'the record' if ch in old else 'the new build'}" for ch in sorted(set(old) ^ set(now))]
    for ch in sorted(set(old) & set(now)):
        a, b = old[ch], now[ch]
        out += [f"{ch}: verdict only in {'the record' if n in a else 'the new build'}: {n}" for n in sorted(set(a) ^ set(b))]
        for name in sorted(set(a) & set(b)):
            x, y = a[name], b[name]
            for k in ("outcome", "kind", "depends_on", "options", "seeds"):
                if x.get(k, y.get(k)) != y.get(k):  # a record made before a key existed: compared once both have it
                    out.append(f"{ch}: {name!r}: {k} {x.get(k)!r} -> {y.get(k)!r}")
            for opt in sorted(set(x["evidence"]) & set(y["evidence"])):
                for k, u in x["evidence"][opt].items():
                    d = _differs(u, y["evidence"][opt].get(k), rtol)
                    if d is not None:
                        out.append(f"{ch}: {name!r} [{opt}]: {k} {u!r} -> {y['evidence'][opt].get(k)!r} (relative {d:.1e})")
    return out


def _opt_text(v: dict) -> str:
    ev = v.get("evidence", {})
    return "; ".join(f"{o or 'one rule'}: {v['options'].get(o)} (n {e.get('n')}, margin {_num(e.get('margin'))}, "
                     f"unc. {_num(e.get('uncertainty'))})" for o, e in ev.items())


def _num(x) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


def _kind_of(v: dict) -> str:
    if v["outcome"] != "inconclusive":
        return v["outcome"]
    k = v.get("kind") or ("depends on X" if v.get("depends_on") else "too few runs")
    return f"depends on {v.get('depends_on')}" if k == "depends on X" else k


def changes_table(old_record: Path, new_record: Path) -> str:
    """A Markdown table of every verdict whose outcome, kind, options or seeds changed between two records: its
    outcome, options (with n, margin and uncertainty) and seed count before and after."""
    a, b = json.loads(old_record.read_text())["chapters"], json.loads(new_record.read_text())["chapters"]
    rows = ["| chapter | verdict | before | after |", "|---|---|---|---|"]
    for ch in sorted(set(a) | set(b)):
        va, vb = a.get(ch, {}), b.get(ch, {})
        for name in sorted(set(va) | set(vb)):
            x, y = va.get(name), vb.get(name)
            if x and y and (_kind_of(x), x["options"], len(x.get("seeds", []))) == (_kind_of(y), y["options"], len(y.get("seeds", []))):
                continue
            cell = (lambda v: "-" if v is None else f"**{_kind_of(v)}**, {len(v.get('seeds', []))} seeds; {_opt_text(v)}")
            rows.append(f"| {ch} | {name} | {cell(x)} | {cell(y)} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--rtol", type=float, default=0.0)
    ap.add_argument("--record", action="store_true", help="OLD is the committed verdict record (a JSON file)")
    ap.add_argument("--changes", action="store_true", help="OLD and NEW are two verdict records: print a Markdown table "
                    "of the verdicts that changed (outcome, options, n, margin, uncertainty)")
    args = ap.parse_args(argv)
    if args.changes:
        print(changes_table(args.old, args.new))
        return 0
    if args.record:
        diffs = compare_record(args.old, args.new, args.rtol)
        print("\n".join(diffs) if diffs else f"every verdict equals the record (rtol {args.rtol:g})")
        return 1 if diffs else 0
    diffs = compare(args.old, args.new, args.rtol)
    n = len(list(args.old.glob("ch[0-9][0-9].json")))
    print("\n".join(diffs) if diffs else f"{n} chapters: every claim and verdict identical (rtol {args.rtol:g})")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
