"""notebooks/ch08_fig6.py: online SGD of a module and its NQF on a teacher, seeds vmapped (Fig. 6)."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nqf import architectures
from nqf.structure import nqf_output
from helpers import count_compilations

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch08_fig6 import online_teacher_student  # noqa: E402

ARCH = architectures.two_layer_mlp(3)


def test_online_run_starts_together_and_matches_a_manual_run():
    S, d, steps = 2, 4, 12
    W0 = 1e-3 * jax.random.normal(jax.random.PRNGKey(0), (S, ARCH.p, d))
    Wt = jax.random.normal(jax.random.PRNGKey(1), (S, ARCH.p, 5))
    run = online_teacher_student(ARCH, ARCH, W0, Wt, key=jax.random.PRNGKey(2), learning_rate=0.1, batch=8,
                                 num_steps=steps, record_every=4, n_probe=16)
    assert run.probe_loss["module"].shape == (S, steps // 4 + 1) and run.batch_loss["nqf"].shape == (S, steps)
    np.testing.assert_allclose(run.probe_loss["module"][:, 0], run.probe_loss["nqf"][:, 0], rtol=1e-6)
    assert np.all(run.output_gap[:, 0] < 1e-6)
    assert abs(run.probe_loss["module"][0, 0] - run.probe_loss["module"][1, 0]) > 1e-6  # independent teachers
    # seed 0 by hand: its key is split(key, S)[0], split again into probe and minibatch keys; SGD on module and NQF
    kp, kd = jax.random.split(jax.random.split(jax.random.PRNGKey(2), S)[0])
    draw = lambda k, n: jax.vmap(ARCH.sample_input)(jax.random.split(k, n))  # noqa: E731
    Wm = Wn = W0[0]
    for t, k in enumerate(jax.random.split(kd, steps)):
        xb = draw(k, 8)
        yb = jax.vmap(lambda x: ARCH.apply(Wt[0], x))(xb)
        lm = lambda W: jnp.mean((jax.vmap(lambda x: ARCH.apply(W, x))(xb) - yb) ** 2)  # noqa: E731
        ln = lambda W: jnp.mean((jax.vmap(lambda x: nqf_output(ARCH, W, x))(xb) - yb) ** 2)  # noqa: E731
        np.testing.assert_allclose(run.batch_loss["module"][0, t], lm(Wm), rtol=1e-10)
        np.testing.assert_allclose(run.batch_loss["nqf"][0, t], ln(Wn), rtol=1e-10)
        Wm, Wn = Wm - 0.1 * jax.grad(lm)(Wm), Wn - 0.1 * jax.grad(ln)(Wn)
    px = draw(kp, 16)
    py = jax.vmap(lambda x: ARCH.apply(Wt[0], x))(px)
    final = jnp.mean((jax.vmap(lambda x: ARCH.apply(Wm, x))(px) - py) ** 2)
    np.testing.assert_allclose(run.probe_loss["module"][0, -1], final, rtol=1e-10)


def test_online_compiles_once_for_new_weights_and_rate():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    W0 = 0.01 * jax.random.normal(keys[0], (2, ARCH.p, 4))
    Wt = jax.random.normal(keys[1], (2, ARCH.p, 2))
    kw = dict(batch=4, num_steps=20, record_every=10, n_probe=8)
    W2 = 2 * W0
    online_teacher_student(ARCH, ARCH, W0, Wt, key=keys[0], learning_rate=0.05, **kw)
    with count_compilations() as seen:
        online_teacher_student(ARCH, ARCH, W2, Wt, key=keys[1], learning_rate=0.02, **kw)
    assert seen == []
