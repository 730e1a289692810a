r"""One claim of a chapter: its kind, its test, and how its numbers read (the shortest exact threshold,
the measured value to the precision of its bound, Greek names). The collector of a chapter's claims is
:mod:`nqf.pipeline._claims`; their tables and summary line, :mod:`nqf.pipeline._claims_table`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Optional

#: The kinds of claim (BOOK.md rule 11), in the order the table shows them.
KINDS = ("paper", "finding", "sanity")


def _json_number(x: Optional[float]):
    """Strict JSON has no NaN/inf: write those as the strings "nan", "inf", "-inf"."""
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _fmt(x: Optional[float]) -> str:
    if x is None:
        return ""
    return f"{x:.6g}"


def _given(x: Optional[float]) -> str:
    """A threshold as it was given: the shortest text that reads back as the same number.

    ``5 + 1e-9`` prints as ``5.000000001``, not ``5`` (12 significant digits at most, so that
    binary noise such as ``0.30000000000000004`` prints as ``0.3``).
    """
    if x is None:
        return ""
    if not math.isfinite(x):
        return _fmt(x)
    return f"{x:.12g}"


def _to_places(x: float, step: float) -> str:
    """``x`` to the decimal place of ``step`` (2 to 12 significant digits)."""
    if x == 0 or not math.isfinite(x):
        return _fmt(x)
    if not step or not math.isfinite(step):
        return f"{x:.3g}"
    n = math.floor(math.log10(abs(x))) - math.floor(math.log10(abs(step))) + 1
    # "#": trailing zeros kept, so that 2.9996 within 0.02 of 3 reads "3.000", not "3"
    return f"{x:#.{min(12, max(2, n))}g}".rstrip(".").replace(".e", "e")


def _measured_text(c: "Claim") -> str:
    """The measured value to the precision of its bound, never rounded onto the bound.

    ``close``: to a tenth of the allowed deviation; a bound: to a hundredth of the bound's
    magnitude, with more digits while the rounded value would read as equal to (or on the wrong
    side of) the printed bound.
    """
    x = c.measured
    if c.test == "close":
        step = (c.allowed or 0.0) / 10 or abs(c.predicted or 0.0) * 1e-6
        return _to_places(x, step)
    bounds = [b for b in (c.lo, c.hi) if b is not None]
    scale = max((abs(b) for b in bounds), default=0.0)
    text = _to_places(x, scale / 100 if scale else 0.0)
    if x == 0 or not math.isfinite(x):
        return text
    for digits in range(2, 13):
        shown = float(text)
        if all((shown < b) == (x < b) and (shown > b) == (x > b) for b in bounds):
            break
        text = f"{x:.{digits}g}"
    return text


_GREEK_WORDS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "eps": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "sigma": "σ", "tau": "τ",
    "Sigma": "Σ", "Lambda": "Λ", "Delta": "Δ",
}
_GREEK_RE = re.compile(r"(?<![A-Za-z])(" + "|".join(sorted(_GREEK_WORDS, key=len, reverse=True)) + r")(?![A-Za-z])")
_SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def readable_name(name: str) -> str:
    """A claim name as the table shows it: Greek letters and powers in Unicode.

    ``"eta^2 term"`` -> ``"η² term"``, ``"sigma=np.int64(1)"`` -> ``"σ=1"``; the name recorded
    in the JSON is unchanged.
    """
    name = re.sub(r"\bnp\.(?:int|float|uint)\d*\(([^()]*)\)", r"\1", name)
    name = _GREEK_RE.sub(lambda m: _GREEK_WORDS[m.group(1)], name)
    name = re.sub(r"\^\(?(-?\d+)\)?", lambda m: m.group(1).translate(_SUPERSCRIPTS), name)
    return name



@dataclasses.dataclass(frozen=True)
class Claim:
    """One checked claim (see the module docstring for ``kind`` and ``test``)."""

    name: str
    test: str  # "close" | "less" | "greater" | "within"
    measured: float
    passed: bool
    predicted: Optional[float] = None
    lo: Optional[float] = None
    hi: Optional[float] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    note: str = ""
    kind: str = "paper"  # "paper" | "finding" | "sanity"
    exact_note: str = ""  # why an exactly matching measurement could differ in principle

    @property
    def sanity(self) -> bool:
        """True for a sanity check (kind ``"sanity"``)."""
        return self.kind == "sanity"

    @property
    def exact(self) -> bool:
        """The measurement equals the prediction exactly (or is exactly 0)."""
        if self.measured == 0.0:
            return True
        return self.test == "close" and self.measured == self.predicted

    @property
    def allowed(self) -> Optional[float]:
        """For ``close``: the allowed deviation ``atol + rtol*|predicted|``."""
        if self.test != "close":
            return None
        return (self.atol or 0.0) + (self.rtol or 0.0) * abs(self.predicted)

    @property
    def error(self) -> Optional[float]:
        """For ``close``: the measured deviation ``|measured - predicted|``."""
        if self.test != "close":
            return None
        return abs(self.measured - self.predicted)

    def target(self) -> str:
        """Human-readable statement of what was required."""
        if self.test == "close":
            tols = []
            if self.rtol is not None:
                tols.append(f"rtol {_given(self.rtol)}")
            if self.atol is not None:
                tols.append(f"atol {_given(self.atol)}")
            return f"≈ {_given(self.predicted)} ({', '.join(tols)})"
        if self.test == "less":
            return f"< {_given(self.hi)}"
        if self.test == "greater":
            return f"> {_given(self.lo)}"
        return f"in [{_given(self.lo)}, {_given(self.hi)}]"

    def full_note(self) -> str:
        """The note, with the ``exact_note`` appended when there is one."""
        if not self.exact_note:
            return self.note
        extra = f"exact match: {self.exact_note}"
        return f"{self.note}; {extra}" if self.note else extra

    def describe(self) -> str:
        """One line: kind, name, measured vs required, and by how much it missed."""
        line = f"[{self.kind}] {self.name}: measured {_fmt(self.measured)}, required {self.target()}"
        if self.test == "close":
            line += f"; |measured - predicted| = {_fmt(self.error)} vs allowed {_fmt(self.allowed)}"
        note = self.full_note()
        if note:
            line += f"  [{note}]"
        return line

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "test": self.test,
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
            "exact_note": self.exact_note,
            "sanity": self.sanity,
        }
