"""flax models through nqf.diagnose and nqf.compare_with_nqf (issue 29, item 5): a linen MLP as
``apply(variables, x)`` and an nnx MLP as ``apply(state, x) = nnx.merge(graphdef, state)(x)``."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nqf
from nqf.structure import neuron_weights

flax = pytest.importorskip("flax")
from models_example import LINEN_AXES, flax_mlps, teacher_data  # noqa: E402

jax.config.update("jax_enable_x64", True)


def _teacher():
    return teacher_data(s=(1.0, 0.4))


def _nnx_model():
    return flax_mlps()[1]


def _check_valid_within(rep):
    pl = rep.plateaus
    assert pl.levels.size == 2, str(rep)
    ok = pl.valid
    assert ok.any(), str(rep)
    err = np.abs(pl.module / pl.predicted - 1)
    assert np.all(err[ok] <= pl.tolerance[ok]), str(rep)


@pytest.fixture(scope="module")
def linen():
    variables, apply, _ = flax_mlps()[0]
    return apply, variables


def test_a_linen_model_through_diagnose(linen):
    apply, variables = linen
    xs, ys = _teacher()
    rep = nqf.diagnose(nqf.quadratic_form(apply, neuron_axes=LINEN_AXES), (xs, ys), optax.sgd(0.05), num_steps=600,
                       params=variables)
    text = str(rep)
    assert "['params']['Dense_1']['bias'] (3,)" in text  # the shared output bias is listed as frozen
    assert rep.run.form == "rank-two" and rep.run.optimizer.kind == "sgd"
    _check_valid_within(rep)
    # A(x) against an independent autodiff Hessian of the linen model in the packed coordinates
    W0, layout = neuron_weights(variables, LINEN_AXES)
    p, d = W0.shape
    H = jax.hessian(lambda w: apply(layout.unflatten(w.reshape(p, d)), xs[0]))(jnp.zeros(p * d))
    np.testing.assert_allclose(rep.run.As[0], 0.5 * H.reshape(3, p, d, p, d)[:, :, 0, :, 0], atol=1e-12)


def test_an_nnx_model_through_diagnose():
    state, nnx_apply, axes = _nnx_model()
    xs, ys = _teacher()
    rep = nqf.diagnose(nqf.quadratic_form(nnx_apply, neuron_axes=axes), (xs, ys), optax.sgd(0.05, momentum=0.5),
                       num_steps=400, params=state)
    assert "nnx_apply" in str(rep) and "frozen leaves: none" in str(rep)
    assert rep.run.optimizer.kind == "heavy-ball momentum"
    _check_valid_within(rep)


@pytest.mark.parametrize("kind", ["linen", "nnx"])
def test_flax_models_through_compare_with_nqf(kind, linen):
    xs, ys = _teacher()
    if kind == "linen":
        apply, params = linen
        axes = LINEN_AXES
    else:
        params, apply, axes = _nnx_model()
    c = nqf.compare_with_nqf(nqf.quadratic_form(apply, neuron_axes=axes), (xs, ys), optax.sgd(0.05), num_steps=300,
                             params=params, track=nqf.training.Track(("loss", "outputs"), probe=xs[:16], record_every=10))
    loss = np.asarray(c.module["loss"])
    assert loss[-1] < 0.5 * loss[0]  # the model learns
    assert c.gap[0] < 1e-4  # module and NQF start together (remainder O(|W|^4) at init 1e-3)
    assert np.isfinite(c.window) or c.gap.max() <= 0.1


def test_a_float32_flax_model_gets_the_param_dtype_advice():
    variables, apply, _ = flax_mlps()[0]
    variables = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), variables)
    xs, ys = _teacher()
    with pytest.raises(ValueError, match="param_dtype=jnp.float64"):
        nqf.diagnose(nqf.quadratic_form(apply, neuron_axes=LINEN_AXES), (xs, ys), optax.sgd(0.05), num_steps=10,
                     params=variables)
