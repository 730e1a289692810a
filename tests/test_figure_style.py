"""The figure conventions (nqf/pipeline/_style.py): measurements as open markers, theory as lines.

:func:`nqf.pipeline.savefig` reads them off a figure's labelled curves and warns for each curve that breaks
them; every chapter's figures are checked where test_notebooks runs the chapters (no such warning)."""

import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nqf.pipeline import MEASURED_KW, THEORY_KW, savefig  # noqa: E402

T = np.linspace(0, 1, 20)


def _saved(tmp_path, draw):
    fig, ax = plt.subplots()
    draw(ax)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        savefig(fig, "f", chapter="ch00", out_dir=tmp_path)
    plt.close(fig)
    return [str(w.message) for w in seen if "figure convention" in str(w.message)]


def test_curves_drawn_by_the_conventions_pass(tmp_path):
    def draw(ax):
        ax.plot(T, T, **THEORY_KW, label="Thm 6 (theory)")
        ax.plot(T, T**2, **MEASURED_KW, label="GD (measured)")
        ax.plot(T, T**3, marker="o", markevery=5, linewidth=0.6, label="module (measured), a guide line")
        ax.plot(T, -T, label="unlabelled kind")  # no claim made: not checked
        ax.plot(T[::5], T[::5], "x", label="Eq. 292 at each K (theory)")  # theory at discrete settings: a cross
    assert _saved(tmp_path, draw) == []


@pytest.mark.parametrize("kw, label, says", [
    ({"linestyle": "-"}, "GD (measured)", "measurement drawn without markers"),
    ({"linestyle": "None", "marker": "o", "markerfacecolor": "none"}, "Thm 6 (theory)", "theory drawn with open markers"),
    ({"linestyle": "None", "marker": "None"}, "Thm 6 (theory)", "invisibly"),
])
def test_a_curve_against_its_label_is_named(tmp_path, kw, label, says):
    problems = _saved(tmp_path, lambda ax: ax.plot(T, T, **kw, label=label))
    assert len(problems) == 1 and says in problems[0] and "ch00/f" in problems[0] and label in problems[0]
    folder = tmp_path / "figures" / "ch00"
    assert (folder / "f.png").is_file()  # the figure is still saved, and the problem recorded beside it
    assert (folder / "f.conventions.txt").read_text().strip() == problems[0]
    fixed = MEASURED_KW if "(measured)" in label else THEORY_KW
    assert _saved(tmp_path, lambda ax: ax.plot(T, T, **fixed, label=label)) == []
    assert not (folder / "f.conventions.txt").exists()  # saved again by the conventions: the record goes


@pytest.mark.parametrize("fidelity, formats", [("quick", {"png"}), ("full", {"png", "svg"})])
def test_a_chapter_at_quick_writes_the_png_only(tmp_path, fidelity, formats):
    from nqf.pipeline import start_chapter, use_style

    out = tmp_path / "out"
    (out / "figures" / "ch00").mkdir(parents=True)
    (out / "figures" / "ch00" / "f.svg").write_text("<svg/>")  # an earlier run's: stale unless rewritten
    try:
        start_chapter("ch00", fidelity, out)
        fig, ax = plt.subplots()
        ax.plot(T, T, **THEORY_KW, label="Thm 6 (theory)")
        paths = savefig(fig, "f", chapter="ch00", out_dir=out)
        plt.close(fig)
        assert set(paths) == formats
        assert {p.suffix[1:] for p in (out / "figures" / "ch00").iterdir()} == formats
        if "svg" in formats:
            assert (out / "figures" / "ch00" / "f.svg").read_text() != "<svg/>"
    finally:
        use_style()


@pytest.mark.parametrize("bad", ["png", (), ("png", "png"), ("pdf",), ["png", "jpg"]])
def test_use_style_names_bad_formats(bad):
    from nqf.pipeline import use_style

    with pytest.raises(ValueError, match="formats"):
        use_style(formats=bad)
