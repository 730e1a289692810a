r"""One claim of a chapter: its kind, its test, and how its numbers read (the shortest exact threshold,
the measured value to the precision of its bound, Greek names). The collector of a chapter's claims is
:mod:`nqfbook.kit._claims`; their tables and summary line, :mod:`nqfbook.kit._claims_table`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Optional

#: The kinds of claim, in the order the table shows them.
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


def _to_places(x: float, step: float, cap: int = 12) -> str:
    """``x`` to the decimal place of ``step`` (2 to ``cap`` significant digits)."""
    if x == 0 or not math.isfinite(x):
        return _fmt(x)
    if not step or not math.isfinite(step):
        return f"{x:.3g}"
    n = math.floor(math.log10(abs(x))) - math.floor(math.log10(abs(step))) + 1
    # "#": trailing zeros kept, so that 2.9996 within 0.02 of 3 reads "3.000", not "3"
    return f"{x:#.{min(cap, max(2, n))}g}".rstrip(".").replace(".e", "e")


#: The most significant digits a table shows (a computed number shows 4; more only to keep a
#: measured value visibly on its side of the bound).
_SHOWN_DIGITS = 4
_MAX_DIGITS = 6


def _short(x: Optional[float]) -> str:
    """A declared number as declared (``0.05``, ``1e-10``: the shortest text of at most 4 significant
    digits that reads back as ``x``), a computed one to 4 significant digits."""
    if x is None:
        return ""
    if not math.isfinite(x):
        return _fmt(x)
    for d in range(1, _SHOWN_DIGITS + 1):
        if float(f"{x:.{d}g}") == x:
            return f"{x:.{d}g}"
    return f"{x:.{_SHOWN_DIGITS}g}"


def _directed(x: float, digits: int, up: bool) -> str:
    """``x`` to ``digits`` significant digits, rounded up (``up``) or down, never across a bound."""
    if x == 0 or not math.isfinite(x):
        return _fmt(x)
    e = math.floor(math.log10(abs(x))) - digits + 1
    q = x / 10.0 ** e
    q = math.ceil(q) if up else math.floor(q)
    return f"{q * 10.0 ** e:.{digits}g}"


def _shown_bounds(c: "Claim") -> tuple[Optional[str], Optional[str], str, str]:
    """``(lo, hi, lo_op, hi_op)`` as the table prints them. A bound shortened for display that the
    measured value would read as crossing (``5 < 5`` for a bound of ``5 + 1e-9``) is printed with the
    inclusive operator it is equivalent to at the shown precision (``≤ 5``)."""
    lo = _short(c.lo) if c.lo is not None else None
    hi = _short(c.hi) if c.hi is not None else None
    lo_op, hi_op = (">", "<") if c.test in ("less", "greater") else ("≥", "≤")
    if c.passed and hi is not None and c.test == "less" and c.measured >= float(hi):
        hi_op = "≤"
    if c.passed and lo is not None and c.test == "greater" and c.measured <= float(lo):
        lo_op = "≥"
    return lo, hi, lo_op, hi_op


def _measured_text(c: "Claim") -> str:
    """The measured value as the table shows it: to the precision of its bound, at most 6 significant
    digits, never shown on the wrong side of the printed bound.

    ``close``: to a tenth of the allowed deviation (2 to 4 significant digits, up to 6 to show a value
    that rounds onto the edge of the allowed interval inside it); a bound: to a hundredth of the
    bound's magnitude, with more digits (at most 6) while the rounded value would read as equal to, or
    on the wrong side of, the printed bound, and rounded towards its side at 6 digits.
    """
    x = c.measured
    if x == 0 or not math.isfinite(x):
        return _fmt(x)
    if c.test == "close":
        step = (c.allowed or 0.0) / 10 or abs(c.predicted or 0.0) * 1e-4
        text = _to_places(x, step, cap=_SHOWN_DIGITS)
        if c.passed and c.allowed and abs(float(text) - c.predicted) > c.allowed:
            for d in range(_SHOWN_DIGITS + 1, _MAX_DIGITS + 1):
                text = f"{x:.{d}g}"
                if abs(float(text) - c.predicted) <= c.allowed:
                    break
        return text
    lo, hi, lo_op, hi_op = _shown_bounds(c)

    def on_side(t: str) -> bool:
        v = float(t)
        ok = True
        if hi is not None:
            ok &= (v <= float(hi)) if hi_op == "≤" else (v < float(hi))
        if lo is not None:
            ok &= (v >= float(lo)) if lo_op == "≥" else (v > float(lo))
        return ok

    bounds = [b for b in (c.lo, c.hi) if b is not None]
    scale = max((abs(b) for b in bounds), default=0.0)
    text = _to_places(x, scale / 100 if scale else 0.0, cap=_SHOWN_DIGITS)
    if not c.passed or on_side(text):
        return text
    for d in range(2, _MAX_DIGITS + 1):
        text = f"{x:.{d}g}"
        if on_side(text):
            return text
    return _directed(x, _MAX_DIGITS, up=c.test == "greater")


_GREEK_WORDS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "eps": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "sigma": "σ", "tau": "τ",
    "Sigma": "Σ", "Lambda": "Λ", "Delta": "Δ", "phi": "φ", "xi": "ξ", "rho": "ρ", "chi": "χ", "nu": "ν",
    "omega": "ω", "psi": "ψ",
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


_TEX_GREEK = {w: "\\" + ("epsilon" if w == "eps" else w) for w in _GREEK_WORDS}
_SCRIPT = r"(?:[_^](?:\([^()\s]*\)|\*|[A-Za-z]+|-?\d+(?:/\d+)?))"
_MATH_TOKEN = re.compile(r"(?<![A-Za-z0-9])((?:[A-Za-z]+\d*\*?|\|\|?[A-Za-z]\|?\|)" + _SCRIPT + r"+)(?![A-Za-z0-9])"
                         r"|(sqrt\(([^()]*)\))|(\|\|[A-Za-z]\|\|)")


_TEX_OPERATORS = {"max": "\\max", "min": "\\min", "sum": "\\sum", "inf": "\\infty", "prod": "\\prod"}


def _tex_word(w: str, *, script: bool = False) -> str:
    if w in _TEX_GREEK:
        return _TEX_GREEK[w]
    if w in _TEX_OPERATORS:
        return _TEX_OPERATORS[w]
    if w.startswith(("d", "D")) and w[1:] in _TEX_GREEK:  # dxi: the differential of xi
        return w[0] + " " + _TEX_GREEK[w[1:]]
    if script and len(w) >= 3 and w.isalpha():  # a word as subscript: t_Saxe
        return f"\\mathrm{{{w}}}"
    return w


def _tex_token(tok: str) -> str:
    """One pseudo-math token in TeX: ``H_ii`` -> ``H_{ii}``, ``t*_k`` -> ``t^*_{k}``, ``W^T`` ->
    ``W^\\top``, ``A^(m)`` -> ``A^{(m)}``, ``d^(-1/2)`` -> ``d^{-1/2}``, ``zeta_mu`` -> ``\\zeta_{\\mu}``."""
    m = re.match(r"(\|\|?[A-Za-z]\|?\||[A-Za-z]+\d*)(\*?)", tok)
    base, star = m.group(1), m.group(2)
    out = base.replace("||", "\\|") if base.startswith("|") else _tex_word(base)
    if star:
        out += "^*"
    for op, arg in re.findall(r"([_^])(\([^()\s]*\)|\*|[A-Za-z]+|-?\d+(?:/\d+)?)", tok[m.end():]):
        if arg.startswith("("):
            inner = arg[1:-1]
            arg = inner if re.fullmatch(r"[-+]?[\d./]+", inner) else arg
        elif op == "^" and arg == "T":
            arg = "\\top"
        else:
            arg = _tex_word(arg, script=True)
        out += f"{op}{{{arg}}}"
    return out


def name_parts(name: str) -> list[tuple[str, bool]]:
    """A claim name split into ``(text, is_math)`` parts: pseudo-math tokens (``H_ii/2``'s ``H_ii``,
    ``t*_k``, ``W^T``, ``sqrt(10)``, ``||W||``) become TeX, typeset on the page; the rest reads as
    :func:`readable_name` (Greek letters, powers in Unicode)."""
    name = re.sub(r"\bnp\.(?:int|float|uint)\d*\(([^()]*)\)", r"\1", name)
    name = name.replace("->", "→").replace("<=", "≤").replace(">=", "≥").replace("+-", "±")
    if "$" in name:  # TeX written between dollars is typeset as written
        out: list[tuple[str, bool]] = []
        for k, piece in enumerate(re.split(r"\$([^$]+)\$", name)):
            out += [(piece, True)] if k % 2 else (name_parts(piece) if piece else [])
        return out
    parts: list[tuple[str, bool]] = []
    pos = 0
    for m in _MATH_TOKEN.finditer(name):
        if m.start() > pos:
            parts.append((readable_name(name[pos:m.start()]), False))
        if m.group(1):
            parts.append((_tex_token(m.group(1)), True))
        elif m.group(2):
            parts.append((f"\\sqrt{{{m.group(3)}}}", True))
        else:
            parts.append((m.group(4).replace("||", "\\|"), True))
        pos = m.end()
    if pos < len(name):
        parts.append((readable_name(name[pos:]), False))
    return parts


def name_html(name: str) -> str:
    """The claim name as HTML, its math in the inline-math spans MathJax typesets on the page."""
    import html

    return "".join(f'<span class="math notranslate nohighlight">\\({html.escape(t)}\\)</span>' if math_ else
                   html.escape(t) for t, math_ in name_parts(name))


def name_markdown(name: str) -> str:
    """The claim name as Markdown, its math between dollars."""
    return "".join(f"${t}$" if math_ else t for t, math_ in name_parts(name))



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

    def shown_target(self) -> str:
        """What was required, as the table shows it: declared numbers as declared, computed ones to 4
        significant digits (:meth:`target` keeps every digit, for error messages)."""
        if self.test == "close":
            tols = []
            if self.rtol is not None:
                tols.append(f"rtol {_short(self.rtol)}")
            if self.atol is not None:
                tols.append(f"atol {_short(self.atol)}")
            allowed = self.allowed or 0.0
            pred = _to_places(self.predicted, allowed / 10, cap=_SHOWN_DIGITS) if allowed else _short(self.predicted)
            return f"≈ {pred} ({', '.join(tols)})"
        lo, hi, lo_op, hi_op = _shown_bounds(self)
        if self.test == "less":
            return f"{hi_op} {hi}"
        if self.test == "greater":
            return f"{lo_op} {lo}"
        return f"in [{lo}, {hi}]"

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
