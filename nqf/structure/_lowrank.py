r"""Rank-two factors of $A(x)$ for one-hidden-layer models, found by Hessian-vector probes:
$A^{(o)}(x) = \tfrac12(a(x)b_o^\top + b_oa(x)^\top)$, so the NQF on all samples is $a(X)\,W\,(W^\top B)$ (for an MLP,
Eq. 6, $a(x) = \sigma'(0)[x; 1; 0]$, $b_o = [0; 0; e_o]$). Accepted only if equal to the matrix-free NQF at $W(0)$
and two random weights to $10^{-9}$ relative."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._matrix_free import nqf_out

_PROBES = 6  # random probe directions per detection sample (rank 2 needs 3 to be tested)
_RANK_TOL = 1e-9  # singular values below this fraction of the largest count as zero
_MATCH_TOL = 1e-9  # structured against matrix-free NQF, relative


class RankTwoForm(eqx.Module):
    r"""The factors of $A^{(o)}(x) = \tfrac12(a(x)b_o^\top + b_oa(x)^\top)$ on a set of samples: ``a`` of shape
    ``(m, p)``, ``B`` of shape ``(p, o)``, ``out_shape`` the model's output shape. :meth:`quadratic` is
    $\mathrm{Tr}[WW^\top A(x_\mu)]$ for every sample: ``(m, *out_shape)``."""

    a: jax.Array
    B: jax.Array
    out_shape: tuple = eqx.field(static=True)

    def quadratic(self, W, a=None):
        """$a(X)\\,W\\,(W^\\top B)$ for ``W`` of shape ``(p, d)`` (``a``: other samples' factors)."""
        a = self.a if a is None else a
        Q = (a @ W) @ (W.T @ self.B)
        return jnp.reshape(Q, (a.shape[0],) + self.out_shape)


def quasi_random(shape, phase: float, *, dtype=jnp.float64):
    """A fixed, generic array (entries ``sin(phase + 1e3 * sqrt(2) * i)``, i the flat index): probe directions
    with no key to carry, the same on every call."""
    n = int(np.prod(shape, dtype=int))
    return jnp.asarray(np.sin(phase + 1e3 * np.sqrt(2.0) * np.arange(1, n + 1)).reshape(shape), dtype)


def _one_neuron(apply, packing, tr, frozen, p, d):
    """``f(w, x)``: the model with neuron 1 = ``w`` (packed rows) and every other neuron zero, outputs raveled."""
    zero = jax.tree_util.tree_map(jnp.zeros_like, tr)
    dtype = jax.tree_util.tree_leaves(tr)[0].dtype

    def f(w, x):
        W = jnp.zeros((p, d), dtype).at[:, 0].set(w)
        return jnp.ravel(apply(eqx.combine(packing.unpack(W, zero), frozen), x))

    return f


@eqx.filter_jit
def _probe_ranges(apply, packing, tr, frozen, x2, Om, p, d):
    """``2 A^{(o)}(x) Omega`` for the two samples ``x2``: shape ``(2, o, p, k)``."""
    f = _one_neuron(apply, packing, tr, frozen, p, d)
    w0 = jnp.zeros((p,), Om.dtype)

    def hv(x, v):  # (o, p): rows H_o v, H_o = d^2 f_o / dw^2 at 0 = 2 A^{(o)}
        return jax.jvp(lambda w: jax.jacrev(f)(w, x), (w0,), (v,))[1]

    return jax.vmap(lambda x: jax.vmap(lambda v: hv(x, v), in_axes=1, out_axes=-1)(Om))(x2)


def _factor(f, x, bhat, sel):
    r"""$a_o(x) = 2A^{(o)}b - b\,(b^\top 2A^{(o)} b)/2$ for the unit ``bhat`` of the output ``sel`` (one-hot)."""
    w0 = jnp.zeros_like(bhat)
    Hb = jax.jvp(lambda w: jax.grad(lambda u: jnp.dot(f(u, x), sel))(w), (w0,), (bhat,))[1]  # 2 A b
    return Hb - 0.5 * bhat * jnp.dot(bhat, Hb)


@eqx.filter_jit
def _output_factors(apply, packing, tr, frozen, x, bh, p, d):
    """$a_o(x)$ of every output ``o`` at one sample: ``(o, p)``."""
    f = _one_neuron(apply, packing, tr, frozen, p, d)
    return jax.vmap(lambda b, e: _factor(f, x, b, e), in_axes=(1, 0))(bh, jnp.eye(bh.shape[1], dtype=bh.dtype))


@eqx.filter_jit
def _sample_factors(apply, packing, tr, frozen, xs, bhat, sel, p, d):
    """$a(x)$ for every sample from one Hessian-vector product along ``bhat`` of the output ``sel``."""
    f = _one_neuron(apply, packing, tr, frozen, p, d)
    return jax.lax.map(lambda x: _factor(f, x, bhat, sel), xs, batch_size=16)  # memory: a (p, d) cotangent each


@eqx.filter_jit
def _check_form(apply, packing, tr, frozen, xs, a, B, Ws):
    """Largest |structured - matrix-free| quadratic term over ``xs`` at each of ``Ws``, and its scale."""
    def gap(W):
        t = packing.unpack(W, tr)
        mf = jax.vmap(lambda x: jnp.ravel(nqf_out(apply, t, frozen, x)))(xs)
        z = jax.tree_util.tree_map(jnp.zeros_like, tr)
        f0 = jax.vmap(lambda x: jnp.ravel(nqf_out(apply, z, frozen, x)))(xs)
        q = (a @ W) @ (W.T @ B)
        return jnp.max(jnp.abs(f0 + q - mf)), jnp.max(jnp.abs(mf - f0))

    return jax.vmap(gap)(Ws)


def search_inputs(packing, tr, xs):
    """``(W(0), p, d, m)`` for a factored form's search on the samples ``xs``; ``None`` when ``xs`` is not an array of
    at least two samples (no search: the NQF is evaluated matrix-free)."""
    if not isinstance(xs, jax.Array) or xs.shape[0] < 2:
        return None
    W0 = packing.pack(tr)
    return (W0, *W0.shape, xs.shape[0])


def rank_two_form(apply, packing, tr, frozen, xs) -> RankTwoForm | None:
    r"""The rank-two factors of the model's $A(x)$ on the samples ``xs``, or ``None`` when
    the model's structure matrices are not of that form (then evaluate the NQF matrix-free).

    ``apply(params, x)`` is the model, ``tr``/``frozen`` its neuron leaves and the rest (the split of
    ``QuadraticForm.split``), ``packing`` the ``NeuronPacking`` of ``tr``'s leaves;
    ``xs`` an array of inputs with a leading sample axis (at least two samples)."""
    found = search_inputs(packing, tr, xs)
    if found is None:
        return None
    W0, p, d, m = found
    dtype = W0.dtype
    pick = np.asarray([0, m // 2 if m > 2 else 1])
    Om = quasi_random((p, _PROBES), 0.3, dtype=dtype)
    Y = np.asarray(_probe_ranges(apply, packing, tr, frozen, xs[pick], Om, p, d))  # (2, o, p, k)
    o = Y.shape[1]
    scale = float(np.max(np.abs(Y))) if Y.size else 0.0
    if not np.isfinite(scale) or scale == 0.0:
        return None
    bh = np.zeros((p, o))
    norms = np.zeros(o)
    for j in range(o):
        bases = []
        for s in range(2):
            U, sv, _ = np.linalg.svd(Y[s, j], full_matrices=False)
            if sv[0] <= _RANK_TOL * scale:
                bases = None  # this output has no quadratic term on the probe samples
                break
            if sv.size < 3 or sv[2] > 10 * _RANK_TOL * sv[0]:
                return None  # rank above two: not of this form
            if sv[1] <= _RANK_TOL * sv[0]:
                return None  # rank one: a(x) parallel to b_o (not handled)
            bases.append(U[:, :2])
        if bases is None:
            continue
        cs = np.linalg.svd(bases[0].T @ bases[1])
        if not (cs[1][0] > 1 - 1e-8 and cs[1][1] < 1 - 1e-6):
            return None  # the ranges on two samples do not meet in one shared direction
        bh[:, j] = bases[0] @ cs[0][:, 0]  # the shared direction b_o / |b_o| (sign free)
        norms[j] = np.linalg.norm(Y[0, j])
    if not norms.any():
        return None
    o_star = int(np.argmax(norms))
    a1 = np.asarray(_output_factors(apply, packing, tr, frozen, xs[0], jnp.asarray(bh, dtype), p, d))  # (o, p)
    a_star = a1[o_star]
    B = np.zeros((p, o))
    for j in range(o):
        if not norms[j]:
            continue
        aj = a1[j]
        s = float(aj @ a_star) / float(a_star @ a_star)
        if np.linalg.norm(aj - s * a_star) > 1e-8 * np.linalg.norm(aj):
            return None  # the sample factor differs between outputs
        B[:, j] = s * bh[:, j]
    a = _sample_factors(apply, packing, tr, frozen, xs, jnp.asarray(bh[:, o_star], dtype),
                        jnp.asarray(np.eye(o)[o_star], dtype), p, d)
    Bj = jnp.asarray(B, dtype)
    head = xs[:4]
    Ws = jnp.stack([W0, quasi_random((p, d), 1.1, dtype=dtype), 0.1 * quasi_random((p, d), 2.3, dtype=dtype)])
    err, sc = (np.asarray(v) for v in _check_form(apply, packing, tr, frozen, head, a[:4], Bj, Ws))
    if not np.all(err <= _MATCH_TOL * np.maximum(sc, 1e-300)):
        return None
    out_shape = tuple(jax.eval_shape(lambda t, x: apply(eqx.combine(t, frozen), x), tr, xs[0]).shape)
    return RankTwoForm(a, Bj, out_shape)
