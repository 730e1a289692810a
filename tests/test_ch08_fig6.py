"""notebooks/ch08_fig6.py: online SGD of a module and its NQF on a teacher, every run vmapped (Fig. 6)."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nqf import architectures
from nqf.structure import nqf_output
from helpers import count_compilations
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch08_fig6 import OnlineRun, Pair, mean_window, online_teacher_student, run_inputs, split_runs, windows  # noqa: E402

ARCH = architectures.two_layer_mlp(3)
#: one configuration for the MLP's runs: the tests that run two seeds with it share one compiled program
KW = dict(d=4, eps=1e-3, batch=4, num_steps=8, n_probe=8)


def test_online_run_starts_together_and_matches_a_manual_run():
    seeds, d, steps, eta, batch, n_probe = (11, 12), KW["d"], KW["num_steps"], 0.1, KW["batch"], KW["n_probe"]
    run = online_teacher_student(ARCH, seeds, [eta, 2 * eta], **KW)
    assert run.probe_loss["module"].shape == run.loss_gap.shape == (2, steps + 1)  # every step recorded
    np.testing.assert_allclose(run.probe_loss["module"][:, 0], run.probe_loss["nqf"][:, 0], rtol=1e-6)
    assert np.all(run.output_gap[:, 0] < 1e-6) and not run.diverged.any() and np.all(np.isnan(run.c_norm2))
    # seed 12 by hand at its rate 2 eta: its draws (run_inputs) and the trainer's stream split(key, steps)
    W0, Wt, _, px, kd = (jax.tree_util.tree_map(lambda a: a[0], x) for x in
                         run_inputs(ARCH, 12, d=d, eps=1e-3, n_probe=n_probe, readout=False))
    draw = lambda k, n: jax.vmap(ARCH.sample_input)(jax.random.split(k, n))  # noqa: E731
    Wm = Wn = W0
    for k in jax.random.split(kd, steps):
        xb = draw(k, batch)
        yb = jax.vmap(lambda x: ARCH.apply(Wt, x))(xb)
        lm = lambda W: jnp.mean((jax.vmap(lambda x: ARCH.apply(W, x))(xb) - yb) ** 2)  # noqa: E731
        ln = lambda W: jnp.mean((jax.vmap(lambda x: nqf_output(ARCH, W, x))(xb) - yb) ** 2)  # noqa: E731
        Wm, Wn = Wm - 2 * eta * jax.grad(lm)(Wm), Wn - 2 * eta * jax.grad(ln)(Wn)
    py = jax.vmap(lambda x: ARCH.apply(Wt, x))(px)
    fm = jax.vmap(lambda x: ARCH.apply(Wm, x))(px)
    fn = jax.vmap(lambda x: nqf_output(ARCH, Wn, x))(px)
    np.testing.assert_allclose(run.probe_loss["module"][1, -1], jnp.mean((fm - py) ** 2), rtol=1e-10)
    np.testing.assert_allclose(run.probe_loss["nqf"][1, -1], jnp.mean((fn - py) ** 2), rtol=1e-10)
    np.testing.assert_allclose(run.output_gap[1, -1], jnp.linalg.norm(fm - fn) / jnp.linalg.norm(py), rtol=1e-8)


def test_readout_contracts_the_identity_readout_model_and_its_nqf():
    D, N, d_k = 4, 3, 2
    c = np.array([0.3, -1.2, 0.7, 2.0])
    eye, one = architectures.qk_attention(D, N, d_k, c=np.eye(D)), architectures.qk_attention(D, N, d_k, c=c)
    W = 0.4 * normal(jax.random.PRNGKey(0), (eye.p, 3))
    xs = jax.vmap(eye.sample_input)(jax.random.split(jax.random.PRNGKey(1), 5))
    args = {"c": jnp.asarray(c)}
    want_f = jax.vmap(lambda x: one.apply(W, x))(xs)
    want_q = jax.vmap(lambda x: nqf_output(one, W, x))(xs)
    np.testing.assert_allclose(Pair(eye, True).predict(W, args, xs, nqf=False), want_f, rtol=1e-12)
    np.testing.assert_allclose(Pair(eye, True).predict(W, args, xs, nqf=True), want_q, rtol=1e-10)
    np.testing.assert_allclose(Pair(eye, True, True).predict(W, args, xs, nqf=True), want_q, rtol=1e-10)  # fast form


def test_fast_form_through_the_structure_matrix_equals_the_matrix_free_nqf():
    """An architecture without its own ``quadratic`` (the MLP of Fig. 6: Architecture.quadratic, through
    ``arch.structure``): the fast NQF equals the matrix-free second derivative (Eq. 2) at a W of unit scale, and so
    does a whole fast run's record."""
    mlp = ARCH
    assert type(mlp).quadratic is architectures.Architecture.quadratic
    W = normal(jax.random.PRNGKey(2), (mlp.p, 7))
    xs = jax.vmap(mlp.sample_input)(jax.random.split(jax.random.PRNGKey(3), 6))
    want = jax.vmap(lambda x: nqf_output(mlp, W, x))(xs)
    np.testing.assert_allclose(Pair(mlp, False, True).predict(W, {}, xs, nqf=True), want, rtol=1e-10)
    slow, fast = (online_teacher_student(mlp, (3, 4), [0.05, 0.05], fast=f, **KW) for f in (False, True))
    np.testing.assert_allclose(fast.probe_loss["nqf"], slow.probe_loss["nqf"], rtol=1e-10)
    np.testing.assert_allclose(fast.loss_gap, slow.loss_gap, rtol=1e-8, atol=1e-14)


def test_readout_run_depends_on_c_and_eta_through_eta_c2():
    """A run with readout c at eta equals the run with readout c/|c| at eta |c|^2 (gaps, relative): checked through
    the loss, which is |c|^2 times the unit-readout loss."""
    qk = architectures.qk_attention(4, 3, 2, c=np.eye(4))
    run = online_teacher_student(qk, (5,), [0.05], d=2, eps=1e-3, batch=4, num_steps=6, n_probe=8, readout=True,
                                 fast=True)
    assert run.c_norm2.shape == (1,) and run.c_norm2[0] > 0
    W0, Wt, c, px, _ = (jax.tree_util.tree_map(lambda a: a[0], x)
                        for x in run_inputs(qk, 5, d=2, eps=1e-3, n_probe=8, readout=True))
    np.testing.assert_allclose(np.sum(np.asarray(c) ** 2), run.c_norm2[0], rtol=1e-12)
    pair = Pair(qk, True, True)
    a = {"c": c}
    u = {"c": c / jnp.linalg.norm(c)}
    L = lambda args: jnp.mean((pair.predict(W0, args, px, nqf=True) - pair.predict(Wt, args, px, nqf=False)) ** 2)  # noqa: E731
    np.testing.assert_allclose(L(a), run.c_norm2[0] * L(u), rtol=1e-10)


def test_windows_first_step_censored_and_diverged():
    steps = np.arange(6)
    gap = np.array([[0.0, 0.01, 0.2, 0.05, 0.3, 0.3], [0.0] * 6, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    run = OnlineRun(steps, {}, gap, gap, np.full(3, np.nan), np.array([False, False, True]))
    w = windows(run, 0.1, metric="loss")
    assert w[0] == 2.0  # the first step at or above the threshold (it may dip back later)
    assert w[1] == 5.0  # never parted: the run's length, a lower bound
    assert np.isnan(w[2])  # diverged: not judged


def test_online_compiles_once_for_new_seeds_and_rates():
    online_teacher_student(ARCH, (1, 2), [0.05, 0.02], **KW)
    with count_compilations() as seen:
        online_teacher_student(ARCH, (3, 4), [0.02, 0.01], **KW)
    assert seen == []


def test_split_runs_reads_a_call_in_groups():
    both = online_teacher_student(ARCH, (2, 1), [0.05, 0.5], **KW)
    a, b = split_runs(both, [1, 1])
    alone = online_teacher_student(ARCH, (1,), [0.5], **KW)
    assert a.loss_gap.shape == (1, 9) and b.diverged.shape == (1,)
    scale = np.max(np.abs(alone.probe_loss["module"]))
    for k in ("module", "nqf"):  # the same run vmapped beside others: equal to rounding
        np.testing.assert_allclose(b.probe_loss[k], alone.probe_loss[k], rtol=1e-8, atol=1e-12 * scale)
    np.testing.assert_array_equal(a.c_norm2, both.c_norm2[:1])
    with pytest.raises(ValueError, match="add up"):
        split_runs(both, [1, 2])


def test_mean_window_reads_the_gap_of_the_seed_mean_curves():
    steps = np.arange(6)
    lm = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [np.inf] * 6])
    ln = np.array([[1.0, 1.0, 1.3, 1.0, 1.3, 1.3], [1.0, 1.0, 1.0, 1.0, 1.0, 1.3], [np.nan] * 6])
    gap = np.abs(ln - lm) / lm
    run = OnlineRun(steps, {"module": lm, "nqf": ln}, gap, gap, np.full(3, np.nan), np.array([False, False, True]))
    m = mean_window(run, 0.1, metric="loss", seeds=(7, 8, 9))
    # the mean curves: module 1, NQF (1, 1, 1.15, 1, 1.15, 1.3): they part at step 2 (per run: 2 and 5)
    assert (m.value, m.n, m.diverged) == (2.0, 2, (9,))
    # leave-one-out: run 8 alone parts at 5, run 7 alone at 2 -> jackknife se = sqrt(1/2 * 2 * 1.5^2)
    assert m.se == pytest.approx(np.sqrt(0.5 * 2 * 1.5 ** 2))
    assert mean_window(run, 0.1, metric="output", seeds=(7, 8, 9)).value == 2.0   # mean of the gaps (0.15 at 2)
    assert mean_window(run, 0.5, metric="loss", seeds=(7, 8, 9)).value == 5.0     # never: the run's length
    assert mean_window(run, 0.1, metric="loss", seeds=(7, 8, 9), grid=3).value == 5.0  # steps 0, 3 miss the parting
