"""The book's Sphinx extensions (book/_ext): docstring math, grouped entries, plain-text titles."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))

import dollar_docstrings as dd  # noqa: E402
import site_fixes as sf  # noqa: E402


def test_inline_math_becomes_a_role_also_across_a_line_break():
    text = "Weights $W = 0 \\in\n    \\mathbb R^{p\\times d}$ and $f_{x_\\mu}$, norm |x| here."
    out = dd.convert(text)
    assert ":math:`W = 0 \\in \\mathbb R^{p\\times d}`" in out  # one role, line break folded
    assert ":math:`f_{x_\\mu}`" in out  # x_ inside math is not a reST reference any more
    assert "\\|x| here" in out  # a bare | outside math is escaped (no substitution)
    assert "$" not in out


def test_display_math_literals_and_trailing_space():
    out = dd.convert("See\n\n    $$a = b$$\n\nand ``$x$`` literal; $f = $ :func:`g`.")
    assert ".. math::" in out and "a = b" in out
    assert "``$x$``" in out  # literals untouched
    assert ":math:`f =`" in out


def test_grouped_entries_are_split_for_napoleon():
    lines = ["Data.", "", "Attributes:", "    x_train, x_test: images, shape ``(n, h, w)``,",
             "        pixel values in [0, 1].", "    n: number.", "", "Returns:", "    a, b: kept"]
    dd._attribute_colon(None, "class", "X", None, None, lines)
    assert lines[3:8] == ["    x_train: images, shape ``(n, h, w)``,", "        pixel values in [0, 1].",
                          "    x_test: images, shape ``(n, h, w)``,", "        pixel values in [0, 1].",
                          "    n: number."]
    assert lines[-1] == "    a, b: kept"  # only Args/Attributes-like sections


def test_attribute_colon_is_not_a_type():
    lines = ["max |H_ij| relative to the scale (Eq. 54: 0)", ""]
    dd._attribute_colon(None, "attribute", "X.cross_block", None, None, lines)
    assert ": " not in lines[0] and "Eq. 54" in lines[0]


def test_alias_docstrings_dropped():
    lines = ["Alias for field number 3"]
    dd._process(None, "attribute", "X.f", None, None, lines)
    assert lines == []


def test_plain_tex_titles():
    assert sf.plain_tex(r"One model at different \(A\)") == "One model at different A"
    assert sf.plain_tex(r"close on \((M, \mu)\)") == "close on (M, μ)"
    assert sf.plain_tex(r"Two meanings of $\epsilon$") == "Two meanings of ε"
    assert sf.plain_tex("no math here") == "no math here"


def test_figures_get_caption_alt_text_and_a_full_size_link():
    page = ('<h2>Plateaus of \\(\\mu\\)<a class="headerlink" href="#p">#</a></h2>'
            '<figure id="fig-a"><img alt="../_images/abc.png" src="../_images/abc.png" />'
            '<figcaption><p><span class="caption-number">Fig. 5.1 </span><span class="caption-text">'
            'Paper Fig. 3 at \\(\\eta = 0.1\\).</span></p></figcaption></figure>'
            '<div class="output text_png"><img alt="../_images/0123456789abcdef01.png" '
            'src="../_images/0123456789abcdef01.png" /></div>')
    out = sf.figure_html(page)
    assert 'alt="Fig. 5.1 Paper Fig. 3 at η = 0.1."' in out  # the caption, TeX as plain text
    assert 'alt="Plot shown by a code cell of the section “Plateaus of μ”"' in out
    assert out.count('class="reference internal nqf-full-size" href="../_images/') == 2
    assert sf.figure_html(out) == out  # idempotent (incremental builds)
    scaled = ('<figure id="fig-b"><a class="reference internal image-reference" href="../_images/def.png">'
              '<img alt="../_images/def.png" src="../_images/def.png" style="width: 837px;" /></a>'
              '<figcaption><p>Paper Fig. 8.</p></figcaption></figure>')
    out = sf.figure_html(scaled)  # docutils links an image shown smaller than its file: that link is kept
    assert out.count("<a ") == 1 and 'class="reference internal image-reference nqf-full-size" href="../_images/def.png"' in out
    assert 'alt="Paper Fig. 8."' in out and sf.figure_html(out) == out


def test_theme_follows_the_readers_system():
    ctx = {"title": "x"}
    sf._page_context(None, "p", "page.html", ctx, None)
    assert ctx["default_mode"] == "auto"


def test_short_signatures():
    import short_signatures as ss

    sig = ("(W: Float[jaxlib._jax.Array, 'p d'] | Float[ndarray, 'p d'], n: Int[Array, 'n'], "
           "act=<function tanh at 0x7f3a2c>) -> Float[jaxlib._jax.Array, 'p p']")
    assert ss.shorten(sig) == "(W: Array['p d'], n: IntArray['n'], act=tanh) -> Array['p p']"
    assert ss.shorten(None) is None
