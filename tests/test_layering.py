"""The layering rule of ARCHITECTURE.md, enforced by parsing nqf's imports.

From the ground up: ``_types``, ``_checks`` <- ``architectures``, ``model`` <-
``structure``, ``dynamics`` <- ``solutions`` <- ``datasets`` <- ``pipeline``.
A room imports only rooms on lower floors (and itself); no science room
imports the book machinery; the top-level ``__init__`` may import any room.
"""

from __future__ import annotations

import ast
from pathlib import Path

NQF = Path(__file__).resolve().parents[1] / "nqf"
FLOOR = {
    "_types": 0, "_checks": 0,
    "architectures": 1, "model": 1,
    "structure": 2, "dynamics": 2,
    "solutions": 3,
    "datasets": 4,
    "pipeline": 5,
}


def _room(path: Path) -> str:
    rel = path.relative_to(NQF)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_rooms(path: Path) -> set[str]:
    """Rooms named by every ``from .x`` / ``import nqf.x`` statement in ``path``, top level or not."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(NQF.parent).with_suffix("").parts[:-1]  # e.g. ("nqf", "dynamics")
    rooms = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = list(base) + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            if target[:1] == ["nqf"] and len(target) > 1:
                rooms.add(target[1])
            elif target == ["nqf"]:
                rooms.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "nqf" and len(parts) > 1:
                    rooms.add(parts[1])
    return rooms


def _violations() -> list[str]:
    bad = []
    for path in sorted(NQF.rglob("*.py")):
        if path == NQF / "__init__.py":
            continue
        room = _room(path)
        assert room in FLOOR, f"{path.relative_to(NQF)} is in no room of ARCHITECTURE.md"
        for other in _imported_rooms(path) - {room}:
            if other not in FLOOR:
                bad.append(f"{path.relative_to(NQF)} imports unknown room {other!r}")
            elif FLOOR[other] >= FLOOR[room]:
                bad.append(f"{path.relative_to(NQF)} (floor {FLOOR[room]}) imports {other} (floor {FLOOR[other]})")
    return bad


def test_every_room_imports_only_lower_floors():
    assert _violations() == []


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    """The rule is not vacuous: an upward import planted in a copy is reported."""
    fake = tmp_path / "nqf"
    (fake / "model").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "model" / "_x.py").write_text("from ..dynamics import nqf_sgd\nfrom ..pipeline import Claims\n")
    monkeypatch.setattr(__import__(__name__), "NQF", fake)
    assert len(_violations()) == 2


def test_top_level_surface_is_small():
    """At most ~55 public names, counted from ``nqf/__init__.py`` itself (importing a
    submodule such as ``nqf.pipeline`` elsewhere adds an attribute, not a name of the surface)."""
    tree = ast.parse((NQF / "__init__.py").read_text())
    names = [a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names]
    public = [n for n in names if not n.startswith("_")]
    assert len(public) == len(set(public)), "a name is exported twice"
    assert len(public) <= 55, public
