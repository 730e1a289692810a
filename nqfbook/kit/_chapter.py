r"""The one-call start of a chapter: what every chapter's first code cell did by hand."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax

from nqf._checks import require_kind
from nqf._checks import require_value
from . import _provenance
from ._claims import Claims
from ._parameters import check_parameter
from ._parameters import declared_parameters
from ._parameters import parameter_type
from ._style import FIGURE_FORMATS, use_style

FIDELITIES = ("quick", "full")

_LOWERING = "/jax/core/compile/jaxpr_to_mlir_module_duration"  # one per jit cache miss (tests/helpers.py)
_BACKEND = "/jax/core/compile/backend_compile_duration"  # XLA's compile (skipped on a persistent-cache hit)


class _CompileCounter:
    """JAX's compilations in this process since the chapter started: lowerings (one per cache miss of a
    jitted program) and the seconds spent lowering and in XLA's backend compile."""

    totals = {"lowerings": 0, "lowering_seconds": 0.0, "backend_compiles": 0, "backend_compile_seconds": 0.0}
    _listening = False

    def __init__(self):
        if not _CompileCounter._listening:
            jax.monitoring.register_event_duration_secs_listener(_CompileCounter._event)
            _CompileCounter._listening = True
        self.start = dict(self.totals)

    @staticmethod
    def _event(event: str, duration: float, **_) -> None:
        t = _CompileCounter.totals
        if event == _LOWERING:
            t["lowerings"] += 1
            t["lowering_seconds"] += duration
        elif event == _BACKEND:
            t["backend_compiles"] += 1
            t["backend_compile_seconds"] += duration

    def since_start(self) -> dict:
        return {k: round(v - self.start[k], 3) if isinstance(v, float) else v - self.start[k]
                for k, v in self.totals.items()}


def _check_fidelity(name: str, value: Any, what: str = "") -> None:
    require_value(name, value in FIDELITIES, f"'quick' or 'full'{what}", repr(value))


def start_chapter(chapter: str, fidelity: str, out_dir: str | os.PathLike) -> Claims:
    """Start a chapter: float64 for JAX (the book's tolerances need it; call this before creating any
    array), the book's figure style (:func:`nqfbook.kit.savefig` writes PNG and SVG, at quick fidelity the PNG
    only), the fidelity checked (``"quick"`` or ``"full"``), and the collector
    of the chapter's claims, which writes ``<out_dir>/claims/<chapter>.json`` (and, beside it, the count of
    JAX compilations since this call: ``<chapter>.compilations.json``, which the runner adds to its timings).

    The science package never flips JAX flags; the chapters do, through this call. It also lowers JAX's threefry
    hash unrolled on CPU (``unroll_threefry_on_cpu``: the same draws, compiled faster).
    """
    require_kind("chapter", isinstance(chapter, str) and bool(chapter), "a chapter id such as 'ch01'", chapter)
    _check_fidelity("fidelity", fidelity)
    _check_out_dir(out_dir)
    history = _history()
    check_injected_parameters(history)
    if history and not _injected(history):
        fidelity, out_dir = interactive_settings(fidelity, out_dir)
        _check_out_dir(out_dir)
    jax.config.update("jax_enable_x64", True)
    unroll_threefry_on_cpu()  # the same draws, compiled in a third of the time
    use_style(formats=("png",) if fidelity == "quick" else FIGURE_FORMATS)  # quick: the figures' PNG only
    _provenance.FIDELITY["value"] = fidelity  # named under every figure (savefig)
    _provenance.FIGURES.clear()
    claims = Claims(chapter, fidelity, out_dir)
    claims._compilations = _CompileCounter()  # finish() writes <out_dir>/claims/<chapter>.compilations.json
    return claims


def _check_out_dir(out_dir: Any) -> None:
    """``out_dir`` is a path (``str`` or ``os.PathLike``, not empty) of a folder that is or can be made: its
    nearest existing ancestor is a writable directory (a file there fails now, not at ``finish()``)."""
    require_kind("out_dir", isinstance(out_dir, (str, os.PathLike)) and not isinstance(out_dir, bytes),
                 "a folder path (str or os.PathLike) for the chapter's claims and figures", out_dir)
    require_value("out_dir", str(out_dir).strip() != "", "a folder path, not empty", repr(out_dir))
    folder = Path(out_dir)
    require_value("out_dir", not folder.exists() or folder.is_dir(), "a folder (the claims go to <out_dir>/claims/)",
                  f"{str(out_dir)!r}, an existing file")
    ancestor = next((a for a in (folder, *folder.parents) if a.exists()), Path("."))
    require_value("out_dir", ancestor.is_dir(), "a path whose existing part is a folder",
                  f"{str(out_dir)!r}, under the file {str(ancestor)!r}")
    require_value("out_dir", os.access(ancestor, os.W_OK | os.X_OK), "a folder this process can write in",
                  f"{str(out_dir)!r} ({str(ancestor)!r} is not writable)")


def interactive_settings(fidelity: str, out_dir: str | os.PathLike, *,
                         environ: "os._Environ | dict | None" = None) -> tuple[str, str]:
    """The fidelity and output folder of an interactive session (JupyterLab, a plain kernel).

    The runner and papermill inject ``fidelity`` and ``out_dir``; a notebook run by hand does not, and its
    parameters cell holds the book's defaults (full fidelity, the full build's folder). Run by hand, a
    chapter therefore runs at the fidelity named by the environment variable ``NQF_FIDELITY`` (``quick``
    when unset: ``make lab NQF_FIDELITY=full`` for the full chapter), and a folder of the book's builds
    (``.../_build/output/quick`` or ``.../full``) becomes ``.../_build/output/interactive/<fidelity>``, so
    a session never writes over a build. Any other ``out_dir`` the reader set is kept. The chapter's
    claims (``claims.fidelity``, ``claims.out_dir``) carry the values used.
    """
    env = os.environ if environ is None else environ
    chosen = env.get("NQF_FIDELITY", "quick")
    _check_fidelity("NQF_FIDELITY", chosen, " (the environment variable)")
    folder = Path(out_dir)
    if folder.parent.name == "output" and folder.name in FIDELITIES:
        folder = folder.parent / "interactive" / chosen
    print(f"Interactive session: fidelity {chosen!r} (NQF_FIDELITY), outputs in {folder.as_posix()}; "
          "the book's builds are left alone.")
    return chosen, folder.as_posix()


# ------------------------------------------------------------------ parameters given by papermill
def _history() -> list[str]:
    """The sources of the cells executed so far in this kernel (empty outside IPython, and for a shell that ran
    nothing: ``In[0]`` is always ``""``, and an ``InteractiveShell.instance()`` made by a library call is no session)."""
    return [h for h in _provenance.cells_run() if h]


def _injected(history: list[str]) -> bool:
    """Whether papermill (the runner, or papermill run directly with ``-p``) injected parameters."""
    return any(h.lstrip().startswith("# Parameters\n") for h in history)


def check_injected_parameters(history: list[str]) -> None:
    """Refuse parameters papermill injected that the chapter's parameters cell does not declare, or of
    another type than declared, or out of the declared range (papermill itself only warns and runs on): the rule
    the runner applies to ``-p`` too (:func:`~nqfbook.kit.parameter_type`; ``rays: int = None`` accepts None
    and ints, ``rays: "positive int" = None`` None and ints >= 1); an import path's module must be found on
    the kernel's path and define the attribute (``ParameterType.locate``).

    ``history`` holds the executed cell sources; papermill's injected cell starts with ``# Parameters``
    and follows the chapter's own parameters cell. Without an injected cell (JupyterLab, a plain
    kernel) there is nothing to check.
    """
    idx = [i for i, h in enumerate(history) if h.lstrip().startswith("# Parameters\n")]
    if not idx or idx[-1] == 0:
        return
    injected = declared_parameters(history[idx[-1]])
    declared = declared_parameters(history[idx[-1] - 1])
    unknown = sorted(set(injected) - set(declared))
    require_value(", ".join(unknown), not unknown, "a parameter of this chapter, one of "
                  f"{', '.join(f'`{n}`' for n in declared)} (see its parameters cell)", "no such parameter")
    for name, (value, _) in injected.items():
        if value is not ...:  # papermill injects literals; anything else is not the reader's -p
            default, annotation = declared[name]
            check_parameter(name, value, default=default, annotation=annotation)
            parameter_type(default, annotation=annotation).locate(name, value)  # an import path: its module found


def by_fidelity(name: str, value: Any, fidelity: str, *, quick: Any, full: Any) -> Any:
    """A chapter setting: ``value`` when the reader gave it (a parameter of the chapter, ``None`` by default),
    else the named default of the fidelity, ``quick`` or ``full``. The two sets of defaults sit below the
    parameters cell, so ``-p name=value`` (runner or papermill) overrides one setting at either fidelity.

    A value of another type than the defaults (the rule of :func:`parameter_type`, typed by the fidelity's
    default: an int is a float, a list is typed by its entries) is a ``TypeError`` naming the parameter.
    """
    _check_fidelity("fidelity", fidelity)
    default = quick if fidelity == "quick" else full
    if value is None:
        return default
    kind = parameter_type(default)
    require_kind(name, kind.accepts(value), f"of type {kind.name} like its defaults (quick {quick!r}, full {full!r})",
                 value)
    return type(default)(value) if isinstance(default, float) else value


def unroll_threefry_on_cpu() -> bool:
    """Lower JAX's threefry hash on CPU unrolled, as JAX lowers it on every other platform: the same integer
    arithmetic, so every draw is bit for bit the same (``tests/test_random.py``), at a quarter to a half of the
    compile time.

    On CPU, JAX 0.10 lowers ``threefry2x32`` as a rolled ``fori_loop`` of its five rounds, which XLA compiles
    as a separate while loop at every draw site; under ``vmap`` that costs about 0.3 s of compile per draw on 2
    cores (issue 31, measured alone: five vmapped draws 1.60 s rolled, 0.42 s unrolled; Fig. 6's inputs of
    attention 1.59 s, 0.50 s). Drawing is also faster (4M normals: 51 ms rolled, 36 ms unrolled).

    This replaces a lowering rule in the running process, for programs lowered after the call; the science
    package nqf never does it. :func:`start_chapter` and the test suite call it. Returns
    whether the rule was replaced (``False`` where JAX's internals differ from 0.10's: the draws are the same
    either way, only compiled as JAX chose)."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.random import threefry2x32 as threefry

        primitive, rule = threefry.threefry2x32_p, threefry._threefry2x32_lowering_rule
    except (ImportError, AttributeError):
        return False
    mlir.register_lowering(primitive, rule, platform="cpu", inline=False)
    return True
