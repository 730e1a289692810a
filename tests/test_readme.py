"""The README runs as written: each Python block alone in a fresh process, and the printed report it
shows is that code's output (up to the last digits of its numbers, which vary with the machine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_ENABLE_X64", "PYTHONPATH"))}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)


def _shape(text: str) -> list[str]:
    """Each line with its numbers masked (``7.8e-17`` -> ``#``) and its spacing collapsed."""
    masked = (re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?%?", "#", line) for line in text.strip().splitlines())
    return [re.sub(r"\s+", " ", line).strip() for line in masked]


def test_the_readme_has_its_snippets():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_readme_block_runs_alone_in_a_fresh_process(index, tmp_path):
    """No variable from another block, its own imports, float64 where it needs it (JAX_ENABLE_X64 unset)."""
    proc = _run(BLOCKS[index], tmp_path)
    assert proc.returncode == 0, f"README block {index}:\n{BLOCKS[index]}\n{proc.stderr[-3000:]}"
    if "print(report)" in BLOCKS[index]:
        shown = README.split(BLOCKS[index], 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
        assert _shape(proc.stdout) == _shape(shown), ("the README's printed report is not this code's "
                                                      f"output; regenerate it:\n{proc.stdout}")


def test_the_parameter_table_rows_are_the_chapters_own_declarations():
    """Each ``name: "word" = default`` row of the README's parameter table is declared so by a chapter."""
    import ast

    import nbformat

    from nqfbook.kit._parameters import declared_parameters

    rows = re.findall(r'^\| `(\w+): "([^"]+)" = ([^`]+)` \|', README, re.M)
    assert len(rows) >= 6
    declared: dict[str, list[tuple[str, object]]] = {}
    for path in sorted((ROOT / "notebooks").glob("ch*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        for name, (value, annotation) in declared_parameters(cell.source).items():
            declared.setdefault(name, []).append((str(annotation or "").strip("\"'"), value))
    for name, word, default in rows:
        value = None if default == "None" else ast.literal_eval(default)
        assert (word, value) in declared.get(name, []), (
            f"README row {name}: {word!r} = {default} is no chapter's declaration: {declared.get(name)}")
