"""nqf.diagnose round 3, item 1 (issue 51): outside the quadratic regime. A surrogate that diverges while the model
trains is blamed on the regime, never on the user's learning rate (the issue's 6-16-4 tanh MLP at init 1.0 with
sgd(0.05): the NQF's loss grows 2e5-fold in 3 steps while the model's falls 1300-fold)."""

import equinox as eqx
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


# ----------------------------------------------------------------- two regimes, one report
from ch10_models import scaled_default_mlp  # noqa: E402  (models_example puts notebooks/ on the path)


def _lecun(seed, width, scale):
    """A 6-width-4 tanh MLP at ``scale`` times the library default: chapter 10's ``scaled_default_mlp`` (LeCun, b = 0;
    a small bias draw below scale 1e-2 so that the bias neurons are not exactly 0)."""
    return scaled_default_mlp(jax.random.PRNGKey(100 + seed), 6, 4, width, scale)


def _classify(seed, width, scale):
    xs, ys = teacher_data(m=200, n_in=6, n_out=4, s=(1.0, 0.5, 0.25, 0.1), seed=seed)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return nqf.diagnose(_lecun(seed, width, scale), (xs, ys), optax.sgd(0.8 / width), num_steps=1000)


# The rule (nqf.solutions._regimes) was fixed on seed 0 (exploration: widths 16 and 256, scales 1e-3, 0.1, 0.3, 1,
# 3); these are the known answers on fresh seeds: small init is the NQF's, a wide MLP at the library's default
# initialisation is lazy (the learning rate 0.8 / width keeps the kernel regime's step stable, as NTK theory asks).
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("width, scale, regime", [(256, 1e-3, "nqf"), (256, 1.0, "linearised")])
def test_the_known_regimes_are_classified_by_the_rule_fixed_before_the_runs(seed, width, scale, regime):
    rep = _classify(seed, width, scale)
    text = str(rep)
    assert rep.regime == regime, text
    assert f"which describes this training: {'the NQF' if regime == 'nqf' else 'the linearised model'}" in text
    if regime == "linearised":
        assert rep.not_small and np.isfinite(rep.run.linearised.loss).all()
        L = np.asarray(rep.run.comparison.module["step_loss"])
        assert abs(rep.regime_reached["linearised"] / rep.half_way_step - 1) <= 0.1 + 2 / rep.half_way_step
        assert rep.run.linearised.loss[-1] < 0.1 * L[0]  # the surrogate learns, as the model does


def test_the_issues_mlp_at_init_one_is_described_by_neither():
    """The issue's 6-16-4 tanh MLP at init 1.0 (U, V ~ N(0, 1)) with sgd(0.05): the NQF blows up at once and the
    linearised model leaves its range of validity by the model's half-way step."""
    xs, ys = teacher_data(m=200, n_in=6, n_out=4, s=(1.0, 0.5, 0.25, 0.1))
    with pytest.warns(RuntimeWarning):
        rep = nqf.diagnose(tanh_mlp(n_in=6, n_out=4, width=16, init=1.0), (xs, ys), optax.sgd(0.05), num_steps=1000)
    assert rep.regime == "neither" and "which describes this training: neither surrogate" in str(rep)
    assert np.isnan(rep.regime_validity["nqf"])


def test_a_linear_network_is_its_own_nqf_in_the_regime_report():
    class Linear(eqx.Module):
        U: jax.Array
        V: jax.Array

        def __call__(self, x):
            return self.V @ (self.U @ x)

        def neuron_axes(self):
            return Linear(0, 1)

    xs, ys = teacher_data()
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    net = Linear(1e-3 * jax.random.normal(k1, (5, 4)), 1e-3 * jax.random.normal(k2, (3, 5)))
    rep = nqf.diagnose(net, (xs, ys), optax.sgd(0.05), num_steps=600)
    assert not np.isfinite(rep.regime_validity["nqf"]) and rep.regime == "nqf", str(rep)


def test_regimes_option_and_its_bad_inputs():
    xs, ys = teacher_data()
    rep = nqf.diagnose(tanh_mlp(), (xs, ys), optax.sgd(0.05), num_steps=200, regimes=("nqf",))
    assert rep.run.linearised is None and "linearised" not in str(rep) and set(rep.regime_validity) == {"nqf"}
    for bad, match in ((("kernel",), r"`regimes` must hold only names among \('nqf', 'linearised'\); got \['kernel'\]"),
                       (("linearised",), r"`regimes` must hold 'nqf'"),
                       ("nqf", r"`regimes` must be a tuple of names")):
        with pytest.raises(ValueError, match=match):
            nqf.diagnose(tanh_mlp(), (xs, ys), optax.sgd(0.05), num_steps=10, regimes=bad)


def test_the_linearised_error_starts_at_zero_and_its_range_is_not_cut_at_step_0():
    """At W(0) the linearised model is the model: a rounding difference over a zero change is no error (it made the
    784-256-10 MLP's linearisation 'valid until step 0')."""
    from nqf.solutions._regimes import valid_until

    rep = _classify(1, 16, 1.0)
    lin = rep.run.linearised
    assert lin.error[0] == 0.0 and rep.regime_validity["linearised"] > 0
    assert valid_until([0, 1, 2], [0.0, 0.01, 0.5], 0.1) == 2.0 and valid_until([0, 1], [0.0, 0.01], 0.1) == np.inf


def test_the_A_stack_is_formed_in_chunks_and_skipped_when_its_work_is_too_large(monkeypatch):
    """One neuron's Hessian is taken in the model of all d neurons: a 1024-wide MLP on 600 samples asked for 53 GB
    at once. The stack is formed in chunks (the same matrices), and not at all beyond STACK_WORK."""
    import nqf.solutions._plateaus as P

    xs, ys = teacher_data()
    q = nqf.quadratic_form(tanh_mlp())
    whole = q.structure(xs, batch=True)
    monkeypatch.setattr(P, "STACK_CHUNK", 3 * 9 * 9 * 8 * 7)  # 7 samples a chunk: 120 = 17 x 7 + 1, one padded
    np.testing.assert_array_equal(P._stack(q, None, xs, (120, 3, 9, 8)), whole)
    monkeypatch.setattr(P, "STACK_WORK", 10)  # the Hessians' work: a matrix-free form's stack is skipped
    rep = nqf.diagnose(nqf.quadratic_form(tanh_mlp(), form="matrix-free"), (xs, ys), optax.sgd(0.05), num_steps=200,
                       regimes=("nqf",))
    assert rep.run.As is None and "the full A(x) stack not formed" in str(rep)
    rep = nqf.diagnose(tanh_mlp(), (xs, ys), optax.sgd(0.05), num_steps=200, regimes=("nqf",))
    assert rep.run.As is not None and "also formed, from the factors" in str(rep)  # products of factors: no Hessian
    monkeypatch.setattr(P, "DENSE_LIMIT", 10)  # too large to hold: not formed, the drive from the factors instead
    rep = nqf.diagnose(tanh_mlp(), (xs, ys), optax.sgd(0.05), num_steps=200, regimes=("nqf",))
    assert rep.run.As is None and rep.run.drive is not None
