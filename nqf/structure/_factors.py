r"""Rank-$2r$ factors of $A(x)$, found by Hessian probes: $A^{(o)}(x) = \tfrac12(U(x)V_o^\top + V_oU(x)^\top)$ with
$U(x)$ of shape $(p, r)$ shared by all outputs and $V_o$ of shape $(p, r)$ fixed (the same for every input), so that
the NQF's quadratic term on all samples is $\sum_k u_k(x)^\top W W^\top v_{k,o}$: $O(m\,p\,r\,d)$ a step instead of
nested ``jax.jvp`` per sample. Attention with its heads as the neurons has this form: its quadratic term is
$\sum_j (\bar x^\top v_j)(o_j \cdot e)$, a value column times an output row per head unit ($r$ = the head size).

The search, on three detection samples $x_s$ (their full $A(x_s)$, $p$ Hessian-vector products each):

1. $S$, the subspace shared by the column spaces of all $A^{(o)}(x_s)$ (the $V_o$ must lie in it), orthonormal
   basis $E$ ``(p, s)``; the form needs $P_\perp A P_\perp = 0$ ($P_\perp = I - EE^\top$) on every sample;
2. $P_\perp\,2A^{(o)}(x)\,E = P_\perp U(x)\,C_o^\top$ with $V_o = E\,C_o$: the stack over outputs has rank $r$
   and one row space $C$ (the same $C_o$ for every input), read off the first sample and tested on the others;
3. the part inside $S$: $E^\top 2A^{(o)}E = Z C_o^\top + C_o Z^\top$ gives $E^\top U = Z$ (least squares, the
   same linear map for every input), skipped when that part is zero on the detection samples.

Then $U(x)$ for every sample from $s$ Hessian-vector products each. The factors are accepted only if they rebuild
$A(x_s)$ on the detection samples and the NQF's outputs equal the matrix-free NQF's (nested ``jax.jvp``) on the
samples at $W(0)$ and two generic weights, both to :data:`_MATCH_TOL` relative;
otherwise :func:`low_rank_form` returns ``None`` and the NQF is evaluated matrix-free."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._lowrank import _one_neuron, quasi_random, search_inputs
from ._matrix_free import nqf_out

_RANK_TOL = 1e-9  # singular values below this fraction of the largest count as zero
_ANGLE_TOL = 1e-8  # a direction is shared by two column spaces when its principal cosine exceeds 1 - this
_FIT_TOL = 1e-8  # relative residual allowed in the factor fits on the detection samples
_MATCH_TOL = 1e-9  # rebuilt A(x) and outputs against the matrix-free NQF, relative
_MAX_DETECT_ENTRIES = 20_000_000  # 3 * o * p^2 above this: no search (160 MB of float64 Hessians)
_MAX_LSTSQ_ENTRIES = 20_000_000  # o * s^3 * r above this: the in-subspace part is not solved (no form)
_VMAP_SAMPLES = 2048  # up to this many samples in one vmap, beyond in batches of 256 (memory)


class LowRankForm(eqx.Module):
    r"""The factors of $A^{(o)}(x) = \tfrac12(U(x)V_o^\top + V_oU(x)^\top)$ on a set of samples: ``U`` of shape
    ``(m, p, r)``, ``V`` of shape ``(p, r, o)``, ``out_shape`` the model's output shape."""

    U: jax.Array
    V: jax.Array
    out_shape: tuple = eqx.field(static=True)

    def quadratic(self, W, U=None):
        r"""$\sum_k u_k(x_\mu)^\top W W^\top v_{k,o}$ for every sample: ``(m, *out_shape)`` (``U``: other samples')."""
        U = self.U if U is None else U
        return jnp.reshape(low_rank_quadratic(U, self.V, W), (U.shape[0],) + self.out_shape)

    def structure(self, U=None):
        r"""$A(x_\mu)$ rebuilt from the factors: ``(m, o, p, p)``."""
        U = self.U if U is None else U
        UV = jnp.einsum("mpk,qko->mopq", U, self.V)
        return 0.5 * (UV + jnp.swapaxes(UV, -1, -2))


def low_rank_quadratic(U, V, W):
    r"""$\sum_k u_k^\top W W^\top v_{k,o}$: ``U`` ``(m, p, r)``, ``V`` ``(p, r, o)``, ``W`` ``(p, d)`` -> ``(m, o)``."""
    return jnp.einsum("mkd,dko->mo", jnp.einsum("mpk,pd->mkd", U, W), jnp.einsum("pd,pko->dko", W, V))


def _over_samples(fn, xs):
    """``fn`` on every sample of ``xs``: one ``vmap`` for a few thousand samples, else batches (memory)."""
    return jax.vmap(fn)(xs) if xs.shape[0] <= _VMAP_SAMPLES else jax.lax.map(fn, xs, batch_size=256)


@eqx.filter_jit
def _hessians(apply, packing, tr, frozen, xs, p, d):
    """$2A^{(o)}(x)$ (one neuron's symmetrised Hessian at 0) for the samples ``xs``: ``(n, o, p, p)``."""
    f = _one_neuron(apply, packing, tr, frozen, p, d)
    w0 = jnp.zeros((p,), jax.tree_util.tree_leaves(tr)[0].dtype)
    H = jax.vmap(lambda x: jax.hessian(lambda w: f(w, x))(w0))(xs)
    return 0.5 * (H + jnp.swapaxes(H, -1, -2))


@eqx.filter_jit
def _sample_factors(apply, packing, tr, frozen, xs, E, C, L, p, d):
    r"""$U(x)$ for every sample: $P_\perp 2A E$ against $C$, plus $E Z$ with $Z = L\,\mathrm{vec}(E^\top 2AE)$."""
    f = _one_neuron(apply, packing, tr, frozen, p, d)
    w0 = jnp.zeros((p,), E.dtype)

    def one(x):
        HE = jax.vmap(lambda v: jax.jvp(lambda w: jax.jacrev(f)(w, x), (w0,), (v,))[1], in_axes=1,
                      out_axes=-1)(E)  # (o, p, s): 2 A^(o) E
        inner = jnp.einsum("pi,opj->oij", E, HE)
        U = jnp.einsum("opj,koj->pk", HE - jnp.einsum("pi,oij->opj", E, inner), C)
        if L is not None:
            U = U + E @ jnp.reshape(L @ jnp.ravel(inner), (E.shape[1], C.shape[0]))
        return U

    return jax.lax.map(one, xs, batch_size=16)


@eqx.filter_jit
def _mixed_factors(apply, packing, tr, frozen, xs, c, Y, E, p, d):
    r"""$U(x) = P_\perp H_g(x) Y$ for every sample, $g = \sum_o c_o f_o$ one mix of the outputs and
    $Y = E C_c (C_c^\top C_c)^{-1}$, $C_c = \sum_o c_o C_o$: $r$ Hessian-vector products of one scalar a sample."""
    f = _one_neuron(apply, packing, tr, frozen, p, d)
    w0 = jnp.zeros((p,), Y.dtype)

    def one(x):
        HY = jax.vmap(lambda v: jax.jvp(jax.grad(lambda w: jnp.dot(f(w, x), c)), (w0,), (v,))[1], in_axes=1,
                      out_axes=1)(Y)  # (p, r)
        return HY - E @ (E.T @ HY)

    return _over_samples(one, xs)


@eqx.filter_jit
def _output_gap(apply, tr, frozen, packing, xs, U, V, Ws):
    """Largest |factored - matrix-free| NQF output over ``xs`` at each of ``Ws``, and the largest quadratic term."""
    z = jax.tree_util.tree_map(jnp.zeros_like, tr)

    def outs(t):
        return _over_samples(lambda x: jnp.ravel(nqf_out(apply, t, frozen, x)), xs)

    f0 = outs(z)

    def gap(W):
        mf = outs(packing.unpack(W, tr))
        return jnp.max(jnp.abs(f0 + low_rank_quadratic(U, V, W) - mf)), jnp.max(jnp.abs(mf - f0))

    return jax.vmap(gap)(Ws)


def _generic(shape, phase):
    """A fixed, generic, full-rank array without a key: column ``j`` is ``sin(phase + j + i omega_j)`` over rows
    ``i``, the frequencies ``omega_j`` distinct in (0, pi) (``quasi_random``'s ``sin`` of one arithmetic sequence,
    reshaped, has rank two: no sketch and no generic ``W``)."""
    i = np.arange(1, shape[0] + 1)[:, None]
    j = np.arange(1, shape[1] + 1)[None, :]
    return np.sin(phase + j + i * np.pi * np.modf(j * 0.6180339887498949)[0])


def _range(M, phase):
    """Orthonormal basis of the column space of a wide ``M`` ``(p, N)``: the SVD of the sketch ``M Omega``
    (``Omega`` ``(N, p)`` fixed and generic, :func:`_generic`: the same range), singular values above
    :data:`_RANK_TOL` of the largest; the ``(p, p)`` SVD costs a fraction of the wide one's (and loses less to
    thread contention beside XLA's)."""
    Y = M @ _generic((M.shape[1], M.shape[0]), phase) if M.shape[1] > M.shape[0] else M
    U, sv, _ = np.linalg.svd(Y, full_matrices=False)
    return U[:, sv > _RANK_TOL * sv[0]] if sv.size and sv[0] > 0 else U[:, :0]


def _shared_subspace(H, scale):
    """Orthonormal basis ``(p, s)`` of the directions shared by the column spaces of every sample's ``H`` stack."""
    n, o, p, _ = H.shape
    E = None
    for s in range(n):
        Q = _range(np.transpose(H[s], (1, 0, 2)).reshape(p, o * p), 0.5 + s)
        if E is None:
            E = Q
            continue
        Uc, cos, _ = np.linalg.svd(E.T @ Q, full_matrices=False)
        E = E @ Uc[:, :int(np.sum(cos > 1 - _ANGLE_TOL))]
    return E


def _in_subspace_map(C, s):
    r"""The least-squares inverse of $Z \mapsto [Z C_o^\top + C_o Z^\top]_o$ (``C`` ``(r, o, s)``): ``(s r, o s^2)``."""
    r, o, _ = C.shape
    cols = []
    for i in range(s * r):
        Z = np.zeros(s * r)
        Z[i] = 1.0
        Z = Z.reshape(s, r)
        Co = np.transpose(C, (1, 2, 0))  # (o, s, r): C_o
        cols.append(np.ravel(Z[None] @ np.swapaxes(Co, 1, 2) + Co @ Z.T[None]))
    return np.linalg.pinv(np.stack(cols, axis=1), rcond=1e-12)


def _factor_basis(H, E, scale):
    """``(C, L)``: the shared row space ``(r, o, s)`` of $P_\\perp 2A E$ and the in-subspace map (or None), or
    None when the detection samples' Hessians ``H`` ``(n, o, p, p)`` are not of the form."""
    n, o, p, _ = H.shape
    s = E.shape[1]
    perp = np.eye(p) - E @ E.T
    if np.max(np.abs(perp @ H @ perp)) > _FIT_TOL * scale:
        return None  # a part outside the shared subspace on both sides: not of the form
    G = [np.transpose(perp @ H[k] @ E, (1, 0, 2)).reshape(p, o * s) for k in range(n)]
    if np.max(np.abs(G[0])) <= _FIT_TOL * scale:
        return None  # nothing outside the shared subspace: no U(x) to find
    Ub = _range(G[0], 4.5)
    r = Ub.shape[1]
    Cst = np.linalg.qr((Ub.T @ G[0]).T)[0].T  # (r, o s): orthonormal rows spanning G's row space
    for g in G[1:]:
        if np.linalg.norm(g - (g @ Cst.T) @ Cst) > _FIT_TOL * max(np.linalg.norm(g), scale):
            return None  # the output mixing C_o differs between samples
    C = Cst.reshape(r, o, s)
    inner = E.T @ H @ E  # (n, o, s, s)
    if np.max(np.abs(inner)) <= _FIT_TOL * scale:
        return C, None
    if o * s ** 3 * r > _MAX_LSTSQ_ENTRIES:
        return None
    return C, _in_subspace_map(C, s)


def _all_factors(apply, packing, tr, frozen, xs, E, C, L, dtype):
    """$U(x)$ of every sample: from one mix of the outputs when the in-subspace part is zero and the mix keeps
    all $r$ directions (condition number below 1e6), else from $2A^{(o)}E$ of every output."""
    p, d = packing.p, packing.pack(tr).shape[1]
    if L is None:
        c = quasi_random((C.shape[1],), 0.7, dtype=dtype)
        Cc = np.einsum("o,koj->jk", np.asarray(c), C)  # (s, r)
        sv = np.linalg.svd(Cc, compute_uv=False)
        if sv[-1] > 1e-6 * sv[0]:
            Y = E @ Cc @ np.linalg.inv(Cc.T @ Cc)
            return _mixed_factors(apply, packing, tr, frozen, xs, c, jnp.asarray(Y, dtype), jnp.asarray(E, dtype),
                                  p, d)
    return _sample_factors(apply, packing, tr, frozen, xs, jnp.asarray(E, dtype), jnp.asarray(C, dtype),
                           None if L is None else jnp.asarray(L, dtype), p, d)


def low_rank_form(apply, packing, tr, frozen, xs) -> LowRankForm | None:
    r"""The rank-$2r$ factors of the model's $A(x)$ on the samples ``xs``, or ``None`` when the model's structure
    matrices are not of that form or the factors do not reproduce the matrix-free NQF (then evaluate it matrix-free).

    Arguments as :func:`~nqf.structure._lowrank.rank_two_form`: ``apply(params, x)``, the neuron leaves ``tr`` and
    the rest ``frozen`` (``QuadraticForm.split``), ``packing`` of ``tr``'s leaves, ``xs`` inputs with a leading
    sample axis (at least two samples). The factors' outputs are checked against the matrix-free NQF on every
    sample of ``xs`` at three weights."""
    found = search_inputs(packing, tr, xs)
    if found is None:
        return None
    W0, p, d, m = found
    dtype = W0.dtype
    host = np.asarray(xs)  # slices on the host: a jax array's slice compiles
    out_shape = tuple(jax.eval_shape(lambda t, x: apply(eqx.combine(t, frozen), x), tr, xs[0]).shape)
    o = int(np.prod(out_shape, dtype=int))
    pick = np.unique(np.asarray([0, m // 2, m - 1]))
    if pick.size * o * p * p > _MAX_DETECT_ENTRIES:
        return None
    H = np.asarray(_hessians(apply, packing, tr, frozen, jnp.asarray(host[pick]), p, d)).reshape(pick.size, o, p, p)
    scale = float(np.max(np.abs(H))) if H.size else 0.0
    if not np.isfinite(scale) or scale == 0.0:
        return None
    E = _shared_subspace(H, scale)
    if E.shape[1] == 0 or E.shape[1] == p:
        return None  # nothing shared, or everything (no saving over the stack; e.g. a constant A)
    basis = _factor_basis(H, E, scale)
    if basis is None:
        return None
    C, L = basis
    U = _all_factors(apply, packing, tr, frozen, xs, E, C, L, dtype)
    V = np.einsum("pj,koj->pko", E, C)
    Uh = np.asarray(U)
    UV = np.einsum("mpk,qko->mopq", Uh[pick], V)
    if not np.max(np.abs(UV + np.swapaxes(UV, -1, -2) - H)) <= _MATCH_TOL * scale:  # 2 A rebuilt
        return None
    Ws = jnp.asarray(np.stack([np.asarray(W0), _generic((p, d), 1.1), 0.1 * _generic((p, d), 2.3)]), dtype)
    Vj = jnp.asarray(V, dtype)
    err, sc = (np.asarray(v) for v in _output_gap(apply, tr, frozen, packing, xs, U, Vj, Ws))
    if not np.all(err <= _MATCH_TOL * np.maximum(sc, 1e-300)):
        return None
    return LowRankForm(U, Vj, out_shape)
