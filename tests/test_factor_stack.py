"""The A(x) stack from a factored form's factors (nqf.structure._factors.factor_stack) is the stack of Hessians
(Eq. 54) on the same inputs: diagnose forms it from the factors the runs used (issue 51, item 5: the Hessian
stack of an equinox Conv1d CNN took 10.6 s of diagnose's 22 s), and the drive of a low-rank form (attention) is
computed from its factors."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

import nqf
from models_example import tanh_mlp, teacher_data
from nqf.solutions._drive import factor_stack

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _both(q, params, xs):
    parts, evaluation, _ = q.parts(params, [xs])
    f0, a = parts[0]
    fast = np.asarray(factor_stack(evaluation.kind, a, evaluation.B)).reshape(np.shape(f0) + (a.shape[1],) * 2)
    slow = np.asarray(q.structure(xs, batch=True))
    return evaluation.kind, fast, slow.reshape(fast.shape)


def test_rank_two_factors_give_the_hessian_stack():
    xs, _ = teacher_data(m=20)
    net = tanh_mlp()
    kind, fast, slow = _both(nqf.quadratic_form(net), net, xs)
    assert kind == "rank-two"
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12 * np.abs(slow).max())


def test_cnn_and_attention_factors_give_the_hessian_stack():
    from library_models import build

    for name, kind in (("cnn", "rank-two"), ("equinox", "low-rank")):
        model, _, axes, xs, _ = build(name, 0, 8)
        got, fast, slow = _both(nqf.quadratic_form(model, neuron_axes=axes), model, xs)
        assert got == kind, name
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-10 * np.abs(slow).max(), err_msg=name)


def test_the_drive_of_a_low_rank_form_is_the_stacks_drive_and_diagnose_reports_it():
    """Attention on a rank-2 teacher: the low-rank form's drive is the Hessian stack's (the same spectrum: each
    teacher direction three times, once per unit of the head size), and diagnose now reports it (it said "not
    computed" for a low-rank form)."""
    from library_models import build
    from nqf.solutions._drive import drive_spectrum, driven_count

    model, _, axes, xs, ys = build("equinox", 0, 60)
    q = nqf.quadratic_form(model, neuron_axes=axes)
    parts, evaluation, _ = q.parts(model, [xs])
    f0, U = parts[0]
    fast = drive_spectrum(nqf.model.mse, f0, ys, factors=(U, evaluation.B))
    slow = drive_spectrum(nqf.model.mse, f0, ys, stack=jnp.asarray(q.structure(xs, batch=True)))
    np.testing.assert_allclose(fast, slow, atol=1e-10 * np.abs(slow).max())
    n_plus = driven_count(slow)
    assert driven_count(fast) == n_plus and 0 < n_plus < slow.size
    rep = nqf.diagnose(q, (xs, ys), optax.sgd(0.1), num_steps=300, regimes=("nqf",))
    assert rep.run.drive is not None and f"modes the data drive: {n_plus} " in str(rep)
