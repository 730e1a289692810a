"""CITATION.cff: a valid citation file whose facts are the project's own (one source each)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _cff() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def test_citation_file_has_the_fields_cff_requires():
    cff = _cff()
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "version", "license", "repository-code", "type"):
        assert cff.get(key), f"CITATION.cff lacks {key!r}"
    # the authors are one entity (the book's contributors), not an invented person
    assert cff["authors"] == [{"name": yaml.safe_load((ROOT / "_config.yml").read_text())["author"]}]


def test_citation_agrees_with_pyproject_and_the_configured_repository():
    cff = _cff()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert str(cff["version"]) == project["version"]
    assert cff["license"] == project["license"]["text"]
    assert cff["repository-code"] == config["repository"]["url"]


def test_the_paper_is_the_reference_and_matches_the_bibliography():
    (paper,) = _cff()["references"]
    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    entry = bib[bib.index("@article{ziyin2026nqf"):]
    entry = entry[:entry.index("\n}") + 2]
    title = re.search(r"title\s*=\s*\{(.*)\}", entry).group(1)
    assert paper["title"] == title
    assert [a["family-names"] for a in paper["authors"]] == ["Ziyin", "Xu", "Poggio", "Chuang"]
    assert "2608.13335" in paper["url"] and "2608.13335" in entry


def test_the_cite_page_shows_this_file_and_the_papers_whole_entry():
    page = (ROOT / "book" / "cite.md").read_text(encoding="utf-8")
    assert "{literalinclude} ../CITATION.cff" in page
    lines = (ROOT / "book" / "references.bib").read_text(encoding="utf-8").splitlines()
    first, last = map(int, re.search(r":lines: (\d+)-(\d+)", page.split("references.bib")[1]).groups())
    assert lines[first - 1].startswith("@article{ziyin2026nqf") and lines[last - 1] == "}"
    cff = _cff()
    software = page[page.index("@software{"):]
    assert f"title   = {{{cff['title']}}}" in software and f"version = {{{cff['version']}}}" in software
    assert "book/cite" in (ROOT / "book" / "_toc.yml").read_text(encoding="utf-8")
