r"""THE rule for a chapter's parameters: which values a parameter of a chapter's ``parameters`` cell accepts.

One rule, two users: the runner (``nqfbook``) checks every ``-p name=value`` against it before it executes
anything, and :func:`~nqf.pipeline.start_chapter` checks the cell papermill injected against it inside the
kernel (papermill itself only warns and runs on); :func:`~nqf.pipeline.by_fidelity` types a chapter setting
by its fidelity's default with it.

A parameter is typed by its annotation when it has one that names known types, else by its default:

* ``int``: an int, never a bool; ``float``: a float or an int (never a bool); ``str``, ``bool``, ``dict``:
  exactly that; ``list`` (or ``tuple``): a list or a tuple; ``list[float]``: a list or tuple whose
  entries are floats (ints too); ``Optional[int]``, ``int | None``, ``Union[int, str]``: either.
* **A declared default of None is accepted**: ``rays: int = None`` (the fidelity's default unless the
  reader gives one) accepts None and ints, and refuses bools, floats and strings.
* Without a usable annotation, the default types the parameter: ``steps = 100`` is an int, ``rate = 0.1``
  a float, ``teacher_s = [1.0, 0.5]`` a ``list[float]`` (a list is typed by its entries when they share
  one kind), and a default of ``None`` (or not a literal) accepts anything.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from .._checks import require_kind

_NAMES = {"bool": "bool", "int": "int", "float": "float", "str": "str", "dict": "dict", "Dict": "dict",
          "None": "None", "NoneType": "None", "list": "list", "List": "list", "tuple": "list", "Tuple": "list",
          "Sequence": "list"}


@dataclasses.dataclass(frozen=True)
class ParameterType:
    """What one chapter parameter accepts (see the module docstring for the rule).

    Attributes:
        kinds: the accepted kinds: ``"int"``, ``"float"``, ``"str"``, ``"bool"``, ``"dict"``, ``"None"``, or
            ``("list", kinds_of_the_entries)`` (entries of any kind: ``("list", None)``); ``None`` accepts
            anything.
        expected: how a message says it (``"int or None"``, ``"of type int like its default 100"``).
    """

    kinds: frozenset | None
    expected: str

    @property
    def name(self) -> str:
        """The type as an annotation would say it (``"int or None"``, ``"list[float]"``; ``"anything"``)."""
        return "anything" if self.kinds is None else _name(self.kinds)

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (a Python literal, as papermill injects it) is of this type."""
        return self.kinds is None or _accepts(self.kinds, value)


def _accepts(kinds: frozenset, value: Any) -> bool:
    if value is None:
        return "None" in kinds
    if isinstance(value, bool):
        return "bool" in kinds
    if isinstance(value, int):
        return "int" in kinds or "float" in kinds
    if isinstance(value, float):
        return "float" in kinds
    if isinstance(value, str):
        return "str" in kinds
    if isinstance(value, dict):
        return "dict" in kinds
    if isinstance(value, (list, tuple)):
        entries = [k[1] for k in kinds if isinstance(k, tuple)]
        return any(e is None or all(_accepts(e, v) for v in value) for e in entries)
    return False


def _annotation_kinds(node: ast.AST) -> frozenset | None:
    """The kinds an annotation names (``None`` when it names a type the rule does not know)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation: "int"
        try:
            return _annotation_kinds(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return None
    if isinstance(node, ast.Constant) and node.value is None:
        return frozenset({"None"})
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _annotation_kinds(node.left), _annotation_kinds(node.right)
        return None if left is None or right is None else left | right
    if isinstance(node, (ast.Name, ast.Attribute)):
        kind = _NAMES.get(node.id if isinstance(node, ast.Name) else node.attr)
        if kind is None:
            return None
        return frozenset({("list", None) if kind == "list" else kind})
    if isinstance(node, ast.Subscript):
        head = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", "")
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head in ("Optional", "Union"):
            parts = [_annotation_kinds(a) for a in args]
            if any(p is None for p in parts):
                return None
            out = frozenset().union(*parts)
            return out | {"None"} if head == "Optional" else out
        if _NAMES.get(head) == "list":
            args = [a for a in args if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
            entries = [_annotation_kinds(a) for a in args]
            entry = None if not entries or any(e is None for e in entries) else frozenset().union(*entries)
            return frozenset({("list", entry)})
        if _NAMES.get(head) == "dict":
            return frozenset({"dict"})
    return None


def _default_kinds(default: Any) -> frozenset | None:
    """The kinds the default of a parameter stands for (``None``: anything)."""
    if default is None or default is ...:
        return None
    if isinstance(default, bool):
        return frozenset({"bool"})
    if isinstance(default, int):
        return frozenset({"int"})
    if isinstance(default, float):
        return frozenset({"float"})
    if isinstance(default, str):
        return frozenset({"str"})
    if isinstance(default, dict):
        return frozenset({"dict"})
    if isinstance(default, (list, tuple)):
        entries = {_default_kinds(v) for v in default}
        if entries == {frozenset({"int"}), frozenset({"float"})}:
            entries = {frozenset({"float"})}  # [1, 0.5]: floats
        return frozenset({("list", entries.pop() if len(entries) == 1 and None not in entries else None)})
    return None


def _name(kinds: frozenset) -> str:
    def one(k):
        if isinstance(k, tuple):
            return "list" if k[1] is None else f"list[{_name(k[1])}]"
        return k

    order = sorted(kinds, key=lambda k: (k == "None", isinstance(k, tuple), str(k)))
    return " or ".join(one(k) for k in order)


def parameter_type(default: Any, *, annotation: str = "") -> ParameterType:
    """The type of a chapter parameter declared ``name: annotation = default`` (``annotation`` as text,
    ``""`` for none; ``default`` a Python literal, ``...`` when it is not one): see the module docstring."""
    kinds = None
    if annotation and annotation.strip():
        try:
            kinds = _annotation_kinds(ast.parse(annotation.strip(), mode="eval").body)
        except SyntaxError:
            kinds = None
    if kinds is not None:
        if default is None:
            kinds = kinds | {"None"}
        return ParameterType(kinds, _name(kinds))
    kinds = _default_kinds(default)
    if kinds is None:
        return ParameterType(None, "anything")
    return ParameterType(kinds, f"of type {_name(kinds)} like its default {default!r}")


def check_parameter(name: str, value: Any, *, default: Any, annotation: str = "") -> None:
    """Raise ``TypeError`` naming parameter ``name`` unless ``value`` is of the type declared by
    ``name: annotation = default`` (:func:`parameter_type`)."""
    kind = parameter_type(default, annotation=annotation)
    shown = "<not a literal>" if default is ... else repr(default)
    declared = f"{name}: {annotation} = {shown}" if annotation else f"{name} = {shown}"
    require_kind(name, kind.accepts(value), f"{kind.expected} (a chapter parameter, declared `{declared}`)", value)


def declared_parameters(source: str) -> dict[str, tuple[Any, str]]:
    """``name -> (default, annotation)`` of the top-level assignments of a parameters cell: the default as a
    Python literal (``...`` when it is not one), the annotation as text (``""`` without one)."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            try:
                value = ast.literal_eval(node.value) if node.value is not None else None
            except ValueError:
                value = ...
            annotation = ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else ""
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = (value, annotation)
    return out
