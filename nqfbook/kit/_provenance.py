"""Every figure's data and provenance: the arrays it plots, and the recipe, cell, parameters and commit
that drew it.

:func:`nqfbook.kit.savefig` writes, beside ``{name}.png``/``.svg``:

* ``{name}.npz``: every array the figure plots, read off the figure itself (so the file holds exactly what
  is drawn): per panel ``p``, each line ``panel{p}/line{j}/x`` and ``/y``, each scatter
  ``panel{p}/points{j}/xy``, each band ``panel{p}/band{j}/xy`` (its outline), each error-bar set
  ``panel{p}/segments{j}`` (``(n, 2, 2)``: ends of each bar), each image ``panel{p}/image{j}``; the chapter's
  own extra arrays (``savefig(..., data={"seeds": ...})``) under their names; and ``_meta``, a JSON string
  with each panel's title, axis labels (the units are in the labels) and scales, and each series' legend label.
* ``{name}.provenance.json``: :func:`figure_provenance`.

The site serves a copy of each ``.npz`` (``figure-data/{chapter}/{name}.npz`` beside the chapters), linked
from the line under each figure, which is glued as ``{glue}_provenance`` (``{glue:md}`` in the caption).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

#: Where the site serves the figures' data, relative to the chapters' directory (``nqfbook/site.py`` copies
#: ``{out_dir}/figures/{chapter}/*.npz`` there).
SITE_DATA_DIR = "figure-data"


def figure_arrays(fig, data: "dict[str, Any] | None" = None) -> dict[str, np.ndarray]:
    """The arrays ``fig`` plots (see the module docstring for the names), plus ``data``, plus ``_meta``."""
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection

    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"panels": [], "series": {}}
    for p, ax in enumerate(fig.axes):
        meta["panels"].append({"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                               "xscale": ax.get_xscale(), "yscale": ax.get_yscale()})

        def add(key: str, value: Any, label: str = "") -> None:
            arrays[key] = np.asarray(value, dtype=float)
            name = key.rsplit("/", 1)[0] if key.endswith(("/x", "/y")) else key
            meta["series"][name] = "" if label.startswith("_") else label

        for j, line in enumerate(ax.get_lines()):
            add(f"panel{p}/line{j}/x", np.ma.filled(np.ma.asarray(line.get_xdata(), dtype=float), np.nan))
            add(f"panel{p}/line{j}/y", np.ma.filled(np.ma.asarray(line.get_ydata(), dtype=float), np.nan),
                line.get_label())
        for j, coll in enumerate(ax.collections):
            label = coll.get_label()
            if isinstance(coll, LineCollection):
                add(f"panel{p}/segments{j}", np.array([np.asarray(s, float) for s in coll.get_segments()]), label)
            elif isinstance(coll, PathCollection):
                add(f"panel{p}/points{j}/xy", np.ma.filled(np.ma.asarray(coll.get_offsets(), dtype=float), np.nan),
                    label)
            elif isinstance(coll, PolyCollection) and coll.get_paths():
                add(f"panel{p}/band{j}/xy", coll.get_paths()[0].vertices, label)
        for j, image in enumerate(ax.images):
            add(f"panel{p}/image{j}", np.ma.filled(np.ma.asarray(image.get_array(), dtype=float), np.nan),
                image.get_label())
    for key, value in (data or {}).items():
        if key in arrays or key == "_meta" or key.startswith("panel"):
            raise ValueError(f"`data` key {key!r} clashes with the figure's own arrays (panel*/..., _meta)")
        arrays[key] = np.asarray(value)
        meta["series"][key] = "the chapter's own array (savefig's data=)"
    arrays["_meta"] = np.array(json.dumps(meta))
    return arrays


def write_figure_data(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` to ``path`` (``.npz``) through a temporary file: never a half-written file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
    try:
        np.savez_compressed(tmp, **arrays)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def load_figure_data(path: "str | os.PathLike") -> tuple[dict[str, np.ndarray], dict]:
    """``(arrays, meta)`` from a figure's ``.npz`` (for replotting: ``arrays["panel0/line0/x"]``, ...)."""
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files if k != "_meta"}
        meta = json.loads(str(f["_meta"]))
    return arrays, meta


# ------------------------------------------------------------------ provenance
#: The fidelity of the chapter running in this kernel (set by :func:`nqfbook.kit.start_chapter`; ``""`` before).
FIDELITY = {"value": ""}

#: The provenance of every figure saved since the chapter started (``savefig`` appends, ``start_chapter`` empties;
#: the claims file lists them).
FIGURES: list[dict[str, Any]] = []


def chapter_provenance() -> dict[str, Any]:
    """The claims file's provenance: the commit, the non-default parameters, the fidelity and each figure's."""
    return {"commit": commit(), "parameters": chapter_parameters(), "fidelity": FIDELITY["value"],
            "figures": list(FIGURES)}


def figure_provenance(name: str, chapter: str) -> dict[str, Any]:
    """Where a figure comes from: its chapter notebook and the code cell that drew it (counted in the
    source notebook, from 1), the recipe functions that cell and the cells defining its inputs call (functions
    of the chapters' own modules ``notebooks/ch*.py`` or of ``nqf``), the chapter's non-default parameters,
    the fidelity and the commit (:func:`commit`)."""
    cell, recipes = _drawing_cell()
    return {"figure": name, "chapter": chapter, "notebook": _notebook_name(chapter), "code_cell": cell,
            "recipes": recipes, "parameters": chapter_parameters(), "fidelity": FIDELITY["value"], "commit": commit()}


def provenance_markdown(prov: dict[str, Any]) -> str:
    """The line under a figure: its data file (a download link on the site), cell, recipes, parameters, commit."""
    data = f"{SITE_DATA_DIR}/{prov['chapter']}/{prov['figure']}.npz"
    where = f"code cell {prov['code_cell']} of `{prov['notebook']}`" if prov["code_cell"] else f"`{prov['notebook']}`"
    recipes = ", ".join(f"`{r}`" for r in prov["recipes"]) or "the notebook's own cells"
    params = ", ".join(f"`{k} = {v!r}`" for k, v in prov["parameters"].items()) or "the defaults"
    return (f"Data: {{download}}`{prov['figure']}.npz <{data}>` · drawn by {where} (recipes: {recipes}) · "
            f"parameters: {params}" + (f" at {prov['fidelity']} fidelity" if prov["fidelity"] else "") + f" · commit `{prov['commit'] or 'unknown'}`")


def commit(cwd: "str | os.PathLike | None" = None) -> str:
    """The commit of the working tree (12 hex digits), with ``+modified`` when ``nqf/``, ``nqfbook/`` or
    ``notebooks/`` differ from it; ``""`` outside a git checkout (Colab)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        top = git("rev-parse", "--show-toplevel")
        dirty = git("-C", top, "status", "--porcelain", "--", "nqf", "nqfbook", "notebooks")
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + ("+modified" if dirty else "")


def chapter_parameters() -> dict[str, Any]:
    """The parameters papermill injected other than ``fidelity`` and ``out_dir`` (the runner injects only the
    reader's ``-p`` values), with their values; ``{}`` in an interactive kernel."""
    from ._parameters import declared_parameters

    injected = [h for h in cells_run() if h.lstrip().startswith("# Parameters\n")]
    if not injected:
        return {}
    values = declared_parameters(injected[-1])
    return {k: v for k, (v, _) in values.items() if k not in ("fidelity", "out_dir") and v is not ...}


def cells_run() -> list:
    """``In``: the sources of the cells this kernel ran (``[]`` outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of the book
        return []
    ip = get_ipython()
    return [h for h in ip.user_ns.get("In", []) if isinstance(h, str)] if ip is not None else []


def _notebook_name(chapter: str) -> str:
    here = Path.cwd()
    found = sorted(here.glob(f"{chapter}_*.ipynb")) or sorted(here.glob(f"{chapter}*.ipynb"))
    return found[0].name if found else f"{chapter}.ipynb"


def _drawing_cell() -> tuple[int, list[str]]:
    """The source notebook's code-cell number of the running cell (0 outside a kernel), and the recipes."""
    history = cells_run()
    n = len(history) - 1  # the running cell is the last of ``In`` (IPython's execution_count is already n + 1)
    if n < 1 or not isinstance(history[n], str):
        return 0, []
    injected = sum(1 for h in history[1:n] if isinstance(h, str) and h.lstrip().startswith("# Parameters\n"))
    cells = [history[n], *_defining_cells(history[1:n], history[n])]
    from IPython import get_ipython

    return n - injected, _recipes_called(cells, get_ipython().user_ns)


def _defining_cells(earlier: list[str], cell: str) -> list[str]:
    """The latest earlier cell assigning each name the drawing cell uses (one level back)."""
    used = set(re.findall(r"\b([A-Za-z_]\w*)\b", cell))
    found: list[str] = []
    for name in used:
        pattern = re.compile(rf"^\s*(?:[\w, ()*]*,\s*)?\(?{re.escape(name)}\b[\w, ()*]*=[^=]", re.M)
        src = next((h for h in reversed(earlier) if isinstance(h, str) and pattern.search(h)), None)
        if src is not None and src not in found:
            found.append(src)
    return found


def _recipes_called(cells: list[str], namespace: dict) -> list[str]:
    """``module.function`` for each public function of a chapter module (``notebooks/ch*.py``) the cells call,
    and each public ``nqf`` function the drawing cell (the first) calls, as written there."""
    import inspect

    out: list[str] = []
    for k, src in enumerate(cells):
        for name in re.findall(r"\b([A-Za-z_][\w.]*)\s*\(", src):
            obj = namespace.get(name.split(".")[0])
            for part in name.split(".")[1:]:
                obj = getattr(obj, part, None)
            if not inspect.isfunction(obj) or obj.__name__ != name.split(".")[-1] or obj.__name__.startswith("_"):
                continue
            module = obj.__module__ or ""
            if re.fullmatch(r"ch\d\d_\w+", module) and "." not in obj.__qualname__:
                label = f"{module}.{obj.__name__}"
            elif k == 0 and module.split(".")[0] == "nqf":
                label = name
            else:
                continue
            if label not in out:
                out.append(label)
    return out
