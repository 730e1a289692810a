"""Named quantitative claims of a chapter, checked and written to JSON.

Every chapter of the book ends with a *claims cell*:
each quantitative statement of the chapter becomes a named claim
``(measured, predicted, tolerance)`` or a bound, labelled by its **kind**; all
claims are written to ``{out_dir}/claims/{chapter}.json``, and any failed claim
raises :class:`ClaimError`, which stops the notebook and therefore
``make book`` / ``make test``.

Example::

    from nqfbook.kit import Claims

    claims = Claims("ch01", fidelity, out_dir)
    claims.close("remainder slope (no Z2)", slope, 3.0, atol=0.05, kind="paper",
                 note="log-log fit of |f - f(0) - Tr[MA]| against ||W||, Thm 1")
    claims.less("our generator: data satisfy Eq. (40)", residual, 1e-12, kind="sanity")
    claims.table()      # shown in the notebook, grouped by kind
    claims.finish()     # writes the JSON, raises ClaimError if any claim failed

**Kinds** (required for every claim; a claim without one is refused with a
``TypeError``, an unknown one with a ``ValueError``):

* ``"paper"``: an independent measurement against the paper's prediction, which
  could fail if the paper were wrong. Only these are counted as evidence in the
  chapter summaries, the introduction and the errata page.
* ``"finding"``: the book's own result, not a prediction of the paper: a
  measured erratum that settles a typo, "Adam breaks the closure" (the paper
  only says Adam is not covered), a check that a comparison is not trivial.
* ``"sanity"``: our data meet a theorem's hypothesis, an identity of our own
  code or data construction, a setup check.

**Exact measurements of paper claims.** A paper claim whose measurement equals
its prediction exactly (``close`` with ``measured == predicted``, or any test
with ``measured == 0``) is usually an identity of our code, not evidence. Such a
claim is refused at record time (``ValueError``) unless it carries
``exact_note=``: a sentence saying why the measured value could differ in
principle (a step count that happens to agree to the step, a boolean verdict, a
zero that the theorem predicts and the code does not build in). Identities are
``kind="sanity"`` instead. The check is a review flag: it never changes whether
a claim passes.

Semantics of the tests, for every kind of claim:

* ``close``:  ``|measured - predicted| <= atol + rtol * |predicted|``
  (at least one of ``rtol``/``atol``; the missing one counts as 0);
* ``less``:   ``measured < bound`` (strict);
* ``greater``: ``measured > bound`` (strict);
* ``within``: ``lo <= measured <= hi`` (inclusive).

Every kind of claim fails the chapter when it does not hold; the kinds only
decide how a claim is labelled, grouped and counted.

A NaN anywhere in a comparison fails the claim. Values are converted to
python floats (JAX/NumPy scalars and size-1 arrays are accepted).
``chapter`` should be the chapter id (``"ch01"``) or the notebook's file stem
(``"ch01_neural_quadratic_form"``): the book runner looks for either name.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import tempfile
from typing import Any, Optional

from nqf._checks import check_option
from nqf._checks import require
from nqf._checks import require_kind
from nqf._checks import require_value
from ._claim import KINDS, Claim, _fmt
from ._claims_table import ClaimsSummary, ClaimsTable
from ._provenance import chapter_provenance
from ._verdicts import Verdict, kind_counts, outcome_counts


_CHAPTER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

_MISSING = object()


class ClaimError(AssertionError):
    """Raised by :meth:`Claims.finish` when at least one claim failed."""


def _as_float(value: Any, what: str, claim: str) -> float:
    """Convert a python/NumPy/JAX scalar or size-1 array to a python float (``what``: the argument of the
    claim named ``claim``)."""
    if isinstance(value, bool):
        return float(value)
    import numpy as np

    arr = np.asarray(value)
    require_value(what, arr.size == 1, f"a scalar (claim {claim!r})", f"an array of shape {arr.shape}")
    require_value(what, not np.iscomplexobj(arr), f"real (claim {claim!r})", repr(value))
    try:
        return float(arr.reshape(()))
    except (TypeError, ValueError):
        require_value(what, False, f"a real number (claim {claim!r})", repr(value))


def _tol(value: Any, what: str, claim: str) -> Optional[float]:
    if value is None:
        return None
    v = _as_float(value, what, claim)
    require_value(what, math.isfinite(v) and v >= 0, f"finite and >= 0 (claim {claim!r})", repr(v))
    return v


def _check_kind(name: str, kind: Any) -> str:
    require_kind(
        "kind", kind is not _MISSING and kind is not None,
        f"given for claim {name!r}: kind='paper', 'finding' or 'sanity' (only paper claims count as evidence): "
        "'paper' for an independent measurement against the paper's prediction, 'finding' for the "
        "book's own result, 'sanity' for a hypothesis met by our data or an identity of our code",
        None if kind is _MISSING else kind)
    require_value("kind", isinstance(kind, str) and kind in KINDS, f"one of {KINDS} (claim {name!r})", repr(kind))
    return kind


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
        require_value("chapter", isinstance(chapter, str) and bool(_CHAPTER_RE.match(chapter)),
                      "a file-name-safe id such as 'ch01'", repr(chapter))
        require_value("fidelity", isinstance(fidelity, str) and bool(fidelity), "a non-empty string", repr(fidelity))
        self.chapter = chapter
        self.fidelity = fidelity
        self.out_dir = pathlib.Path(out_dir)
        self._claims: list[Claim] = []
        self._verdicts: list[Verdict] = []
        self._compilations = None  # start_chapter's counter: written beside the claims by finish()

    # ------------------------------------------------------------------ adding
    def _add(self, claim: Claim) -> bool:
        require_value("name", all(c.name != claim.name for c in self._claims),
                      f"unique in chapter {self.chapter}", f"the duplicate claim name {claim.name!r}")
        require_value(
            "exact_note", not (claim.kind == "paper" and claim.exact and not claim.exact_note),
            "given for an exact paper claim (an exact match is usually an identity of our own code): "
            "exact_note='why the measurement could differ in principle', or label it kind='sanity'",
            f"none for paper claim {claim.name!r}, measured exactly {_fmt(claim.measured)} against {claim.target()}")
        self._claims.append(claim)
        return claim.passed

    @staticmethod
    def _check_name(name: Any) -> str:
        require_value("name", isinstance(name, str) and bool(name.strip()), "a non-empty string (the claim's name)",
                      repr(name))
        return name

    @staticmethod
    def _check_text(name: str, what: str, value: Any) -> str:
        require_value(what, isinstance(value, str), f"a string (claim {name!r})", repr(value))
        return value

    def close(
        self,
        name: str,
        measured: Any,
        predicted: Any,
        *,
        kind: str = _MISSING,
        rtol: Any = None,
        atol: Any = None,
        note: str = "",
        exact_note: str = "",
    ) -> bool:
        """Claim ``|measured - predicted| <= atol + rtol*|predicted|``; returns whether it holds."""
        name = self._check_name(name)
        kind = _check_kind(name, kind)
        require_value("rtol, atol", rtol is not None or atol is not None,
                      f"given: at least one of rtol= or atol= (claim {name!r})", "neither")
        rtol_f = _tol(rtol, "rtol", name)
        atol_f = _tol(atol, "atol", name)
        m = _as_float(measured, "measured", name)
        p = _as_float(predicted, "predicted", name)
        allowed = (atol_f or 0.0) + (rtol_f or 0.0) * abs(p)
        passed = bool(math.isfinite(m) and math.isfinite(p) and abs(m - p) <= allowed)
        return self._add(
            Claim(name, "close", m, passed, predicted=p, rtol=rtol_f, atol=atol_f,
                  note=self._check_text(name, "note", note), kind=kind,
                  exact_note=self._check_text(name, "exact_note", exact_note))
        )

    def less(self, name: str, measured: Any, bound: Any, *, kind: str = _MISSING, note: str = "",
             exact_note: str = "") -> bool:
        """Claim ``measured < bound``; returns whether it holds."""
        name = self._check_name(name)
        kind = _check_kind(name, kind)
        m = _as_float(measured, "measured", name)
        b = _as_float(bound, "bound", name)
        passed = bool(m < b)  # False if either is NaN
        return self._add(Claim(name, "less", m, passed, hi=b, note=self._check_text(name, "note", note),
                               kind=kind, exact_note=self._check_text(name, "exact_note", exact_note)))

    def greater(self, name: str, measured: Any, bound: Any, *, kind: str = _MISSING, note: str = "",
                exact_note: str = "") -> bool:
        """Claim ``measured > bound``; returns whether it holds."""
        name = self._check_name(name)
        kind = _check_kind(name, kind)
        m = _as_float(measured, "measured", name)
        b = _as_float(bound, "bound", name)
        passed = bool(m > b)
        return self._add(Claim(name, "greater", m, passed, lo=b, note=self._check_text(name, "note", note),
                               kind=kind, exact_note=self._check_text(name, "exact_note", exact_note)))

    def within(self, name: str, measured: Any, lo: Any, hi: Any, *, kind: str = _MISSING, note: str = "",
               exact_note: str = "") -> bool:
        """Claim ``lo <= measured <= hi``; returns whether it holds."""
        name = self._check_name(name)
        kind = _check_kind(name, kind)
        m = _as_float(measured, "measured", name)
        lo_f = _as_float(lo, "lo", name)
        hi_f = _as_float(hi, "hi", name)
        require_value("lo, hi", not lo_f > hi_f, f"an interval, lo <= hi (claim {name!r})", f"lo={lo_f!r} > hi={hi_f!r}")
        passed = bool(lo_f <= m <= hi_f)
        return self._add(Claim(name, "within", m, passed, lo=lo_f, hi=hi_f,
                               note=self._check_text(name, "note", note), kind=kind,
                               exact_note=self._check_text(name, "exact_note", exact_note)))

    def add_verdict(self, verdict: Verdict) -> str:
        """Record a :class:`~nqfbook.kit.Verdict` (what :func:`nqfbook.kit.judge` does); returns its outcome.

        A verdict never fails the chapter: ``holds``, ``against`` and ``inconclusive`` are all results.
        """
        require_kind("verdict", isinstance(verdict, Verdict), "a nqfbook.kit.Verdict", type(verdict).__name__)
        names = {v.name for v in self._verdicts} | {c.name for c in self._claims}
        require_value("rule.name", verdict.name not in names, f"unique in chapter {self.chapter}",
                      f"the duplicate name {verdict.name!r}")
        self._verdicts.append(verdict)
        return verdict.outcome

    # --------------------------------------------------------------- reporting
    @property
    def verdicts(self) -> list[Verdict]:
        """The verdicts recorded so far, in order."""
        return list(self._verdicts)

    @property
    def claims(self) -> list[Claim]:
        """The claims recorded so far, in order."""
        return list(self._claims)

    @property
    def failed(self) -> list[Claim]:
        """The claims that do not hold."""
        return [c for c in self._claims if not c.passed]

    def count(self, kind: str) -> int:
        """How many claims of ``kind`` (``"paper"``, ``"finding"`` or ``"sanity"``) were recorded."""
        check_option("kind", kind, KINDS)
        return sum(c.kind == kind for c in self._claims)

    @property
    def path(self) -> pathlib.Path:
        """Where :meth:`finish` writes the JSON."""
        return self.out_dir / "claims" / f"{self.chapter}.json"

    def table(self) -> ClaimsTable:
        """A table of all claims, grouped by kind, for display in the notebook (HTML/Markdown/text)."""
        return ClaimsTable(self.chapter, self.fidelity, self._claims, self._verdicts)

    def to_json(self) -> dict:
        failed = self.failed
        return {
            "chapter": self.chapter,
            "fidelity": self.fidelity,
            "passed": bool(self._claims) and not failed,
            "n_claims": len(self._claims),
            "n_paper": self.count("paper"),
            "n_finding": self.count("finding"),
            "n_sanity": self.count("sanity"),
            "n_failed": len(failed),
            "verdict_counts": outcome_counts(self._verdicts),
            "verdict_kinds": kind_counts(self._verdicts),
            # the commit, non-default parameters and fidelity of this run, and each figure's recipe and cell
            "provenance": chapter_provenance(),
            "claims": [c.to_json() for c in self._claims],
            "verdicts": [v.to_json() for v in self._verdicts],
        }

    def finish(self) -> ClaimsSummary:
        """Write ``{out_dir}/claims/{chapter}.json`` atomically; raise if any claim failed.

        The JSON is written in every case (also when claims fail), so the
        runner can name the failed claims. A chapter without claims fails too,
        and so does one without a single paper claim.

        Returns:
            A :class:`ClaimsSummary` (its ``path`` is the JSON file), if every claim holds;
            it displays as one line that quotes the number of paper claims.

        Raises:
            ClaimError: naming every failed claim (with its kind) with measured vs required.
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
        if self._compilations is not None:  # the chapter's compile cost, for the runner's timings (not a claim)
            side = path.with_name(f"{self.chapter}.compilations.json")
            side.write_text(json.dumps(self._compilations.since_start(), indent=1) + "\n", encoding="utf-8")

        where = f"{self.chapter} ({self.fidelity})"
        require(bool(self._claims), ClaimError, f"{where}: no claims were recorded")
        require(bool(self.count("paper")) or bool(self._verdicts), ClaimError,
                f"{where}: no paper claim and no verdict (only findings and sanity checks)")
        failed = self.failed
        lines = [f"{where}: {len(failed)} of {len(self._claims)} claim(s) failed:"]
        require(not failed, ClaimError, "\n".join(lines + [f"  - {c.describe()}" for c in failed]))
        return ClaimsSummary(self.chapter, self.fidelity, path, self.count("paper"), self.count("sanity"),
                             n_finding=self.count("finding"), verdicts=kind_counts(self._verdicts))

    def __repr__(self) -> str:
        return (
            f"Claims(chapter={self.chapter!r}, fidelity={self.fidelity!r}, {len(self._claims)} claim(s): "
            f"{self.count('paper')} paper, {self.count('finding')} finding, {self.count('sanity')} sanity; "
            f"{len(self.failed)} failed; {len(self._verdicts)} verdict(s))"
        )
