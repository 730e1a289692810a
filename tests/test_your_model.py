"""Chapter 10's one call on a user's model: nqf.diagnose (report, A(x), multi-output data, float32, plateau rule)."""

import jax
import jax.numpy as jnp
import equinox as eqx
import numpy as np
import pytest

import nqf
from nqf.solutions._plateaus import learned_levels, mode_plateau_ends
from nqf.structure import neuron_weights

from helpers import count_compilations
from models_example import make_model, make_sin_model
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

jax.config.update("jax_enable_x64", True)


class LinearNet(eqx.Module):
    """f(x) = V U x: a two-layer linear network, whose NQF is the network itself (Eq. 2 with no remainder)."""

    U: jax.Array
    V: jax.Array

    def __call__(self, x):
        return self.V @ (self.U @ x)

    def neuron_axes(self):
        return LinearNet(0, 1)


class ReluNet(eqx.Module):
    U: jax.Array
    V: jax.Array

    def __call__(self, x):
        return self.V @ jax.nn.relu(self.U @ x)


def _teacher(seed=0, m=40, n_in=4, n_out=3, s=(2.0, 0.7)):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(m, n_in))
    P = np.linalg.qr(rng.normal(size=(n_in, len(s))))[0]
    Q = np.linalg.qr(rng.normal(size=(n_out, len(s))))[0]
    return jnp.asarray(xs), jnp.asarray(xs @ (P * np.asarray(s)) @ Q.T)


OPT = dict(name="sgd", learning_rate=0.05)


@pytest.fixture(scope="module")
def report():
    xs, ys = _teacher(s=(1.0, 0.35))
    net = make_sin_model(jax.random.PRNGKey(1), 4, 3, width=6, init_scale=1e-3)
    return nqf.diagnose(net, (xs, ys), nqf.optimizer("sgd", 0.05), num_steps=1200), net, xs, ys


def test_report_on_a_model_the_package_does_not_ship(report):
    rep, net, xs, ys = report
    text = str(rep)
    assert "SinMLP" in text and "_call_module" not in text
    assert "plateau ends" in text and "measured agreement (trained model vs prediction" in text
    # A(x) against an independent autodiff: the full Hessian of f(W) at 0 in the packed coordinates
    W0, layout = neuron_weights(net, net.neuron_axes())
    p, d = W0.shape
    H = jax.hessian(lambda w: layout.unflatten(w.reshape(p, d))(xs[3]))(jnp.zeros(p * d))  # (o, pd, pd)
    H = H.reshape(3, p, d, p, d)
    np.testing.assert_allclose(rep.run.As[3], 0.5 * H[:, :, 0, :, 0], atol=1e-12)
    np.testing.assert_allclose(H[:, :, 0, :, 1], 0.0, atol=1e-12)  # ZGZ: no cross-neuron block (Eq. 54)
    assert rep.run.As.shape == (40, 3, p, p) and rep.run.data.num_outputs == 3
    # two modes are learned (teacher of rank 2), predicted and measured within 15 % while the NQF is valid
    pl = rep.plateaus
    assert pl.levels.size == 2
    ok = pl.valid & pl.within_run
    assert ok.any()
    assert np.all(np.abs(pl.module[ok] / pl.predicted[ok] - 1) <= pl.tolerance[ok])
    # the prediction (GD on the NQF) lags its flow by about eta a / 2 (GD's discrete growth), never leads it
    assert np.all(np.isfinite(pl.flow)) and np.all(pl.lag > -0.02) and np.all(pl.lag < 0.2)
    fig = rep.plot()
    assert len(fig.axes) == 2
    from nqfbook.kit._style import _figure_conventions

    assert _figure_conventions(fig) == []  # the model's curves are measurements: open markers


def test_linear_network_is_its_own_nqf():
    """Where the NQF is exact (a linear network), the model run and the NQF run coincide to rounding."""
    xs, ys = _teacher(seed=2)
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    net = LinearNet(1e-3 * normal(k1, (5, 4)), 1e-3 * normal(k2, (3, 5)))
    rep = nqf.diagnose(net, (xs, ys), nqf.optimizer("sgd", 0.05), num_steps=600)
    c = rep.run.comparison
    assert np.max(c.gap) < 1e-9 and not np.isfinite(rep.window)
    np.testing.assert_allclose(rep.run.eigs_module, rep.run.eigs_nqf, rtol=1e-8, atol=1e-14)
    assert not np.isfinite(rep.valid_until_steps) and rep.run.quadratic_error < 1e-9
    pl = rep.plateaus
    assert pl.levels.size == 2 and pl.valid.all()
    np.testing.assert_allclose(pl.module, pl.predicted, rtol=1e-8)


def test_second_call_with_new_data_compiles_nothing(report):
    rep, net, xs, ys = report
    xs2, ys2 = _teacher(seed=5, s=(1.0, 0.35))
    opt = nqf.optimizer("sgd", 0.04)  # a new learning rate too: traced
    with count_compilations() as seen:
        rep2 = nqf.diagnose(net, (xs2, ys2), opt, num_steps=1200)
    assert len(seen) == 0, f"{len(seen)} compilations in the second call"
    assert rep2.run.comparison.module["loss"].shape == rep.run.comparison.module["loss"].shape


def test_float32_model_gets_an_enable_float64_error():
    xs, ys = _teacher()
    net = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), make_model(jax.random.PRNGKey(0), 4, 3))
    with pytest.raises(ValueError, match=r"GeluMLP has float32 parameters.*float64"):
        nqf.diagnose(net, (xs, ys), nqf.optimizer("sgd", 0.05), num_steps=10)


def test_hypothesis_errors_name_the_users_class():
    xs, ys = _teacher()
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    net = ReluNet(0.1 * normal(k1, (5, 4)), 0.1 * normal(k2, (3, 5)))
    with pytest.raises(ValueError, match="ReluNet is not smooth") as err:
        nqf.diagnose(nqf.quadratic_form(net, neuron_axes=ReluNet(0, 1)), (xs, ys), nqf.optimizer("sgd", 0.05),
                     num_steps=10)
    assert "_call_module" not in str(err.value)
    with pytest.raises(ValueError, match="neuron_axes"):
        nqf.diagnose(net, (xs, ys), nqf.optimizer("sgd", 0.05), num_steps=10)


def test_multi_output_nqf_data_keeps_the_loss_and_the_clock():
    rng = np.random.default_rng(0)
    m, o, p = 7, 3, 4
    A = rng.normal(size=(m, o, p, p))
    A = A + np.swapaxes(A, -1, -2)
    y, f0 = rng.normal(size=(m, o)), rng.normal(size=(m, o))
    data = nqf.NQFData(A, y, f0=f0)
    assert (data.m, data.p, data.num_outputs) == (m * o, p, o)
    W = rng.normal(size=(p, 2))
    M = jnp.asarray(W @ W.T)
    f = lambda M: jnp.einsum("ij,moji->mo", M, A) + f0  # noqa: E731
    np.testing.assert_allclose(nqf.model.mse_loss(M, data), nqf.model.mse(f(M), y), rtol=1e-12)
    np.testing.assert_allclose(data.per_output(nqf.model.outputs(M, data)), f(M), rtol=1e-12)
    # the flow's H is twice the gradient of the package's loss: GD on W at rate eta is flow time eta * step
    g = jax.grad(lambda M: nqf.model.mse(f(M), y))(M)
    np.testing.assert_allclose(nqf.model.h_matrix(M, data), 2 * g, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"\(m, o\) = \(7, 3\)"):
        nqf.NQFData(A, y[:, :2])
    with pytest.raises(ValueError, match="ZGZ"):
        nqf.NQFData(A, y, gs=np.zeros((m, p)))


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_plateau_rule_on_a_logistic_staircase():
    """Known switch-on times of a synthetic logistic staircase are read back by the one rule."""
    t = np.linspace(0.0, 60.0, 6001)
    t_on, s, a = np.array([5.0, 18.0, 40.0]), np.array([4.0, 2.0, 0.5]), np.array([3.0, 1.5, 0.8])
    eps = 1e-6
    lam = s * _sigmoid(a * (t[:, None] - t_on)) + eps
    levels = learned_levels(t, lam)
    np.testing.assert_allclose(levels, s, rtol=1e-5)
    np.testing.assert_allclose(mode_plateau_ends(t, lam, levels), t_on, atol=1e-3)
    # a mode that has not settled by the end of the record is not a learned mode
    lam2 = lam.copy()
    lam2[:, 2] = 0.5 * _sigmoid(0.8 * (t - 58.0)) + eps
    assert learned_levels(t, lam2).size == 2
    # never reached: inf
    assert np.isinf(mode_plateau_ends(t, lam, 10 * s)).all()


READER_MODELS = '''
import equinox as eqx
import jax


class TanhNet(eqx.Module):
    U: jax.Array
    b: jax.Array
    V: jax.Array

    def __call__(self, x):
        return self.V @ jax.numpy.tanh(self.U @ x + self.b)

    def neuron_axes(self):
        return TanhNet(0, 0, 1)


def make_model(key, n_in, n_out, width=8, init_scale=1e-3):
    k1, k2, k3 = jax.random.split(key, 3)
    return TanhNet(init_scale * jax.random.normal(k1, (width, n_in)), init_scale * jax.random.normal(k2, (width,)),
                   init_scale * jax.random.normal(k3, (n_out, width)))
'''


@pytest.mark.notebook
def test_chapter_9_reruns_on_a_readers_model_through_papermill(tmp_path):
    """``papermill ... -p model readers_models:make_model`` reruns Chapter 10 on a model written here."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "readers_models.py").write_text(READER_MODELS)
    nb = Path(__file__).resolve().parents[1] / "notebooks" / "ch10_your_own_model.ipynb"
    out = tmp_path / "out"
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(tmp_path)}
    cmd = [sys.executable, "-m", "papermill", nb.name, str(tmp_path / "executed.ipynb"), "-p", "fidelity", "quick",
           "-p", "out_dir", str(out), "-p", "model", "readers_models:make_model", "-p", "width", "8",
           "-p", "m_samples", "120", "-p", "num_steps", "800"]
    proc = subprocess.run(cmd, cwd=nb.parent, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "claims" / "ch10.json").read_text())
    assert data["passed"] and data["n_paper"] >= 1
    assert "TanhNet" in (tmp_path / "executed.ipynb").read_text()


def flax_style_apply(variables, x):
    """A flax-linen-style ``apply``: Dense(h) -> sin -> Dense(o) on a ``{"params": ...}`` dict (kernels (in, out))."""
    p = variables["params"]
    h = jnp.sin(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    return h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]


def test_a_parameter_dict_with_apply_goes_through_the_same_call():
    """The flax route: ``apply(variables, x)`` and ``neuron_axes`` (hidden units are the neurons; the output bias
    is shared, axis None, and held fixed)."""
    xs, ys = _teacher(s=(1.0, 0.35))
    rng = np.random.default_rng(3)
    variables = {"params": {"Dense_0": {"kernel": 1e-3 * rng.normal(size=(4, 6)), "bias": 1e-3 * rng.normal(size=6)},
                            "Dense_1": {"kernel": 1e-3 * rng.normal(size=(6, 3)), "bias": np.zeros(3)}}}
    variables = jax.tree_util.tree_map(jnp.asarray, variables)
    axes = {"params": {"Dense_0": {"kernel": 1, "bias": 0}, "Dense_1": {"kernel": 0, "bias": None}}}
    rep = nqf.diagnose(nqf.quadratic_form(flax_style_apply, neuron_axes=axes), (xs, ys), nqf.optimizer("sgd", 0.05),
                       num_steps=600, params=variables)
    assert "flax_style_apply" in str(rep)
    W0, layout = neuron_weights(variables, axes)
    p, d = W0.shape
    assert (p, d) == (4 + 1 + 3, 6)
    H = jax.hessian(lambda w: flax_style_apply(layout.unflatten(w.reshape(p, d)), xs[0]))(jnp.zeros(p * d))
    np.testing.assert_allclose(rep.run.As[0], 0.5 * H.reshape(3, p, d, p, d)[:, :, 0, :, 0], atol=1e-12)
    assert rep.plateaus.levels.size == 2


def test_chapter_10s_library_attention_recipe_has_the_head_axis_layers_A():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
    from ch10_models import head_axis_layer, make_attention, token_teacher

    att, axes = make_attention(jax.random.PRNGKey(0), init_scale=0.5)
    sep, sep_axes = head_axis_layer(att)
    xs, ys = token_teacher(1, 3)
    assert xs.shape == (3, 5, 6) and ys.shape == (3, 5, 6) and np.allclose(ys[:, 0], ys[:, 4])
    x = jnp.asarray(xs[0])
    np.testing.assert_allclose(att(x), sep(x), rtol=1e-12, atol=1e-14)
    A1 = nqf.quadratic_form(att, neuron_axes=axes).structure(x)
    A2 = nqf.quadratic_form(sep, neuron_axes=sep_axes).structure(x)
    assert A1.shape == (5, 6, 72, 72)
    np.testing.assert_allclose(A1, A2, rtol=1e-10, atol=1e-14)


def test_chapter_10s_init_scale_sweep_recipe():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
    from ch10_models import init_scale_sweep, scaled_default_mlp

    net = scaled_default_mlp(jax.random.PRNGKey(0), 4, 3, 32, 1.0)
    assert np.isclose(np.std(np.asarray(net.U)) * 2, 1.0, rtol=0.25) and not np.any(np.asarray(net.b))
    xs, ys = _teacher(s=(1.0, 0.35))
    rows = init_scale_sweep(jax.random.PRNGKey(0), (np.asarray(xs), np.asarray(ys)), [8], [1e-3], 300)
    assert len(rows) == 1 and rows[0]["regime"] == "nqf" and set(rows[0]["valid"]) == {"nqf", "linearised"}


def test_a_prediction_that_creeps_through_its_half_way_line_is_not_judged():
    """The tolerance assumes a switch-on: a level known to 2e moves a steep crossing by little. A logistic rise is
    resolved; an eigenvalue that creeps through its half-way band (the largest one when a mode of half its level
    switched on first, as in a pooled Conv1d CNN) is not, and is never called valid."""
    from nqf.solutions._plateaus import crossing_resolved

    t = np.arange(0.0, 1000.0)
    steep = 1.0 / (1 + np.exp(-(t - 100.0) / 5.0))
    creep = 0.5 * (0.95 + 0.1 * t / 1000.0) * (t > 50)  # through 0.5 x (1 +- 0.05) over 1000 steps
    lam = np.stack([steep, creep], axis=1)
    ok = crossing_resolved(t, lam, np.array([1.0, 1.0]), np.array([0.025, 0.025]), np.array([20.0, 20.0]))
    assert ok.tolist() == [True, False]
