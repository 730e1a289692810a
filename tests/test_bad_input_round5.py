"""Issue 50 (bad input, round 5): the last silent answers and obscure messages, on nqf 1.0's surfaces. Each test
failed before its fix: a NaN or a mis-shaped probe was taken, a zero start ran silently, and the messages came from
NumPy, JAX or flax instead of naming the argument."""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf.training import Record, Track

jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="module")
def small():
    mlp = eqx.nn.MLP(4, 2, 6, 1, activation=jnp.tanh, use_bias=False, use_final_bias=False,
                     key=jax.random.PRNGKey(0))
    mlp = jax.tree_util.tree_map(lambda w: 0.01 * w if eqx.is_array(w) else w, mlp)
    axes = eqx.tree_at(lambda m: (m.layers[0].weight, m.layers[1].weight), mlp, replace=(0, 1))
    xs = jax.random.normal(jax.random.PRNGKey(1), (40, 4))
    return nqf.quadratic_form(mlp, neuron_axes=axes), mlp, xs, xs[:, :2]


def test_compare_with_nqf_refuses_non_finite_probe_inputs(small):
    q, _, xs, ys = small
    with pytest.raises(ValueError, match=r"`probe` must hold finite inputs; got probe inputs with 1 NaN"):
        nqf.compare_with_nqf(q, (xs, ys), optax.sgd(0.1), num_steps=5,
                             track=Track(("loss", "outputs"), probe=xs[:10].at[2, 1].set(jnp.nan)))


def test_compare_with_nqf_names_the_probe_when_its_width_is_wrong(small):
    q, _, xs, ys = small
    with pytest.raises(ValueError, match=r"`probe` must hold inputs of the training data's shape: \(n, 4\).*"
                                         r"got probe inputs of shape \(10, 5\)"):
        nqf.compare_with_nqf(q, (xs, ys), optax.sgd(0.1), num_steps=5,
                             track=Track(("loss", "outputs"), probe=jnp.ones((10, 5))))


def test_compare_with_nqf_says_what_it_got_for_params_of_an_equinox_model(small):
    q, mlp, xs, ys = small
    with pytest.raises(ValueError, match=r"`params` must be None for an equinox model .*; got a MLP"):
        nqf.compare_with_nqf(q, (xs, ys), optax.sgd(0.1), num_steps=5, params=mlp)


def test_gradient_flow_from_exactly_zero_warns_that_it_is_a_fixed_point():
    data = nqf.NQFData(nqf.structure_matrix(nqf.architectures.diagonal_linear_network(3), jnp.eye(3), batch=True),
                       jnp.array([1.0, 0.1, 0.01]))
    with pytest.warns(RuntimeWarning, match=r"`M0` is exactly 0: a fixed point of the flow"):
        sol = nqf.gradient_flow(jnp.zeros((3, 3)), data, nqf.flow.log_times(10.0, 5))
    assert float(jnp.abs(sol.ys).max()) == 0.0  # still the true answer
    with pytest.warns(RuntimeWarning, match=r"initial conditions \[1\] of 2"):
        nqf.gradient_flow(jnp.stack([1e-3 * jnp.eye(3), jnp.zeros((3, 3))]), data, nqf.flow.log_times(10.0, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a small start says nothing
        nqf.gradient_flow(1e-3 * jnp.eye(3), data, nqf.flow.log_times(10.0, 5))


def test_nqfdata_from_matrices_of_different_shapes_names_their_shapes():
    with pytest.raises(ValueError, match=r"`As` must be an array, or a list of arrays of one shape; got a list of "
                                         r"entries of shapes \(3, 3\), \(4, 4\)"):
        nqf.NQFData([np.eye(3), np.eye(4)], jnp.array([1.0, 2.0]))


def test_check_hypotheses_with_w_of_another_p_names_w_and_the_shapes():
    with pytest.raises(ValueError, match=r"`W` must be parameters `apply` accepts.*got W and x of shapes \(3, 5\) "
                                         r"and \(4,\), on which apply\(W, x\) fails: TypeError: dot_general"):
        nqf.check_hypotheses(lambda W, x: jnp.tanh(x @ W[:-1]) @ W[-1], jnp.ones((3, 5)), jnp.ones(4))


def test_a_model_returning_a_matrix_is_told_the_shape_as_a_user_writes_it():
    with pytest.raises(ValueError, match=r"`module` must return a scalar or an \(o,\) vector; got an output of "
                                         r"shape \(3, 3\)\.$") as info:
        nqf.structure_matrix(lambda W, x: jnp.outer(W[0], W[1]), jnp.ones(3), p=2)
    assert "ShapeDtypeStruct" not in str(info.value)


@pytest.mark.parametrize("record", [Record(lambda W: "hello"), lambda W, a: {"x": "s"}])
def test_a_record_returning_a_string_names_record(record):
    with pytest.raises(TypeError, match=r"`record` must return numbers or arrays .*; got a 'str' value"):
        nqf.train(lambda W, b, a: jnp.sum(W ** 2), jnp.ones(3), optax.sgd(0.1), num_steps=3, record=record)


def test_a_flax_module_given_for_its_apply_says_what_to_pass():
    nn = pytest.importorskip("flax.linen")

    class Lin(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2, use_bias=False, param_dtype=jnp.float64)(jnp.tanh(
                nn.Dense(6, use_bias=False, param_dtype=jnp.float64)(x)))

    with pytest.raises(TypeError, match=r"`model` must be the flax Module's apply function .*"
                                        r"nqf.quadratic_form\(model.apply, neuron_axes=...\).*got the flax Module Lin"):
        nqf.quadratic_form(Lin(), neuron_axes={"params": {"Dense_0": {"kernel": 1}, "Dense_1": {"kernel": 0}}})


def test_a_divergence_warning_shows_numbers_that_differ():
    from nqf.training._trainer import _distinct

    assert _distinct(2.2941, 2.2949) == ("2.294", "2.295")  # 3 digits would print "2.29" twice
    assert _distinct(2.29, 5.0) == ("2.29", "5")


def test_an_uphill_first_step_is_not_reported_as_a_rise_of_the_medians():
    with pytest.warns(RuntimeWarning, match=r"the first update points up the gradient \(the loss's slope along "
                                            r"it is \+.*a negative learning rate\?") as rec:
        nqf.train(lambda W, b, a: jnp.sum(W ** 2), jnp.ones(3), optax.sgd(-1e-3), num_steps=20)
    assert not any("rose from" in str(w.message) for w in rec)


def test_an_unhashable_module_is_traced_afresh_never_answered_from_another_ones_cache():
    """A module whose ``__eq__`` makes it unhashable (Python drops ``__hash__``), and says every module of its kind
    is equal, is not cached by value: each call traces its own module, so two of them never share an answer."""

    class Layer:
        def __init__(self, scale):
            self.scale = scale

        def __eq__(self, other):  # a user's: every Layer is "equal"
            return isinstance(other, Layer)

        def __call__(self, W, x):
            return self.scale * jnp.sum(jnp.tanh(W[0] * x) * W[1])

    assert Layer.__hash__ is None
    x = jnp.asarray(0.7)
    A1 = nqf.structure_matrix(Layer(1.0), x, p=2)
    A2 = nqf.structure_matrix(Layer(2.0), x, p=2)
    np.testing.assert_allclose(A2, 2.0 * A1, rtol=1e-12)
    assert float(jnp.abs(A1).max()) > 0


@pytest.mark.parametrize("steps", [1, 2, 9])
def test_diagnose_refuses_too_few_steps_to_read_a_plateau_end(small, steps):
    q, _, xs, ys = small
    with pytest.raises(ValueError, match=rf"`num_steps` must be at least 10: .*; got {steps}\."):
        nqf.diagnose(q, (xs, ys), optax.sgd(0.1), num_steps=steps)
