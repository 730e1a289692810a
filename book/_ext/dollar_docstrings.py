"""Sphinx extension: make the plain-text math of nqf docstrings safe for reStructuredText.

The nqf docstrings carry the paper's equations in dollar notation and write
norms as ``|x|`` (readable in ``help()`` and in editors). The dollar math itself
is typeset by ``sphinx-math-dollar`` (``_config.yml``), which turns ``$...$``
into math nodes *after* reStructuredText has parsed the docstring, so a formula
may span a line break. Two characters would be eaten by that parse first: ``|``
(a substitution reference) and ``*`` (emphasis). This hook, run on every
docstring after napoleon, protects them:

* inside ``$...$`` / ``$$...$$``: ``|`` becomes ``\\vert{}`` (``\\|`` stays a
  norm) and a bare ``*`` becomes ``\\ast{}``;
* outside math and ``literals``, a ``|`` followed by a non-blank character is
  escaped (table and line-block syntax, ``| `` followed by a blank, is kept).

It does not convert the math (``sphinx-math-dollar`` does). Double-backtick
literals and ``\\$`` are left alone.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"(?P<literal>``[^\n]+?``)"
    r"|(?P<display>\$\$(?P<dbody>.+?)\$\$)"
    r"|(?<![\\$])\$(?=\S)(?P<ibody>[^$]*?\S)\$(?!\$)",
    re.S,
)
_PIPE = re.compile(r"(?<!\\)\|(?=\S)")
_MATH_PIPE = re.compile(r"(?<!\\)\|")
_MATH_STAR = re.compile(r"(?<!\\)\*")


def _protect_math(body: str) -> str:
    body = _MATH_PIPE.sub(r"\\vert{}", body)
    return _MATH_STAR.sub(r"\\ast{}", body)


def convert(text: str) -> str:
    """Rewrite one docstring (lines joined by newlines)."""
    out: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        out.append(_PIPE.sub(r"\\|", text[pos : m.start()]))
        if m.group("literal"):
            out.append(m.group("literal"))
        elif m.group("display"):
            out.append("$$" + _protect_math(m.group("dbody")) + "$$")
        else:
            out.append("$" + _protect_math(m.group("ibody")) + "$")
        pos = m.end()
    out.append(_PIPE.sub(r"\\|", text[pos:]))
    return "".join(out)


def _process(app, what, name, obj, options, lines):
    if not any("$" in ln or "|" in ln for ln in lines):
        return
    lines[:] = [ln.rstrip() for ln in convert("\n".join(lines)).split("\n")]


def setup(app):
    app.connect("autodoc-process-docstring", _process, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "2"}
