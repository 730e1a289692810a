"""notebooks/ch08_fig7.py: a module and its NQF trained side by side by Adam, initialisations vmapped (Fig. 7)."""

import sys
from pathlib import Path

import numpy as np

from nqf import architectures

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch08_fig7 import fig7_run, zero_outputs  # noqa: E402


def _data(k=6, m=24, n=10, seed=0):
    rng = np.random.default_rng(seed)
    xtr, xte = rng.normal(size=(m, k)), rng.normal(size=(n, k))
    return xtr, np.sign(xtr[:, 0]), xte, np.sign(xte[:, 0])


def test_fig7_run_records_both_accuracies_per_initialisation():
    arch, data = architectures.two_layer_mlp(6), _data()
    run = fig7_run(arch, 5, data, (1, 2), tag=700, form="structure", num_steps=20, record_every=5)
    assert run.comparison.steps.tolist() == [0, 5, 10, 15, 20]
    for k in ("module", "nqf"):
        assert run.accuracy[k].shape == (2, 5) and np.all((0 <= run.accuracy[k]) & (run.accuracy[k] <= 1))
    assert run.f0_max == 0.0  # an MLP without biases: f_x(0) = 0, so the targets are the labels
    # from W(0) = 0.01 Z both start from the same outputs, so the same accuracy; the runs differ by lane (seed)
    np.testing.assert_array_equal(run.accuracy["module"][:, 0], run.accuracy["nqf"][:, 0])
    assert run.comparison.module["loss"].shape == (2, 5)
    assert not np.array_equal(run.comparison.module["loss"][0], run.comparison.module["loss"][1])


def test_zero_outputs_of_a_module_with_an_offset():
    """f_x(0) is the module at W = 0: for QK attention with a readout, each of the d heads attends uniformly, so
    f_x(0) = d c^T mean_j X_j."""
    arch = architectures.qk_attention(3, 4, 2, c=np.ones(3) / 3)
    rng = np.random.default_rng(1)
    xs = (rng.normal(size=(5, 3)), rng.normal(size=(5, 3, 4)))
    f0 = zero_outputs(arch, xs, ((5,), 2))
    expected = np.array([2 * np.mean(xs[1][i], axis=1) @ (np.ones(3) / 3) for i in range(5)])  # d = 2 heads
    np.testing.assert_allclose(f0, expected, rtol=1e-12)
