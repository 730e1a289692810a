"""Named quantitative claims of a chapter, checked and written to JSON.

Every chapter of the book ends with a *claims cell* (BOOK.md, rule 6): each
quantitative statement of the chapter becomes a named claim
``(measured, predicted, tolerance)`` or a bound, all claims are written to
``{out_dir}/claims/{chapter}.json``, and any failed claim raises
:class:`ClaimError`, which stops the notebook and therefore ``make book`` /
``make test``.

Example::

    from nqf.pipeline import Claims

    claims = Claims("ch01", fidelity, out_dir)
    claims.close("remainder slope (no Z2)", slope, 3.0, atol=0.05,
                 note="log-log fit of |f - f(0) - Tr[MA]| against ||W||, Thm 1")
    claims.less("cross-neuron Hessian blocks", max_offdiag, 1e-12)
    claims.table()      # shown in the notebook
    claims.finish()     # writes the JSON, raises ClaimError if any claim failed

Semantics, for every kind of claim:

* ``close``:  ``|measured - predicted| <= atol + rtol * |predicted|``
  (at least one of ``rtol``/``atol``; the missing one counts as 0);
* ``less``:   ``measured < bound`` (strict);
* ``greater``: ``measured > bound`` (strict);
* ``within``: ``lo <= measured <= hi`` (inclusive).

Every kind takes ``sanity=True`` for a *sanity check*: a check of our own
code, data generator or experimental setup (the two weight matrices of a
comparison really differ, training reduced the loss, the data satisfy the
theorem's hypothesis) rather than an independent test of the paper. A sanity
check fails the chapter like a claim, but it is labelled as such in the table
and the JSON and counted apart in the summary, so "N claims hold" counts only
evidence about the paper (BOOK.md rule 9). A *paper claim* compares an
independent measurement with an independent prediction and could fail if the
paper were wrong.

A NaN anywhere in a comparison fails the claim. Values are converted to
python floats (JAX/NumPy scalars and size-1 arrays are accepted).
``chapter`` should be the chapter id (``"ch01"``) or the notebook's file stem
(``"ch01_neural_quadratic_form"``): the book runner looks for either name.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import os
import pathlib
import re
import tempfile
from typing import Any, Optional


_CHAPTER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ClaimError(AssertionError):
    """Raised by :meth:`Claims.finish` when at least one claim failed."""


def _as_float(value: Any, what: str) -> float:
    """Convert a python/NumPy/JAX scalar or size-1 array to a python float."""
    if isinstance(value, bool):
        return float(value)
    try:
        import numpy as np

        arr = np.asarray(value)
    except Exception as exc:  # pragma: no cover - numpy is a dependency
        raise ValueError(f"{what} must be a real number; got {value!r}") from exc
    if arr.size != 1:
        raise ValueError(f"{what} must be a scalar; got an array of shape {arr.shape}")
    if np.iscomplexobj(arr):
        raise ValueError(f"{what} must be real; got {value!r}")
    try:
        return float(arr.reshape(()))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be a real number; got {value!r}") from exc


def _tol(value: Any, what: str) -> Optional[float]:
    if value is None:
        return None
    v = _as_float(value, what)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{what} must be finite and >= 0; got {v!r}")
    return v


def _json_number(x: Optional[float]):
    """Strict JSON has no NaN/inf: write those as the strings "nan", "inf", "-inf"."""
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _fmt(x: Optional[float]) -> str:
    if x is None:
        return ""
    return f"{x:.6g}"


@dataclasses.dataclass(frozen=True)
class Claim:
    """One checked claim (see the module docstring for the semantics of ``kind``)."""

    name: str
    kind: str  # "close" | "less" | "greater" | "within"
    measured: float
    passed: bool
    predicted: Optional[float] = None
    lo: Optional[float] = None
    hi: Optional[float] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    note: str = ""
    sanity: bool = False  # a check of our code/data/setup, not evidence about the paper

    @property
    def allowed(self) -> Optional[float]:
        """For ``close``: the allowed deviation ``atol + rtol*|predicted|``."""
        if self.kind != "close":
            return None
        return (self.atol or 0.0) + (self.rtol or 0.0) * abs(self.predicted)

    @property
    def error(self) -> Optional[float]:
        """For ``close``: the measured deviation ``|measured - predicted|``."""
        if self.kind != "close":
            return None
        return abs(self.measured - self.predicted)

    def target(self) -> str:
        """Human-readable statement of what was required."""
        if self.kind == "close":
            tols = []
            if self.rtol is not None:
                tols.append(f"rtol {self.rtol:.3g}")
            if self.atol is not None:
                tols.append(f"atol {self.atol:.3g}")
            return f"≈ {_fmt(self.predicted)} ({', '.join(tols)})"
        if self.kind == "less":
            return f"< {_fmt(self.hi)}"
        if self.kind == "greater":
            return f"> {_fmt(self.lo)}"
        return f"in [{_fmt(self.lo)}, {_fmt(self.hi)}]"

    def describe(self) -> str:
        """One line: name, measured vs required, and by how much it missed."""
        line = f"{self.name}: measured {_fmt(self.measured)}, required {self.target()}"
        if self.kind == "close":
            line += f"; |measured - predicted| = {_fmt(self.error)} vs allowed {_fmt(self.allowed)}"
        if self.note:
            line += f"  [{self.note}]"
        return line

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "measured": _json_number(self.measured),
            "predicted": _json_number(self.predicted),
            "lo": _json_number(self.lo),
            "hi": _json_number(self.hi),
            "rtol": self.rtol,
            "atol": self.atol,
            "error": _json_number(self.error),
            "allowed": _json_number(self.allowed),
            "passed": self.passed,
            "note": self.note,
            "sanity": self.sanity,
        }


def _cell(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{html.escape(text)}</td>"


class ClaimsTable:
    """Display object returned by :meth:`Claims.table` (HTML, Markdown or text).

    Paper claims come first; sanity checks follow in a collapsed block of their own.
    """

    def __init__(self, chapter: str, fidelity: str, claims: list[Claim]):
        self.chapter = chapter
        self.fidelity = fidelity
        self.claims = list(claims)

    @staticmethod
    def _row(c: Claim) -> tuple[str, ...]:
        return (
            c.name,
            _fmt(c.measured),
            c.target(),
            "✓ pass" if c.passed else "✗ FAIL",
            c.note,
        )

    def _rows(self) -> list[tuple[str, ...]]:
        return [self._row(c) for c in self._ordered()]

    def _ordered(self) -> list[Claim]:
        return [c for c in self.claims if not c.sanity] + [c for c in self.claims if c.sanity]

    _HEAD = ("claim", "measured", "required", "result", "note")
    _CLASSES = ("claim", "num", "num", "result", "note")

    def _html_table(self, claims: list[Claim], caption: str) -> str:
        head = "".join(f"<th>{h}</th>" for h in self._HEAD)
        body = []
        for c in claims:
            cls = "" if c.passed else ' class="fail"'
            cells = "".join(_cell(v, k) for v, k in zip(self._row(c), self._CLASSES))
            body.append(f"<tr{cls}>{cells}</tr>")
        return (
            f'<table class="nqf-claims"><caption>{caption}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )

    def _repr_html_(self) -> str:
        esc = html.escape
        paper = [c for c in self.claims if not c.sanity]
        sanity = [c for c in self.claims if c.sanity]
        n_fail_p = sum(not c.passed for c in paper)
        n_fail_s = sum(not c.passed for c in sanity)
        where = f"{esc(self.chapter)} at fidelity “{esc(self.fidelity)}”"
        out = [
            '<div class="nqf-claims-wrap">',
            self._html_table(
                paper, f"Paper claims of {where}: {len(paper) - n_fail_p} of {len(paper)} pass"
            ),
        ]
        if sanity:
            open_attr = " open" if n_fail_s else ""
            out.append(
                f'<details class="nqf-sanity"{open_attr}><summary>Sanity checks of our own code, data '
                f"and setup (not evidence about the paper): {len(sanity) - n_fail_s} of "
                f"{len(sanity)} pass</summary>"
                + self._html_table(sanity, f"Sanity checks of {where}")
                + "</details>"
            )
        out.append("</div>")
        return "".join(out)

    def _repr_markdown_(self) -> str:
        def cell(s: str) -> str:
            return s.replace("|", "\\|").replace("\n", " ")

        head = ("kind",) + self._HEAD
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += [
            "| " + " | ".join(cell(v) for v in (("sanity" if c.sanity else "paper"),) + self._row(c)) + " |"
            for c in self._ordered()
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        head = ("kind",) + self._HEAD
        rows = [head] + [(("sanity" if c.sanity else "paper"),) + self._row(c) for c in self._ordered()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        out = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(out)

    __repr__ = __str__


class ClaimsSummary:
    """What :meth:`Claims.finish` returns: the counts, shown as one line in the notebook.

    Attributes:
        path: where the JSON was written.
        n_paper: number of paper claims (all hold, else ``finish`` raised).
        n_sanity: number of sanity checks (all pass).
    """

    def __init__(self, chapter: str, fidelity: str, path: pathlib.Path, n_paper: int, n_sanity: int):
        self.chapter = chapter
        self.fidelity = fidelity
        self.path = path
        self.n_paper = n_paper
        self.n_sanity = n_sanity

    def __str__(self) -> str:
        # the file name only: the page must not show a path of the build machine
        return (
            f"{self.chapter} at fidelity {self.fidelity!r}: all {self.n_paper} paper claims hold; "
            f"all {self.n_sanity} sanity checks pass (written to claims/{self.path.name})"
        )

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return (
            f'<p class="nqf-claims-summary"><strong>{self.n_paper} paper claims hold</strong>, '
            f"and {self.n_sanity} sanity checks of our own code pass "
            f"({html.escape(self.chapter)}, fidelity “{html.escape(self.fidelity)}”).</p>"
        )


class Claims:
    """Collects the named claims of one chapter; see the module docstring.

    Args:
        chapter: chapter id used for the JSON file name (``"ch01"``).
        fidelity: ``"quick"`` or ``"full"`` (recorded in the JSON; the runner
            checks it matches the fidelity it asked for).
        out_dir: the chapter's output directory; the claims go to
            ``{out_dir}/claims/{chapter}.json``.
    """

    def __init__(self, chapter: str, fidelity: str, out_dir: "str | os.PathLike"):
        if not isinstance(chapter, str) or not _CHAPTER_RE.match(chapter):
            raise ValueError(
                f"`chapter` must be a file-name-safe id such as 'ch01'; got {chapter!r}"
            )
        if not isinstance(fidelity, str) or not fidelity:
            raise ValueError(f"`fidelity` must be a non-empty string; got {fidelity!r}")
        self.chapter = chapter
        self.fidelity = fidelity
        self.out_dir = pathlib.Path(out_dir)
        self._claims: list[Claim] = []

    # ------------------------------------------------------------------ adding
    def _add(self, claim: Claim) -> bool:
        if any(c.name == claim.name for c in self._claims):
            raise ValueError(f"duplicate claim name {claim.name!r} in chapter {self.chapter}")
        self._claims.append(claim)
        return claim.passed

    @staticmethod
    def _check_name(name: Any) -> str:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"claim name must be a non-empty string; got {name!r}")
        return name

    def close(
        self,
        name: str,
        measured: Any,
        predicted: Any,
        *,
        rtol: Any = None,
        atol: Any = None,
        note: str = "",
        sanity: bool = False,
    ) -> bool:
        """Claim ``|measured - predicted| <= atol + rtol*|predicted|``; returns whether it holds."""
        name = self._check_name(name)
        if rtol is None and atol is None:
            raise ValueError(f"claim {name!r}: give at least one of rtol= or atol=")
        rtol_f = _tol(rtol, f"claim {name!r}: rtol")
        atol_f = _tol(atol, f"claim {name!r}: atol")
        m = _as_float(measured, f"claim {name!r}: measured")
        p = _as_float(predicted, f"claim {name!r}: predicted")
        allowed = (atol_f or 0.0) + (rtol_f or 0.0) * abs(p)
        passed = bool(math.isfinite(m) and math.isfinite(p) and abs(m - p) <= allowed)
        return self._add(
            Claim(name, "close", m, passed, predicted=p, rtol=rtol_f, atol=atol_f, note=note,
                  sanity=bool(sanity))
        )

    def less(self, name: str, measured: Any, bound: Any, *, note: str = "", sanity: bool = False) -> bool:
        """Claim ``measured < bound``; returns whether it holds."""
        name = self._check_name(name)
        m = _as_float(measured, f"claim {name!r}: measured")
        b = _as_float(bound, f"claim {name!r}: bound")
        passed = bool(m < b)  # False if either is NaN
        return self._add(Claim(name, "less", m, passed, hi=b, note=note, sanity=bool(sanity)))

    def greater(self, name: str, measured: Any, bound: Any, *, note: str = "", sanity: bool = False) -> bool:
        """Claim ``measured > bound``; returns whether it holds."""
        name = self._check_name(name)
        m = _as_float(measured, f"claim {name!r}: measured")
        b = _as_float(bound, f"claim {name!r}: bound")
        passed = bool(m > b)
        return self._add(Claim(name, "greater", m, passed, lo=b, note=note, sanity=bool(sanity)))

    def within(self, name: str, measured: Any, lo: Any, hi: Any, *, note: str = "",
               sanity: bool = False) -> bool:
        """Claim ``lo <= measured <= hi``; returns whether it holds."""
        name = self._check_name(name)
        m = _as_float(measured, f"claim {name!r}: measured")
        lo_f = _as_float(lo, f"claim {name!r}: lo")
        hi_f = _as_float(hi, f"claim {name!r}: hi")
        if lo_f > hi_f:
            raise ValueError(f"claim {name!r}: lo={lo_f!r} > hi={hi_f!r}")
        passed = bool(lo_f <= m <= hi_f)
        return self._add(Claim(name, "within", m, passed, lo=lo_f, hi=hi_f, note=note,
                               sanity=bool(sanity)))

    # --------------------------------------------------------------- reporting
    @property
    def claims(self) -> list[Claim]:
        """The claims recorded so far, in order."""
        return list(self._claims)

    @property
    def failed(self) -> list[Claim]:
        """The claims that do not hold."""
        return [c for c in self._claims if not c.passed]

    @property
    def path(self) -> pathlib.Path:
        """Where :meth:`finish` writes the JSON."""
        return self.out_dir / "claims" / f"{self.chapter}.json"

    def table(self) -> ClaimsTable:
        """A table of all claims for display in the notebook (HTML/Markdown/text)."""
        return ClaimsTable(self.chapter, self.fidelity, self._claims)

    def to_json(self) -> dict:
        failed = self.failed
        return {
            "chapter": self.chapter,
            "fidelity": self.fidelity,
            "passed": bool(self._claims) and not failed,
            "n_claims": len(self._claims),
            "n_paper": sum(not c.sanity for c in self._claims),
            "n_sanity": sum(c.sanity for c in self._claims),
            "n_failed": len(failed),
            "claims": [c.to_json() for c in self._claims],
        }

    def finish(self) -> "ClaimsSummary":
        """Write ``{out_dir}/claims/{chapter}.json`` atomically; raise if any claim failed.

        The JSON is written in every case (also when claims fail), so the
        runner can name the failed claims. A chapter without claims fails too.

        Returns:
            A :class:`ClaimsSummary` (its ``path`` is the JSON file), if every claim holds;
            it displays as one line counting paper claims and sanity checks apart.

        Raises:
            ClaimError: naming every failed claim with measured vs required.
        """
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_json(), indent=2, ensure_ascii=False, allow_nan=False)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.chapter}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

        if not self._claims:
            raise ClaimError(f"{self.chapter} ({self.fidelity}): no claims were recorded")
        if all(c.sanity for c in self._claims):
            raise ClaimError(f"{self.chapter} ({self.fidelity}): only sanity checks, no paper claim")
        failed = self.failed
        if failed:
            lines = [
                f"{self.chapter} ({self.fidelity}): {len(failed)} of "
                f"{len(self._claims)} claim(s) failed:"
            ]
            lines += [f"  - {c.describe()}" for c in failed]
            raise ClaimError("\n".join(lines))
        n_sanity = sum(c.sanity for c in self._claims)
        return ClaimsSummary(self.chapter, self.fidelity, path, len(self._claims) - n_sanity, n_sanity)

    def __repr__(self) -> str:
        return (
            f"Claims(chapter={self.chapter!r}, fidelity={self.fidelity!r}, "
            f"{len(self._claims)} claim(s) of which {sum(c.sanity for c in self._claims)} sanity, "
            f"{len(self.failed)} failed)"
        )
