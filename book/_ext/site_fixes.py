"""Sphinx extension: small fixes so that every page reads cleanly in a browser, offline.

* the theme's ``default_mode`` is set (``auto``: light or dark as the reader's system
  prefers), else pydata-sphinx-theme logs "Got invalid theme mode" to the console on a
  reader's first visit;
* every figure image links to itself at full size and has its caption, in plain text, as
  alt text (not the hash file name myst-nb gives it); a plot shown by a code cell outside a
  figure is described by its section's title;
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

``tests/site/check_site.py`` (``make check-site``) checks these in Chromium
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
        context["default_mode"] = "auto"
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


_FIGURE = re.compile(r"<figure\b[^>]*>.*?</figure>", re.S)
_IMG = re.compile(r"<img\b[^>]*>")
_TAG = re.compile(r"<[^>]+>")
_SECTION_TITLE = re.compile(r"<h[1-3][^>]*>(.*?)</h[1-3]>", re.S)


def _text(fragment: str) -> str:
    import html as _html

    text = _html.unescape(_TAG.sub(" ", fragment)).replace("¶", "").replace("#", " ")
    return re.sub(r"\s+", " ", plain_tex(text)).strip()


def _attr(tag: str, name: str) -> str | None:
    m = re.search(rf'\s{name}="([^"]*)"', tag)
    return m.group(1) if m else None


def _with_alt(tag: str, alt: str) -> str:
    import html as _html

    alt = _html.escape(alt[:300], quote=True)
    if _attr(tag, "alt") is not None:
        return re.sub(r'\salt="[^"]*"', f' alt="{alt}"', tag, count=1)
    return tag.replace("<img", f'<img alt="{alt}"', 1)


def _hashed(alt: str, src: str) -> bool:
    """An alt text that says nothing: empty, the file name, or a hash."""
    name = src.rsplit("/", 1)[-1]
    return not alt or alt in (src, name) or alt.endswith("/" + name) or bool(re.fullmatch(r"[0-9a-f]{16,}(\.\w+)?", alt))


def _linked(tag: str, src: str) -> str:
    return (f'<a class="reference internal nqf-full-size" href="{src}" '
            f'title="the figure at full size">{tag}</a>')


def figure_html(page: str) -> str:
    """Figures of one HTML page: alt text from the caption, the image linked at full size.

    An image of a ``<figure>`` takes the caption as its alt text; an image of the site's
    ``_images`` outside a figure (a plot shown by a code cell) is described by the title of
    its section. Both are wrapped in a link to the image file, unless already in a link; docutils's own
    link of an image shown smaller than its file becomes that full-size link.
    """
    out, pos = [], 0
    for m in _FIGURE.finditer(page):
        block = m.group(0)
        cap = re.search(r"<figcaption\b[^>]*>(.*?)</figcaption>", block, re.S)
        alt = _text(cap.group(1)) if cap else ""

        def img(k: re.Match, block=block, alt=alt) -> str:
            tag, src = k.group(0), _attr(k.group(0), "src") or ""
            if alt and _hashed(_attr(tag, "alt") or "", src):
                tag = _with_alt(tag, alt)
            if not src or src.startswith("data:") or re.search(r"<a\b[^>]*>\s*$", block[:k.start()]):
                return tag
            return _linked(tag, src)

        out += [page[pos:m.start()], _IMG.sub(img, block)]
        pos = m.end()
    out.append(page[pos:])
    page = "".join(out)

    def loose(k: re.Match) -> str:
        tag, src = k.group(0), _attr(k.group(0), "src") or ""
        before = page[max(0, k.start() - 300):k.start()]
        if re.search(r"<a\b[^>]*>\s*$", before):
            return tag  # in a link already (a figure handled above, or a link of the page)
        if _hashed(_attr(tag, "alt") or "", src):
            titles = _SECTION_TITLE.findall(page[:k.start()])
            where = _text(titles[-1]) if titles else "this page"
            tag = _with_alt(tag, f"Plot shown by a code cell of the section “{where}”")
        return _linked(tag, src)

    page = re.sub(r'<img\b[^>]*?\ssrc="[^"]*_images/[^"]+"[^>]*>', loose, page)
    # an image shown smaller than its file (a width set, as nqfbook.kit.savefig's glued figures are) is linked
    # to its file by docutils already: that link is the full-size link
    return _IMAGE_REFERENCE.sub(r'<a class="reference internal image-reference nqf-full-size" href="\1" '
                                r'title="the figure at full size">', page)


_IMAGE_REFERENCE = re.compile(r'<a class="reference internal image-reference" href="([^"]*)">')


def _fix_source_backlinks(outdir) -> None:
    """The "[docs]" links of the highlighted source (``_modules``) go to the page that has the id.

    An object documented under two namespaces (``nqf.dynamics.nqf_output``, also imported by
    ``nqf.structure``) gets one back-link from sphinx.ext.viewcode, sometimes to the other API
    page; the link is pointed at the page that defines the id.
    """
    import os
    from pathlib import Path

    outdir = Path(outdir).resolve()
    owner: dict[str, Path] = {}
    pages = sorted((outdir / "book").glob("api*.html"))
    for page in pages:
        for i in re.findall(r'\sid="([^"]+)"', page.read_text(encoding="utf-8")):
            owner.setdefault(i, page)
    ids = {page: set(re.findall(r'\sid="([^"]+)"', page.read_text(encoding="utf-8"))) for page in pages}
    for src in sorted((outdir / "_modules").rglob("*.html")):
        text = src.read_text(encoding="utf-8")

        def fix(m: re.Match, src=src) -> str:
            target = (src.parent / m.group(1)).resolve()
            frag = m.group(2)
            if target not in ids or frag in ids[target]:
                return m.group(0)
            if frag not in owner:  # documented under another namespace: the same name there
                short = "." + frag.rsplit(".", 1)[-1]
                same = sorted(i for i in ids[target] if i.endswith(short) and i.count(".") == frag.count("."))
                if same:
                    return f'href="{m.group(1)}#{same[0]}"'
                # a result type documented by its private path (nqf.datasets._digits.DigitsData), or a name
                # documented in its room (nqf.structure.nqf_output), while viewcode links the public-looking or
                # top-level name (nqf.datasets.DigitsData, nqf.StructureReport.summary, nqf.nqf_output)
                tail = "." + frag.split(".", 1)[-1]

                def public(i: str) -> str:  # the id without its private modules
                    return ".".join(part for part in i.split(".") if not part.startswith("_"))

                private = sorted((i for i in owner if public(i) == frag or public(i).endswith(tail)),
                                 key=lambda i: (owner[i] != target, len(i)))  # the linked page first
                if not private:
                    return m.group(0)
                rel = os.path.relpath(owner[private[0]], src.parent).replace(os.sep, "/")
                return f'href="{rel}#{private[0]}"'
            rel = os.path.relpath(owner[frag], src.parent).replace(os.sep, "/")
            return f'href="{rel}#{frag}"'


        fixed = re.sub(r'href="([^"#]*book/api[^"#]*\.html)#([^"]+)"', fix, text)
        if fixed != text:
            src.write_text(fixed, encoding="utf-8")


def _fix_figures(app, exc):
    if exc is not None or app.builder.format != "html":
        return
    from pathlib import Path

    _fix_source_backlinks(app.outdir)

    for path in sorted(Path(app.outdir).rglob("*.html")):
        if "_static" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        if "<img" not in text:
            continue
        fixed = figure_html(text)
        if fixed != text:
            path.write_text(fixed, encoding="utf-8")


def setup(app):
    app.connect("build-finished", _fix_figures, priority=800)
    _register_bibliography_style()
    app.connect("build-finished", _prune_mathjax, priority=900)
    app.connect("html-page-context", _page_context, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
