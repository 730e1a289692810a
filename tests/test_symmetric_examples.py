"""Coupled permutation-symmetric modules (nqf.architectures): Theorem 1 holds on them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nqf
from nqf.architectures import output_nonlinearity_mlp, symmetric_examples
from nqf.architectures._symmetric import gated_mlp, normalised_mlp

jax.config.update("jax_enable_x64", True)

SCALES = np.logspace(-3, -1, 6)


@pytest.mark.parametrize("arch, order", list(zip(symmetric_examples(3), (3, 4, 4))), ids=lambda a: str(a)[:12])
def test_theorem1_on_coupled_modules(arch, order):
    x = arch.sample_input(jax.random.PRNGKey(3))
    c = nqf.structure.check_theorem1(arch, x=x, seed=1, rays=2, scales=SCALES)
    rep = c.report
    assert rep.zgz and rep.zgz_property and rep.permutation_symmetric and rep.smooth_at_zero
    assert c.cross_block < 1e-12 and c.diag_spread < 1e-12 and c.grad_norm < 1e-12  # Eqs. (52), (54), (56)
    assert c.closed_form_error < 1e-12  # the chain-rule closed form equals autodiff's H_ii / 2
    assert np.allclose(c.slopes, order, atol=0.05)
    assert not c.exactly_quadratic


def test_the_neurons_are_coupled():
    """Not a plain sum: changing one neuron changes what another neuron contributes."""
    x = jnp.asarray([0.3, -1.2, 0.7])
    rng = np.random.default_rng(0)
    for arch in symmetric_examples(3):
        W = jnp.asarray(rng.standard_normal((arch.p, 2)))
        W2 = W.at[:, 1].multiply(2.0)
        # f(w1, w2) - f(0, w2) depends on w2 for a coupled module, not for a sum over neurons
        gap = lambda V: arch.apply(V, x) - arch.apply(V.at[:, 0].set(0.0), x)  # noqa: E731
        assert abs(float(gap(W) - gap(W2))) > 1e-3, arch.name


def test_closed_forms():
    x = jnp.asarray([0.5, -1.0, 2.0])
    off = lambda A: np.asarray(A)[:3, 3]  # noqa: E731  (the u-a block)
    # softplus'(0) = 1/2, gelu'(0) = 1/2: C = x / 4, A = C / 2 in the off-diagonal block
    assert np.allclose(off(output_nonlinearity_mlp(3).structure(x)), np.asarray(x) / 8)
    assert np.allclose(off(normalised_mlp(3, delta=4.0).structure(x)), np.asarray(x) / 4)
    A = np.asarray(gated_mlp(3).structure(x))
    assert A.shape == (7, 7) and np.allclose(A[:3, 3], np.asarray(x) / 4) and np.allclose(A[4:], 0.0)
    assert np.allclose(A, A.T)


def test_without_zgz_the_cross_blocks_do_not_vanish():
    """The control: a bias inside the activation breaks ZGZ; the cross block is g''(0) phi(b)^2."""
    arch = output_nonlinearity_mlp(3, bias=0.5)
    rep = nqf.structure_report(arch, arch.sample_input(jax.random.PRNGKey(0)))
    assert not rep.zgz
    assert np.isclose(rep.max_cross_block, 0.25 * float(jax.nn.gelu(0.5)) ** 2, rtol=1e-10)


def test_bad_arguments_and_values():
    with pytest.raises(ValueError, match="delta"):
        normalised_mlp(3, delta=0.0)
    with pytest.raises((TypeError, ValueError)):
        gated_mlp(0)
    with pytest.raises(ValueError, match="shape"):
        gated_mlp(3).apply(jnp.zeros((4, 2)), jnp.zeros(3))
    with pytest.raises(ValueError):
        normalised_mlp(3).apply(jnp.zeros((4, 2)), jnp.zeros(2))
    assert gated_mlp(3) == gated_mlp(3) and hash(normalised_mlp(2)) == hash(normalised_mlp(2))
