"""Sphinx extension: small fixes so that every page reads cleanly in a browser, offline.

* the theme's ``default_mode`` is set (``light``), else pydata-sphinx-theme logs
  "Got invalid theme mode" to the console on a reader's first visit;
* a script that two extensions register twice (sphinx-thebe's configuration,
  loaded on every page by Jupyter Book) is emitted once: twice is a console
  SyntaxError ("Identifier 'THEBE_JS_URL' has already been declared");
* the tab title is plain text: TeX in a page title (``\\(A\\)``, ``$\\mu$``) becomes
  Unicode or plain letters, since the browser cannot typeset a ``<title>``.

* the bibliography is labelled by author and year ("Ziyin et al., 2026"), like
  the in-text citations (``bibtex_reference_style: author_year``), instead of the
  numbers "[5]" of pybtex's plain style: ``bibtex_default_style: plain_author_year``.

* the MathJax copy that ``sphinx-mathjax-offline`` ships into ``_static/mathjax``
  keeps only what the pages load (``tex-chtml.js`` and the components it loads on
  demand): the other combined bundles and the SVG output, about 15 MB, are removed.

``tests/site/check_site.py`` (``make check-site``) checks the first three in Chromium
(and that nothing MathJax asks for is missing).
"""

from __future__ import annotations

import re

_GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν",
    "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "chi": "χ",
    "psi": "ψ", "omega": "ω", "Sigma": "Σ", "Lambda": "Λ", "Delta": "Δ", "Gamma": "Γ",
    "infty": "∞", "to": "→", "cdot": "·", "times": "×", "le": "≤", "ge": "≥", "ne": "≠",
    "top": "ᵀ", "in": "∈", "ln": "ln", "max": "max", "min": "min",
}
_MATH = re.compile(r"\\\((.+?)\\\)|\$(.+?)\$")


def plain_tex(text: str) -> str:
    """``"close on \\((M, \\mu)\\)"`` -> ``"close on (M, μ)"``: TeX spans as plain Unicode text."""

    def one(m: re.Match) -> str:
        body = m.group(1) if m.group(1) is not None else m.group(2)
        body = re.sub(r"\\mathcal\s*\{?(\w)\}?|\\mathbb\s*\{?(\w)\}?|\\mathrm\s*\{([^}]*)\}",
                      lambda k: next(g for g in k.groups() if g), body)
        body = re.sub(r"\\([A-Za-z]+)", lambda k: _GREEK.get(k.group(1), k.group(1)), body)
        body = body.replace("{", "").replace("}", "").replace("\\", "")
        return re.sub(r"\s+", " ", body).strip()

    return _MATH.sub(one, text)


def _page_context(app, pagename, templatename, context, doctree):
    if not context.get("default_mode"):
        context["default_mode"] = "light"
    scripts = context.get("script_files")
    if scripts:
        seen, unique = set(), []
        for js in scripts:
            attrs = getattr(js, "attributes", {}) or {}
            key = (str(getattr(js, "filename", None) or ""), tuple(sorted((k, str(v)) for k, v in attrs.items())))
            if key not in seen:
                seen.add(key)
                unique.append(js)
        scripts[:] = unique
    if context.get("title"):
        context["title"] = plain_tex(context["title"])


def _register_bibliography_style() -> None:
    from pybtex.plugin import register_plugin
    from pybtex.style.formatting.plain import Style as PlainStyle
    from pybtex.style.labels import BaseLabelStyle

    class AuthorYearLabels(BaseLabelStyle):
        def format_labels(self, sorted_entries):
            for entry in sorted_entries:
                people = entry.persons.get("author") or entry.persons.get("editor") or []
                last = [" ".join(p.last_names) for p in people]
                if not last:
                    who = entry.key
                elif len(last) == 1:
                    who = last[0]
                elif len(last) == 2:
                    who = f"{last[0]} and {last[1]}"
                else:
                    who = f"{last[0]} et al."
                who = who.replace("{", "").replace("}", "")
                yield f"{who}, {entry.fields.get('year', 'n.d.')}"

    class PlainAuthorYear(PlainStyle):
        default_label_style = "author_year"

    for group, name, cls in (("pybtex.style.labels", "author_year", AuthorYearLabels),
                             ("pybtex.style.formatting", "plain_author_year", PlainAuthorYear)):
        try:
            register_plugin(group, name, cls)
        except Exception:  # already registered (incremental builds)
            pass


_MATHJAX_UNUSED = (
    "mml-chtml.js", "mml-svg.js", "tex-mml-chtml.js", "tex-mml-svg.js", "tex-svg.js", "tex-svg-full.js",
    "tex-chtml-full.js", "tex-chtml-full-speech.js", "node-main.js", "output/svg", "output/svg.js",
)


def _prune_mathjax(app, exc):
    if exc is not None or app.builder.format != "html":
        return
    import shutil
    from pathlib import Path

    root = Path(app.outdir) / "_static" / "mathjax"
    if not (root / "tex-chtml.js").is_file():
        return
    for rel in _MATHJAX_UNUSED:
        p = root / rel
        if p.is_dir():
            shutil.rmtree(p)
        elif p.is_file():
            p.unlink()


def setup(app):
    _register_bibliography_style()
    app.connect("build-finished", _prune_mathjax, priority=900)
    app.connect("html-page-context", _page_context, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
