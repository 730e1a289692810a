"""Write the committed record of the full build's verdicts: benchmarks/verdicts-full.json.

Run after `make book` (the full-fidelity claims are in _build/output/full/claims/):

    .venv/bin/python benchmarks/record_verdicts.py

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
                v["name"]: {"outcome": v["outcome"], "depends_on": v["depends_on"],
                            "options": {o["option"]: o["outcome"] for o in v["options"]}}
                for v in verdicts}
    return chapters


def main(argv: list[str]) -> int:
    claims_dir = pathlib.Path(argv[1]) if len(argv) > 1 else ROOT / "_build" / "output" / "full" / "claims"
    chapters = collect(claims_dir)
    if not chapters:
        raise SystemExit(f"no verdicts in {claims_dir} (run `make book` first)")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    record = {"commit": commit, "fidelity": "full", "chapters": chapters}
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    n = sum(len(v) for v in chapters.values())
    print(f"wrote {RECORD.relative_to(ROOT)}: {n} verdicts of {len(chapters)} chapters at commit {commit}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
