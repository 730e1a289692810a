"""Claims tables as the page shows them (nqfbook/kit/_claims.py, the rendering only)."""

from __future__ import annotations

from nqfbook.kit import Claims
from nqfbook.kit._claim import readable_name


def _table(tmp_path):
    c = Claims("ch07", "quick", tmp_path)
    c.less("count of modes", 5.0, 5 + 1e-9, kind="paper", exact_note="a count that could differ")
    c.close("slope", 2.98765432, 3.0, atol=0.05, kind="paper")
    c.less("near the bound", 4.99996, 5, kind="finding")
    c.less("identity residual", 3.7e-16, 1e-10, kind="sanity")
    return c.table()


def test_thresholds_as_given_values_to_the_precision_of_their_bound(tmp_path):
    html = _table(tmp_path)._repr_html_()
    # a bound of 5 + 1e-9 met by a count of 5 reads "5 ≤ 5" at the shown precision, never "5 < 5"
    # nor twelve digits
    assert '<td class="num">5.00</td><td class="num">≤ 5</td>' in html
    assert '<td class="num">2.988</td>' in html  # to a tenth of the allowed 0.05, not 2.98765
    assert '<td class="num">4.99996</td>' in html  # never rounded onto its bound ("5 < 5")
    assert '<td class="num">3.7e-16</td>' in html


def test_no_number_has_more_than_six_significant_digits(tmp_path):
    import re

    c = Claims("ch02", "quick", tmp_path)
    c.close("computed tolerance", 0.500323972899, 0.51, atol=0.0193855469959, kind="paper")
    c.less("just below", 4.99999999, 5.0, kind="paper")
    c.greater("just above", 2.0000000001, 2.0, kind="paper")
    c.close("tiny", -2.22044604925e-16, 0.0, atol=1e-12, kind="sanity")
    html = c.table()._repr_html_()
    cells = " ".join(re.findall(r'<td class="num">([^<]*)</td>', html))
    numbers = re.findall(r"\d+(?:\.\d+)?(?=e|\b)", cells)
    digits = {x: len(x.replace(".", "").lstrip("0")) for x in numbers}
    assert max(digits.values()) <= 6, digits
    assert '<td class="num">≈ 0.510 (atol 0.01939)</td>' in html
    assert '<td class="num">4.99999</td>' in html          # towards its side of the bound, 6 digits
    assert '<td class="num">2.00000</td><td class="num">≥ 2</td>' in html or \
        '<td class="num">2.00001</td>' in html


def test_a_shared_note_is_printed_once_and_math_is_typeset(tmp_path):
    c = Claims("ch02", "quick", tmp_path)
    long = "the closed form against the autodiff Hessian at W = 0, relative Frobenius error"
    for i in range(3):
        c.less(f"row {i}: closed-form A equals autodiff H_ii/2", 1e-14, 1e-10, kind="paper", note=long)
    html = c.table()._repr_html_()
    assert html.count(long) == 1 and html.count("see note 1") == 3
    assert r'<span class="math notranslate nohighlight">\(H_{ii}\)</span>/2' in html
    assert "<details" in html and "All 3 checks of ch02: 3 paper claims (all pass)" in html


def test_trailing_zeros_show_the_precision(tmp_path):
    c = Claims("ch01", "quick", tmp_path)
    c.close("remainder order", 2.99996, 3.0, atol=0.02, kind="paper")
    assert '<td class="num">3.000</td>' in c.table()._repr_html_()


def test_kinds_grouped_visible_and_no_always_pass_column(tmp_path):
    html = _table(tmp_path)._repr_html_()
    assert html.count("<table") == 3
    assert html.index("Paper claims") < html.index("Findings") < html.index("Sanity checks")
    assert "<th>result</th>" not in html and "✓ pass" not in html


def test_readable_names():
    assert readable_name("eta^2 term at sigma=np.int64(1)") == "η² term at σ=1"
    assert readable_name("beta and theta, not meta") == "β and θ, not meta"
