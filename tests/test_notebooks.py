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
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("ch*.ipynb"))


@pytest.mark.notebook
@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_at_quick_fidelity(notebook, record_property):
    env = os.environ.copy()
    env.pop("PYTHONPATH", None)
    record_property("chapter", f"{notebook.stem}: FAILED")
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
    executed = ROOT / "_build" / "executed" / "quick" / notebook.name
    assert executed.is_file()
    broken = [line for f in sorted((out / "figures" / chid).glob("*.conventions.txt"))
              for line in f.read_text(encoding="utf-8").splitlines()]
    assert not broken, f"{notebook.stem}: figures break the conventions (nqfbook.kit.savefig):\n" + "\n".join(broken)
    _quick_never_contradicts_full(data)
    _rules_were_fixed_in_the_history(data)
    timing = json.loads((out / "timings.json").read_text())["chapters"][notebook.stem]
    from nqfbook.execute import chapter_summary
    from nqfbook.layout import Layout

    record_property("chapter", f"{notebook.stem}: ok, {chapter_summary(Layout(ROOT, 'quick'), notebook.stem)}, "
                               f"{timing['seconds']:.1f} s")


def _quick_never_contradicts_full(data: dict) -> None:
    """A quick verdict that is conclusive and opposite to the committed full-build record fails
    (BOOK.md rule 10); inconclusive at quick, or a verdict the record does not have yet, is allowed."""
    from nqfbook.kit._verdicts import verdict_contradictions

    record_path = ROOT / "benchmarks" / "verdicts-full.json"
    if not data.get("verdicts") or not record_path.is_file():
        return
    record = json.loads(record_path.read_text(encoding="utf-8"))["chapters"].get(data["chapter"], {})
    quick = {v["name"]: v["outcome"] for v in data["verdicts"]}
    bad = verdict_contradictions(quick, record)
    assert not bad, (f"{data['chapter']}: quick verdicts contradict the full record "
                     f"(benchmarks/verdicts-full.json): {bad}")


def _rules_were_fixed_in_the_history(data: dict) -> None:
    """Every rule's ``fixed_at`` (and every listed change's commit) is a commit of this history, an
    ancestor of HEAD: the git history is the record of when a rule was fixed (BOOK.md rule 10)."""
    if not (ROOT / ".git").exists():
        return
    for v in data.get("verdicts", []):
        commits = [v["rule"]["fixed_at"]] + [c["commit"] for c in v["rule"]["changes"]]
        for c in commits:
            proc = subprocess.run(["git", "merge-base", "--is-ancestor", c, "HEAD"], cwd=ROOT,
                                  capture_output=True, text=True)
            assert proc.returncode == 0, f"{data['chapter']}: rule {v['name']!r} names commit {c}, not an ancestor of HEAD"


# ------------------------------------------------------------- rerun a chapter with other settings
def _glued(executed: Path) -> dict:
    import nbformat

    out = {}
    for cell in nbformat.read(executed, as_version=4).cells:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                out[name] = "".join(str(v) for v in o.get("data", {}).values())
    return out


def _figures(out_dir: Path) -> dict:
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out_dir.rglob("*.png"))}


@pytest.mark.notebook
def test_a_real_parameter_reruns_the_chapter_through_papermill_and_the_runner(tmp_path):
    """ch01's ``rays`` (random directions per architecture) changes a glued number and a figure, whether
    it is given to papermill directly or to the runner's ``-p``; both routes agree."""
    import shutil

    nb = ROOT / "notebooks" / "ch01_neural_quadratic_form.ipynb"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def papermill(out: Path, *extra):
        out.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "papermill", nb.name, str(out / "executed.ipynb"), "-p", "fidelity", "quick",
               "-p", "out_dir", str(out), *extra]
        proc = subprocess.run(cmd, cwd=nb.parent, env={**env, "JAX_ENABLE_X64": "1"}, capture_output=True, text=True,
                              timeout=1800)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return _glued(out / "executed.ipynb"), _figures(out)

    base = papermill(tmp_path / "base")
    changed = papermill(tmp_path / "rays3", "-p", "rays", "3")
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    shutil.copy(nb, repo / "notebooks" / nb.name)
    for name in ("pyproject.toml", "requirements-lock.txt"):
        shutil.copy(ROOT / name, repo / name)
    shutil.copytree(ROOT / "nqf", repo / "nqf")
    proc = subprocess.run([sys.executable, "-m", "nqfbook", "--root", str(repo), "--fidelity", "quick",
                           "--only", "ch01", "-p", "rays=3"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    runner = (_glued(repo / "_build" / "executed" / "quick" / nb.name), _figures(repo / "_build" / "output" / "quick"))
    assert base[0].keys() == changed[0].keys()
    assert any(base[0][k] != changed[0][k] for k in base[0]), "no glued number depends on `rays`"
    assert any(base[1][k] != changed[1].get(k) for k in base[1]), "no figure depends on `rays`"
    # the lines under the figures name the commit, which the copy without a git history cannot know
    def numbers(glued):
        return {k: re.sub(r"commit `[^`]*`", "commit", v) if k.endswith("_provenance") else v for k, v in glued.items()}

    assert numbers(runner[0]) == numbers(changed[0]), "the runner's -p and papermill's -p disagree"
