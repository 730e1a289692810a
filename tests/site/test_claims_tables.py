"""Claims tables as the page shows them (nqf/pipeline/_claims.py, the rendering only)."""

from __future__ import annotations

from nqf.pipeline import Claims
from nqf.pipeline._claim import readable_name


def _table(tmp_path):
    c = Claims("ch07", "quick", tmp_path)
    c.less("count of modes", 5.0, 5 + 1e-9, kind="paper", exact_note="a count that could differ")
    c.close("slope", 2.98765432, 3.0, atol=0.05, kind="paper")
    c.less("near the bound", 4.99996, 5, kind="finding")
    c.less("identity residual", 3.7e-16, 1e-10, kind="sanity")
    return c.table()


def test_thresholds_as_given_values_to_the_precision_of_their_bound(tmp_path):
    html = _table(tmp_path)._repr_html_()
    assert "&lt; 5.000000001" in html  # not "< 5" for a threshold of 5 + 1e-9
    assert '<td class="num">2.988</td>' in html  # to a tenth of the allowed 0.05, not 2.98765
    assert '<td class="num">4.99996</td>' in html  # never rounded onto its bound ("5 < 5")
    assert '<td class="num">3.7e-16</td>' in html


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
