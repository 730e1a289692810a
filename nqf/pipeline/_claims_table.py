r"""How a chapter's claims read on its page: the tables grouped by kind (paper claims, findings, sanity
checks) and the one-line summary the claims cell ends with. The claims themselves, their kinds and
checks are :mod:`nqf.pipeline._claim`; the collector, :mod:`nqf.pipeline._claims`.
"""

from __future__ import annotations

import html
import pathlib

from ._claim import KINDS
from ._claim import Claim
from ._claim import _measured_text
from ._claim import readable_name

_GROUP_TITLES = {
    "paper": "Paper claims",
    "finding": "Findings",
    "sanity": "Sanity checks",
}
_GROUP_HELP = {
    "paper": "independent measurements against the paper's predictions; each could fail if the paper were wrong",
    "finding": "the book's own results: measured errata, what the paper does not cover; not counted as paper claims",
    "sanity": "our data meet a theorem's hypotheses, identities of our own code and setup; not evidence about the paper",
}


def _cell(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{html.escape(text)}</td>"


class ClaimsTable:
    """Display object returned by :meth:`Claims.table` (HTML, Markdown or text).

    The claims are grouped by kind: paper claims, then the book's findings, then
    sanity checks, each group a table of its own with its own count.
    """

    def __init__(self, chapter: str, fidelity: str, claims: list[Claim]):
        self.chapter = chapter
        self.fidelity = fidelity
        self.claims = list(claims)

    @staticmethod
    def _row(c: Claim) -> tuple[str, ...]:
        # no "result" column: a published chapter has only passing claims (a failure raises);
        # a failing row says so in its measured cell
        measured = _measured_text(c)
        return (
            readable_name(c.name),
            measured if c.passed else f"✗ FAIL {measured}",
            c.target(),
            c.full_note(),
        )

    def groups(self) -> list[tuple[str, list[Claim]]]:
        """``(kind, claims)`` for every kind that has claims, in the order of the kinds (``"paper"``, ``"finding"``, ``"sanity"``)."""
        out = []
        for kind in KINDS:
            members = [c for c in self.claims if c.kind == kind]
            if members:
                out.append((kind, members))
        return out

    def _ordered(self) -> list[Claim]:
        return [c for _, members in self.groups() for c in members]

    def _rows(self) -> list[tuple[str, ...]]:
        return [self._row(c) for c in self._ordered()]

    _HEAD = ("claim", "measured", "required", "note")
    _CLASSES = ("claim", "num", "num", "note")

    def _html_table(self, kind: str, claims: list[Claim]) -> str:
        esc = html.escape
        n_pass = sum(c.passed for c in claims)
        where = f"{esc(self.chapter)} at fidelity “{esc(self.fidelity)}”"
        caption = (f"{_GROUP_TITLES[kind]} of {where}: "
                   f"{n_pass} of {len(claims)} pass "
                   f"<span class=\"nqf-claims-help\">({esc(_GROUP_HELP[kind])})</span>")
        head = "".join(f"<th>{h}</th>" for h in self._HEAD)
        body = []
        for c in claims:
            cls = "" if c.passed else ' class="fail"'
            cells = "".join(_cell(v, k) for v, k in zip(self._row(c), self._CLASSES))
            body.append(f"<tr{cls}>{cells}</tr>")
        return (
            f'<table class="nqf-claims nqf-claims-{kind}"><caption>{caption}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )

    def _repr_html_(self) -> str:
        out = ['<div class="nqf-claims-wrap">']
        out += [self._html_table(kind, members) for kind, members in self.groups()]
        out.append("</div>")
        return "".join(out)

    def _repr_markdown_(self) -> str:
        def cell(s: str) -> str:
            return s.replace("|", "\\|").replace("\n", " ")

        head = ("kind",) + self._HEAD
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cell(v) for v in (c.kind,) + self._row(c)) + " |" for c in self._ordered()]
        return "\n".join(lines)

    def __str__(self) -> str:
        head = ("kind",) + self._HEAD + ("result",)
        rows = [head] + [(c.kind,) + self._row(c) + ("pass" if c.passed else "FAIL",) for c in self._ordered()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        out = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(out)

    __repr__ = __str__


class ClaimsSummary:
    """What :meth:`Claims.finish` returns: the counts, shown as one line in the notebook.

    The line quotes the number of *paper* claims only (BOOK.md rule 11); the
    findings and sanity checks are counted in their own tables.

    Attributes:
        path: where the JSON was written.
        n_paper: number of paper claims (all hold, else ``finish`` raised).
        n_finding: number of findings of the book (all hold).
        n_sanity: number of sanity checks (all pass).
    """

    def __init__(self, chapter: str, fidelity: str, path: pathlib.Path, n_paper: int, n_sanity: int, *,
                 n_finding: int = 0):
        self.chapter = chapter
        self.fidelity = fidelity
        self.path = path
        self.n_paper = n_paper
        self.n_finding = n_finding
        self.n_sanity = n_sanity

    def __str__(self) -> str:
        # the file name only: the page must not show a path of the build machine
        return (
            f"{self.chapter} at fidelity {self.fidelity!r}: all {self.n_paper} paper claims hold "
            f"(findings and sanity checks, tabled apart, pass too; written to claims/{self.path.name})"
        )

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return (
            f'<p class="nqf-claims-summary"><strong>{self.n_paper} paper claims hold</strong> '
            f"({html.escape(self.chapter)}, fidelity “{html.escape(self.fidelity)}”); the book's findings "
            f"and the sanity checks of our own code, tabled apart, pass too.</p>"
        )
