"""The figure conventions (nqfbook/kit/_style.py): measurements as open markers, theory as lines.

:func:`nqfbook.kit.savefig` reads them off a figure's labelled curves and warns for each curve that breaks
them; every chapter's figures are checked where test_notebooks runs the chapters (no such warning)."""

import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nqfbook.kit import MEASURED_KW, THEORY_KW, savefig  # noqa: E402

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
    from nqfbook.kit import start_chapter, use_style

    out = tmp_path / "out"
    (out / "figures" / "ch00").mkdir(parents=True)
    (out / "figures" / "ch00" / "f.svg").write_text("<svg/>")  # an earlier run's: stale unless rewritten
    try:
        start_chapter("ch00", fidelity, out)
        fig, ax = plt.subplots()
        ax.plot(T, T, **THEORY_KW, label="Thm 6 (theory)")
        paths = savefig(fig, "f", chapter="ch00", out_dir=out)
        plt.close(fig)
        assert set(paths) == formats | {"npz", "provenance"}  # the figure's data and provenance (test_figure_data)
        assert {p.name for p in (out / "figures" / "ch00").iterdir()} == {f"f.{x}" for x in formats} | {
            "f.npz", "f.provenance.json"}
        if "svg" in formats:
            assert (out / "figures" / "ch00" / "f.svg").read_text() != "<svg/>"
    finally:
        use_style()


@pytest.mark.parametrize("bad", ["png", (), ("png", "png"), ("pdf",), ["png", "jpg"]])
def test_use_style_names_bad_formats(bad):
    from nqfbook.kit import use_style

    with pytest.raises(ValueError, match="formats"):
        use_style(formats=bad)


def test_glue_keyword_glues_the_saved_png_at_the_screen_size(tmp_path, monkeypatch):
    """``savefig(..., glue=name)`` glues the PNG file itself (not a second drawing of the figure), at the width the
    inline backend gives the figure: its pixel width times figure.dpi / savefig.dpi."""
    from nqfbook.kit import _glue

    glued = []
    monkeypatch.setattr(_glue, "glue", lambda name, value, display: glued.append((name, value, display)))
    fig, ax = plt.subplots(figsize=(4.0, 3.0), dpi=110)
    ax.plot(T, T, **THEORY_KW, label="Thm 6 (theory)")
    with matplotlib.rc_context({"savefig.dpi": 200, "savefig.bbox": None}):
        paths = savefig(fig, "f", chapter="ch00", out_dir=tmp_path, glue="ch00_f")
    plt.close(fig)
    [(name, image, display), (line_name, line, line_display)] = glued
    assert name == "ch00_f" and display is False
    assert line_name == "ch00_f_provenance" and line_display is False and "f.npz" in line.data
    assert image.data == paths["png"].read_bytes()
    # the PNG with its width, as the notebook stores it (read without IPython's display formatter, which would
    # leave a global InteractiveShell behind: start_chapter would then take any later test for a kernel session)
    _, metadata = image._repr_png_()
    assert metadata == {"width": 440}  # 800 px saved, 4 in at 110 dpi
    with pytest.raises(ValueError, match="glue"):
        savefig(fig, "f", chapter="ch00", out_dir=tmp_path, glue="")


def test_glue_without_a_png_is_a_named_error_before_anything_is_written(tmp_path):
    """The glued image is the saved PNG: a style that writes SVG only cannot glue one, and says so before it writes."""
    from nqfbook.kit import use_style

    fig, ax = plt.subplots()
    ax.plot(T, T, **THEORY_KW, label="Thm 6 (theory)")
    try:
        use_style(formats=("svg",))
        with pytest.raises(ValueError, match=r"glue.*writes no PNG.*'ch00_f' with formats \('svg',\)"):
            savefig(fig, "f", chapter="ch00", out_dir=tmp_path, glue="ch00_f")
    finally:
        use_style()
        plt.close(fig)
    assert not (tmp_path / "figures").exists()


def test_a_shell_that_ran_nothing_is_not_a_session(tmp_path):
    """An ``InteractiveShell`` made by a library call (IPython's display formatter makes one) has run no cell:
    ``start_chapter`` keeps the fidelity it is given (it once took the shell for a kernel session and ran quick)."""
    from IPython.core.interactiveshell import InteractiveShell

    from nqfbook.kit import start_chapter, use_style

    made = not InteractiveShell.initialized()
    InteractiveShell.instance()
    try:
        claims = start_chapter("ch00", "full", tmp_path / "out")
        assert claims.fidelity == "full"
        fig, ax = plt.subplots()
        ax.plot(T, T, **THEORY_KW, label="Thm 6 (theory)")
        assert set(savefig(fig, "f", chapter="ch00", out_dir=tmp_path / "out")) >= {"png", "svg"}
        plt.close(fig)
    finally:
        use_style()
        if made:
            InteractiveShell.clear_instance()


@pytest.mark.parametrize("display", [False, True])
@pytest.mark.parametrize("value", ["0.1234", 3.5, [1, 2]], ids=["str", "float", "list"])
def test_glue_writes_myst_nbs_record(monkeypatch, value, display):
    """nqf's glue writes what myst-nb's glue writes (the book reads it back with myst-nb), without importing
    myst-nb's glue module (nbformat and jsonschema: 1 s per chapter)."""
    import IPython.display
    import myst_nb.ext.glue as myst_glue
    from IPython.core.interactiveshell import InteractiveShell

    from nqfbook.kit import glue

    shown = []
    record = lambda *args, **kwargs: shown.append((args, kwargs))  # noqa: E731
    monkeypatch.setattr(IPython.display, "display", record)
    monkeypatch.setattr(myst_glue, "ipy_display", record)
    had_shell = InteractiveShell.initialized()
    try:
        glue("ch00_x", value, display=display)
        myst_glue.glue("ch00_x", value, display)
    finally:
        if not had_shell:  # format_display_data made a global shell: start_chapter would take later tests for a kernel
            InteractiveShell.clear_instance()
    ours, theirs = shown
    assert ours == theirs and ours[1]["metadata"]["scrapbook"] == {"name": "ch00_x", "mime_prefix": "" if display
                                                                   else "application/papermill.record/"}
