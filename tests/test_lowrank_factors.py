"""The rank-2r factor form of A(x) (nqf/structure/_factors.py, issue 51 item 5): attention with its heads as the
neurons has A^(o)(x) = (U(x) V_o^T + V_o U(x)^T)/2; the form found by probes must equal the matrix-free NQF (outputs
and A(x)), and a model it does not fit must fall back to matrix-free."""

from __future__ import annotations

import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nqf
from nqf.structure import _factors
from nqf.structure._factors import low_rank_form

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch10_models import make_attention, token_teacher  # noqa: E402


def _parts_against_matrix_free(q, params, xs):
    """The auto form's kind, factors and outputs at W(0) and a larger W, beside the matrix-free NQF's."""
    parts, ev, _ = q.parts(params, [xs])
    f0, U = parts[0]
    tr, frozen, packing = q.split(params)
    out = []
    for scale in (1.0, 300.0):  # W(0) is ~1e-3: also a W whose quadratic term is of order one
        t = jax.tree_util.tree_map(lambda w: scale * w, tr)
        fast = ev(t, {"frozen": frozen}, (xs, f0, U))
        mf = jax.vmap(lambda x: nqf.structure.nqf_output(q.apply, eqx.combine(t, frozen), x,
                                                         neuron_axes=q.neuron_axes(params)))(xs)
        out.append((np.asarray(fast), np.asarray(mf), np.asarray(mf - f0)))
    return ev, U, out


def _check_structure(q, params, xs, U, V):
    """A(x) rebuilt from the factors against q.structure (one neuron's Hessian at 0, autodiff) on 5 samples."""
    A = np.asarray(q.structure(params, xs[:5], batch=True))
    o = int(np.prod(A.shape[1:-2]))
    UV = np.einsum("mpk,qko->mopq", np.asarray(U[:5]), np.asarray(V))
    rebuilt = 0.5 * (UV + np.swapaxes(UV, -1, -2))
    A = A.reshape(5, o, *A.shape[-2:])
    assert np.max(np.abs(A)) > 0
    np.testing.assert_allclose(rebuilt, A, rtol=0, atol=1e-10 * np.max(np.abs(A)))


def test_equinox_attention_heads_as_blocks_get_the_low_rank_form():
    model, axes = make_attention(jax.random.PRNGKey(0))
    xs = jnp.asarray(token_teacher(1, 40)[0])
    q = nqf.quadratic_form(model, neuron_axes=axes)
    ev, U, out = _parts_against_matrix_free(q, model, xs)
    assert ev.kind == "low-rank"
    assert U.shape == (40, q.split(model)[2].p, 3) and ev.B.shape[1:] == (3, 30)  # r = the head size, o = 5 x 6
    for fast, mf, quad in out:
        assert np.max(np.abs(quad)) > 0
        np.testing.assert_allclose(fast, mf, rtol=0, atol=1e-9 * np.max(np.abs(quad)))
    _check_structure(q, model, xs, U, ev.B)


def _flax_attention(use_bias):
    nn = pytest.importorskip("flax.linen")
    att = nn.MultiHeadDotProductAttention(num_heads=4, qkv_features=12, out_features=6, use_bias=use_bias,
                                          param_dtype=jnp.float64, dtype=jnp.float64)
    x0 = jnp.zeros((5, 6))
    v = att.init(jax.random.PRNGKey(0), x0, x0)
    keys = iter(jax.random.split(jax.random.PRNGKey(1), 16))
    v = jax.tree_util.tree_map(lambda a: 1e-3 * jax.random.normal(next(keys), a.shape), v)

    def apply(v, x):
        return att.apply(v, x, x)

    axes = {"params": {n: ({"kernel": 1, "bias": 0} if use_bias else {"kernel": 1}) for n in ("query", "key", "value")}}
    axes["params"]["out"] = {"kernel": 0, "bias": None} if use_bias else {"kernel": 0}
    return v, apply, axes


@pytest.mark.parametrize("use_bias", [False, True])
def test_flax_multi_head_dot_product_attention_gets_the_low_rank_form(use_bias):
    v, apply, axes = _flax_attention(use_bias)
    xs = jnp.asarray(token_teacher(2, 30)[0])
    q = nqf.quadratic_form(apply, neuron_axes=axes)
    ev, U, out = _parts_against_matrix_free(q, v, xs)
    assert ev.kind == "low-rank" and U.shape[-1] == 3  # 12 features over 4 heads
    for fast, mf, quad in out:
        np.testing.assert_allclose(fast, mf, rtol=0, atol=1e-9 * np.max(np.abs(quad)))
    _check_structure(q, v, xs, U, ev.B)


class QuadNet(eqx.Module):
    """``f(x) = sum_i (u_i . x)^2 / 2``: A(x) = x x^T / 2, no fixed factor shared by all inputs."""

    U: jax.Array

    def __call__(self, x):
        return 0.5 * jnp.sum((self.U @ x) ** 2)


class InputMixedBilinear(eqx.Module):
    """``f_o(x) = sum_i (a_i . x)(c_i . M_o x)``: A^(o)(x) = sym([x; 0][0; M_o x]^T)/2 shares the c-slots across
    inputs, but how the outputs mix them (C_o, here M_o x) changes with x: not of the form."""

    A: jax.Array
    C: jax.Array
    M: jax.Array

    def __call__(self, x):
        return jnp.einsum("i,io->o", self.A @ x, jnp.einsum("ie,oef,f->io", self.C, self.M, x))

    def neuron_axes(self):
        return InputMixedBilinear(0, 0, None)


def test_models_without_the_form_fall_back_to_matrix_free():
    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.normal(size=(20, 4)))
    net = QuadNet(jnp.asarray(1e-3 * rng.normal(size=(6, 4))))
    q = nqf.quadratic_form(net, neuron_axes=QuadNet(0))
    tr, frozen, packing = q.split(net)
    assert low_rank_form(q.apply, packing, tr, frozen, xs) is None
    assert q.parts(net, [xs])[1].kind == "matrix-free"
    with pytest.raises(ValueError, match="low-rank"):
        nqf.quadratic_form(net, neuron_axes=QuadNet(0), form="low-rank").parts(net, [xs])
    mixed = InputMixedBilinear(*(jnp.asarray(v * rng.normal(size=sh)) for v, sh in
                                 ((1e-3, (5, 4)), (1e-3, (5, 4)), (1.0, (4, 4, 4)))))
    q = nqf.quadratic_form(mixed)
    tr, frozen, packing = q.split(mixed)
    H = np.asarray(_factors._hessians(q.apply, packing, tr, frozen, xs[:3], packing.p, 5)).reshape(3, 4, 8, 8)
    scale = np.max(np.abs(H))
    E = _factors._shared_subspace(H, scale)
    assert E.shape[1] == 4  # the c-slots are shared ...
    assert _factors._factor_basis(H, E, scale) is None  # ... but the output mixing changes with x
    assert q.parts(mixed, [xs])[1].kind == "matrix-free"


def test_a_wrong_factorisation_is_refused_by_the_output_check(monkeypatch):
    """The search's last guard: factors that rebuild A(x) on the detection samples but are off elsewhere (here: a
    factor U of one sample off by 1e-6 relative) are refused by the comparison with the matrix-free NQF, never used."""
    model, axes = make_attention(jax.random.PRNGKey(0))
    xs = jnp.asarray(token_teacher(1, 12)[0])
    q = nqf.quadratic_form(model, neuron_axes=axes)
    tr, frozen, packing = q.split(model)
    assert low_rank_form(q.apply, packing, tr, frozen, xs) is not None
    real = _factors._all_factors

    def off(*args):
        U = real(*args)
        return U.at[1].multiply(1.0 + 1e-6)  # sample 1: in the output check's rows, not a detection sample
    monkeypatch.setattr(_factors, "_all_factors", off)
    assert low_rank_form(q.apply, packing, tr, frozen, xs) is None


class TiedPairs(eqx.Module):
    """``f_o(x) = sum_{i,k} (a_ik . x + c_ik . g_k) c_iko``, k = 1, 2: A^(o)(x) = sum_k sym(u_k(x) v_ko^T) with
    u_k(x) = [x; g_k] reaching into the fixed factors' subspace (the in-subspace part Z of the search)."""

    A: jax.Array
    C: jax.Array
    G: jax.Array

    def __call__(self, x):
        return jnp.einsum("ik,iko->o", jnp.einsum("ikd,d->ik", self.A, x) + jnp.einsum("iko,ko->ik", self.C, self.G),
                          self.C)

    def neuron_axes(self):
        return TiedPairs(0, 0, None)


def test_factors_reaching_into_the_fixed_subspace():
    rng = np.random.default_rng(3)
    net = TiedPairs(*(jnp.asarray(v * rng.normal(size=sh)) for v, sh in
                      ((1e-2, (6, 2, 4)), (1e-2, (6, 2, 3)), (1.0, (2, 3)))))
    xs = jnp.asarray(rng.normal(size=(25, 4)))
    q = nqf.quadratic_form(net)
    tr, frozen, packing = q.split(net)
    form = low_rank_form(q.apply, packing, tr, frozen, xs)
    assert form is not None and form.U.shape == (25, packing.p, 2)
    H = np.asarray(_factors._hessians(q.apply, packing, tr, frozen, xs[:8], packing.p, 6)).reshape(8, 3, 14, 14)
    E = _factors._shared_subspace(H, np.max(np.abs(H)))
    assert np.max(np.abs(np.einsum("pi,mopq,qj->moij", E, H, E))) > 1e-3 * np.max(np.abs(H))  # Z is not zero
    np.testing.assert_allclose(2 * np.asarray(form.structure(form.U[:8])), H, rtol=0, atol=1e-10 * np.max(np.abs(H)))
    W = 3.0 * packing.pack(tr)
    mf = jax.vmap(lambda x: q(eqx.combine(packing.unpack(W, tr), frozen), x) - q(
        eqx.combine(jax.tree_util.tree_map(jnp.zeros_like, tr), frozen), x))(xs)
    quad = np.asarray(form.quadratic(W))
    np.testing.assert_allclose(quad, np.asarray(mf), rtol=0, atol=1e-9 * np.max(np.abs(mf)))


def test_the_batched_path_for_many_samples_gives_the_same_factors(monkeypatch):
    """Beyond _VMAP_SAMPLES samples the factors and the output check run in batches (lax.map): the same form (the
    factors themselves are fixed only up to an r x r change of basis, set by the detection samples)."""
    model, axes = make_attention(jax.random.PRNGKey(0))
    xs = jnp.asarray(token_teacher(4, 700)[0][:333])  # a sample count no other test compiles for
    q = nqf.quadratic_form(model, neuron_axes=axes)
    tr, frozen, packing = q.split(model)
    one = low_rank_form(q.apply, packing, tr, frozen, xs)
    monkeypatch.setattr(_factors, "_VMAP_SAMPLES", 100)
    batched = low_rank_form(q.apply, packing, tr, frozen, xs[:332])
    assert one is not None and batched is not None
    W = 300.0 * packing.pack(tr)
    ref = np.asarray(one.quadratic(W))[:332]
    np.testing.assert_allclose(np.asarray(batched.quadratic(W)), ref, rtol=0, atol=1e-10 * np.max(np.abs(ref)))
