"""Sphinx extension: render the plain-text math of nqf docstrings.

The nqf docstrings carry the paper's equations in dollar notation and write
norms as ``|x|`` (readable in ``help()`` and in editors). autodoc hands
docstrings to reStructuredText, which has no dollar math and reads ``|x|`` as
a substitution reference, so this hook rewrites each docstring after napoleon:

* ``$x$`` becomes ``:math:`x```, also when the formula spans a line break
  (the line break becomes a space); a ``$$...$$`` block becomes a
  ``.. math::`` directive;
* outside math and ``literals``, a ``|`` followed by a non-blank character is
  escaped (table and line-block syntax, ``| `` followed by a blank, is kept);
* the "Alias for field number N" docstrings that ``NamedTuple`` gives fields
  without a ``#:`` comment are dropped (they say nothing to a reader);
* before napoleon, a grouped entry ``x_train, x_test: images`` of an Args or
  Attributes section becomes one entry per name (napoleon would read the
  second name as the type of the first), and ": " in the one-line docstring of an attribute becomes a
  dash, so that napoleon does not read the text before it as the attribute's
  type ("max |H_ij| (Eq. 54: 0)" and "``(o, p)``: the block" are descriptions).

A ``missing-reference`` handler resolves cross-references the way a reader
means them: ``nqf.nqf_sgd`` (a top-level name) to the room that documents it
(``nqf.updates.nqf_sgd``), and an unqualified ``TABLE1`` to the one documented
object of that name.

Why not ``sphinx-math-dollar``: it finds ``$...$`` *after* reStructuredText has
parsed the docstring, and by then the math is already damaged: ``x_\\mu`` is read
as a hyperlink reference ("Unknown target name: x"), ``|x|`` as a substitution,
``*`` as emphasis. Protecting those characters needs a pass over the raw
docstring that finds the math anyway, and that pass can emit ``:math:`` roles
directly, which is what this extension does.

Double-backtick literals and ``\\$`` are left alone.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"(?P<literal>``[^\n]+?``)"
    r"|(?P<display>\$\$(?P<dbody>.+?)\$\$)"
    r"|(?<![\\$])\$(?=\S)(?P<ibody>[^$]+?)\$(?!\$)",
    re.S,
)
_PIPE = re.compile(r"(?<!\\)\|(?=\S)")
_ALIAS = re.compile(r"^Alias for field number \d+$")


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
            body = " ".join(m.group("ibody").split())
            before = text[m.start() - 1] if m.start() > 0 else " "
            after = text[m.end()] if m.end() < len(text) else " "
            pre = "" if before.isspace() or before in "([{'\"" else "\\ "
            post = "" if after.isspace() or after in ".,;:!?)]}'\"-" else "\\ "
            out.append(f"{pre}:math:`{body}`{post}")
        pos = m.end()
    out.append(_PIPE.sub(r"\\|", text[pos:]))
    return "".join(out)


def _process(app, what, name, obj, options, lines):
    if len([ln for ln in lines if ln.strip()]) == 1 and _ALIAS.match(lines[0].strip()):
        lines[:] = []
        return
    if not any("$" in ln or "|" in ln for ln in lines):
        return
    lines[:] = [ln.rstrip() for ln in convert("\n".join(lines)).split("\n")]


_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Attributes|Keyword Args|Other Parameters):\s*$")
_GROUPED = re.compile(r"^(\s+)([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)+)(\s*\([^)]*\))?\s*:(\s.*|)$")


def _split_grouped(lines: list[str]) -> list[str]:
    """``x_train, x_test: images`` in an Args/Attributes section -> one entry per name.

    napoleon reads a grouped entry as one name with a type ("x_train" of class "x_test").
    """
    out: list[str] = []
    i, in_section, item_indent = 0, False, None
    while i < len(lines):
        ln = lines[i]
        sec = _SECTION.match(ln)
        if sec:
            in_section, item_indent = True, None
            out.append(ln)
            i += 1
            continue
        if in_section and ln.strip() and item_indent is None:
            item_indent = len(ln) - len(ln.lstrip())
        if in_section and ln.strip() and len(ln) - len(ln.lstrip()) < (item_indent or 0):
            in_section = False
        m = _GROUPED.match(ln) if in_section else None
        if m and len(m.group(1)) == item_indent:
            body = [ln]
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > item_indent):
                if not lines[j].strip() and (j + 1 >= len(lines) or not lines[j + 1].strip()):
                    break
                body.append(lines[j])
                j += 1
            names = [n.strip() for n in m.group(2).split(",")]
            for n in names:
                out.append(f"{m.group(1)}{n}{m.group(3) or ''}:{m.group(4)}")
                out.extend(body[1:])
            i = j
            continue
        out.append(ln)
        i += 1
    return out


def _attribute_colon(app, what, name, obj, options, lines):
    if any("," in ln for ln in lines):
        lines[:] = _split_grouped(lines)
    text = [i for i, ln in enumerate(lines) if ln.strip()]
    if what in ("attribute", "data", "property") and len(text) == 1 and ": " in lines[text[0]]:
        lines[text[0]] = lines[text[0]].replace(": ", " \u2014 ")


_ROOMS = ("architectures", "structure", "model", "updates", "flow", "training", "solutions", "datasets", "pipeline")


def _resolve(app, env, node, contnode):
    """Resolve ``nqf.X`` through the room that re-exports X, and unique unqualified names."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    domain = env.get_domain("py")
    candidates: list[str] = []
    if target.startswith("nqf.") and target.count(".") == 1:
        import importlib

        name = target.split(".", 1)[1]
        for room in _ROOMS:
            try:
                mod = importlib.import_module(f"nqf.{room}")
            except ImportError:
                continue
            if hasattr(mod, name):
                candidates.append(f"nqf.{room}.{name}")
    elif target and "." not in target and not target.startswith("~"):
        candidates = [full for full in domain.objects if full.startswith("nqf.") and full.endswith("." + target)]
        # a method or attribute named from its class's docstring: prefer the same class, then its room
        here = node.get("py:class") or ""
        module = node.get("py:module") or ""
        candidates.sort(key=lambda full: (not (here and f".{here}." in f".{full}"),
                                          not full.startswith(module + "."), full))
        if not candidates:
            return None
    for cand in candidates:
        ref = domain.resolve_xref(env, node.get("refdoc"), app.builder, node.get("reftype"), cand, node, contnode)
        if ref is not None:
            return ref
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _attribute_colon, priority=400)
    app.connect("autodoc-process-docstring", _process, priority=600)
    app.connect("missing-reference", _resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "2"}
