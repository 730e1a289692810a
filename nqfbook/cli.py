"""The command line: ``python -m nqfbook`` (see the package docstring for what it does)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Optional

from .cache import source_tree_hash
from .chapters import (check_parameter_type, check_toc, discover_chapters, find_root, kernel_path,
                       parameter_info, parameter_names, parse_parameters, positive_int, select_chapters)
from .execute import chapter_summary, record_timing, run_chapter
from .layout import (FIDELITIES, PROG, REQUIRED_PARAMETERS, ChapterResult, Interrupted, Layout, RunnerError,
                     fmt_seconds, rm)
from .processes import end_children, on_signal, prepare_environment
from .site import build_site, clean_site_temporaries, housekeeping


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m {PROG}",
        description="Execute the book's chapter notebooks with papermill, check their claims, "
        "and optionally build the HTML site.",
    )
    p.add_argument("--fidelity", choices=FIDELITIES, default="full",
                   help="problem sizes to run at (default: full)")
    p.add_argument("--only", action="append", default=[], metavar="CHAPTER",
                   help="run only this chapter (ch01, or the notebook's name); repeatable")
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="extra papermill parameter for the selected chapters; repeatable")
    p.add_argument("--build", action="store_true",
                   help="after running every chapter, build the HTML site "
                   "(_build/html, or _build/html-quick at quick fidelity)")
    p.add_argument("--force", action="store_true", help="re-execute even if a valid cached execution exists")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failed chapter")
    p.add_argument("--list", action="store_true", help="list the chapters and their parameters, then exit")
    p.add_argument("--cell-timeout", type=positive_int, default=3600, metavar="SECONDS",
                   help="maximum time of one cell, a positive integer (default 3600)")
    p.add_argument("--root", default=None, help="repository root (default: found from the current directory)")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point of ``python -m nqfbook``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        root = find_root(args.root)
        chapters = discover_chapters(root)
        if not chapters:
            raise RunnerError(f"no chapters: {root / 'notebooks'} holds no ch*.ipynb")
        selected = select_chapters(chapters, args.only)
        if args.build and (args.only or args.parameter):
            raise RunnerError("--build publishes every chapter at its default parameters; "
                              "drop --only/-p (or run them without --build)")
        params = parse_parameters(args.parameter)
        names, info, sources = {}, {}, {}
        for nb_path in selected:
            try:
                names[nb_path.stem] = parameter_names(nb_path)
            except RunnerError as exc:
                raise RunnerError(f"{nb_path.stem}: {exc}") from None
            absent = [n for n in REQUIRED_PARAMETERS if n not in names[nb_path.stem]]
            if absent:
                raise RunnerError(f"{nb_path.stem}: the parameters cell must assign {', '.join(absent)}")
            unknown = [k for k in params if k not in names[nb_path.stem]]
            if unknown:
                raise RunnerError(f"{nb_path.stem} has no parameter {', '.join(unknown)}; "
                                  f"its parameters are {', '.join(names[nb_path.stem])}")
            info[nb_path.stem] = parameter_info(nb_path)
            for k, v in params.items():
                default, _, hint = info[nb_path.stem][k]
                module = check_parameter_type(nb_path.stem, k, default, v, hint=hint,
                                              path=kernel_path(root, nb_path))
                if module is not None:  # an import path's module: its source is part of the cache key
                    sources.setdefault(nb_path.stem, {})[k] = module
        if args.list:
            for nb_path in selected:
                print(f"{nb_path.stem}:")
                for name, (default, help_, hint) in info[nb_path.stem].items():
                    shown = "(not a literal)" if default is ... else repr(default)
                    print(f"  {name}{': ' + hint if hint else ''} = {shown}" + (f"  # {help_}" if help_ else ""))
            return 0
        if args.build:
            problems = check_toc(root, chapters)
            if problems:
                raise RunnerError("\n  ".join(["book/_toc.yml:", *problems]))
    except RunnerError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in handlers:
        signal.signal(sig, on_signal)
    try:
        return _main(args, root, chapters, selected, params, sources)
    except Interrupted as exc:
        for sig in handlers:  # a second signal does not interrupt the clean-up
            signal.signal(sig, signal.SIG_IGN)
        end_children()
        clean_site_temporaries(root / "_build")
        for fidelity in FIDELITIES:
            rm(Layout(root, fidelity).stage)
        site = Layout(root, args.fidelity).site
        state = ("the previous site is unchanged" if site.is_dir() else "there was no site")
        print(f"\n{PROG}: interrupted by {exc.signame}; child processes ended, temporary "
              f"directories removed, the last good outputs kept; {state}", file=sys.stderr, flush=True)
        return 128 + exc.signum
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)


def _main(args, root: Path, chapters: list[Path], selected: list[Path], params: dict,
          sources: dict) -> int:
    try:
        prepare_environment(root, args.fidelity)
    except RunnerError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    housekeeping(root)
    lay = Layout(root, args.fidelity)
    tree_hash = source_tree_hash(root)
    n = len(selected)
    print(f"{PROG}: {n} chapter(s) at {args.fidelity} fidelity, root {root}", flush=True)
    results: list[ChapterResult] = []
    t_all = time.perf_counter()
    for i, nb_path in enumerate(selected, 1):
        print(f"[{i}/{n}] {nb_path.stem} ({args.fidelity}) ...", flush=True)
        res = run_chapter(root, nb_path, args.fidelity, params, force=args.force,
                          cell_timeout=args.cell_timeout, tree_hash=tree_hash,
                          progress_bar=sys.stdout.isatty(), sources=sources.get(nb_path.stem))
        results.append(res)
        record_timing(lay, res, params)
        if res.status == "passed":
            summary = chapter_summary(lay, res.stem) or f"{res.n_claims} claims hold"
            print(f"[{i}/{n}] {res.stem}: ok, {summary}, {fmt_seconds(res.seconds)}", flush=True)
        elif res.status == "cached":
            summary = chapter_summary(lay, res.stem) or f"{res.n_claims} claims hold"
            print(f"[{i}/{n}] {res.stem}: up to date (cached; executed in {fmt_seconds(res.seconds)}), "
                  f"{summary}", flush=True)
        else:
            print(f"[{i}/{n}] {res.stem}: FAILED after {fmt_seconds(res.seconds)}", flush=True)
            if args.fail_fast:
                break
    print(f"{PROG}: chapters done in {fmt_seconds(time.perf_counter() - t_all)}", flush=True)

    failed = [r for r in results if not r.ok]
    if failed:
        print(f"\n{PROG}: {len(failed)} chapter(s) failed at {args.fidelity} fidelity:", file=sys.stderr)
        for r in failed:
            print(f"  {r.stem}: {r.message}", file=sys.stderr)
        if args.build:
            print(f"{PROG}: site not built; {_site_state(lay)}", file=sys.stderr)
        return 1

    if args.build:
        print(f"{PROG}: building the site ...", flush=True)
        ok, msg, secs = build_site(root, args.fidelity, chapters)
        if not ok:
            print(f"{PROG}: site build FAILED; {_site_state(lay)}.\n    {msg}", file=sys.stderr)
            return 3
        record_timing(lay, None, params, site_seconds=secs)
        print(f"{PROG}: site built in {fmt_seconds(secs)}: {msg}", flush=True)
    return 0


def _site_state(lay: Layout) -> str:
    if lay.site.is_dir():
        return "the previous site is unchanged"
    return f"there is no previous site ({lay.site.relative_to(lay.root)} does not exist)"
