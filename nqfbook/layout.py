"""What every part of the runner shares: the fidelities, the errors, a chapter's result, where
everything lives under ``_build/``, and small atomic file operations."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any, Optional

PROG = "nqfbook"  # the prefix of every message the runner prints
FIDELITIES = ("quick", "full")
REQUIRED_PARAMETERS = ("fidelity", "out_dir")
KERNEL_NAME = "python3"
_CHID_RE = re.compile(r"^(ch\d+)")


class RunnerError(Exception):
    """A usage or configuration error (exit status 2)."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT arrived (raised by the CLI's signal handler)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def signame(self) -> str:
        return signal.Signals(self.signum).name


@dataclasses.dataclass
class ChapterResult:
    """Outcome of one chapter."""

    stem: str
    status: str  # "passed" | "cached" | "failed"
    seconds: float
    message: str = ""
    n_claims: int = 0
    failed_claims: list = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("passed", "cached")


def chapter_id(stem: str) -> str:
    """``"ch01_neural_quadratic_form"`` -> ``"ch01"``."""
    m = _CHID_RE.match(stem)
    return m.group(1) if m else stem


@dataclasses.dataclass
class Layout:
    """Where the runner keeps everything of one fidelity under ``{root}/_build``."""

    root: Path
    fidelity: str

    @property
    def build(self) -> Path:
        return self.root / "_build"

    @property
    def out_dir(self) -> Path:
        return self.build / "output" / self.fidelity

    @property
    def executed(self) -> Path:
        return self.build / "executed" / self.fidelity

    @property
    def records(self) -> Path:
        return self.executed / ".records"

    @property
    def locks(self) -> Path:
        return self.build / ".locks"

    @property
    def timings(self) -> Path:
        return self.out_dir / "timings.json"

    @property
    def site(self) -> Path:
        return self.build / ("html" if self.fidelity == "full" else f"html-{self.fidelity}")

    @property
    def stage(self) -> Path:
        return self.build / "stage" / self.fidelity

    def executed_nb(self, stem: str) -> Path:
        return self.executed / f"{stem}.ipynb"

    def record(self, stem: str) -> Path:
        return self.records / f"{stem}.json"

    def running_nb(self, stem: str) -> Path:
        return self.executed / ".running" / f"{stem}.ipynb"

    def previous(self, stem: str) -> Path:
        """Where a re-execution keeps the chapter's last good outputs until it succeeds."""
        return self.executed / ".previous" / stem

    def failed_nb(self, stem: str) -> Path:
        return self.executed / "failed" / f"{stem}.ipynb"

    def failed_outputs(self, stem: str) -> Path:
        return self.executed / "failed" / stem

    def claim_candidates(self, stem: str) -> list[Path]:
        names = dict.fromkeys([chapter_id(stem), stem])
        return [self.out_dir / "claims" / f"{n}.json" for n in names]

    def figure_dirs(self, stem: str) -> list[Path]:
        names = dict.fromkeys([chapter_id(stem), stem])
        return [self.out_dir / "figures" / n for n in names]

    def chapter_outputs(self, stem: str) -> list[Path]:
        """The chapter's own files under ``out_dir`` (claims and figures)."""
        return [*self.claim_candidates(stem), *self.figure_dirs(stem)]


# -------------------------------------------------------------- small utils
def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False, default=repr)
            fh.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_json(path: Path) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def rm(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def move(src: Path, dest: Path) -> None:
    """Rename ``src`` to ``dest`` (replacing it), creating parents."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    rm(dest)
    os.rename(src, dest)


_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return _ANSI_RE.sub("", text)


def fmt_seconds(s: Optional[float]) -> str:
    if s is None:
        return "—"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"
