"""The introduction's verdict tally: per chapter, how many of the paper's figure-level rules hold, go
against the paper or are inconclusive, read from the claims JSON of the build being published
(BOOK.md rule 10). Included by ``book/intro.md`` as ``_generated/verdicts.md``."""

from __future__ import annotations

import json
from pathlib import Path

from .layout import Layout

_OUTCOMES = ("holds", "against", "inconclusive")


def _chapters(claims_dir: Path) -> list[dict]:
    out = []
    for path in sorted(claims_dir.glob("ch*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "chapter" in data and "claims" in data:  # not a side file
            out.append(data)
    return out


def verdicts_markdown(root: Path, fidelity: str) -> str:
    """A Markdown table: chapter, rules that hold / against / inconclusive, other paper claims; then
    every verdict that is not ``holds``, named, with the choice it depends on."""
    chapters = _chapters(Layout(Path(root), fidelity).out_dir / "claims")
    if not chapters:
        return "*No chapter has been executed at this fidelity yet.*\n"
    total = dict.fromkeys(_OUTCOMES, 0)
    lines = ["| chapter | rules hold | against | inconclusive | other paper claims (all hold) |",
             "|---|---:|---:|---:|---:|"]
    open_ones = []
    for data in chapters:
        counts = {k: 0 for k in _OUTCOMES}
        for v in data.get("verdicts", []):
            counts[v["outcome"]] += 1
            if v["outcome"] != "holds":
                dep = f" (depends on {v['depends_on']})" if v.get("depends_on") else ""
                open_ones.append(f"- {data['chapter']}: *{v['name']}*: **{v['outcome']}**{dep}")
        for k in _OUTCOMES:
            total[k] += counts[k]
        lines.append(f"| {data['chapter']} | {counts['holds']} | {counts['against']} | {counts['inconclusive']} "
                     f"| {data.get('n_paper', 0)} |")
    lines.append(f"| **all** | **{total['holds']}** | **{total['against']}** | **{total['inconclusive']}** "
                 f"| **{sum(d.get('n_paper', 0) for d in chapters)}** |")
    text = (f"At fidelity “{fidelity}”, the book judges {sum(total.values())} figure-level rules: "
            f"{total['holds']} hold, {total['against']} against the paper, {total['inconclusive']} inconclusive.")
    body = [text, "", *lines]
    if open_ones:
        body += ["", "The rules that do not hold:", "", *open_ones]
    return "\n".join(body) + "\n"
