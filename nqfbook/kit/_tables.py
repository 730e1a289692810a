r"""The one way a chapter shows a table of results: :func:`table`, never Markdown built by hand.

A table is a list of rows (tuples, or dicts keyed by column) or a pandas ``DataFrame``. Strings are
shown as written (MyST Markdown, so ``$A(x)$`` is typeset); numbers to 4 significant digits unless the
column's format says otherwise (``formats={"error": ".1e"}``); ``None`` and NaN as a dash.

Example::

    from nqfbook.kit import table

    table([(row.model, c.closed_form_error) for row, c in zip(rows, checks)],
          columns=["model", "closed form vs autodiff"], formats={"closed form vs autodiff": ".1e"})
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nqf._checks import require_kind
from nqf._checks import require_value

__all__ = ["Table", "table"]


def _number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _text(x: Any, fmt: str | None) -> str:
    if x is None:
        return "—"
    if hasattr(x, "shape") and getattr(x, "shape", None) == ():
        x = x.item()
    if _number(x):
        if isinstance(x, (float, np.floating)) and not math.isfinite(float(x)):
            return "—" if math.isnan(float(x)) else ("∞" if x > 0 else "−∞")
        if fmt:
            return format(x, fmt)
        if isinstance(x, (int, np.integer)):
            return str(int(x))
        return f"{float(x):.4g}"
    if isinstance(x, tuple):
        return "(" + ", ".join(_text(v, fmt) for v in x) + ")"
    return str(x)


class Table:
    """A table as the page shows it: Markdown (MyST, so math in cells is typeset) and plain text.

    Attributes:
        columns: the column titles.
        cells: the rows, each a tuple of the cells' text.
    """

    def __init__(self, columns: Sequence[str], cells: Sequence[Sequence[str]], align: Sequence[str]):
        self.columns = tuple(columns)
        self.cells = [tuple(r) for r in cells]
        self._align = tuple(align)

    def _repr_markdown_(self) -> str:
        def cell(s: str) -> str:
            return s.replace("|", "\\|").replace("\n", " ")

        rule = {"left": "---", "right": "---:"}
        lines = ["| " + " | ".join(cell(c) for c in self.columns) + " |",
                 "|" + "|".join(rule[a] for a in self._align) + "|"]
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in self.cells]
        return "\n".join(lines)

    def __str__(self) -> str:
        rows = [self.columns] + self.cells
        widths = [max(len(r[i]) for r in rows) for i in range(len(self.columns))]
        out = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(out)

    __repr__ = __str__


def table(rows: Any, *, columns: Sequence[str] | None = None, formats: Mapping[str, str] | None = None) -> Table:
    """A table of ``rows`` (tuples, dicts keyed by column, or a pandas ``DataFrame``) with ``columns``.

    Args:
        rows: the rows. Dicts take their columns from the first row unless ``columns`` is given.
        columns: the column titles (required for tuple rows).
        formats: a format spec per column title (``".1e"``, ``".3f"``) for its numbers; others show
            4 significant digits.

    Returns:
        A :class:`Table`, shown by the notebook as a Markdown table; numeric columns align right.
    """
    formats = dict(formats or {})
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a DataFrame
        columns = [str(c) for c in rows.columns] if columns is None else list(columns)
        rows = [tuple(r) for r in rows.itertuples(index=False)]
    require_kind("rows", isinstance(rows, Sequence) and not isinstance(rows, str), "a list of rows",
                 type(rows).__name__)
    rows = list(rows)
    if rows and isinstance(rows[0], Mapping):
        columns = list(rows[0]) if columns is None else list(columns)
        missing = [c for r in rows for c in columns if c not in r]
        require_value("rows", not missing, f"every row with the columns {columns}", f"missing {missing[:3]}")
        rows = [tuple(r[c] for c in columns) for r in rows]
    require_value("columns", columns is not None, "the column titles (rows are tuples)", "None")
    columns = [str(c) for c in columns]
    bad = [i for i, r in enumerate(rows) if len(r) != len(columns)]
    require_value("rows", not bad, f"{len(columns)} cells per row (one per column)",
                  f"row {bad[0]} has {len(rows[bad[0]])}" if bad else "")
    unknown = [k for k in formats if k not in columns]
    require_value("formats", not unknown, f"keys among the columns {columns}", repr(unknown))
    cells = [tuple(_text(v, formats.get(c)) for v, c in zip(r, columns)) for r in rows]
    align = ["right" if rows and all(_number(r[i]) or r[i] is None for r in rows) else "left"
             for i in range(len(columns))]
    return Table(columns, cells, align)
