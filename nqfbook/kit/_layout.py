"""Layouts for the book's column: panels stacked one under the other, each with its legend below it.

A figure at most ``COLUMN_WIDTH_IN`` wide is shown at its own size, so its 9-pt text
renders at 9 pt. Two panels side by side in that width leave a legend no room off the data; stacked, each
panel has the column's width, and a legend that does not fit inside goes below its own panel (a subfigure
per panel carries it, so constrained layout makes room for it).
"""

from __future__ import annotations

from typing import Any

from nqf._checks import require_value

from ._style import figsize


def stacked(n: int, *, panel_height: float = 3.2) -> tuple[Any, list[Any]]:
    """A figure of ``n`` panels stacked in the column, each in its own subfigure.

    Args:
        n: number of panels (one under the other).
        panel_height: height of one panel, in inches (its legend below it included).

    Returns:
        ``(fig, axes)``: the matplotlib figure and a list of ``n`` axes, top to bottom.
    """
    import matplotlib.pyplot as plt

    require_value("n", isinstance(n, int) and n >= 1, "a positive integer", repr(n))
    fig = plt.figure(figsize=figsize(1, n, panel_height=panel_height))
    subs = [fig] if n == 1 else list(fig.subfigures(n, 1))
    return fig, [s.subplots() for s in subs]


def legend_below(ax: Any, *, ncol: int = 2, **kwargs: Any) -> Any:
    """Draw ``ax``'s legend below its panel, outside the data.

    The legend belongs to the axes' (sub)figure, as made by :func:`stacked`, so it sits under that panel
    and not under the whole figure. Keyword arguments go to ``legend``.
    """
    handles, labels = ax.get_legend_handles_labels()
    return ax.figure.legend(handles, labels, loc="outside lower center", ncol=ncol, **kwargs)
