"""One home for each rule (issue 48, ARCHITECTURE.md "One home per rule").

* **One "never crossed" value, one first-crossing function.** Every reader of a crossing time (the package's
  agreement window, the kit's crossing time of the chapters, Fig. 2's half-times, the singular-limit sweep) takes
  "never" from :data:`nqf.training._agreement.NEVER` through :func:`nqf.training.first_crossing`. The test moves
  that one value and checks that every reader follows; a reader with a value of its own (planted) does not.
* **One loss convention.** No chapter, recipe or room writes a mean squared error by hand: the one object is
  :class:`nqf.model.MSE` (``nqf.model.mse``). A scan of the sources finds ``mean((a - b) ** 2)``; a planted one
  is found.
* **One Theorem-1 tolerance set**: ``tests/test_theorem1_tolerance.py`` plants breaks of the hypotheses and checks
  that every check of them (``structure_report``, ``check_hypotheses``, the runners' refusal) agrees.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import nqf.training._agreement as agreement
from nqf.training import Agreement, first_crossing

ROOT = Path(__file__).resolve().parents[1]
MOVED = -7.0  # "never", moved: a reader that follows the one home returns this


def _readers():
    """Every reader of a crossing time, each on a record that never reaches its level: ``name -> result``."""
    sys.path.insert(0, str(ROOT / "notebooks"))
    try:
        import ch06_fig2
    finally:
        sys.path.remove(str(ROOT / "notebooks"))
    from nqf.solutions._sudden import _first_crossing as sweep_crossing
    from nqfbook.kit import crossing_time

    t = np.arange(5.0)
    v = np.zeros(5)
    return {
        "first_crossing": first_crossing(t, v, 1.0),
        "Agreement.window": Agreement(0.5).window(t, v[None])[0],
        "nqfbook.kit.crossing_time": crossing_time(t, v, 1.0),
        "ch06's half_times": ch06_fig2.half_times(t, v[:, None])[0],
        "the singular-limit sweep": np.asarray(sweep_crossing(t, v[None, :, None], np.ones((1, 1)),
                                                              np.zeros((1, 1, 1))))[0, 0, 0],
    }


def test_never_is_inf_everywhere():
    assert agreement.NEVER == np.inf
    assert {k: float(v) for k, v in _readers().items()} == {k: np.inf for k in _readers()}


def test_every_reader_follows_the_one_never_value(monkeypatch):
    monkeypatch.setattr(agreement, "NEVER", MOVED)
    got = {k: float(v) for k, v in _readers().items()}
    assert got == {k: MOVED for k in got}, got


def test_a_reader_with_its_own_never_is_seen(monkeypatch):
    """Not vacuous: a reader that spells "never" itself (``np.inf`` after an argmax, as ch06 once did) does not
    follow the moved value."""
    def own_half_times(steps, ratio):
        above = np.asarray(ratio) >= 0.5
        return np.where(above.any(axis=-2), np.asarray(steps)[np.argmax(above, axis=-2)], np.inf)

    monkeypatch.setattr(agreement, "NEVER", MOVED)
    assert float(own_half_times(np.arange(5.0), np.zeros((5, 1)))[0]) != MOVED


# ---------------------------------------------------------------- one loss convention
HAND_MSE = re.compile(r"\b(?:jnp|np|numpy)\.mean\(\s*\(.*-.*\)\s*\*\*\s*2")


def _sources(root: Path) -> dict[str, str]:
    """The package's files but the loss's own module, the recipes, and the code cells of the chapters."""
    out = {str(p.relative_to(root)): p.read_text() for p in sorted((root / "nqf").rglob("*.py"))
           if p.relative_to(root).as_posix() != "nqf/model/_model.py"}
    out.update({str(p.relative_to(root)): p.read_text() for p in sorted((root / "notebooks").glob("*.py"))})
    for p in sorted((root / "notebooks").glob("*.ipynb")):
        cells = json.loads(p.read_text())["cells"]
        out[str(p.relative_to(root))] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return out


def hand_written_losses(root: Path = ROOT) -> list[str]:
    return [f"{name}: {line.strip()}" for name, text in _sources(root).items() for line in text.splitlines()
            if HAND_MSE.search(line)]


def test_no_hand_written_mean_squared_error():
    assert hand_written_losses() == []


def test_the_scan_sees_a_planted_loss(tmp_path):
    (tmp_path / "nqf" / "training").mkdir(parents=True)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "nqf" / "training" / "_x.py").write_text("loss = jnp.mean((f(W, xs) - ys) ** 2)\n")
    (tmp_path / "notebooks" / "ch99_x.py").write_text("loss = mse(f(W, xs), ys)\n")
    cell = {"cell_type": "code", "source": ["L = np.mean((z @ lam.T - y) ** 2, axis=1)\n"]}
    (tmp_path / "notebooks" / "ch99_x.ipynb").write_text(json.dumps({"cells": [cell]}))
    assert len(hand_written_losses(tmp_path)) == 2


@pytest.mark.parametrize("n", [1, 7, 64])
def test_the_one_loss_is_the_papers_mean_squared_error(n):
    """Eq. 26 without the factor 1/2: mean over samples of the squared error summed over outputs."""
    from nqf.model import MSE, mse

    rng = np.random.default_rng(n)
    f, y = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    assert float(mse(f, y)) == pytest.approx(np.sum((f - y) ** 2) / n, rel=1e-14)
    assert float(MSE(outputs="mean")(f, y)) == pytest.approx(np.sum((f - y) ** 2) / (3 * n), rel=1e-14)
    assert float(MSE(samples="sum")(f[:, 0], y[:, 0])) == pytest.approx(np.sum((f[:, 0] - y[:, 0]) ** 2), rel=1e-14)
