"""``glue`` for the chapters: myst-nb's glue record where the book's toolchain is installed, a plain display elsewhere.

The record is myst-nb's (``myst_nb.ext.glue.glue``, read back by its ``extract_glue_data_cell``): the value's
display bundle, each mimetype prefixed with :data:`GLUE_PREFIX` unless it is also shown, and the metadata
``{"scrapbook": {"name": ..., "mime_prefix": ...}}``. It is written here rather than by calling myst-nb's
function, whose module imports nbformat and with it jsonschema's format checkers, which build 38 grammars on
import: 1.0 s of every chapter's first glue (issue 31). ``tests/test_figure_style.py`` checks that both write
the same output.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from nqf._checks import require_kind

#: myst-nb's mimetype prefix of a value glued without being shown (``myst_nb.ext.glue.GLUE_PREFIX``)
GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, variable: Any, *, display: bool = True) -> None:
    """Record ``variable`` under ``name`` for the book's text (myst-nb's ``glue``), or only show it.

    The book builds with myst-nb, which reads the recorded value into the prose (``{glue:text}``,
    ``{glue:figure}``). A chapter run where myst-nb is not installed (Colab, which gets nqf and its
    science dependencies only) has no prose to fill: the value is displayed when ``display`` is true
    and otherwise dropped, so the chapter runs the same.
    """
    require_kind("name", isinstance(name, str) and bool(name), "a non-empty string", name)
    from IPython.display import display as show

    if importlib.util.find_spec("myst_nb") is None:
        if display:
            show(variable)
        return None
    from IPython.core.formatters import format_display_data

    bundle, metadata = format_display_data(variable)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    show({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
    return None
