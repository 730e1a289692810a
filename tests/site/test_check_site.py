"""The source checks of tests/site/check_site.py on planted chapter sources (no browser)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_site  # noqa: E402


def _site(tmp_path, cells):
    folder = tmp_path / "_sources" / "notebooks"
    folder.mkdir(parents=True)
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": tags}, "source": src} for src, tags in cells]}
    (folder / "ch99_planted.ipynb").write_text(json.dumps(nb))
    return tmp_path


def test_visible_code_lines_glue_and_lint_comments(tmp_path):
    site = _site(tmp_path, [("x = 1\n" * 81, []), ("glue('a', 1)\n", []),
                            ("f = lambda v: v  # noqa: E731\n", ["hide-input"]),
                            ("g = lambda v: v  # noqa: E731\n", ["remove-cell"])])
    problems = check_site.check_visible_code(site)
    assert any("82 visible code lines" in p for p in problems), problems
    assert any("1 visible glue( call" in p for p in problems), problems
    assert any("1 lint comment" in p for p in problems), problems  # the hidden cell, not the removed one


def test_clean_sources_pass(tmp_path):
    assert check_site.check_visible_code(_site(tmp_path, [("x = 1\n", []), ("glue('a', 1)\n", ["remove-input"])])) == []
