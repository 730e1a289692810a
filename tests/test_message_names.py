"""Every ``nqf.*`` name that a message or a docstring of the package quotes exists (a message that sends the user
to a function that is gone is worse than none)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import nqf

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"(?<![\w.])nqf(?:\.[A-Za-z_]\w*)+")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    obj = nqf
    for i, part in enumerate(parts[1:], 1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:  # a private module (nqf.structure._neurons), imported on demand
            obj = importlib.import_module(".".join(parts[: i + 1]))
        except ImportError:
            # a trailing attribute of a class or an instance (nqf.model.MSE.outputs, nqf.flow.ODEOptions.rtol)
            return isinstance(obj, type) and part in getattr(obj, "__dataclass_fields__", {}) | vars(obj)
    return True


def _quoted_names() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "nqf").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in NAME.findall(node.value):
                    found.setdefault(name.rstrip("."), []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_quoted_nqf_name_exists():
    names = _quoted_names()
    assert len(names) > 50  # the scan sees the package's messages and docstrings
    missing = {n: where[:3] for n, where in names.items() if not _resolves(n)}
    assert not missing, missing
