"""Each figure's data file holds what it plots, and a panel can be redrawn from that file alone."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nqfbook.kit import MEASURED_KW, THEORY_KW, savefig  # noqa: E402
from nqfbook.kit._provenance import load_figure_data, provenance_markdown  # noqa: E402


def _figure():
    t = np.linspace(0.0, 3.0, 40)
    fig, (a, b) = plt.subplots(1, 2)
    a.plot(t, np.exp(-t), **THEORY_KW, label="Eq. (1) (theory)")
    a.plot(t[::4], np.exp(-t[::4]) * 1.01, **MEASURED_KW, label="GD (measured)")
    a.fill_between(t, np.exp(-t) - 0.05, np.exp(-t) + 0.05, alpha=0.2, label="± std")
    a.errorbar([1.0, 2.0], [0.4, 0.2], yerr=[0.05, 0.02], fmt="o", label="seed mean (measured)")
    a.set(xlabel="time $t$ (flow units)", ylabel="loss", yscale="log")
    b.imshow(np.arange(12.0).reshape(3, 4))
    b.scatter([1, 2, 3], [3, 1, 2], label="modes (measured)")
    return fig


def test_a_panel_is_redrawn_from_its_data_file_alone(tmp_path):
    fig = _figure()
    paths = savefig(fig, "demo", chapter="ch99", out_dir=tmp_path, data={"seeds": [8100, 8101]})
    original = [(line.get_xdata(), line.get_ydata(), line.get_label()) for line in fig.axes[0].get_lines()]
    plt.close(fig)

    arrays, meta = load_figure_data(paths["npz"])
    assert paths["npz"] == tmp_path / "figures" / "ch99" / "demo.npz"
    assert meta["panels"][0]["xlabel"] == "time $t$ (flow units)" and meta["panels"][0]["yscale"] == "log"
    assert arrays["seeds"].tolist() == [8100, 8101]
    # redraw panel 0's lines from the file only
    redrawn, ax = plt.subplots()
    j = 0
    while f"panel0/line{j}/x" in arrays:
        ax.plot(arrays[f"panel0/line{j}/x"], arrays[f"panel0/line{j}/y"], label=meta["series"][f"panel0/line{j}"] or None)
        j += 1
    again = [(line.get_xdata(), line.get_ydata(), line.get_label()) for line in ax.get_lines()]
    plt.close(redrawn)
    assert len(again) == len(original) >= 2
    for (x0, y0, l0), (x1, y1, l1) in zip(original, again):
        np.testing.assert_array_equal(np.asarray(x0, float), x1)
        np.testing.assert_array_equal(np.asarray(y0, float), y1)
        assert l1 == l0 or (l0.startswith("_") and l1.startswith("_"))  # unlabelled stays unlabelled
    assert "Eq. (1) (theory)" in meta["series"].values()
    # the band's outline, the error bars' ends, the image and the scatter points are there too
    assert any(k.startswith("panel0/band") for k in arrays)
    assert any(k.startswith("panel0/segments") and arrays[k].shape == (2, 2, 2) for k in arrays)
    np.testing.assert_array_equal(arrays["panel1/image0"], np.arange(12.0).reshape(3, 4))
    (points,) = [v for k, v in arrays.items() if k.startswith("panel1/points")]
    np.testing.assert_array_equal(points, [[1, 3], [2, 1], [3, 2]])


def test_the_provenance_names_the_figure_its_data_and_the_commit(tmp_path):
    fig = _figure()
    paths = savefig(fig, "demo", chapter="ch99", out_dir=tmp_path)
    plt.close(fig)
    prov = json.loads(paths["provenance"].read_text())
    assert prov["figure"] == "demo" and prov["chapter"] == "ch99"
    assert prov["commit"] == "" or len(prov["commit"].split("+")[0]) == 12  # this checkout's HEAD, or no git
    line = provenance_markdown({**prov, "code_cell": 7, "recipes": ["ch06_fig2.fig2_runs"],
                                "parameters": {"seed": 3}, "fidelity": "quick", "commit": "0123456789ab"})
    assert line == ("Data: {download}`demo.npz <figure-data/ch99/demo.npz>` · drawn by code cell 7 of "
                    f"`{prov['notebook']}` (recipes: `ch06_fig2.fig2_runs`) · parameters: `seed = 3` at quick "
                    "fidelity · commit `0123456789ab`")


def test_extra_data_may_not_overwrite_the_figures_arrays(tmp_path):
    fig = _figure()
    with pytest.raises(ValueError, match="`data` key 'panel0/line0/x' clashes"):
        savefig(fig, "demo", chapter="ch99", out_dir=tmp_path, data={"panel0/line0/x": [1.0]})
    plt.close(fig)


def test_the_site_serves_the_data_where_the_kit_links_it():
    from nqfbook import site
    from nqfbook.kit import _provenance

    assert site.SITE_DATA_DIR == _provenance.SITE_DATA_DIR


def test_the_recipes_are_the_chapter_modules_functions_behind_the_drawing_cell():
    from nqfbook.kit._provenance import _defining_cells, _recipes_called

    def fig9_runs(n):
        return n

    def _private(n):
        return n

    fig9_runs.__module__ = _private.__module__ = "ch77_fake"  # as if defined at the top of notebooks/ch77_fake.py
    fig9_runs.__qualname__, _private.__qualname__ = "fig9_runs", "_private"
    namespace = {"fig9_runs": fig9_runs, "_private": _private, "np": np, "plt": plt}
    earlier = ["import numpy as np", "runs = fig9_runs(3)\nother = _private(2)", "unused = fig9_runs(4) + 1"]
    drawing = "fig, ax = plt.subplots()\nax.plot(np.arange(3), runs)\nsavefig(fig, 'x', chapter='ch77', out_dir='o')"
    cells = [drawing, *_defining_cells(earlier, drawing)]
    assert cells[1:] == [earlier[1]]  # the cell that assigned `runs`, not the one that only used fig9_runs
    assert _recipes_called(cells, namespace) == ["ch77_fake.fig9_runs"]  # private and library calls left out


def test_every_glued_figure_shows_its_provenance_line():
    """Each ``{glue:figure} NAME`` of a chapter ends with ``{glue:md}`NAME_provenance:myst``` (savefig glues it)."""
    import re
    from pathlib import Path

    missing = []
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("ch*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            text = "".join(cell["source"]) if cell["cell_type"] == "markdown" else ""
            for name, body in re.findall(r"```\{glue:figure\}\s*([\w-]+)(.*?)\n```", text, re.S):
                if f"{{glue:md}}`{name}_provenance:myst`" not in body:
                    missing.append(f"{path.name}: {name}")
    assert not missing, missing


def test_the_claims_file_carries_the_runs_and_each_figures_provenance(tmp_path):
    from nqfbook.kit import start_chapter

    claims = start_chapter("ch99", "quick", tmp_path)
    fig = _figure()
    savefig(fig, "demo", chapter="ch99", out_dir=tmp_path)
    plt.close(fig)
    claims.less("tiny", 1e-20, 1e-12, kind="paper")
    claims.finish()
    prov = json.loads((tmp_path / "claims" / "ch99.json").read_text())["provenance"]
    assert prov["fidelity"] == "quick" and prov["parameters"] == {}
    assert [f["figure"] for f in prov["figures"]] == ["demo"] and prov["figures"][0]["commit"] == prov["commit"]
