"""A chapter parameter is declared by the range its use needs (issue 50): the values its declaration admits are
the values the function it feeds accepts, checked at the edges of the range, so the runner refuses before any cell
runs what the chapter would fail on (or, worse, run with: ``-p threshold=1.5``)."""

from __future__ import annotations

import nbformat
import numpy as np
import pytest

from nqfbook.kit._parameters import check_parameter, declared_parameters
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _declared(chapter: str) -> dict:
    path = next((ROOT / "notebooks").glob(f"{chapter}_*.ipynb"))
    cell = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    return declared_parameters(cell.source)


def _agreement(v):
    from nqf.training import Agreement

    return Agreement(v)


def _seeded(v):
    from nqf.datasets import digits_odd_even

    return digits_odd_even(n_train=5, n_test=1, seed=v)


#: (chapter, parameter) -> (the call it feeds, values inside the use's range, values outside it)
FEEDS = {
    ("ch10", "threshold"): (_agreement, [1e-9, 0.1, 1 - 1e-9], [0.0, 1.0, 1.5, -0.1]),  # diagnose's threshold
    ("ch10", "seed"): (_seeded, [0, 1, 2**32], [-1, -5]),  # digits_odd_even's numpy generator
}


@pytest.mark.parametrize("chapter, name", list(FEEDS), ids=[f"{c}-{n}" for c, n in FEEDS])
def test_the_declared_range_is_the_range_of_the_call_it_feeds(chapter, name):
    feed, inside, outside = FEEDS[(chapter, name)]
    default, annotation = _declared(chapter)[name]
    for v in inside:  # the declaration admits it and the call takes it
        check_parameter(name, v, default=default, annotation=annotation)
        feed(v)
    for v in outside:  # the call refuses it, and so does the declaration, before any cell runs
        with pytest.raises((TypeError, ValueError)):
            feed(v)
        with pytest.raises(ValueError, match=f"`{name}`|{name}"):
            check_parameter(name, v, default=default, annotation=annotation)
