"""The claims helper (BOOK.md rules 6, 9, 11): semantics, kinds, JSON, failure messages."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from nqfbook.kit import ClaimError, Claims


def _read(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_close_semantics(tmp_path):
    c = Claims("ch99", "quick", tmp_path)
    # binary-exact numbers, so the boundary cases are decided exactly
    assert c.close("abs ok (boundary)", 1.5, 1.0, atol=0.5, kind="paper")
    assert not c.close("abs bad", 1.5625, 1.0, atol=0.5, kind="paper")
    assert c.close("rel ok (boundary)", 68.0, 64.0, rtol=0.0625, kind="paper")
    assert not c.close("rel bad", 68.5, 64.0, rtol=0.0625, kind="paper")
    assert c.close("rel uses |predicted|", -68.0, -64.0, rtol=0.0625, kind="paper")
    # both tolerances add: 0.25 + 0.125 * 4 = 0.75
    assert c.close("both ok (boundary)", 4.75, 4.0, rtol=0.125, atol=0.25, kind="paper")
    assert not c.close("both bad", 4.875, 4.0, rtol=0.125, atol=0.25, kind="paper")
    assert c.close("exact zero tolerance", 3.0, 3.0, atol=0, kind="sanity")


def test_bounds_semantics(tmp_path):
    c = Claims("ch99", "quick", tmp_path)
    assert c.less("less ok", 1.0, 2.0, kind="paper")
    assert not c.less("less is strict", 2.0, 2.0, kind="paper")
    assert c.greater("greater ok", 3.0, 2.0, kind="paper")
    assert not c.greater("greater is strict", 2.0, 2.0, kind="paper")
    assert c.within("within ok", 2.0, 1.0, 3.0, kind="paper")
    assert c.within("within inclusive", 3.0, 1.0, 3.0, kind="paper")
    assert not c.within("within bad", 3.5, 1.0, 3.0, kind="paper")


@pytest.mark.parametrize("bad", [float("nan"), np.nan, np.float32("nan")])
def test_nan_fails_every_kind(tmp_path, bad):
    c = Claims("ch99", "quick", tmp_path)
    assert not c.close("close", bad, 1.0, atol=1e300, kind="paper")
    assert not c.close("close predicted nan", 1.0, bad, atol=1e300, kind="paper")
    assert not c.less("less", bad, 1.0, kind="paper")
    assert not c.greater("greater", bad, 1.0, kind="paper")
    assert not c.within("within", bad, -1e300, 1e300, kind="paper")
    with pytest.raises(ClaimError):
        c.finish()
    data = _read(c.path)
    assert data["n_failed"] == 5 and data["passed"] is False
    assert data["claims"][0]["measured"] == "nan"  # strict JSON: no bare NaN


def test_infinite_measured_fails_close(tmp_path):
    c = Claims("ch99", "quick", tmp_path)
    assert not c.close("inf", math.inf, 1.0, rtol=1.0, kind="paper")


def test_values_become_python_floats(tmp_path):
    import jax.numpy as jnp

    c = Claims("ch99", "full", tmp_path)
    c.close("jax scalar", jnp.float64(2.0), np.array([2.0]), atol=1e-12, kind="sanity")
    c.less("numpy scalar", np.float32(0.5), 1, kind="paper")
    c.within("bool and int", True, 0, 1, kind="paper")
    for claim in c.claims:
        assert type(claim.measured) is float
    path = c.finish().path
    data = _read(path)
    assert data["claims"][0]["measured"] == 2.0 and data["claims"][0]["predicted"] == 2.0


def test_rejects_arrays_and_bad_arguments(tmp_path):
    c = Claims("ch99", "quick", tmp_path)
    with pytest.raises(ValueError, match="scalar"):
        c.close("vector", np.ones(3), 1.0, atol=1, kind="paper")
    with pytest.raises(ValueError, match="rtol= or atol="):
        c.close("no tolerance", 1.0, 1.0, kind="paper")
    with pytest.raises(ValueError, match="rtol"):
        c.close("negative tolerance", 1.0, 1.0, rtol=-1e-3, kind="paper")
    with pytest.raises(ValueError, match="atol"):
        c.close("nan tolerance", 1.0, 1.0, atol=float("nan"), kind="paper")
    with pytest.raises(ValueError, match="lo="):
        c.within("empty interval", 1.0, 2.0, 0.0, kind="paper")
    with pytest.raises(ValueError):
        c.less("complex", 1j, 1.0, kind="paper")
    with pytest.raises(ValueError):
        Claims("../escape", "quick", tmp_path)
    with pytest.raises(ValueError):
        Claims("ch99", "", tmp_path)
    assert c.claims == []  # nothing half-recorded


def test_duplicate_names_raise(tmp_path):
    c = Claims("ch99", "quick", tmp_path)
    c.less("same", 0.5, 1.0, kind="paper")
    with pytest.raises(ValueError, match="duplicate"):
        c.greater("same", 2.0, 1.0, kind="paper")
    with pytest.raises(ValueError, match="duplicate"):
        c.close("same", 1.0, 1.0, atol=1, kind="paper")


def test_finish_writes_json_and_returns_summary(tmp_path):
    c = Claims("ch01", "full", tmp_path / "out")
    c.close("slope", 3.01, 3.0, atol=0.05, note="Thm 1", kind="paper")
    c.less("cross blocks", 1e-14, 1e-12, kind="paper")
    c.greater("positive", 1.0, 0.0, kind="paper")
    c.within("window", 0.5, 0.0, 1.0, kind="paper")
    summary = c.finish()
    path = summary.path
    assert path == tmp_path / "out" / "claims" / "ch01.json"
    assert (summary.n_paper, summary.n_finding, summary.n_sanity) == (4, 0, 0)
    # the summary shown at the end of a chapter names no path of the build machine
    assert str(tmp_path) not in repr(summary) and str(tmp_path) not in summary._repr_html_()
    data = _read(path)
    assert data["chapter"] == "ch01" and data["fidelity"] == "full"
    assert data["passed"] is True and data["n_claims"] == 4 and data["n_failed"] == 0
    first = data["claims"][0]
    assert first["name"] == "slope" and first["kind"] == "paper" and first["test"] == "close" and first["note"] == "Thm 1"
    assert first["predicted"] == 3.0 and first["atol"] == 0.05 and first["rtol"] is None
    assert first["passed"] is True and math.isclose(first["error"], 0.01)
    assert data["claims"][1]["hi"] == 1e-12 and data["claims"][2]["lo"] == 0.0
    assert [k["test"] for k in data["claims"]] == ["close", "less", "greater", "within"]
    assert [k["kind"] for k in data["claims"]] == ["paper"] * 4
    # atomic write: no temporary files left behind
    assert sorted(p.name for p in path.parent.iterdir()) == ["ch01.json"]


def test_failure_names_every_failed_claim_and_still_writes(tmp_path):
    c = Claims("ch05", "quick", tmp_path)
    c.close("plateau time", 12.5, 10.0, rtol=0.1, kind="paper")
    c.less("gap", 0.3, 0.1, kind="paper")
    c.greater("fine", 2.0, 1.0, kind="paper")
    with pytest.raises(ClaimError) as info:
        c.finish()
    msg = str(info.value)
    assert "ch05" in msg and "2 of 3" in msg
    assert "plateau time" in msg and "12.5" in msg and "10" in msg
    assert "gap" in msg and "0.3" in msg and "< 0.1" in msg
    assert "fine" not in msg
    assert isinstance(info.value, AssertionError)
    data = _read(c.path)
    assert data["passed"] is False and data["n_failed"] == 2
    assert [x["passed"] for x in data["claims"]] == [False, False, True]


def test_no_claims_is_a_failure(tmp_path):
    c = Claims("ch02", "quick", tmp_path)
    with pytest.raises(ClaimError, match="no claims"):
        c.finish()
    assert _read(c.path)["passed"] is False


def test_finish_overwrites_previous_file(tmp_path):
    c = Claims("ch03", "quick", tmp_path)
    c.less("a", 0.5, 1.0, kind="paper")
    c.finish()
    c2 = Claims("ch03", "quick", tmp_path)
    c2.less("b", 0.5, 1.0, kind="paper")
    c2.finish()
    assert [x["name"] for x in _read(c2.path)["claims"]] == ["b"]


def test_table_renders(tmp_path):
    c = Claims("ch01", "quick", tmp_path)
    c.close("a <b>", 1.0005, 1.0, atol=1e-3, note="x | y", kind="paper")
    c.less("c", 2.0, 1.0, kind="paper")
    table = c.table()
    html = table._repr_html_()
    assert "<table" in html and "a &lt;b&gt;" in html and "FAIL" in html and "1 of 2 pass" in html
    md = table._repr_markdown_()
    assert md.splitlines()[0].startswith("| kind | claim") and "x \\| y" in md
    text = str(table)
    assert "a <b>" in text and "pass" in text


def test_kinds_are_labelled_grouped_and_counted_apart(tmp_path):
    c = Claims("ch07", "quick", tmp_path)
    c.close("paper: slope", 2.01, 2.0, atol=0.1, kind="paper")
    c.less("setup: the two runs differ", 0.0, 1.0, kind="sanity")
    c.greater("finding: Adam breaks the closure", 1.0, 0.5, kind="finding")
    c.greater("setup: training reduced the loss", 1.0, 0.5, kind="sanity")
    c.within("paper: window", 0.5, 0.0, 1.0, kind="paper")
    summary = c.finish()
    assert (summary.n_paper, summary.n_finding, summary.n_sanity) == (2, 1, 2)
    data = _read(summary.path)
    assert (data["n_paper"], data["n_finding"], data["n_sanity"], data["n_claims"]) == (2, 1, 2, 5)
    assert [x["kind"] for x in data["claims"]] == ["paper", "sanity", "finding", "sanity", "paper"]
    assert [x["sanity"] for x in data["claims"]] == [False, True, False, True, False]
    html = c.table()._repr_html_()
    # three groups, in the order paper claims, findings, sanity checks, each with its own count
    assert html.index("paper: window") < html.index("finding: Adam") < html.index("setup: the two runs differ")
    assert html.count("<table") == 3
    assert "Paper claims of ch07" in html and "2 of 2 pass" in html
    assert "Findings of ch07" in html and "1 of 1 pass" in html and "Sanity checks" in html
    md_kinds = [line.split("|")[1].strip() for line in c.table()._repr_markdown_().splitlines()[2:]]
    assert md_kinds == ["paper", "paper", "finding", "sanity", "sanity"]
    # the summary quotes the paper-claim count only
    assert "2 paper claims hold" in summary._repr_html_() and "2 paper claims hold" in str(summary)
    assert "1 finding" not in str(summary) and "2 sanity" not in str(summary)
    assert "1 sanity" not in summary._repr_html_() and "5" not in str(summary).split(":")[1]
    assert c.count("finding") == 1 and "2 paper, 1 finding, 2 sanity" in repr(c)


@pytest.mark.parametrize("method, args", [("close", (1.5, 1.0)), ("less", (0.5, 1.0)),
                                          ("greater", (2.0, 1.0)), ("within", (0.5, 0.0, 1.0))])
def test_a_claim_without_a_kind_is_refused(tmp_path, method, args):
    c = Claims("ch99", "quick", tmp_path)
    kw = {"atol": 1.0} if method == "close" else {}
    with pytest.raises(TypeError, match="kind") as info:
        getattr(c, method)("no kind", *args, **kw)
    assert "paper" in str(info.value) and "finding" in str(info.value) and "sanity" in str(info.value)
    with pytest.raises(TypeError, match="kind"):
        getattr(c, method)("kind None", *args, kind=None, **kw)
    with pytest.raises(ValueError, match="kind"):
        getattr(c, method)("bad kind", *args, kind="evidence", **kw)
    with pytest.raises(TypeError):  # the old flag is gone: a kind is the only label
        getattr(c, method)("old flag", *args, sanity=True, **kw)
    assert c.claims == []  # nothing half-recorded


@pytest.mark.parametrize("method, args", [("close", (0.0, 0.0)), ("close", (3.0, 3.0)), ("less", (0.0, 1e-12)),
                                          ("greater", (0.0, -1.0)), ("within", (0.0, -1.0, 1.0))])
def test_a_paper_claim_that_measures_exactly_its_prediction_is_flagged(tmp_path, method, args):
    c = Claims("ch99", "quick", tmp_path)
    kw = {"atol": 1e-12} if method == "close" else {}
    with pytest.raises(ValueError, match="exact_note") as info:
        getattr(c, method)("identity", *args, kind="paper", **kw)
    assert "identity" in str(info.value) and "sanity" in str(info.value)
    assert c.claims == []
    # the same number is fine as a sanity check or a finding ...
    assert getattr(c, method)("identity (sanity)", *args, kind="sanity", **kw)
    assert getattr(c, method)("identity (finding)", *args, kind="finding", **kw)
    # ... or as a paper claim that says why it could differ in principle; the note is recorded and shown
    why = "a step count: the two runs could switch on at different steps"
    assert getattr(c, method)("exact but independent", *args, kind="paper", exact_note=why, **kw)
    claim = c.claims[-1]
    assert claim.exact and claim.exact_note == why and why in claim.full_note()
    assert why in c.table()._repr_html_()
    c.finish()
    assert _read(c.path)["claims"][-1]["exact_note"] == why


def test_a_near_exact_paper_claim_needs_no_note(tmp_path):
    c = Claims("ch99", "quick", tmp_path)
    assert c.less("rounding", 1e-17, 1e-12, kind="paper")
    assert c.close("almost", 3.0 + 4e-16, 3.0, atol=1e-12, kind="paper")
    assert not any(x.exact for x in c.claims)


def test_a_failed_sanity_check_fails_the_chapter(tmp_path):
    c = Claims("ch07", "quick", tmp_path)
    c.close("paper", 1.01, 1.0, atol=0.1, kind="paper")
    c.less("setup", 2.0, 1.0, kind="sanity")
    with pytest.raises(ClaimError, match="setup") as info:
        c.finish()
    assert "[sanity] setup" in str(info.value)  # the failure names the kind
    assert "FAIL" in c.table()._repr_html_()


def test_a_failed_finding_fails_the_chapter(tmp_path):
    c = Claims("ch07", "quick", tmp_path)
    c.close("paper", 1.01, 1.0, atol=0.1, kind="paper")
    c.greater("erratum", 0.5, 1.0, kind="finding")
    with pytest.raises(ClaimError, match=r"\[finding\] erratum"):
        c.finish()


def test_only_findings_and_sanity_checks_is_a_failure(tmp_path):
    c = Claims("ch07", "quick", tmp_path)
    c.less("setup", 0.0, 1.0, kind="sanity")
    c.less("erratum", 0.5, 1.0, kind="finding")
    with pytest.raises(ClaimError, match="no paper claim"):
        c.finish()


# ------------------------------------------------------------- parameters injected by papermill
def test_injected_parameters_are_checked_against_the_parameters_cell():
    from nqfbook.kit._chapter import check_injected_parameters

    declared = 'fidelity = "full"\nout_dir = "../_build"\nmnist_dir = None  # MNIST files\nsteps = 100\nrate = 0.1\n'
    ok = '# Parameters\nfidelity = "quick"\nmnist_dir = "/data"\nsteps = 20\nrate = 1\n'
    check_injected_parameters(["import x", declared, ok, "start"])
    check_injected_parameters([declared])  # no injected cell (JupyterLab): nothing to check
    with pytest.raises(ValueError, match="`stepz`"):
        check_injected_parameters([declared, '# Parameters\nstepz = 3\n'])
    with pytest.raises(TypeError, match="`steps`"):
        check_injected_parameters([declared, '# Parameters\nsteps = "many"\n'])
    with pytest.raises(TypeError, match="`fidelity`"):
        check_injected_parameters([declared, '# Parameters\nfidelity = 3\n'])


def test_an_interactive_session_runs_at_quick_into_its_own_folder(monkeypatch, tmp_path):
    """Run by hand (no injected parameters), a chapter never writes over a build: quick by default, the
    build folder swapped for ``_build/output/interactive/<fidelity>``; the runner's injection wins."""
    from nqfbook.kit import _chapter, interactive_settings

    assert interactive_settings("full", "../_build/output/full", environ={}) == (
        "quick", "../_build/output/interactive/quick")
    assert interactive_settings("full", "../_build/output/quick", environ={"NQF_FIDELITY": "full"}) == (
        "full", "../_build/output/interactive/full")
    assert interactive_settings("full", tmp_path / "mine", environ={}) == ("quick", (tmp_path / "mine").as_posix())
    with pytest.raises(ValueError, match="`NQF_FIDELITY`"):
        interactive_settings("full", "out", environ={"NQF_FIDELITY": "fast"})

    params = 'fidelity = "full"\nout_dir = "../_build/output/full"\n'
    monkeypatch.delenv("NQF_FIDELITY", raising=False)
    monkeypatch.setattr(_chapter, "_history", lambda: ["", params, "start"])
    claims = _chapter.start_chapter("ch99", "full", "../_build/output/full")
    assert (claims.fidelity, claims.out_dir.as_posix()) == ("quick", "../_build/output/interactive/quick")
    injected = '# Parameters\nfidelity = "full"\nout_dir = "../_build/output/full"\n'
    monkeypatch.setattr(_chapter, "_history", lambda: ["", params, injected, "start"])
    claims = _chapter.start_chapter("ch99", "full", "../_build/output/full")
    assert (claims.fidelity, claims.out_dir.as_posix()) == ("full", "../_build/output/full")


def test_by_fidelity_types_a_setting_by_the_one_parameter_rule():
    """``by_fidelity`` types the reader's value by the fidelity's default with the rule of ``parameter_type``:
    an int is a float (and becomes one), a list is typed by its entries, a bool is not a number."""
    from nqfbook.kit import by_fidelity, parameter_type

    assert by_fidelity("rays", None, "quick", quick=2, full=8) == 2
    assert by_fidelity("rays", 5, "full", quick=2, full=8) == 5
    value = by_fidelity("eps_min", 1, "quick", quick=1e-38, full=1e-40)
    assert value == 1.0 and isinstance(value, float)
    assert by_fidelity("teacher_s", [1, 0.5], "quick", quick=[1.0, 0.5], full=[1.0]) == [1, 0.5]
    for name, value, quick in (("rays", True, 2), ("rays", 2.5, 2), ("k_sweep", [1000.0], [1000, 10000]),
                               ("teacher_s", ["a"], [1.0, 0.5])):
        with pytest.raises(TypeError, match=f"`{name}` must be of type .* like its defaults"):
            by_fidelity(name, value, "quick", quick=quick, full=quick)
    assert parameter_type([1000, 10000]).name == "list[int]"
    assert parameter_type([1, 0.5]).name == "list[float]"
    assert parameter_type(None, annotation="int").name == "int or None"
    assert parameter_type(None, annotation="'int'").name == "int or None"  # a quoted annotation
    assert parameter_type(3, annotation="Path").name == "int"  # an unknown annotation: the default types it
    assert parameter_type(None).accepts(object())  # no annotation, default None: anything


def test_a_chapter_records_its_compilations_beside_its_claims(tmp_path, monkeypatch):
    """start_chapter counts JAX's compilations (lowerings: one per jit cache miss) until finish(), which
    writes them to ``<chapter>.compilations.json`` beside the claims; a cached program adds none."""
    import json

    import jax
    import jax.numpy as jnp

    from nqfbook.kit import _chapter

    monkeypatch.setattr(_chapter, "_history", lambda: [])  # not an interactive session
    claims = _chapter.start_chapter("ch99", "quick", tmp_path)

    @jax.jit
    def f(x):
        return jnp.sin(x) * 3.0

    f(jnp.ones(3)), f(jnp.zeros(3)), f(jnp.ones(4))  # two shapes: two programs
    claims.less("a paper claim", 0.5, 1.0, kind="paper")
    claims.finish()
    counts = json.loads((tmp_path / "claims" / "ch99.compilations.json").read_text())
    assert counts["lowerings"] >= 2 and counts["lowering_seconds"] > 0
    claims2 = _chapter.start_chapter("ch98", "quick", tmp_path)
    f(jnp.ones(3)), f(jnp.ones(4))  # compiled already: nothing new
    claims2.less("a paper claim", 0.5, 1.0, kind="paper")
    claims2.finish()
    assert json.loads((tmp_path / "claims" / "ch98.compilations.json").read_text())["lowerings"] == 0
