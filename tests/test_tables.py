"""The one table helper of the chapters (nqfbook.kit.table)."""

from __future__ import annotations

import numpy as np
import pytest

from nqfbook.kit import table


def test_rows_of_tuples_with_formats_and_alignment():
    t = table([("MLP", 1.23456e-12, 3), ("CNN", np.float64(0.5), 12)], columns=["model", "error", "p"],
              formats={"error": ".1e"})
    md = t._repr_markdown_()
    assert md.splitlines()[1] == "|---|---:|---:|"
    assert "| MLP | 1.2e-12 | 3 |" in md and "| CNN | 5.0e-01 | 12 |" in md


def test_dicts_nan_none_and_markdown_cells():
    t = table([{"model": "$A(x)$ | row", "slope": 2.99991, "n": None}, {"model": "b", "slope": np.nan, "n": 1}])
    md = t._repr_markdown_()
    assert "| $A(x)$ \\| row | 3 | — |" in md and "| b | — | 1 |" in md


def test_a_dataframe_like_object():
    class Frame:  # what table() uses of a pandas DataFrame (pandas is not a dependency)
        columns = ["a", "b"]

        def to_dict(self):
            return {}

        def itertuples(self, index=True):
            return iter([(1.0, "x"), (2.5, "y")])

    t = table(Frame())
    assert t.columns == ("a", "b") and t.cells == [("1", "x"), ("2.5", "y")]


def test_bad_tables_are_refused():
    with pytest.raises(ValueError, match="columns"):
        table([(1, 2)])
    with pytest.raises(ValueError, match="cells per row"):
        table([(1, 2), (3,)], columns=["a", "b"])
    with pytest.raises(ValueError, match="formats"):
        table([(1, 2)], columns=["a", "b"], formats={"c": ".1e"})
    with pytest.raises(TypeError, match="rows"):
        table("ab", columns=["a"])
