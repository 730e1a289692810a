"""notebooks/ch09_deep.py: GD on the weights of a deep NQF with one learning rate per layer (Theorem 15)."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nqf import architectures
from nqf.model import deep_nqf_apply, deep_nqf_loss, layer_statistics
from helpers import count_compilations
from nqf._random import normal  # jax.random.normal's numbers, one compilation per size class

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch09_deep import deep_nqf_gd, theorem14, theorem15  # noqa: E402

ARCH = architectures.deep_mlp(k=4, hidden=(5, 6, 7))


def _setup(seed):
    kW, kX = jax.random.split(jax.random.PRNGKey(seed))
    Ws = tuple(0.2 * normal(k, (p, 4)) for k, p in zip(jax.random.split(kW, 2), ARCH.ps))
    xs = jax.vmap(ARCH.sample_input)(jax.random.split(kX, 12))
    return Ws, xs, jnp.sin(xs[:, 0])


def test_deep_nqf_gd_is_layerwise_gradient_descent():
    """W_l <- W_l - eta_l grad_l L, step by step (a hand-written loop), outputs before each step."""
    Ws, xs, ys = _setup(3)
    etas = (0.05, 0.02)
    out = deep_nqf_gd(Ws, ARCH.forms, xs, ys, learning_rates=etas, num_steps=4)
    assert out.shape[0] == 4
    W = Ws
    for k in range(4):
        ref = jax.vmap(lambda x: deep_nqf_apply(W, ARCH.forms, x))(xs)
        np.testing.assert_allclose(out[k], ref, rtol=1e-12, atol=1e-14)
        g = jax.grad(lambda W: deep_nqf_loss(layer_statistics(W), ARCH.forms, xs, ys))(W)
        W = tuple(w - e * gg for w, e, gg in zip(W, etas, g))


def test_deep_nqf_gd_compiles_once_for_new_data_and_rates():
    Ws, xs, ys = _setup(4)
    Ws2, ys2 = tuple(2 * w for w in Ws), jnp.cos(xs[:, 0])
    deep_nqf_gd(Ws, ARCH.forms, xs, ys, learning_rates=(0.05, 0.02), num_steps=3)
    with count_compilations() as seen:
        deep_nqf_gd(Ws2, ARCH.forms, xs, ys2, learning_rates=(0.01, 0.03), num_steps=3)
    assert seen == []


def test_theorem14_and_15_hold_to_rounding_on_a_small_module():
    v = theorem14(ARCH, (4, 4), key=jax.random.PRNGKey(5), m=12, batch=4, num_steps=5, eta=0.05)
    assert v["same"] < 1e-10 and v["update"] < 1e-10 and v["forms"] < 1e-12
    assert v["neurons"] > 1e-2 and v["moved"] > 1e-3  # the weights differ, the order parameters move
    w = theorem15(ARCH, (12, 12), key=jax.random.PRNGKey(6), m=10, num_steps=5, eta=0.05)
    assert w["narrow"] == tuple(p + 1 for p in ARCH.ps) and w["dev"] < 1e-10 and w["moved"] > 1e-3
