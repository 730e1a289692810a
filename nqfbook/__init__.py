"""nqfbook, the book: its chapter kit (:mod:`nqfbook.kit`: claims, verdicts, parameters, glue, tables, figure
style) and its runner (execute the chapters with papermill, check their claims, build the site).

Neither is part of the science package ``nqf``, which never imports ``nqfbook``. The runner executes and
hashes ``nqf/`` and ``nqfbook/kit/``; of the kit it imports only the rule for a chapter's parameters (the one
the kernel checks too), and only when a ``-p`` value is checked: importing the kit imports JAX (about 1 s),
which a run without ``-p``, ``--list`` or ``--help`` does not pay.

Command line (from the repository root)::

    python -m nqfbook [--fidelity quick|full] [--only ch01 ...] [-p name=value ...]
             [--build] [--force] [--fail-fast] [--list]
             [--cell-timeout SECONDS] [--root PATH]

* The chapters are ``notebooks/ch*.ipynb`` (sorted). Each must have a cell
  tagged ``parameters`` assigning at least ``fidelity`` and ``out_dir``;
  the runner injects ``fidelity`` and ``out_dir = _build/output/{fidelity}``
  (relative to the notebook's directory: no path of the build machine on the
  page) plus any ``-p name=value``
  (the value is read as a Python literal if it is one, else as a string).
* Executed notebooks go to ``_build/executed/{fidelity}/``; a failed one to
  ``_build/executed/{fidelity}/failed/``. After each chapter the runner reads
  ``{out_dir}/claims/{chNN or stem}.json`` and fails if it is missing, was
  written for another fidelity, or records a failed claim. Wall times go to
  ``_build/output/{fidelity}/timings.json``.
* ``-p`` values are checked before anything runs: a parameter given twice is
  refused, and each value must be of its declared type and in its declared
  range (``rays: "positive int" = None``, ``etas: "list[nonnegative float]"``;
  :func:`nqfbook.kit.parameter_type`). A parameter declared ``"import path"``
  (chapter 10's ``model``) must name a module found on the kernel's path (the
  notebook's folder, ``PYTHONPATH``) whose source defines the attribute.
* A chapter is re-executed unless a previous successful execution had the same
  key: content hash of (the notebook, its parameters, the source of a module a
  ``-p`` import path names, every file under
  ``nqf/`` and ``nqfbook/kit/`` -- a superset of the sources it imports --, ``pyproject.toml``,
  ``requirements-lock.txt``, Python version, fidelity) *and* its executed
  notebook (content hash recorded when it was written), claims file and the
  files it wrote are still there, unchanged. A hand-edited executed notebook
  is never "up to date". ``--force`` always re-executes. The runner's own
  files (the rest of ``nqfbook/``) are not in the key: editing the tool re-executes nothing.
* A re-execution first sets the chapter's last good outputs (executed
  notebook, claims, figures) aside under ``_build/executed/{fidelity}/.previous/``
  and puts them back if the run fails or is interrupted; the failed run's
  notebook and outputs go to ``_build/executed/{fidelity}/failed/``. Nothing
  is deleted before the new outputs exist.
* Executed notebooks are normalised before they are kept (timing metadata and
  machine paths removed, stderr dropped, consecutive stdout chunks merged), so
  that the same commit gives byte-identical pages. Wall times go to
  ``timings.json``, never onto a page.
* ``--build`` (all chapters, default parameters only) then stages the site
  under ``_build/stage/{fidelity}`` (``_config.yml``, ``book/``, executed
  notebooks at ``notebooks/``, each checked against its recorded hash), runs
  ``jupyter-book build --all -W --keep-going`` (in its own process group) into
  a temporary directory ``_build/.site-*``, and only if that succeeds swaps it
  into ``_build/html`` (``_build/html-quick`` at quick fidelity). A failed or
  interrupted build leaves the previous site in place.
* SIGTERM and SIGINT end the child processes (kernel, jupyter-book) with their
  whole process groups, restore the chapter being run, remove temporary
  directories, and exit with 128 + the signal number. Every run (of any kind)
  first repairs what a killed run left behind: a site swap cut between its two
  renames, stale ``_build/.site-*`` directories, a chapter's outputs set aside.

Exit status: 0 success, 1 a chapter failed (cell error or claim), 2 usage or
configuration error, 3 the site build failed, 130/143 interrupted by
SIGINT/SIGTERM. Messages name the chapter and the failed claims, or the cell
error with its index in the source notebook.

Environment given to the kernels: ``JAX_ENABLE_X64=1``,
``JAX_COMPILATION_CACHE_DIR=_build/jax_cache`` (unless already set),
``PYTHONPATH`` starting with the repository root (so the repository's own
``nqf`` is the one imported and hashed).
"""

from .cache import cache_key as cache_key
from .cache import source_tree_hash as source_tree_hash
from .cache import verify_executed as verify_executed
from .chapters import check_toc as check_toc
from .chapters import discover_chapters as discover_chapters
from .chapters import find_root as find_root
from .chapters import parameter_names as parameter_names
from .chapters import parameter_info as parameter_info
from .chapters import check_parameter_type as check_parameter_type
from .chapters import parse_parameter as parse_parameter
from .chapters import positive_int as positive_int
from .chapters import select_chapters as select_chapters
from .chapters import toc_documents as toc_documents
from .cli import main as main
from .execute import run_chapter as run_chapter
from .layout import FIDELITIES as FIDELITIES
from .layout import ChapterResult as ChapterResult
from .layout import Interrupted as Interrupted
from .layout import Layout as Layout
from .layout import RunnerError as RunnerError
from .layout import chapter_id as chapter_id
from .normalise import normalise_executed as normalise_executed
from .processes import end_children as end_children
from .site import build_site as build_site
from .site import housekeeping as housekeeping
from .site import timings_markdown as timings_markdown

__all__ = [
    "FIDELITIES",
    "RunnerError",
    "Interrupted",
    "ChapterResult",
    "Layout",
    "positive_int",
    "find_root",
    "chapter_id",
    "discover_chapters",
    "select_chapters",
    "parameter_names",
    "parameter_info",
    "check_parameter_type",
    "parse_parameter",
    "toc_documents",
    "check_toc",
    "source_tree_hash",
    "cache_key",
    "verify_executed",
    "normalise_executed",
    "run_chapter",
    "timings_markdown",
    "build_site",
    "housekeeping",
    "end_children",
    "main",
]
