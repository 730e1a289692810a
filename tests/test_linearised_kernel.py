"""The linearised model's Gauss-Newton form (nqf.model._linearised.kernel_form): under an MSE loss the surrogate's
loss is exactly quadratic in W - W(0), so training it through G = J^T J is the same run as the matrix-free jvp one
(issue 51, item 5: the linearised run was 11.5 s of diagnose's 29.6 s on equinox attention)."""

import jax
import numpy as np
import optax
import pytest

import nqf
from models_example import tanh_mlp, teacher_data
from nqf.model import MSE
from nqf.model import _linearised as L
from nqf.solutions._regimes import linearised_run

jax.config.update("jax_enable_x64", True)


def _run(loss, optimizer, monkeypatch=None):
    xs, ys = teacher_data(m=120, n_in=6, n_out=4, s=(1.0, 0.5, 0.25), seed=3)
    net = tanh_mlp(n_in=6, n_out=4, width=16, init=0.5)
    q = nqf.quadratic_form(net)
    return linearised_run(q, net, (xs, ys), optimizer, loss, 300, 10, xs[:40])


class _NotMSE:
    """The same loss under another type: kernel_form does not recognise it and the run is matrix-free."""

    def __init__(self, mse):
        self.mse = mse

    def __call__(self, out, ys):
        return self.mse(out, ys)

    def __hash__(self):
        return 1

    def __eq__(self, other):
        return isinstance(other, _NotMSE)


@pytest.mark.parametrize("loss", [MSE(), MSE(outputs="mean"), MSE(samples="sum")], ids=["sum", "mean", "samples-sum"])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_the_gauss_newton_run_is_the_matrix_free_run(loss, opt):
    optimizer = optax.sgd(0.05 if loss.samples == "mean" else 0.05 / 120) if opt == "sgd" else optax.adam(1e-2)
    fast, slow = _run(loss, optimizer), _run(_NotMSE(loss), optimizer)
    np.testing.assert_allclose(fast.loss, slow.loss, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(fast.outputs, slow.outputs, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fast.error[1:], slow.error[1:], rtol=1e-7)
    assert fast.loss[-1] < 0.5 * fast.loss[0]  # it trains: the comparison is not of two constant runs


def test_the_form_is_skipped_for_other_losses_and_large_jacobians(monkeypatch):
    xs, ys = teacher_data(m=50, n_in=6, n_out=4, seed=1)
    net = tanh_mlp(n_in=6, n_out=4, width=16, init=0.5)
    tr0, frozen, _ = nqf.quadratic_form(net).split(net)
    apply = nqf.quadratic_form(net).apply
    assert L.kernel_form(apply, tr0, frozen, (xs, ys), xs[:5], MSE()) is not None
    assert L.kernel_form(apply, tr0, frozen, (xs, ys), xs[:5], _NotMSE(MSE())) is None
    monkeypatch.setattr(L, "JACOBIAN_MAX_ENTRIES", 55 * 4 * 100)
    assert L.kernel_form(apply, tr0, frozen, (xs, ys), xs[:5], MSE()) is None
