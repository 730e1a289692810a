"""The layering rule of ARCHITECTURE.md, enforced by parsing nqf's imports.

From the ground up: ``_types``, ``_checks`` <- ``architectures``, ``model`` <-
``structure`` <- ``updates``, ``flow`` <- ``training`` <- ``solutions`` <- ``datasets``.
A room imports only rooms on lower floors (and itself); no science room
imports the book machinery; the top-level ``__init__`` may import any room.
No circles, not even between two files of one room (nor of ``nqfbook``): every
import counts, lazy or ``TYPE_CHECKING`` ones too.
The book (``nqfbook``) sits above all of them and outside ``nqf``: no file of
``nqf`` imports it. Its chapter kit (``nqfbook.kit``) imports the science's
public rooms and its ground floor (``nqf._checks``, ``nqf._fit``, ``nqf._types``:
the argument checks and fits the kit shares), no other private module. The
runner (the rest of ``nqfbook``) imports nothing of ``nqf`` and, of the kit,
exactly its public namespace (the rule for a chapter's parameters).
"""

from __future__ import annotations

import ast
from pathlib import Path

NQF = Path(__file__).resolve().parents[1] / "nqf"
NQFBOOK = NQF.parent / "nqfbook"
FLOOR = {
    "_types": 0, "_checks": 0, "_random": 0, "_version": 0, "_fit": 0,
    "architectures": 1, "model": 1,
    "structure": 2,
    "updates": 3, "flow": 3,
    "training": 4,
    "solutions": 5,
    "datasets": 6,
}


def _room(path: Path) -> str:
    rel = path.relative_to(NQF)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_rooms(path: Path) -> set[str]:
    """Rooms named by every ``from .x`` / ``import nqf.x`` statement in ``path``, top level or not."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(NQF.parent).with_suffix("").parts[:-1]  # e.g. ("nqf", "training")
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
    (fake / "model" / "_x.py").write_text("from ..updates import nqf_sgd\nfrom ..datasets import fig4_dataset\n")
    monkeypatch.setattr(__import__(__name__), "NQF", fake)
    assert len(_violations()) == 2


def _module_of(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(path: Path, root: Path) -> set[str]:
    """Modules of the tree ``root`` (a package: ``nqf`` or ``nqfbook``) that ``path`` imports, anywhere in the
    file: ``from .x import y`` is module ``x`` (or ``x.y`` when ``y`` is a module), ``from . import y`` is
    ``y`` when ``y`` is a module of the package, else the package's ``__init__``."""
    package = path.relative_to(root.parent).with_suffix("").parts[:-1]
    out = set()

    def add(parts: list[str], names=()):
        target = root.parent.joinpath(*parts)
        if target.is_dir():
            subs = [n for n in names if (target / f"{n}.py").is_file() or (target / n).is_dir()]
            out.update(".".join([*parts, n]) for n in subs)
            if len(subs) < len(names) or not names:
                out.add(".".join(parts))
        elif target.with_suffix(".py").is_file():
            out.add(".".join(parts))

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                parts = base + (node.module.split(".") if node.module else [])
            else:
                parts = (node.module or "").split(".")
            if parts[:1] == [root.name]:
                add(parts, [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == root.name:
                    add(a.name.split("."))
    return out


def _room_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or parts[0] != "nqf" else module


def _import_cycles(root: Path) -> list[list[str]]:
    """The import cycles among the files of one room (``nqfbook.kit``, ``nqf.training``, ..., or the whole
    of a flat package such as ``nqfbook``): the strongly connected components of the file-import graph
    with more than one file (or a file importing itself). Imports across rooms are the floors' business."""
    files = {_module_of(p, root): p for p in sorted(root.rglob("*.py"))}
    rooms = {m: (_room_of(m) if root.name == "nqf" else root.name) for m in files}
    graph = {m: sorted(t for t in _module_imports(p, root) if t in files and t != m and rooms[t] == rooms[m])
             for m, p in files.items()}
    # Tarjan's strongly connected components
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return sorted(cycles)


def test_no_import_cycle_inside_a_room():
    assert _import_cycles(NQF) == []
    assert _import_cycles(NQFBOOK) == []


def test_the_cycle_checker_sees_a_planted_cycle(tmp_path):
    """The check is not vacuous: two files of one room importing each other (one of them lazily, as
    ``_claims`` and ``_claims_table`` did) are a cycle; a file importing its room's ``__init__`` name that
    is a module is an edge to that module (any other name, to the ``__init__``), and imports across rooms are
not counted."""
    fake = tmp_path / "nqf"
    (fake / "training").mkdir(parents=True)
    (fake / "model").mkdir()
    (fake / "__init__.py").write_text("from .training import train\n")
    (fake / "training" / "__init__.py").write_text("from ._a import A\nfrom ._b import B\n")
    (fake / "training" / "_a.py").write_text("from ._b import B\nA = 1\n")
    (fake / "training" / "_b.py").write_text("def f():\n    from nqf.training._a import A\nB = 2\n")
    (fake / "training" / "_c.py").write_text("from . import _a\nfrom ..model import _x\n")
    (fake / "model" / "__init__.py").write_text("")
    (fake / "model" / "_x.py").write_text("from ..training import _c\n")  # across rooms: the floors' business
    assert _import_cycles(fake) == [["nqf.training._a", "nqf.training._b"]]
    (fake / "training" / "_b.py").write_text("B = 2\n")
    assert _import_cycles(fake) == []
    (fake / "training" / "_b.py").write_text("from . import _c\nB = 2\n")  # a longer circle: a -> b -> c -> a
    assert _import_cycles(fake) == [["nqf.training._a", "nqf.training._b", "nqf.training._c"]]
    (fake / "training" / "_b.py").write_text("from nqf.training import A\nB = 2\n")  # through the room's __init__
    assert _import_cycles(fake) == [["nqf.training", "nqf.training._a", "nqf.training._b"]]


def test_top_level_surface_is_small():
    """At most ~55 public names, counted from ``nqf/__init__.py`` itself (importing a
    submodule such as ``nqfbook.kit`` elsewhere adds an attribute, not a name of the surface)."""
    tree = ast.parse((NQF / "__init__.py").read_text())
    names = [a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names]
    public = [n for n in names if not n.startswith("_")]
    assert len(public) == len(set(public)), "a name is exported twice"
    assert len(public) <= 55, public


def _imported_packages(path: Path) -> set[str]:
    """Top-level packages named by the absolute imports of ``path`` (anywhere in the file)."""
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            tops.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
    return tops


def _imported_modules(path: Path, package: str) -> set[str]:
    """The modules of ``package`` (``nqf`` or ``nqfbook``) named by the absolute imports of ``path``
    (``from nqf import train`` names ``nqf``; a private name, ``from nqfbook.kit import _x``, is named
    ``nqfbook.kit._x``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] == package:
                out.add(node.module)
                out.update(f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_"))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == package)
    return out


#: the science's ground floor that the chapter kit shares (argument checks, line fits, shape aliases)
KIT_MAY_IMPORT_PRIVATE = {"nqf._checks", "nqf._fit", "nqf._types"}


def _tool_violations(nqf: Path = NQF, nqfbook: Path = NQFBOOK) -> list[str]:
    bad = [f"nqf/{p.relative_to(nqf)} imports nqfbook" for p in sorted(nqf.rglob("*.py"))
           if "nqfbook" in _imported_packages(p)]
    for p in sorted(nqfbook.rglob("*.py")):
        rel = p.relative_to(nqfbook)
        if rel.parts[0] == "kit":
            bad += [f"nqfbook/{rel.as_posix()} imports {m} (a private module of nqf)"
                    for m in sorted(_imported_modules(p, "nqf"))
                    if any(part.startswith("_") for part in m.split(".")) and m not in KIT_MAY_IMPORT_PRIVATE]
        else:
            bad += [f"nqfbook/{rel.as_posix()} imports {m} (the runner imports nothing of nqf)"
                    for m in sorted(_imported_modules(p, "nqf"))]
            bad += [f"nqfbook/{rel.as_posix()} imports {m} (of the kit the runner may import nqfbook.kit only)"
                    for m in sorted(_imported_modules(p, "nqfbook"))
                    if m.startswith("nqfbook.kit") and m != "nqfbook.kit"]
    return bad


def test_the_book_is_outside_the_science():
    assert NQFBOOK.is_dir() and not (NQF / "pipeline").exists()
    assert _tool_violations() == []


def test_the_tool_checker_sees_a_planted_import(tmp_path):
    """Planted imports are reported: nqf importing the book, the runner importing the science or a private
    part of the kit, the kit importing a private module of the science beyond the ground floor; the kit's
    public names are allowed to the runner, the science's public rooms to the kit, lazily or not."""
    lines = {"nqf": ["import nqfbook.cli"],
             "nqfbook": ["from nqf.training import train", "import nqf",
                         "from nqfbook.kit._parameters import parameter_type",
                         "from nqfbook.kit import parameter_type, _history",
                         "from nqfbook.kit import parameter_type", "import nqfbook.kit"],
             "nqfbook/kit": ["from nqf.training import train", "from nqf._checks import require",
                             "from nqf.training._trainer import train", "from nqf._random import normal"]}
    for pkg, body in lines.items():
        (tmp_path / pkg / "sub").mkdir(parents=True)
        (tmp_path / pkg / "sub" / "_x.py").write_text("def f():\n" + "".join(f"    {b}\n" for b in body))
    bad = _tool_violations(tmp_path / "nqf", tmp_path / "nqfbook")
    assert bad == ["nqf/sub/_x.py imports nqfbook",
                   "nqfbook/kit/sub/_x.py imports nqf._random (a private module of nqf)",
                   "nqfbook/kit/sub/_x.py imports nqf.training._trainer (a private module of nqf)",
                   "nqfbook/sub/_x.py imports nqf (the runner imports nothing of nqf)",
                   "nqfbook/sub/_x.py imports nqf.training (the runner imports nothing of nqf)",
                   "nqfbook/sub/_x.py imports nqfbook.kit._history (of the kit the runner may import nqfbook.kit only)",
                   "nqfbook/sub/_x.py imports nqfbook.kit._parameters (of the kit the runner may import nqfbook.kit only)"], bad
