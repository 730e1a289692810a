r"""How a chapter's claims read on its page: the tables grouped by kind (paper claims, findings, sanity
checks) and the one-line summary the claims cell ends with. The claims themselves, their kinds and
checks are :mod:`nqfbook.kit._claim`; the collector, :mod:`nqfbook.kit._claims`.
"""

from __future__ import annotations

import html
import pathlib

from ._claim import KINDS
from ._claim import Claim
from ._claim import _measured_text
from ._claim import name_html
from ._claim import name_markdown
from ._claim import readable_name
from ._verdicts import KINDS as VERDICT_KINDS
from ._verdicts import Verdict
from ._verdicts import kind_counts

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


def _tally(counts: dict) -> str:
    """"N hold, K against, D depend on an open choice, F too few runs" (kind counts, :data:`nqfbook.kit._verdicts.KINDS`)."""
    words = {"holds": ("holds", "hold"), "against": ("against", "against"),
             "depends on X": ("depends on an open choice", "depend on an open choice"),
             "too few runs": ("too few runs", "too few runs")}
    return ", ".join(f"{counts.get(k, 0)} {words[k][0] if counts.get(k, 0) == 1 else words[k][1]}" for k in VERDICT_KINDS)


def _cell(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{html.escape(text)}</td>"


class ClaimsTable:
    """Display object returned by :meth:`Claims.table` (HTML, Markdown or text).

    The claims are grouped by kind: paper claims, then the book's findings, then
    sanity checks, each group a table of its own with its own count.
    """

    def __init__(self, chapter: str, fidelity: str, claims: list[Claim], verdicts: list[Verdict] = ()):
        self.chapter = chapter
        self.fidelity = fidelity
        self.claims = list(claims)
        self.verdicts = list(verdicts)

    @staticmethod
    def _option_text(v: Verdict) -> str:
        return "; ".join(o.describe(v.rule.paper_side) for o in v.options)

    @staticmethod
    def _verdict_row(v: Verdict) -> tuple[str, ...]:
        seeds = (f"{len(v.seeds)} confirmation seeds ({v.seeds[0]}–{v.seeds[-1]})" if v.seeds
                 else "deterministic")
        outcome = v.kind_text()
        margin = (f"; smallest margin that matters {v.rule.margin:.3g} ({v.rule.margin_reason})"
                  if v.rule.margin is not None else "")
        rule = (f"{v.rule.statistic}; threshold: {v.rule.threshold}; z = {v.rule.z:g}"
                + (f", resolution {v.resolution:g}" if v.resolution else "") + margin
                + f"; {seeds}; fixed at {v.rule.fixed_at}")
        return (readable_name(v.name), outcome, ClaimsTable._option_text(v), rule)

    def changes(self) -> list[tuple[str, str, str, str, str]]:
        """``(rule, date, commit, what, why)`` for every rule change made after a run, oldest first."""
        rows = [(v.name, c.date, c.commit, c.what, c.why) for v in self.verdicts for c in v.rule.changes]
        return sorted(rows, key=lambda r: r[1])

    def _html_verdicts(self) -> str:
        esc = html.escape
        counts = kind_counts(self.verdicts)
        where = f"{esc(self.chapter)} at fidelity “{esc(self.fidelity)}”"
        tally = _tally(counts)
        caption = (f"Verdicts on the paper's figures, {where}: {tally} "
                   "<span class=\"nqf-claims-help\">(each rule fixed before its confirmation runs; "
                   "conclusive only beyond z standard errors plus the recording resolution, under every "
                   "option the paper leaves open)</span>")
        head = "".join(f"<th>{h}</th>" for h in ("rule", "verdict", "per option", "how it is judged"))
        body = []
        for v in self.verdicts:
            row = self._verdict_row(v)
            cells = (f'<td class="claim">{name_html(v.name)}</td>' + _cell(row[1], f"verdict-{v.outcome}")
                     + _cell(row[2], "note") + f'<td class="note">{name_html(row[3])}</td>')  # the rule's math typeset
            body.append(f"<tr>{cells}</tr>")
        out = (f'<table class="nqf-claims nqf-claims-verdicts"><caption>{caption}</caption>'
               f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
        changes = self.changes()
        if changes:
            # one item per change; a change made to several rules at once names them all
            grouped: dict[tuple, list[str]] = {}
            for r, d, c, w, y in changes:
                grouped.setdefault((d, c, w, y), []).append(r)
            items = "".join(f"<li>{esc(d)}, {esc(c)}: {esc(w)} ({esc(y)}); "
                            f"{'rule' if len(rs) == 1 else f'{len(rs)} rules'}: "
                            f"{'; '.join(f'<em>{name_html(r)}</em>' for r in rs)}</li>"
                            for (d, c, w, y), rs in grouped.items())
            out += f'<p class="nqf-rule-changes-title">Rules changed after a run</p><ul class="nqf-rule-changes">{items}</ul>'
        return out

    @staticmethod
    def _row(c: Claim) -> tuple[str, ...]:
        # no "result" column: a published chapter has only passing claims (a failure raises);
        # a failing row says so in its measured cell
        measured = _measured_text(c)
        return (
            readable_name(c.name),
            measured if c.passed else f"✗ FAIL {measured}",
            c.shown_target(),
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
        # a note shared by several rows is printed once, below the table, and referred to by number
        notes = [c.full_note() for c in claims]
        shared = [n for n in dict.fromkeys(notes) if n and notes.count(n) > 1]
        number = {n: i + 1 for i, n in enumerate(shared)}
        body = []
        for c, note in zip(claims, notes):
            cls = "" if c.passed else ' class="fail"'
            name, measured, required, _ = self._row(c)
            note_cell = (f"<td class=\"note\">see note {number[note]}</td>" if note in number
                         else f'<td class="note">{name_html(note)}</td>')
            cells = (f'<td class="claim">{name_html(c.name)}</td>' + _cell(measured, "num") + _cell(required, "num")
                     + note_cell)
            body.append(f"<tr{cls}>{cells}</tr>")
        foot = ""
        if shared:
            items = "".join(f"<li>{name_html(n)}</li>" for n in shared)
            foot = f'<ol class="nqf-claims-notes">{items}</ol>'
        return (
            f'<table class="nqf-claims nqf-claims-{kind}"><caption>{caption}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{foot}"
        )

    def summary_line(self) -> str:
        """"N claims: P paper claims, F findings, S sanity checks" (the collapsed tables' title)."""
        counts = {kind: len(members) for kind, members in self.groups()}
        words = {"paper": ("paper claim", "paper claims"), "finding": ("finding", "findings"),
                 "sanity": ("sanity check", "sanity checks")}
        parts = [f"{n} {words[k][n != 1]}" for k, n in counts.items()]
        n_pass = sum(c.passed for c in self.claims)
        state = "all pass" if n_pass == len(self.claims) else f"{len(self.claims) - n_pass} FAIL"
        return f"All {len(self.claims)} checks of {self.chapter}: {', '.join(parts)} ({state})"

    def _repr_html_(self) -> str:
        out = ['<div class="nqf-claims-wrap">']
        if self.verdicts:
            out.append(self._html_verdicts())
        tables = "".join(self._html_table(kind, members) for kind, members in self.groups())
        if tables:
            # the full tables are collapsed (a failing chapter shows them open)
            opened = " open" if any(not c.passed for c in self.claims) else ""
            out.append(f'<details class="nqf-claims-details"{opened}><summary>{html.escape(self.summary_line())}'
                       f"</summary>{tables}</details>")
        out.append("</div>")
        return "".join(out)

    def _repr_markdown_(self) -> str:
        def cell(s: str) -> str:
            return s.replace("|", "\\|").replace("\n", " ")

        head = ("kind",) + self._HEAD
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cell(v) for v in (c.kind, name_markdown(c.name)) + self._row(c)[1:]) + " |"
                  for c in self._ordered()]
        if self.verdicts:
            vhead = ("rule", "verdict", "per option", "how it is judged")
            vlines = ["| " + " | ".join(vhead) + " |", "|" + "---|" * len(vhead)]
            vlines += ["| " + " | ".join(cell(x) for x in self._verdict_row(v)) + " |" for v in self.verdicts]
            lines = vlines + [""] + lines
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

    The line quotes the number of *paper* claims only (only they are evidence); the
    findings and sanity checks are counted in their own tables.

    Attributes:
        path: where the JSON was written.
        n_paper: number of paper claims (all hold, else ``finish`` raised).
        n_finding: number of findings of the book (all hold).
        n_sanity: number of sanity checks (all pass).
    """

    def __init__(self, chapter: str, fidelity: str, path: pathlib.Path, n_paper: int, n_sanity: int, *,
                 n_finding: int = 0, verdicts: dict | None = None):
        self.chapter = chapter
        self.fidelity = fidelity
        self.path = path
        self.n_paper = n_paper
        self.n_finding = n_finding
        self.n_sanity = n_sanity
        self.verdicts = dict(verdicts or dict.fromkeys(VERDICT_KINDS, 0))

    def _verdict_text(self) -> str:
        """"N rules: K hold, A against, D depend on an open choice, F too few runs" (empty when the chapter
        judges no rule)."""
        if not sum(self.verdicts.values()):
            return ""
        n = sum(self.verdicts.values())
        return f"{n} {'rule' if n == 1 else 'rules'}: {_tally(self.verdicts)}"

    def _claims_text(self) -> str:
        other = " other" if sum(self.verdicts.values()) else ""
        if not self.n_paper:
            return ""
        return f"the {self.n_paper}{other} paper claims hold" if self.n_paper > 1 else f"the{other} paper claim holds"

    def __str__(self) -> str:
        # the file name only: the page must not show a path of the build machine
        parts = [x for x in (self._verdict_text(), self._claims_text()) if x]
        return (
            f"{self.chapter} at fidelity {self.fidelity!r}: {'; '.join(parts)} "
            f"(findings and sanity checks, tabled apart, pass too; written to claims/{self.path.name})"
        )

    __repr__ = __str__

    def _repr_html_(self) -> str:
        verdicts = self._verdict_text()
        lead = f"<strong>Verdicts on the paper's figures: {html.escape(verdicts)}</strong>; " if verdicts else ""
        claims = self._claims_text()
        claims = f"<strong>{html.escape(claims)}</strong>" if not verdicts else html.escape(claims)
        return (
            f'<p class="nqf-claims-summary">{lead}{claims} '
            f"({html.escape(self.chapter)}, fidelity “{html.escape(self.fidelity)}”); the book's findings "
            f"and the sanity checks of our own code, tabled apart, pass too.</p>"
        )
