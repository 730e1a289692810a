"""nqf.diagnose round 3, item 1 (issue 51): outside the quadratic regime. A surrogate that diverges while the model
trains is blamed on the regime, never on the user's learning rate (the issue's 6-16-4 tanh MLP at init 1.0 with
sgd(0.05): the NQF's loss grows 2e5-fold in 3 steps while the model's falls 1300-fold)."""

import jax
import numpy as np
import optax
import pytest

import nqf
from models_example import tanh_mlp, teacher_data

jax.config.update("jax_enable_x64", True)


def test_a_surrogate_that_diverges_while_the_model_trains_blames_the_regime():
    xs, ys = teacher_data(m=200, n_in=6, n_out=4, s=(1.0, 0.5, 0.25, 0.1))
    net = tanh_mlp(n_in=6, n_out=4, width=16, init=1.0)
    with pytest.warns(RuntimeWarning, match="the NQF diverges because W\\(0\\) lies outside the quadratic regime"):
        rep = nqf.diagnose(net, (xs, ys), optax.sgd(0.05), num_steps=1000)
    text = str(rep)
    loss = np.asarray(rep.run.comparison.module["step_loss"])
    assert np.isfinite(loss).all() and loss[-1] < 1e-2 * loss[0]  # the model trains well at this rate
    assert "not because of the learning rate, which suits the model" in text
    assert "lower it" not in text and "lower the learning rate" not in text
    assert rep.run.quadratic_error > 0.1 and rep.plateaus.levels.size == 0


def test_a_model_that_diverges_still_names_the_learning_rate():
    xs, ys = teacher_data()
    with pytest.warns(RuntimeWarning, match=r"the model's loss .* diverges \(learning rate 1000: lower it\)"):
        rep = nqf.diagnose(tanh_mlp(), (xs, ys), optax.sgd(1e3), num_steps=50)
    assert "DIVERGED" in str(rep)
