"""Write the committed record of the full build's verdicts: benchmarks/verdicts-full.json.

Run after `make book` (the full-fidelity claims are in _build/output/full/claims/):

    .venv/bin/python benchmarks/record_verdicts.py [CLAIMS_DIR] [--table]

Beside each verdict's outcome and its per-option outcomes (what the test reads), the record keeps the
evidence a reader checks a verdict by: the confirmation seeds judged, the commit that fixed the rule, and
per option the runs judged (n), the diverged runs set aside, the statistic's mean, the threshold, the
margin and the uncertainty it is compared with. ``--table`` also prints the record as a Markdown table.

`make test` compares every quick chapter's verdicts with this record (tests/test_notebooks.py): a quick
verdict that is conclusive and opposite to the recorded full one fails the test (BOOK.md rule 10).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "verdicts-full.json"


def collect(claims_dir: pathlib.Path) -> dict:
    chapters = {}
    for path in sorted(claims_dir.glob("ch*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(data, dict) and "chapter" in data and "claims" in data):
            continue  # a chapter's side file (section timings), not its claims
        if data.get("fidelity") != "full":
            raise SystemExit(f"{path.name}: fidelity {data.get('fidelity')!r}, not 'full'")
        verdicts = data.get("verdicts", [])
        if verdicts:
            chapters[data["chapter"]] = {
                v["name"]: {"outcome": v["outcome"], "kind": _kind(v), "depends_on": v["depends_on"],
                            "runs_needed": v.get("runs_needed"), "need_basis": v.get("need_basis", ""),
                            "margin": v["rule"].get("margin"),
                            "margin_reason": v["rule"].get("margin_reason", ""),
                            "options": {o["option"]: o["outcome"] for o in v["options"]},
                            "seeds": v.get("seeds", []), "fixed_at": v["rule"].get("fixed_at", ""),
                            "evidence": {o["option"]: {k: o.get(k) for k in _EVIDENCE} for o in v["options"]}}
                for v in verdicts}
    return chapters


_EVIDENCE = ("n", "diverged", "mean", "threshold", "margin", "uncertainty", "reason", "reading", "runs_needed",
             "need_basis")


def _kind(v: dict) -> str:
    """holds / against / depends on X / too few runs (a record made before the kinds: from depends_on)."""
    if v["outcome"] != "inconclusive":
        return v["outcome"]
    return v.get("kind") or ("depends on X" if v.get("depends_on") else "too few runs")


def _g(x) -> str:
    return "-" if x is None else f"{x:.3g}" if isinstance(x, float) else str(x)


def table(chapters: dict) -> str:
    """One row per verdict and option: outcome, confirmation seeds, margin against its uncertainty."""
    rows = ["| chapter | verdict | outcome | option: outcome, n, margin (uncertainty) | seeds | fixed at |",
            "|---|---|---|---|---|---|"]
    for ch, verdicts in chapters.items():
        for name, v in verdicts.items():
            opts = "; ".join(
                f"{opt or 'one rule'}: {v['options'][opt]}, n={e['n']}"
                + (f" ({len(e['diverged'])} diverged)" if e.get("diverged") else "")
                + f", {_g(e['margin'])} ({_g(e['uncertainty'])})"
                for opt, e in v.get("evidence", {}).items())
            seeds = v.get("seeds") or []
            span = f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else "-".join(map(str, seeds))
            out = (f"depends on {v['depends_on']}" if v.get("kind") == "depends on X" else
                   f"too few runs ({_g(v.get('runs_needed'))} per option would resolve the stated margin)"
                   if v.get("kind") == "too few runs" else v["outcome"])
            rows.append(f"| {ch} | {name} | {out} | {opts} | {span} | {v.get('fixed_at', '')} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if a != "--table"]
    claims_dir = pathlib.Path(args[0]) if args else ROOT / "_build" / "output" / "full" / "claims"
    chapters = collect(claims_dir)
    if not chapters:
        raise SystemExit(f"no verdicts in {claims_dir} (run `make book` first)")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    record = {"commit": commit, "fidelity": "full", "chapters": chapters}
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    n = sum(len(v) for v in chapters.values())
    print(f"wrote {RECORD.relative_to(ROOT)}: {n} verdicts of {len(chapters)} chapters at commit {commit}")
    if "--table" in argv:
        print(table(chapters))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
