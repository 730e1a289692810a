r"""THE rule for a chapter's parameters: which values a parameter of a chapter's ``parameters`` cell accepts.

One rule, two users: the runner (``nqfbook``) checks every ``-p name=value`` against it before it executes
anything, and :func:`~nqfbook.kit.start_chapter` checks the cell papermill injected against it inside the
kernel (papermill itself only warns and runs on); :func:`~nqfbook.kit.by_fidelity` types a chapter setting
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

**Ranges and kinds.** A declaration may also state the values it accepts, with a quoted annotation from a
small vocabulary (quoted, so that the kernel does not evaluate it; papermill reads it as the type name)::

    rays: "positive int" = None          # an int >= 1 (or None, the declared default)
    seed: "nonnegative int" = 0          # an int >= 0
    eta: "positive float" = 0.05         # a finite number > 0 (an int too)
    eps_min: "nonnegative float" = None  # a finite number >= 0
    threshold: "fraction" = 0.1          # a number in (0, 1)
    etas: "list[nonnegative float]" = None  # a non-empty list of such numbers (also list[positive int], ...)
    model: "import path" = "ch10_models:make_model"  # 'package.module:attribute'

The runner refuses a ``-p`` value out of its range before it executes anything, and so does
:func:`~nqfbook.kit.start_chapter` for what papermill injected; for an import path both also look for the
module on the kernel's path (``ParameterType.locate``) and for the attribute in its source. Ranges are
optional: a declaration without one (``steps: int = None``, ``steps = 100``) is checked for its type only,
as above; the rule never guesses a range from a default.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.machinery
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from nqf._checks import require_kind
from nqf._checks import require_value

_NAMES = {"bool": "bool", "int": "int", "float": "float", "str": "str", "dict": "dict", "Dict": "dict",
          "None": "None", "NoneType": "None", "list": "list", "List": "list", "tuple": "list", "Tuple": "list",
          "Sequence": "list"}


# the ranged kinds of the vocabulary: word -> (kind, lower bound, lower strict, upper bound, upper strict)
_RANGED = {
    "positive int": ("int", 1, False, None, False),
    "nonnegative int": ("int", 0, False, None, False),
    "positive float": ("float", 0.0, True, None, False),
    "nonnegative float": ("float", 0.0, False, None, False),
    "fraction": ("float", 0.0, True, 1.0, True),
}
_SAYS = {"positive int": ("an int >= 1", "ints >= 1"), "nonnegative int": ("an int >= 0", "ints >= 0"),
         "positive float": ("a finite number > 0", "finite numbers > 0"),
         "nonnegative float": ("a finite number >= 0", "finite numbers >= 0"),
         "fraction": ("a number in (0, 1)", "numbers in (0, 1)")}
IMPORT_PATH = "import path"
_IMPORT_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def _vocabulary(annotation: str) -> tuple[str, bool] | None:
    """``(word, is_list)`` when ``annotation`` is a word of the ranged vocabulary (``"positive int"``,
    ``"list[fraction]"``, ``"import path"``; quoted or not), else ``None``."""
    text = " ".join(annotation.strip().strip("\"'").split()).lower()
    m = re.fullmatch(r"(?:list|tuple)\[(.+)\]", text)
    word, is_list = (m.group(1).strip(), True) if m else (text, False)
    if word in _RANGED or (word == IMPORT_PATH and not is_list):
        return word, is_list
    return None


@dataclasses.dataclass(frozen=True)
class ParameterType:
    """What one chapter parameter accepts (see the module docstring for the rule).

    Attributes:
        kinds: the accepted kinds: ``"int"``, ``"float"``, ``"str"``, ``"bool"``, ``"dict"``, ``"None"``, or
            ``("list", kinds_of_the_entries)`` (entries of any kind: ``("list", None)``); ``None`` accepts
            anything.
        expected: how a message says it (``"int or None"``, ``"of type int like its default 100"``).
        word: the declared range or kind of the vocabulary (``"positive int"``, ``"import path"``), ``""``
            when the declaration states none (its type only is checked).
        entries: the range applies to the entries of a list (``"list[positive float]"``).
    """

    kinds: frozenset | None
    expected: str
    word: str = ""
    entries: bool = False

    @property
    def name(self) -> str:
        """The type as an annotation would say it (``"int or None"``, ``"list[float]"``; ``"anything"``)."""
        return "anything" if self.kinds is None else _name(self.kinds)

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (a Python literal, as papermill injects it) is of this type."""
        return self.kinds is None or _accepts(self.kinds, value)

    def problem(self, value: Any) -> str:
        """What is wrong with the value of a ``value`` this type :meth:`accepts` (``""``: nothing): out of the
        declared range, an empty list of a ranged list, an import path that is not ``'module:attribute'``."""
        if value is None or not self.word:
            return ""
        if self.word == IMPORT_PATH:
            return "" if _IMPORT_RE.match(value) else (
                f"{value!r}, not of the form 'package.module:attribute' (a module found next to the notebook or on "
                "PYTHONPATH, a colon, then the name of the factory it defines, e.g. 'ch10_models:make_model')")
        if self.entries:
            if len(value) == 0:
                return "an empty list"
            bad = [v for v in value if not _in_range(self.word, v)]
            return f"{list(value)!r} (out of range: {bad[0]!r})" if bad else ""
        return "" if _in_range(self.word, value) else repr(value)

    def check(self, name: str, value: Any, *, declared: str = "") -> None:
        """``TypeError`` naming ``name`` unless ``value`` is of this type, ``ValueError`` unless it is in the
        declared range (``declared``: the declaration, for the message)."""
        where = f" (a chapter parameter, declared `{declared}`)" if declared else ""
        require_kind(name, self.accepts(value), f"{self.expected}{where}", value)
        bad = self.problem(value)
        require_value(name, not bad, f"{self.expected}{where}", bad)

    def locate(self, name: str, value: Any, path: list[str] | None = None) -> Path | None:
        """For an import path ``'package.module:attribute'``: the file of its module found on ``path`` (the
        kernel's ``sys.path``; this interpreter's by default) without importing it, after checking that the
        module's source defines ``attribute``. ``ValueError`` naming ``name``, the module and the path searched
        (``PYTHONPATH`` with it) otherwise. ``None`` for a module without a Python source (built in, compiled).
        """
        self.check(name, value)
        if self.word != IMPORT_PATH or value is None:
            return None
        module, _, attribute = value.partition(":")
        search = [os.getcwd() if p == "" else p for p in (sys.path if path is None else path)]
        spec, missing = _find_module(module, search)
        where = (f"the kernel's path ({os.pathsep.join(search[:3])}{os.pathsep + '...' if len(search) > 3 else ''}: "
                 f"the notebook's folder, PYTHONPATH (now {os.environ.get('PYTHONPATH', '')!r}), the environment)")
        if spec is None:
            if module in sys.builtin_module_names:
                return None
            require_value(name, False, "an import path 'package.module:attribute' whose module the kernel can import",
                          f"{value!r}: no module {missing!r} on {where}; add the module's folder to PYTHONPATH, "
                          "or put the module next to the notebook")
        origin = getattr(spec, "origin", None)
        if not origin or not str(origin).endswith(".py") or not os.path.isfile(origin):
            return None
        try:
            tree = ast.parse(Path(origin).read_text(encoding="utf-8", errors="replace"), filename=str(origin))
        except SyntaxError as err:
            require_value(name, False, "an import path whose module parses",
                          f"{value!r}: module {module!r} ({origin}) has a syntax error at line {err.lineno}: {err.msg}")
        defined, open_ended = _top_level_names(tree)
        require_value(name, attribute in defined or open_ended, f"an import path whose module defines `{attribute}`",
                      f"{value!r}: module {module!r} (found on the notebook's folder or PYTHONPATH at {origin}) "
                      f"defines no `{attribute}` at its top level "
                      f"(it defines {', '.join(sorted(n for n in defined if not n.startswith('_'))[:8]) or 'nothing'})")
        return Path(origin)


def _in_range(word: str, v: Any) -> bool:
    _, lo, lo_strict, hi, hi_strict = _RANGED[word]
    v = float(v)
    if not math.isfinite(v):
        return False
    if lo is not None and (v <= lo if lo_strict else v < lo):
        return False
    return not (hi is not None and (v >= hi if hi_strict else v > hi))


def _find_module(module: str, search: list[str]):
    """``(spec, "")`` of ``module`` found on ``search`` without importing anything, or ``(None, the first
    missing dotted prefix)``."""
    parts = module.split(".")
    for i in range(len(parts)):
        full = ".".join(parts[: i + 1])
        spec = importlib.machinery.PathFinder.find_spec(full, search)
        if spec is None:
            return None, full
        if i < len(parts) - 1:
            search = list(spec.submodule_search_locations or [])
            if not search:
                return None, ".".join(parts[: i + 2])
    return spec, ""


def _top_level_names(tree: ast.Module) -> tuple[set[str], bool]:
    """The names a module binds at its top level (in ``if``/``try`` blocks too), and whether it may bind
    others this cannot see (``from x import *``, a module ``__getattr__``)."""
    names, open_ended = set(), False

    def targets(t):
        if isinstance(t, ast.Name):
            names.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)

    def walk(body):
        nonlocal open_ended
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
                open_ended |= node.name == "__getattr__"
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets(node.target)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    if a.name == "*":
                        open_ended = True
                    else:
                        names.add(a.asname or a.name.split(".")[0])
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(node, field, []) or [])
                for h in getattr(node, "handlers", []) or []:
                    walk(h.body)

    walk(tree.body)
    return names, open_ended


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
    ranged = _vocabulary(annotation) if annotation else None
    if ranged is not None:
        word, is_list = ranged
        kind = "str" if word == IMPORT_PATH else _RANGED[word][0]
        kinds = frozenset({("list", frozenset({kind}))}) if is_list else frozenset({kind})
        if default is None:
            kinds = kinds | {"None"}
        says = "an import path 'package.module:attribute'" if word == IMPORT_PATH else \
            (f"a non-empty list of {_SAYS[word][1]}" if is_list else _SAYS[word][0])
        return ParameterType(kinds, says + (" or None" if default is None else ""), word, is_list)
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
    ``name: annotation = default`` (:func:`parameter_type`), ``ValueError`` unless it is in the declared range."""
    kind = parameter_type(default, annotation=annotation)
    shown = "<not a literal>" if default is ... else repr(default)
    declared = f"{name}: {annotation} = {shown}" if annotation else f"{name} = {shown}"
    kind.check(name, value, declared=declared)


def _special_float(node: ast.AST) -> Any:
    """``float('nan')``, ``float('inf')``, ``float('-inf')`` (how papermill writes them) as floats, else ``...``."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and not node.keywords
            and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
            and node.args[0].value.strip().lower() in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity")):
        return float(node.args[0].value)
    return ...


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
                value = _special_float(node.value)
            annotation = ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else ""
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = (value, annotation)
    return out
