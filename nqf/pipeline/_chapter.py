r"""The one-call start of a chapter: what every chapter's first code cell did by hand."""

from __future__ import annotations

import os

import jax

from ._claims import Claims
from ._style import use_style

FIDELITIES = ("quick", "full")


def start_chapter(chapter: str, fidelity: str, out_dir: str | os.PathLike) -> Claims:
    """Start a chapter: float64 for JAX (the book's tolerances need it; call this before creating any
    array), the book's figure style, the fidelity checked (``"quick"`` or ``"full"``), and the collector
    of the chapter's claims, which writes ``<out_dir>/claims/<chapter>.json``.

    The science package never flips JAX flags; the chapters do, through this call.
    """
    if not isinstance(chapter, str) or not chapter:
        raise TypeError(f"`chapter` must be a chapter id such as 'ch01'; got {chapter!r}.")
    if fidelity not in FIDELITIES:
        raise ValueError(f"`fidelity` must be 'quick' or 'full'; got {fidelity!r}.")
    jax.config.update("jax_enable_x64", True)
    use_style()
    return Claims(chapter, fidelity, out_dir)
