"""The chapters: the repository root, discovery and ``--only``, the parameters cell, ``-p``
values, ``--cell-timeout``, and the table of contents (``book/_toc.yml``)."""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from .layout import REQUIRED_PARAMETERS, RunnerError, chapter_id


def positive_int(text) -> int:
    """Parse a positive whole number of seconds (``--cell-timeout``).

    Raises:
        argparse.ArgumentTypeError: for anything else (``2.5``, ``nan``, ``inf``, ``0``, ``-1``, ``x``).
    """
    if isinstance(text, bool):
        raise argparse.ArgumentTypeError(f"expected a positive integer number of seconds; got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        try:
            value = int(str(text).strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a positive integer number of seconds; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer number of seconds; got {text!r}")
    return value


def find_root(start: Optional[os.PathLike] = None) -> Path:
    """The repository root: ``start`` if given, else the first directory upwards
    from the current one that holds ``_config.yml`` and ``notebooks/``."""
    if start is not None:
        root = Path(start).resolve()
        if not (root / "notebooks").is_dir():
            raise RunnerError(f"--root {root}: no notebooks/ directory there")
        return root
    here = Path.cwd().resolve()
    for cand in (here, *here.parents):
        if (cand / "_config.yml").is_file() and (cand / "notebooks").is_dir():
            return cand
    pkg_parent = Path(__file__).resolve().parent.parent
    if (pkg_parent / "notebooks").is_dir():
        return pkg_parent
    raise RunnerError(
        "cannot find the repository root (a directory with _config.yml and notebooks/); "
        "run from the repository or pass --root"
    )


def discover_chapters(root: Path) -> list[Path]:
    """``notebooks/ch*.ipynb``, sorted by name."""
    return sorted(p for p in (Path(root) / "notebooks").glob("ch*.ipynb") if p.is_file())


def select_chapters(chapters: list[Path], only: list[str]) -> list[Path]:
    """Chapters matching ``--only`` values (``ch01``, a full stem, or a path)."""
    if not only:
        return list(chapters)
    selected: list[Path] = []
    for want in only:
        key = Path(want).name
        key = key[: -len(".ipynb")] if key.endswith(".ipynb") else key
        hits = [p for p in chapters if p.stem == key] or [
            p for p in chapters if chapter_id(p.stem) == key
        ]
        if len(hits) != 1:
            avail = ", ".join(p.stem for p in chapters) or "(none)"
            what = "matches no chapter" if not hits else "is ambiguous"
            raise RunnerError(f"--only {want!r} {what}; chapters: {avail}")
        if hits[0] not in selected:
            selected.append(hits[0])
    return sorted(selected)


# ------------------------------------------------------------- parameters
def parameter_names(notebook) -> list[str]:
    """Names assigned in the notebook's ``parameters``-tagged cell (through ``papermill.inspect_notebook``).

    Args:
        notebook: path of a notebook, or a notebook node (``nbformat.read``).

    Raises:
        RunnerError: if there is not exactly one such code cell or it does not parse.
    """
    import nbformat
    import papermill

    nb = nbformat.read(notebook, as_version=4) if isinstance(notebook, (str, os.PathLike)) else notebook
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1 or cells[0].cell_type != "code":
        raise RunnerError(
            f"needs exactly one code cell tagged 'parameters' (found {len(cells)})"
        )
    try:
        ast.parse(cells[0].source)
    except SyntaxError as exc:
        raise RunnerError(f"the parameters cell does not parse: {exc}") from exc
    if isinstance(notebook, (str, os.PathLike)):
        return list(papermill.inspect_notebook(str(notebook)))
    with tempfile.TemporaryDirectory(prefix="nqf-inspect-") as tmp:
        path = Path(tmp) / "notebook.ipynb"
        nbformat.write(nb, path)
        return list(papermill.inspect_notebook(str(path)))


def parameter_info(notebook) -> dict[str, tuple[Any, str, str]]:
    """``name -> (default, help, type)`` of the parameters cell: the default as a Python literal (``...`` when
    it is not one), the help text of the assignment's trailing comment and its annotation (``"str | None"``;
    ``""`` without one), papermill's conventions."""
    import papermill

    out = {}
    for name, info in papermill.inspect_notebook(str(notebook)).items():
        try:
            default = ast.literal_eval(info.get("default", ""))
        except (ValueError, SyntaxError):
            default = ...
        hint = info.get("inferred_type_name") or ""
        out[name] = (default, info.get("help", "") or "", "" if hint == "None" else hint)
    return out


def check_parameter_type(chapter: str, name: str, default: Any, value: Any, *, hint: str = "",
                         path: Optional[list] = None) -> Optional[Path]:
    """A ``-p`` value must be of the parameter's type and in its declared range: its annotation ``hint``
    (``"int"``, ``"list[float]"``, ``"positive int"``, ``"list[nonnegative float]"``, ``"import path"``),
    else the type of its ``default``, by the one rule the kernel checks too (:func:`nqfbook.kit.parameter_type`:
    ``rays: int = None`` accepts None and ints, not bools, floats or strings; ``rays: "positive int" = None``
    also refuses ints < 1; an int is a float; a list is typed by its entries). Checked before any execution, so
    a wrong value never runs a chapter.

    For an import path (``model: "import path" = "ch10_models:make_model"``) the module must be found on
    ``path`` (the kernel's ``sys.path``: the notebook's folder, ``PYTHONPATH``, the environment) and its source
    must define the attribute; its file is returned (the cache key hashes it), ``None`` for other parameters.

    The rule is imported from ``nqfbook.kit`` here, when a ``-p`` value is checked, not when the runner
    starts: importing ``nqf`` imports JAX (about 1 s), which a run without ``-p`` does not pay.
    """
    from nqfbook.kit import parameter_type

    kind = parameter_type(default, annotation=hint)
    try:
        kind.check(name, value)
        return kind.locate(name, value, path) if kind.word == "import path" else None
    except (TypeError, ValueError) as exc:
        text = str(exc).replace(f"`{name}`", f"-p {name}", 1).rstrip(".")
        raise RunnerError(f"{chapter}: {text}") from None


def kernel_path(root: Path, notebook: Path) -> list[str]:
    """The ``sys.path`` a chapter's kernel gets: its folder (the kernel's cwd), the repository root and
    ``PYTHONPATH`` (as :func:`nqfbook.processes.prepare_environment` sets it), then this interpreter's own
    entries (the same environment), without the runner's working directory."""
    pp = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    own = sys.path[1:] if sys.path and sys.path[0] in ("", os.getcwd()) else list(sys.path)
    return [str(Path(notebook).parent), str(root), *pp, *own]


def parse_parameter(text: str) -> tuple[str, Any]:
    """``"n=100"`` -> ``("n", 100)``; non-literal values stay strings (like papermill's ``-p``)."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise RunnerError(f"-p expects name=value with a Python identifier as name; got {text!r}")
    if name in REQUIRED_PARAMETERS:
        raise RunnerError(
            f"-p {name}=... is set by the runner; use --fidelity (out_dir is _build/output/<fidelity>)"
        )
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = raw
    return name, value


def parse_parameters(texts: list[str]) -> dict[str, Any]:
    """Every ``-p name=value`` (:func:`parse_parameter`); a name given twice is refused (the runner never
    picks one of two values silently)."""
    params: dict[str, Any] = {}
    for text in texts:
        name, value = parse_parameter(text)
        if name in params:
            raise RunnerError(f"-p {name} is given twice ({params[name]!r} and {value!r}); give each parameter once")
        params[name] = value
    return params


# ------------------------------------------------------------------ the toc
def toc_documents(root: Path) -> list[str]:
    """Document names (no suffix) listed in ``book/_toc.yml``, in order."""
    import yaml

    toc_path = Path(root) / "book" / "_toc.yml"
    if not toc_path.is_file():
        raise RunnerError(f"missing {toc_path}")
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8")) or {}
    docs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in ("root", "file"):
                if isinstance(node.get(k), str):
                    docs.append(node[k])
            for k in ("parts", "chapters", "sections", "subtrees", "entries"):
                if k in node:
                    walk(node[k])
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return [d[: -len(Path(d).suffix)] if Path(d).suffix in (".md", ".ipynb") else d for d in docs]


def _resolve_doc(root: Path, doc: str) -> Optional[Path]:
    for suffix in (".md", ".ipynb", ".rst"):
        p = Path(root) / f"{doc}{suffix}"
        if p.is_file():
            return p
    return None


def check_toc(root: Path, chapters: list[Path]) -> list[str]:
    """Problems with the toc: entries that do not exist, notebooks the runner does not execute."""
    root = Path(root)
    problems = []
    stems = {c.stem for c in chapters}
    for doc in toc_documents(root):
        path = _resolve_doc(root, doc)
        if path is None:
            problems.append(f"book/_toc.yml lists {doc!r}, but no {doc}.md/.ipynb exists")
        elif path.suffix == ".ipynb" and not (path.parent == root / "notebooks" and path.stem in stems):
            problems.append(
                f"book/_toc.yml lists notebook {doc!r}, which the runner does not execute "
                "(only notebooks/ch*.ipynb are executed; it would be published unexecuted)"
            )
    return problems
