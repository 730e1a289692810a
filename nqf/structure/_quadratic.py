r"""The NQF of a model is itself a model: :func:`quadratic_form` (Theorem 1, Eq. 2; Cor. 1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import invalid, wrong_kind
from .._random import normal
from ..architectures import Architecture
from ._factors import low_rank_form, low_rank_quadratic
from ._lowrank import rank_two_form
from ._matrix_free import HypothesisCheck, check_hypotheses, module_out, nqf_out, require_hypotheses
from ._models import call_module
from ._neurons import NeuronPacking, axes_spec, deep_stack, flat_axes

FORMS = ("auto", "matrix-free", "structure", "rank-two", "low-rank")
MAX_STRUCTURE_ENTRIES = 60_000_000  #: 480 MB of float64 structure matrices: beyond that a set stays matrix-free
FORM_TOL = 1e-9  #: a fast form further than this (relative) from the matrix-free NQF is refused


class QuadraticForm(eqx.Module):
    r"""The NQF $f_x(0) + \mathrm{Tr}[WW^\top A(x)]$ of a model (Theorem 1, Eq. 2), called like the model: ``q(x)``
    when it holds an equinox ``model``, else ``q(params, x)``. Build it with :func:`quadratic_form`."""

    model: Any  #: the equinox model whose NQF this is (its parameters are this object's), or None
    arch: Any  #: the Architecture (closed forms), or None
    apply_fn: Callable | None = eqx.field(static=True)  #: ``apply(params, x)`` of a pytree model
    spec: tuple = eqx.field(static=True)  #: the neuron axes as a hashable value
    form: Any = eqx.field(static=True)  #: ``"auto"``, ``"matrix-free"``, ``"structure"``, ``"rank-two"``,
    #: ``"low-rank"`` or a callable
    name: str = eqx.field(static=True)  #: the model's name, for messages

    @property
    def apply(self) -> Callable:
        """The model itself, ``apply(params, x)``."""
        return self.arch.apply if self.arch is not None else (self.apply_fn or call_module)

    def _args(self, args):
        """``(params, x)``: the model's own parameters unless given (``q(x)``, ``q.check(params, x)``)."""
        return (self.model, *args) if self.model is not None and len(args) == 1 else args

    def neuron_axes(self, params=None):
        """The neuron axis (or None) of every leaf of ``params`` (default: the model), as a pytree like it."""
        params = self.model if params is None else params
        axes, _ = flat_axes(params, self.spec, self.name)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(params), list(axes))

    def leaf_axes(self, params) -> tuple:
        """The neuron axis (or None) of each leaf of ``params``, in ``jax.tree_util.tree_leaves`` order (a ``None``
        field is no leaf, so it has no entry)."""
        return flat_axes(params, self.spec, self.name)[0]

    def deep_stack(self) -> str | None:
        """For an equinox model that is a deep stack of neuron layers, what it is and how to describe it; else None."""
        return deep_stack(self.model) if self.model is not None else None

    def split(self, params):
        """``(trainable, frozen, packing)``: the neuron leaves, the rest, and the packing of the neuron leaves."""
        axes, _ = flat_axes(params, self.spec, self.name)
        mask = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(params), [a is not None for a in axes])
        tr, frozen = eqx.partition(params, mask)
        return tr, frozen, NeuronPacking.of(tr, [a for a in axes if a is not None])

    def __call__(self, *args) -> Float[Array, "*o"]:
        params, x = self._args(args)
        tr, frozen, _ = self.split(params)
        quad = self.form if callable(self.form) else (
            self.arch.quadratic if self.arch is not None and self.form in ("auto", "structure") else None)
        if quad is None:
            return nqf_out(self.apply, tr, frozen, x)
        zero = jax.tree_util.tree_map(jnp.zeros_like, tr)
        return module_out(self.apply, zero, frozen, x) + quad(tr, x)

    def structure(self, *args, batch: bool = False) -> Float[Array, "*m *o p p"]:
        r"""$A(x)$, ``(*o, p, p)`` in the packing's coordinates, at one input (``batch=True``: at every input of a
        leading sample axis): the Architecture's closed form, else $\tfrac12\partial^2 f_x/\partial w_1^2(0)$ (one
        neuron's Hessian at $W = 0$, Eq. 54). Theorem 1's hypotheses are not checked here (:meth:`check`)."""
        params, x = self._args(args)
        if self.arch is not None:
            return _structures(self.arch, x) if batch else self.arch.structure(x)
        tr, frozen, packing = self.split(params)
        xs = x if batch else jax.tree_util.tree_map(lambda a: jnp.asarray(a)[None], x)
        A = neuron_structures(self.apply, packing, tr, frozen, jax.tree_util.tree_map(jnp.asarray, xs))
        return A if batch else A[0]

    def check(self, *args, key=None, require: bool = False) -> HypothesisCheck:
        """Theorem 1's hypotheses measured at one input (:func:`nqf.check_hypotheses`); ``require``: a
        ``ValueError`` naming the model and the failed hypothesis unless they hold (Theorem 1's one tolerance set)."""
        params, x = self._args(args)
        chk = check_hypotheses(self.apply, params, x, neuron_axes=self.neuron_axes(params), key=key)
        if require:
            require_hypotheses(chk, self.name)
        return chk

    def parts(self, params, sets, *, key=None) -> tuple[list, Any, float | None]:
        r"""The form's parts on fixed sets of inputs (each with a leading sample axis): ``([(f0, A), ...], form,
        gap)`` with $f_x(0)$ of every sample and the per-sample part of the fast form (the stack $A(x_\mu)$ for
        ``"structure"``, the factors $a(x_\mu)$ for ``"rank-two"``, $U(x_\mu)$ for ``"low-rank"``, None
        otherwise); ``form`` the
        ``Evaluation`` of the NQF; ``gap`` the fast form's measured distance from the matrix-free NQF (None
        for matrix-free). ``params``: one set of weights (the first lane's); ``key``: a random unit-scale ``W`` at
        which a closed or structure form is also checked."""
        tr, frozen, packing = self.split(params)
        form = self.form
        if not sets:
            return [(None, None)], Evaluation(self.apply, "matrix-free", packing=packing), None
        if form in ("auto", "rank-two", "low-rank", "matrix-free"):
            sizes = np.cumsum([0] + [jax.tree_util.tree_leaves(s)[0].shape[0] for s in sets])
            xs = sets[0] if len(sets) == 1 else jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *sets)
            kind, a, B = _factored(self.apply, packing, tr, frozen, xs, form, self.name)
            f0 = zero_outputs(self.apply, frozen, xs, jax.tree_util.tree_map(jnp.zeros_like, tr))
            parts = [(f0, a)] if len(sets) == 1 else [(f0[i:j], None if a is None else a[i:j])
                                                      for i, j in zip(sizes[:-1], sizes[1:])]
            return parts, Evaluation(self.apply, kind, packing=packing, B=B), None
        if self.arch is None:
            raise invalid("form", "be 'auto', 'matrix-free', 'rank-two' or 'low-rank' for a pytree model ('structure' "
                                  "and a closed form need an nqf Architecture)", repr(form))
        quadratic = None if form == "structure" else form
        parts, gap = _checked_parts(self.arch, quadratic, sets, params, key, self.name)
        kind = "structure" if quadratic is None else "closed"
        return parts, Evaluation(self.apply, kind, quadratic=quadratic, packing=packing), gap


def quadratic_form(model: Any, *, neuron_axes: Any = None, form: str | Callable = "auto") -> QuadraticForm:
    r"""The NQF of ``model`` as a model: $f_x(0) + \mathrm{Tr}[WW^\top A(x)]$, one $A^{(o)}(x)$ per output (Theorem 1,
    Eq. 2; Cor. 1), called exactly like the model on the same parameters (shared leaves held at their values).
    ``q.model`` is the model; ``q.structure`` is $A(x)$, ``q.check`` Theorem 1's hypotheses.

    Args:
        model: an equinox Module (its neurons along ``neuron_axes``, or along its method ``neuron_axes()``), an
            :class:`~nqf.architectures.Architecture` (neurons: the columns of its ``(p, d)`` weights; any leading
            lane axis is the caller's ``jax.vmap``), or a function ``apply(params, x)`` with ``neuron_axes``.
        neuron_axes: the neuron axis of each parameter leaf, a prefix pytree as ``jax.vmap``'s ``in_axes`` (``None``:
            shared by all neurons), or an equinox-style copy of the model with ints at its neuron leaves; the
            model's non-array leaves are ignored, as ``eqx.filter`` does.
        form: how the NQF is evaluated, exactly: ``"matrix-free"`` (any model: $\tfrac12D^2f_x(0)[W, W]$ by two
            nested ``jax.jvp``, under ZGZ, Eq. 54), ``"structure"`` (the $A(x_\mu)$ stack, on fixed inputs),
            ``"rank-two"`` (factors of one-hidden-layer models, on fixed inputs), ``"low-rank"`` (rank-$2r$
            factors $\tfrac12(U(x)V_o^\top + V_oU(x)^\top)$, e.g. attention with heads as neurons, on fixed
            inputs), a callable ``quadratic(W, x)``
            $= \mathrm{Tr}[WW^\top A(x)]$ of an Architecture, or ``"auto"`` (the fastest the model admits). Every
            fast form is compared with the matrix-free NQF before use.

    Returns:
        a :class:`QuadraticForm`: ``q(x)`` for an equinox model, ``q(params, x)`` otherwise.
    """
    if isinstance(model, QuadraticForm):
        return model
    if not (callable(form) or form in FORMS):
        raise invalid("form", f"be one of {FORMS} or a callable quadratic(W, x)", repr(form))
    if isinstance(model, Architecture):
        return QuadraticForm(None, model, None, axes_spec(1), form, repr(model.name))
    if isinstance(model, eqx.Module) and callable(model) and any(map(eqx.is_array, jax.tree_util.tree_leaves(model))):
        if neuron_axes is None:
            own = getattr(model, "neuron_axes", None)
            neuron_axes = own() if callable(own) else own
        if neuron_axes is None and deep_stack(model):
            raise invalid("model", "be one layer of interchangeable neurons", deep_stack(model))
        if neuron_axes is None:
            raise invalid("neuron_axes", f"be given for {type(model).__name__}: the neuron axis of each leaf (None for "
                                         "shared leaves), or a method `neuron_axes()` on the model", "None")
        spec = axes_spec(neuron_axes)
        flat_axes(model, spec, type(model).__name__)
        return QuadraticForm(model, None, None, spec, form, type(model).__name__)
    if not callable(model):
        raise wrong_kind("model", "be an equinox Module, an nqf Architecture or a function apply(params, x)",
                         type(model).__name__)
    if _is_flax_module(model):  # a linen Module is callable, but only bound: its apply takes the variables
        raise wrong_kind("model", f"be the flax Module's apply function with its variables as the parameters: "
                                  f"nqf.quadratic_form(model.apply, neuron_axes=...) and params=variables (for nnx: "
                                  f"apply = lambda state, x: nnx.merge(graphdef, state)(x))",
                         f"the flax Module {type(model).__name__} itself")
    if neuron_axes is None:
        raise invalid("neuron_axes", "be given with a function apply(params, x): the neuron axis of each leaf of its "
                                     "parameters, as jax.vmap's in_axes (None for shared leaves)", "None")
    return QuadraticForm(None, None, model, axes_spec(neuron_axes), form,
                         getattr(model, "__name__", None) or type(model).__name__)


# ----------------------------------------------------------------- how a run's outputs are computed
class Evaluation(eqx.Module):
    r"""How the outputs of a run are computed from its trainable leaves ``tr`` (a value: compiled runs are cached on
    it): ``"model"`` (the model itself), ``"matrix-free"`` (its NQF, nested jvp), ``"structure"``
    ($f_x(0) + \langle A(x), WW^\top\rangle$ from the stack), ``"closed"`` ($f_x(0) + $ ``quadratic(W, x)``) or
    ``"rank-two"`` ($f_x(0) + a(x)^\top WW^\top B$) or ``"low-rank"`` ($f_x(0) + \sum_k u_k(x)^\top WW^\top
    v_{k,o}$, ``B`` the $V$ factors). Inputs are ``(xs, f0, A)``; ``args["frozen"]`` holds the
    shared leaves."""

    apply: Callable
    kind: str = eqx.field(static=True)
    quadratic: Callable | None = eqx.field(static=True, default=None)
    packing: Any = eqx.field(static=True, default=None)
    B: Any = None

    def __call__(self, tr, args, inputs):
        xs, f0, A = inputs
        if self.kind in ("model", "matrix-free"):
            fn = module_out if self.kind == "model" else nqf_out
            return jax.vmap(lambda x: fn(self.apply, tr, args["frozen"], x))(xs)
        if self.kind == "structure":
            return f0 + jnp.einsum("m...ij,ij->m...", A, tr @ tr.T)
        if self.kind == "closed":
            return f0 + jax.vmap(lambda x: self.quadratic(tr, x))(xs)
        W = self.packing.pack(tr)
        Q = low_rank_quadratic(A, self.B, W) if self.kind == "low-rank" else (A @ W) @ (W.T @ self.B)
        return f0 + jnp.reshape(Q, f0.shape)

    def as_model(self) -> "Evaluation":
        """The model itself, evaluated the way this form reads its inputs."""
        return Evaluation(self.apply, "model", packing=self.packing)


def _factored(apply, packing, tr, frozen, xs, form, name):
    """``(kind, per-sample factors, fixed factors)`` of the fastest factored form ``form`` allows: rank-two, else
    low-rank, else ``("matrix-free", None, None)``; a form asked for by name that the model lacks is an error."""
    if form in ("auto", "rank-two"):
        lr = rank_two_form(apply, packing, tr, frozen, xs)
        if lr is not None:
            return "rank-two", lr.a, lr.B
    if form in ("auto", "low-rank"):
        lr = low_rank_form(apply, packing, tr, frozen, xs)
        if lr is not None:
            return "low-rank", lr.U, lr.V
    if form in ("rank-two", "low-rank"):
        raise invalid("form", "be a form the model admits", f"{form!r} for {name}, whose A(x) has no {form} factors "
                                                            "equal to its matrix-free NQF")
    return "matrix-free", None, None


@eqx.filter_jit
def zero_outputs(apply, frozen, xs, zero):
    """$f_x(0)$ for every sample. The zeros come in as an argument: XLA (CPU) constant-folds a product with a zero
    *constant* inside ``jit`` and returned NaN for 100 of the CNN's inputs (0 for 99 or 600)."""
    return jax.vmap(lambda x: module_out(apply, zero, frozen, x))(xs)


@eqx.filter_jit
def neuron_structures(apply, packing, tr, frozen, xs):
    r"""$A(x_\mu) = \tfrac12\partial^2 f_{x_\mu}/\partial w_1^2$ at $W = 0$ (Eq. 54), symmetrised, for every input
    of ``xs`` (leading sample axis): one Hessian in the $p$ parameters of one neuron per sample."""
    zero = jax.tree_util.tree_map(jnp.zeros_like, tr)
    dtype = jax.tree_util.tree_leaves(tr)[0].dtype
    p, d = packing.p, packing.pack(tr).shape[1]

    def one(x):
        def f(w):  # neuron 1 = w (packed rows), every other neuron 0
            return apply(eqx.combine(packing.unpack(jnp.zeros((p, d), dtype).at[:, 0].set(w), zero), frozen), x)
        H = jax.hessian(f)(jnp.zeros((p,), dtype))
        return 0.25 * (H + jnp.swapaxes(H, -1, -2))  # A = (1/2) d^2 f / dw_1^2 at 0, symmetrised

    return jax.vmap(one)(xs)


@eqx.filter_jit
def _structures(arch, xs):
    return jax.vmap(arch.structure)(xs)


@eqx.filter_jit
def _form_gap(evaluation, W, xs, f0, A):
    """Largest |fast - matrix-free| NQF output over ``xs``, and the largest |quadratic term| (the scale)."""
    mf = Evaluation(evaluation.apply, "matrix-free")(W, {"frozen": None}, (xs, None, None))
    return jnp.max(jnp.abs(evaluation(W, None, (xs, f0, A)) - mf)), jnp.max(jnp.abs(mf - f0))


def _layout(x):
    """A pytree's structure with each leaf's shape beyond the sample axis and dtype."""
    leaves, tree = jax.tree_util.tree_flatten(x)
    return tree, tuple((np.shape(l)[1:], np.dtype(l.dtype if hasattr(l, "dtype") else np.result_type(l)))
                       for l in leaves)


def _checked_parts(arch, quadratic, sets, W_one, key, name):
    """``[(f0, A), ...]`` for each set in ``sets`` (``A = None`` for a closed ``quadratic``) and the form's measured
    gap: the largest ``|fast - matrix-free| / max|quadratic term|`` over the checks, at ``W_one`` and (``key`` not
    None) at a random ``W`` of unit scale, on the first 4 inputs of each set; a gap above :data:`FORM_TOL` is
    refused. The sets' $f_x(0)$ (and $A(x)$) come from one compiled program over all their samples (host
    concatenation, unless their leaves differ beyond the sample axis)."""
    if len(sets) > 1 and len({_layout(s) for s in sets}) > 1:
        groups = [_checked_parts(arch, quadratic, [s], W_one, key, name) for s in sets]
        return [g[0][0] for g in groups], max(g[1] for g in groups)
    sizes = [jax.tree_util.tree_leaves(s)[0].shape[0] for s in sets]
    both = jax.tree_util.tree_map(lambda *a: np.concatenate([np.asarray(x) for x in a]), *sets) if len(sets) > 1 \
        else sets[0]
    f0 = zero_outputs(arch.apply, None, both, jnp.zeros_like(W_one))
    A = None
    if quadratic is None:
        one = jax.eval_shape(arch.structure, jax.tree_util.tree_map(lambda a: a[0], both))
        entries = sum(sizes) * int(np.prod(one.shape))
        if entries > MAX_STRUCTURE_ENTRIES:
            raise invalid("form", f"hold at most {MAX_STRUCTURE_ENTRIES:.0e} structure-matrix entries (use the "
                                  "matrix-free form or a closed-form quadratic(W, x))",
                          f"'structure', which would hold {entries:.2e} structure-matrix entries for {sum(sizes)} "
                          f"samples of {name}")
        A = _structures(arch, both)
    f0_host, A_host = np.asarray(f0), None if A is None else np.asarray(A)
    starts = np.cumsum([0] + sizes)
    parts = [(f0, A)] if len(sets) == 1 else [  # split on the host: a jax array's slice would compile
        (jnp.asarray(f0_host[a:b]), None if A is None else jnp.asarray(A_host[a:b]))
        for a, b in zip(starts[:-1], starts[1:])]
    evaluation = Evaluation(arch.apply, "structure" if quadratic is None else "closed", quadratic=quadratic)
    Ws = (W_one,) if key is None else (W_one, normal(key, W_one.shape, W_one.dtype))
    worst = 0.0
    for a in starts[:-1]:
        head = jax.tree_util.tree_map(lambda x: np.asarray(x)[a:a + 4], both)  # on the host: a jax slice compiles
        f0h, Ah = f0_host[a:a + 4], None if A_host is None else A_host[a:a + 4]
        for W in Ws:
            err, scale = (float(v) for v in _form_gap(evaluation, W, head, f0h, Ah))
            if not err <= FORM_TOL * max(scale, 1e-300):
                raise invalid("form", "equal the matrix-free NQF f_x(0) + D^2 f_x(0)[W, W]/2",
                              f"a form of {name} that does not equal the matrix-free NQF: largest difference "
                              f"{err:.3e} on the first inputs against outputs of size {scale:.3e}")
            worst = max(worst, err / max(scale, 1e-300))
    return parts, worst


def _is_flax_module(model) -> bool:
    """A flax linen or nnx Module (not its apply function), told by its class's home (flax need not be installed)."""
    return any(c.__module__.split(".")[0] == "flax" and c.__name__ == "Module" for c in type(model).__mro__)
