"""One figure style for the whole book, and predictable figure paths.

Conventions, used by every chapter:

* **theory = solid line** (closed forms, numerical solutions of the flow):
  ``ax.plot(t, z_theory, **THEORY_KW, label="Thm 6 (theory)")``;
* **measurement = markers without a line** (GD/SGD runs, autodiff, fits):
  ``ax.plot(t, z_gd, **MEASURED_KW, label="GD (measured)")``; a theory value at discrete
  settings (one per K, say) is a cross (``"x"``, ``"+"``), never an open marker;
* a second compared curve of the same kind (e.g. module vs its NQF) uses the
  same colour with ``linestyle="--"`` and says so in the legend;
* colours come from the Okabe–Ito colour-blind-safe cycle :data:`PALETTE`,
  one colour per mode/architecture/sample, shared by its theory and
  measurement;
* axes are labelled with units or "(rescaled)", and the caption names the
  paper figure/equation and the parameters.

Call :func:`use_style` once at the top of a notebook (after the imports) and
save every figure with :func:`savefig`, which writes
``{out_dir}/figures/{chapter}/{name}.png`` and ``.svg`` (at quick fidelity, through
:func:`nqfbook.kit.start_chapter`, the PNG only).

This module only touches matplotlib, and only when its functions are called.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nqf._checks import require_value


#: Okabe–Ito colours (without yellow, which is unreadable on white).
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
)

#: Keyword arguments of ``ax.plot`` for theory curves: a solid line, no markers.
THEORY_KW: dict[str, Any] = {"linestyle": "-", "linewidth": 1.6, "marker": "None", "zorder": 2}

#: Keyword arguments of ``ax.plot`` for measurements: open markers, no line.
MEASURED_KW: dict[str, Any] = {
    "linestyle": "None",
    "marker": "o",
    "markersize": 4.5,
    "markerfacecolor": "none",
    "markeredgewidth": 1.1,
    "zorder": 3,
}

#: Width of the book's text column in inches at the page's scale (the figure dpi below): a
#: figure at most this wide is shown at (nearly) its own size, so its 9-pt ticks and legend
#: render at 9 pt or more. A wider figure is scaled down and its text with it: split its panels.
COLUMN_WIDTH_IN: float = 7.5

#: Smallest font size of the style (ticks, legends), in points.
MIN_FONT_PT: float = 9.0


def figsize(ncols: int, nrows: int, *, panel_height: float = 3.0) -> tuple[float, float]:
    """A figure size for ``ncols`` x ``nrows`` panels that fits the column.

    One panel is 6 in wide (the default figure), two or three share ``COLUMN_WIDTH_IN`` (7.5 in);
    more than three panels in a row do not fit with readable text (split the figure).

    Args:
        ncols: panels side by side (1 to 3).
        nrows: rows of panels.
        panel_height: height of one row, in inches.

    Returns:
        ``(width, height)`` in inches, for ``plt.subplots(figsize=...)``.
    """
    require_value("ncols", isinstance(ncols, int) and 1 <= ncols <= 3,
                  "1, 2 or 3 (more panels do not fit the column)", repr(ncols))
    require_value("nrows", isinstance(nrows, int) and nrows >= 1, "a positive integer", repr(nrows))
    width = 6.0 if ncols == 1 else COLUMN_WIDTH_IN
    return (width, panel_height * nrows)


#: The rcParams set by :func:`use_style`.
RC_PARAMS: dict[str, Any] = {
    "figure.figsize": (6.0, 3.8),
    "figure.dpi": 110,
    "figure.facecolor": "white",
    "figure.constrained_layout.use": True,
    "savefig.dpi": 200,
    "savefig.facecolor": "white",
    "savefig.bbox": "tight",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],  # ships with matplotlib: same glyphs everywhere
    "mathtext.fontset": "dejavusans",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.formatter.use_mathtext": True,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.5,
    "image.cmap": "viridis",
    "svg.fonttype": "path",
    "svg.hashsalt": "nqf",  # deterministic ids: the same run gives the same SVG
}

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# what savefig writes into each format's metadata (None: a field that would change between runs, left out)
_METADATA = {"png": {"Software": None}, "svg": {"Date": None}}
#: Every format :func:`nqfbook.kit.savefig` can write, and its default.
FIGURE_FORMATS = tuple(_METADATA)
_formats: tuple[str, ...] = FIGURE_FORMATS


def use_style(*, formats: "Sequence[str]" = FIGURE_FORMATS) -> None:
    """Apply the book's matplotlib style (:data:`RC_PARAMS` and the :data:`PALETTE` cycle), and set the
    file formats :func:`nqfbook.kit.savefig` writes: ``("png", "svg")`` by default; :func:`nqfbook.kit.start_chapter`
    passes ``formats=("png",)`` at quick fidelity, whose figures are checked and viewed, not printed (an SVG costs
    as much to draw as the PNG: 24 s of the nine chapters' 49 s of figure files at quick, issue 31).

    Imports ``matplotlib.pyplot`` first, so that a notebook backend that sets
    its own rcParams on activation (the inline backend) cannot override ours.
    """
    global _formats
    formats = tuple(formats) if isinstance(formats, (tuple, list)) else formats
    require_value("formats", isinstance(formats, tuple) and len(formats) > 0 and set(formats) <= set(FIGURE_FORMATS)
                  and len(set(formats)) == len(formats),
                  f"a non-empty tuple or list of distinct formats among {FIGURE_FORMATS}", repr(formats))
    import matplotlib as mpl
    import matplotlib.pyplot  # noqa: F401  (activates the backend first)
    from cycler import cycler

    mpl.rcParams.update(RC_PARAMS)
    mpl.rcParams["axes.prop_cycle"] = cycler(color=list(PALETTE))
    _formats = formats


def _no_marker(line) -> bool:
    return line.get_marker() in (None, "None", "none", "", " ")


def _no_line(line) -> bool:
    return line.get_linestyle() in ("None", "none", "", " ") or line.get_linewidth() == 0


def _open_marker(line) -> bool:
    return not _no_marker(line) and str(line.get_markerfacecolor()).lower() == "none" \
        and line.get_marker() not in ("x", "+", "1", "2", "3", "4", "|", "_")


def _figure_conventions(fig) -> list[str]:
    """Where ``fig`` breaks the conventions above, read off its labelled curves: a curve labelled
    "(measured)" drawn without markers, or one labelled "(theory)" drawn with open markers (the measurements'
    glyph) or with neither a line nor a marker. A theory value at discrete settings may be a cross."""
    problems = []
    for i, ax in enumerate(fig.get_axes()):
        for line in ax.get_lines():
            label = str(line.get_label())
            if "(measured)" in label and _no_marker(line):
                problems.append(f"panel {i}: {label!r} is a measurement drawn without markers (MEASURED_KW)")
            if "(theory)" in label and (_open_marker(line) or (_no_line(line) and _no_marker(line))):
                problems.append(f"panel {i}: {label!r} is theory drawn with open markers or invisibly (THEORY_KW)")
    return problems


def savefig(fig, name: str, *, chapter: str, out_dir: "str | os.PathLike", glue: "str | None" = None,
            data: "dict[str, Any] | None" = None) -> dict[str, Path]:
    """Save ``fig`` as ``{out_dir}/figures/{chapter}/{name}.png`` and ``.svg`` (a chapter started at quick
    fidelity by :func:`nqfbook.kit.start_chapter` saves the PNG only).

    Each file is written to a temporary name and moved into place, so a
    figure path never holds a half-written file.

    Args:
        fig: a matplotlib figure.
        name: file name without extension, e.g. ``"fig1_structure_matrices"``.
        chapter: chapter id, e.g. ``"ch01"``.
        out_dir: the chapter's output directory (the notebook's ``out_dir`` parameter).
        glue: a name under which the saved PNG is glued for the book's text (``{glue:figure}``;
            :func:`nqfbook.kit.glue`, not displayed), shown at the size of the figure on screen
            (``figure.dpi``): the page shows the figure file itself, drawn once (gluing the figure
            object draws it a second time: 0.29 s a figure in a kernel, measured). The line under the
            figure (its data, cell, recipes, parameters and commit) is glued as ``{glue}_provenance``, which
            the caption shows with myst-nb's ``glue:md`` role (``:myst`` format).
        data: extra arrays for the figure's data file (the seeds of the runs, say), by name.

    Also writes the figure's data, ``{name}.npz`` (every array it plots, read off the figure, and ``data``),
    and ``{name}.provenance.json`` (the kit's provenance module, ``nqfbook/kit/_provenance.py``).

    Returns:
        ``{"png": Path, "svg": Path, "npz": Path, "provenance": Path}`` (without ``"svg"`` with the PNG only).

    Warns (``UserWarning``, "figure convention: ...") for each labelled curve that breaks the book's
    conventions: a "(measured)" curve without markers, a "(theory)" curve with open markers or invisible;
    the warnings are also written to ``{name}.conventions.txt`` beside the figure (removed once it passes).
    """
    for what, value in (("name", name), ("chapter", chapter)):
        require_value(what, isinstance(value, str) and bool(_NAME_RE.match(value)), "a file-name-safe string",
                      repr(value))
    require_value("name", not name.lower().endswith((".png", ".svg", ".pdf")), "a name without an extension",
                  repr(name))
    require_value("glue", glue is None or (isinstance(glue, str) and bool(glue)), "None or a non-empty string",
                  repr(glue))
    require_value("glue", glue is None or "png" in _formats,
                  "None while the style writes no PNG (the glued image is the saved PNG; use_style(formats=...))",
                  f"{glue!r} with formats {_formats}")
    folder = Path(out_dir) / "figures" / chapter
    folder.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for fmt, metadata in _METADATA.items():
        if fmt not in _formats:  # not written: a file of an earlier call in this format would be stale
            (folder / f"{name}.{fmt}").unlink(missing_ok=True)
            continue
        final = folder / f"{name}.{fmt}"
        tmp = folder / f".{name}.{fmt}.{os.getpid()}.tmp"
        try:
            fig.savefig(tmp, format=fmt, metadata=metadata)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                tmp.unlink()
        paths[fmt] = final
    problems = [f"figure convention: {chapter}/{name}: {p}" for p in _figure_conventions(fig)]
    record = folder / f"{name}.conventions.txt"  # read by the chapter tests (the published notebook drops stderr)
    if problems:
        import warnings

        record.write_text("\n".join(problems) + "\n", encoding="utf-8")
        for problem in problems:
            warnings.warn(problem, UserWarning, stacklevel=2)
    elif record.exists():
        record.unlink()
    from ._provenance import FIGURES, figure_arrays, figure_provenance, provenance_markdown, write_figure_data

    paths["npz"] = write_figure_data(folder / f"{name}.npz", figure_arrays(fig, data))
    prov = figure_provenance(name, chapter)
    FIGURES[:] = [f for f in FIGURES if f["figure"] != name] + [prov]
    paths["provenance"] = folder / f"{name}.provenance.json"
    paths["provenance"].write_text(json.dumps(prov, indent=1, default=repr) + "\n", encoding="utf-8")
    if glue is not None:
        _glue_png(glue, paths["png"], float(fig.dpi))
        from IPython.display import Markdown

        from ._glue import glue as _glue

        _glue(f"{glue}_provenance", Markdown(provenance_markdown(prov)), display=False)
    return paths



def _glue_png(name: str, path: Path, screen_dpi: float) -> None:
    """Glue the PNG at ``path`` as an image ``screen_dpi / savefig.dpi`` of its pixel width (the width the
    inline backend would give the figure)."""
    import struct

    import matplotlib as mpl
    from IPython.display import Image

    from ._glue import glue as _glue

    data = path.read_bytes()
    saved_dpi = mpl.rcParams["savefig.dpi"]
    saved_dpi = screen_dpi if saved_dpi == "figure" else float(saved_dpi)
    width = struct.unpack(">I", data[16:20])[0]  # the PNG header's IHDR: width, then height
    _glue(name, Image(data=data, format="png", width=round(width * screen_dpi / saved_dpi)), display=False)
