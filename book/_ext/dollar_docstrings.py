"""Sphinx extension: render the plain-text math of nqf docstrings.

The nqf docstrings carry the paper's equations in dollar notation and write
norms as ``|x|`` (readable in ``help()`` and in editors). autodoc hands
docstrings to reStructuredText, which has no dollar math and reads ``|x|`` as
a substitution reference, so this hook rewrites each docstring after napoleon:

* ``$x$`` becomes ``:math:`x```, a ``$$...$$`` block a ``.. math::`` directive;
* outside math and ``literals``, a ``|`` followed by a non-blank character is
  escaped (table and line-block syntax, ``| `` followed by a blank, is kept).

Double-backtick literals and ``\\$`` are left alone.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"(?P<literal>``[^\n]+?``)"
    r"|(?P<display>\$\$(?P<dbody>.+?)\$\$)"
    r"|(?<![\\$])\$(?=\S)(?P<ibody>[^$\n]*?\S)\$(?!\$)",
    re.S,
)
_PIPE = re.compile(r"(?<!\\)\|(?=\S)")


def convert(text: str) -> str:
    """Rewrite one docstring (lines joined by newlines)."""
    out: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        out.append(_PIPE.sub(r"\\|", text[pos : m.start()]))
        if m.group("literal"):
            out.append(m.group("literal"))
        elif m.group("display"):
            line_start = text.rfind("\n", 0, m.start()) + 1
            indent = re.match(r"[ \t]*", text[line_start:]).group(0)
            body = " ".join(m.group("dbody").split())
            out.append(f"\n\n{indent}.. math::\n\n{indent}   {body}\n\n{indent}")
        else:
            before = text[m.start() - 1] if m.start() > 0 else " "
            after = text[m.end()] if m.end() < len(text) else " "
            pre = "" if before.isspace() or before in "([{'\"" else "\\ "
            post = "" if after.isspace() or after in ".,;:!?)]}'\"-" else "\\ "
            out.append(f"{pre}:math:`{m.group('ibody')}`{post}")
        pos = m.end()
    out.append(_PIPE.sub(r"\\|", text[pos:]))
    return "".join(out)


def _process(app, what, name, obj, options, lines):
    if not any("$" in ln or "|" in ln for ln in lines):
        return
    lines[:] = [ln.rstrip() for ln in convert("\n".join(lines)).split("\n")]


def setup(app):
    app.connect("autodoc-process-docstring", _process, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
