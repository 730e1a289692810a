"""The introduction's verdict tally: per chapter, how many of the paper's figure-level rules hold, go
against the paper, depend on a choice the paper leaves open, or have too few runs (the two kinds of
inconclusive), read from the claims JSON of the build being published
(BOOK.md rule 10). Included by ``book/intro.md`` as ``_generated/verdicts.md``."""

from __future__ import annotations

import json
from pathlib import Path

from .layout import Layout

_KINDS = ("holds", "against", "depends on X", "too few runs")


def _kind(v: dict) -> str:
    if v["outcome"] != "inconclusive":
        return v["outcome"]
    return v.get("kind") or ("depends on X" if v.get("depends_on") else "too few runs")


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


def _open_line(chapter: str, v: dict) -> str:
    kind = _kind(v)
    if kind == "depends on X":
        shown = "; ".join(f"{o['option']}: {o['outcome']}" for o in v.get("options", []) if o.get("n"))
        return f"- {chapter}: *{v['name']}*: **depends on {v.get('depends_on')}** ({shown})"
    if kind == "too few runs":
        need = v.get("runs_needed")
        what = ("the measured margin (smaller than the stated one)" if v.get("need_basis") == "measured"
                else "the stated margin")
        text = (f"; {int(need)} runs per option would resolve {what}" if isinstance(need, (int, float))
                else f"; no number of runs resolves {what}" if need == "inf" else "")
        judged = max((o.get("n", 0) for o in v.get("options", [])), default=0)
        return f"- {chapter}: *{v['name']}*: **too few runs** (n = {judged}{text})"
    return f"- {chapter}: *{v['name']}*: **{kind}**"


def verdicts_markdown(root: Path, fidelity: str) -> str:
    """A Markdown table: chapter, rules that hold / against / depend on an open choice / have too few runs,
    other paper claims; then every verdict that is not ``holds``, named, with its kind and numbers."""
    chapters = _chapters(Layout(Path(root), fidelity).out_dir / "claims")
    if not chapters:
        return "*No chapter has been executed at this fidelity yet.*\n"
    total = dict.fromkeys(_KINDS, 0)
    lines = ["| chapter | rules hold | against | depends on an open choice | too few runs | other paper claims (all hold) |",
             "|---|---:|---:|---:|---:|---:|"]
    open_ones = []
    for data in chapters:
        counts = dict.fromkeys(_KINDS, 0)
        for v in data.get("verdicts", []):
            counts[_kind(v)] += 1
            if v["outcome"] != "holds":
                open_ones.append(_open_line(data["chapter"], v))
        for k in _KINDS:
            total[k] += counts[k]
        lines.append(f"| {data['chapter']} | " + " | ".join(str(counts[k]) for k in _KINDS)
                     + f" | {data.get('n_paper', 0)} |")
    lines.append("| **all** | " + " | ".join(f"**{total[k]}**" for k in _KINDS)
                 + f" | **{sum(d.get('n_paper', 0) for d in chapters)}** |")
    text = (f"At fidelity “{fidelity}”, the book judges {sum(total.values())} figure-level rules: "
            f"{total['holds']} hold, {total['against']} against the paper, {total['depends on X']} depend on a "
            f"choice the paper leaves open (the options are conclusive and disagree), {total['too few runs']} "
            "have too few runs (the margin lies inside its uncertainty).")
    body = [text, "", *lines]
    if open_ones:
        body += ["", "The rules that do not hold:", "", *open_ones]
    return "\n".join(body) + "\n"
