"""``glue`` for the chapters: myst-nb's where the book's toolchain is installed, a plain display elsewhere."""

from __future__ import annotations

from typing import Any

from .._checks import require_kind


def glue(name: str, variable: Any, *, display: bool = True) -> None:
    """Record ``variable`` under ``name`` for the book's text (myst-nb's ``glue``), or only show it.

    The book builds with myst-nb, which reads the recorded value into the prose (``{glue:text}``,
    ``{glue:figure}``). A chapter run where myst-nb is not installed (Colab, which gets nqf and its
    science dependencies only) has no prose to fill: the value is displayed when ``display`` is true
    and otherwise dropped, so the chapter runs the same.
    """
    require_kind("name", isinstance(name, str) and bool(name), "a non-empty string", name)
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show

            show(variable)
        return None
    return myst_glue(name, variable, display)
