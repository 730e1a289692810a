"""Every chapter at quick fidelity, through the runner (papermill), with its claims.

This is the part of ``make test`` that executes the book (BOOK.md rule 1). It
runs the real chapters against the repository itself, always re-executing
(``--force``), so after ``make test`` the quick-fidelity outputs are in
``_build/executed/quick/`` and ``_build/output/quick/`` (figures, claims,
timings). The 60 s per-chapter budget is measured by ``make bench``, not
asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("ch*.ipynb"))


@pytest.mark.notebook
@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_at_quick_fidelity(notebook):
    env = os.environ.copy()
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [sys.executable, "-m", "nqfbook", "--root", str(ROOT), "--fidelity", "quick",
         "--only", notebook.stem, "--force"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )
    assert proc.returncode == 0, f"{notebook.stem} failed at quick fidelity:\n{proc.stdout}\n{proc.stderr}"

    out = ROOT / "_build" / "output" / "quick"
    chid = notebook.stem.split("_")[0]
    paths = [out / "claims" / f"{n}.json" for n in dict.fromkeys([chid, notebook.stem])]
    found = [p for p in paths if p.is_file()]
    assert found, f"{notebook.stem} wrote no claims file ({', '.join(map(str, paths))})"
    data = json.loads(found[0].read_text(encoding="utf-8"))
    assert data["fidelity"] == "quick"
    failed = [c["name"] for c in data["claims"] if not c["passed"]]
    assert data["passed"] and not failed, f"{notebook.stem}: failed claims {failed}"
    assert data["n_claims"] >= 1
    assert (ROOT / "_build" / "executed" / "quick" / notebook.name).is_file()
    timing = json.loads((out / "timings.json").read_text())["chapters"][notebook.stem]
    print(f"{notebook.stem}: {data['n_claims']} claims hold, {timing['seconds']:.1f} s at quick fidelity")
