r"""A module beside its NQF: train both from the same $W(0)$ with one optax optimiser (Sec. 7, Fig. 2).

Theorem 1 (Eq. 2) says that near small weights a module of interchangeable neurons is its neural
quadratic form,

$$ f_x(W) = f_x(0) + \mathrm{Tr}[WW^\top A(x)] + O(\|W\|^3), $$

with one $A^{(o)}(x)$ per output for vector outputs (App. B.2, Cor. 1). :func:`compare_with_nqf`
trains the module's weights and, from the same $W(0)$, the NQF with the same optimiser, learning
rate and steps (each run one jitted ``lax.scan``), records what the caller asks for and returns the
**agreement window**: the first recorded step at which the relative gap between the two runs exceeds
a threshold.

The NQF is evaluated *matrix-free*: under ZGZ (Property 1) the gradient at 0 and the cross-neuron
Hessian blocks vanish (Eq. 54), so $\mathrm{Tr}[WW^\top A(x)] = \sum_i w_i^\top A w_i
= \tfrac12 D^2 f_x(0)[W, W]$, the second directional derivative of the module at $0$ along $W$
(two nested ``jax.jvp``). No $p\times p$ matrix is ever built, which keeps multi-head attention
($p$ in the hundreds, 8 outputs, 600 samples) cheap. The hypotheses that make this identity true
(permutation symmetry, ZGZ, smoothness at 0) are checked first, matrix-free, with the same three
tests as :func:`nqf.structure.structure_report` (which builds the full Hessian).

On a fixed training set the NQF has two faster, exact evaluations (``nqf_form``): its output is
linear in $M = WW^\top$ given the per-sample structure matrices, $f_x(0) + \langle A(x), M\rangle$, so
the closed-form $A(x_\mu)$ of an :class:`~nqf.architectures.Architecture` and $f_{x_\mu}(0)$ are computed
once (``nqf_form="structure"``); or the caller gives the quadratic term itself,
``quadratic(W, x)`` $= \mathrm{Tr}[WW^\top A(x)]$ (e.g. $L(W)$ on a linear feature of $x$, the
feed-forward form of Eqs. 17-19). Either is compared with the matrix-free NQF at two weights on the
first inputs before the run and refused if they differ beyond rounding.

Modules come in two forms:

* an :class:`~nqf.architectures.Architecture` (``apply(W, x)``, ``W`` of shape ``(p, d)``, neurons
  are the columns) with ``W0`` of shape ``(p, d)`` or ``(B, p, d)`` (``B`` runs vmapped at once:
  seeds, initial scales);
* any callable ``apply(params, x)`` on a parameter pytree (a dict of arrays, an ``equinox.Module``)
  with ``neuron_axes`` giving the neuron axis of each leaf the way ``jax.vmap``'s ``in_axes`` do
  (a prefix pytree of ints; ``None`` marks a leaf shared by all neurons, which is held fixed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_float64
from .._checks import check_int
from .._checks import check_key
from .._checks import check_record_every
from .._checks import invalid
from .._types import Names
from .._random import normal
from ..architectures import Architecture
from ..model import mse
from ..structure import check_hypotheses
from ..structure import model_function
from ..structure import model_name
from ..structure import module_out
from ..structure import nqf_out
from ..structure import require_hypotheses
from ..structure import split_params
from ._agreement import first_exceedance
from ._losses import OutputLoss
from ._agreement import relative_gap
from ._trainer import as_optimizer
from ._trainer import train

TRACKABLE = ("loss", "probe_loss", "outputs", "singular_values")


class Comparison(NamedTuple):
    """Both trajectories of :func:`compare_with_nqf` and their agreement window.

    Arrays carry a leading batch axis ``B`` when ``W0`` was batched.
    """

    steps: np.ndarray  #: (T,) the optimiser steps at which quantities were recorded (0 ... steps)
    module: dict  #: tracked quantity -> ``(*B, T, ...)`` for the module
    nqf: dict  #: tracked quantity -> ``(*B, T, ...)`` for its NQF
    batch_loss: dict  #: ``{"module", "nqf"}`` -> ``(*B, steps)`` loss on each step's batch
    gap: np.ndarray  #: ``(*B, T)`` relative gap of ``gap_on`` between the two runs
    window: np.ndarray  #: ``(*B,)`` first recorded step with gap > threshold or non-finite (``inf``: never)
    threshold: float  #: the gap that ends the window
    gap_on: str  #: the tracked quantity the gap is measured on (``"outputs"`` by default)
    final: dict  #: ``{"module", "nqf"}`` -> final parameters
    #: a fast ``nqf_form``'s measured distance from the matrix-free NQF: the largest ``|fast - matrix-free|`` over
    #: ``max |quadratic term|`` at the checks (``None`` for the matrix-free form)
    form_gap: float | None = None


# ----------------------------------------------------------------- loss and record as values
class NQFFromParts(eqx.Module):
    r"""The loss of Eq. 26 of an NQF evaluated from per-sample parts computed once: a batch is
    ``(xs, ys, f0, A)`` with $f_x(0)$ and either the structure matrices $A(x)$ (``quadratic=None``:
    output $f_x(0) + \langle A(x), WW^\top\rangle$, summed over the last two axes) or ``A = None`` and a
    closed form ``quadratic(W, x)`` $= \mathrm{Tr}[WW^\top A(x)]$. A value: compiled runs are cached on it."""

    quadratic: Callable | None = eqx.field(static=True)

    def predict(self, tr, args, inputs):
        xs, f0, A = inputs
        if self.quadratic is None:
            return f0 + jnp.einsum("m...ij,ij->m...", A, tr @ tr.T)
        return f0 + jax.vmap(lambda x: self.quadratic(tr, x))(xs)

    def __call__(self, tr, batch, args):
        xs, ys, f0, A = batch
        return mse(self.predict(tr, args, (xs, f0, A)), ys)


class _Recorder(eqx.Module):
    loss: Any
    spec: tuple = eqx.field(static=True)
    linear_map: Any = eqx.field(static=True)

    def __call__(self, tr, args):
        rec = {}
        if "loss" in self.spec:
            rec["loss"] = self.loss(tr, args["train"], args)
        if "outputs" in self.spec or "probe_loss" in self.spec:
            pred = self.loss.predict(tr, args, args["probe"])
            if "outputs" in self.spec:
                rec["outputs"] = pred
            if "probe_loss" in self.spec:
                rec["probe_loss"] = mse(pred, args["py"])
        if "singular_values" in self.spec:
            L = self.linear_map(eqx.combine(tr, args["frozen"]))
            ok = jnp.all(jnp.isfinite(L))  # a diverged run: NaN singular values, and no LAPACK error on stdout
            rec["singular_values"] = jnp.where(ok, jnp.linalg.svd(jnp.where(ok, L, 0.0), compute_uv=False), jnp.nan)
        return rec


class _KeyOnly(eqx.Module):
    sample: Callable = eqx.field(static=True)

    def __call__(self, key, args):
        return self.sample(key)


# ----------------------------------------------------------------- the fast NQF forms
NQF_FORMS = ("matrix-free", "structure")
_MAX_STRUCTURE_ENTRIES = 60_000_000  # 480 MB of float64 structure matrices: beyond that stay matrix-free


@eqx.filter_jit
def _zero_outputs(apply, xs, Z):
    """$f_x(0)$ for every sample. The zeros ``Z`` come in as an argument: XLA (CPU) constant-folds a product
    with a zero *constant* inside ``jit`` and returned NaN for 100 of the CNN's inputs (0 for 99 or 600)."""
    return jax.vmap(lambda x: apply(Z, x))(xs)


@eqx.filter_jit
def _structures(arch, xs):
    return jax.vmap(arch.structure)(xs)


@eqx.filter_jit
def _form_gap(apply, quadratic, W, xs, f0, A):
    """Largest |fast - matrix-free| NQF output over ``xs``, and the largest |quadratic term| (the scale)."""
    mf = jax.vmap(lambda x: nqf_out(apply, W, None, x))(xs)
    fast = NQFFromParts(quadratic).predict(W, None, (xs, f0, A))
    return jnp.max(jnp.abs(fast - mf)), jnp.max(jnp.abs(mf - f0))


def _layout(x):
    """A pytree's structure with each leaf's shape beyond the sample axis and dtype."""
    leaves, tree = jax.tree_util.tree_flatten(x)
    return tree, tuple((np.shape(l)[1:], np.dtype(l.dtype if hasattr(l, "dtype") else np.result_type(l)))
                       for l in leaves)


def _nqf_parts(form, arch, sets, W_one, key_check, name):
    """``[(f0, A), ...]`` for each set of samples in ``sets`` (training inputs, probe inputs; ``A = None`` for a
    closed-form ``quadratic``), and the form's measured gap: the largest ``|fast - matrix-free| / max|quadratic
    term|`` over the checks, at ``W_one`` and (``key_check`` not None) at a random ``W`` of unit scale from
    ``key_check``, on the first 4 inputs of each set. A form further than ``1e-9`` from the NQF is refused. The
    sets' $f_x(0)$ (and $A(x)$) come from one compiled program over all their samples."""
    if len(sets) > 1 and len({_layout(s) for s in sets}) > 1:  # leaves differ beyond their sample axis
        groups = [_nqf_parts(form, arch, [s], W_one, key_check, name) for s in sets]
        return [g[0][0] for g in groups], max(g[1] for g in groups)
    sizes = [_leading(s) for s in sets]
    both = jax.tree_util.tree_map(lambda *a: np.concatenate([np.asarray(x) for x in a]), *sets) if len(sets) > 1 \
        else sets[0]  # host concatenation: one program for every set, not one per set's size
    f0 = _zero_outputs(arch.apply, both, jnp.zeros_like(W_one))
    A = None
    quadratic = None if form == "structure" else form
    if form == "structure":
        m = sum(sizes)
        entries = m * int(np.prod(jax.eval_shape(arch.structure, jax.tree_util.tree_map(lambda a: a[0], both)).shape))
        if entries > _MAX_STRUCTURE_ENTRIES:
            raise invalid("nqf_form", f"hold at most {_MAX_STRUCTURE_ENTRIES:.0e} structure-matrix entries (use the "
                                      "matrix-free form or a closed-form quadratic(W, x))",
                          f"nqf_form='structure', which would hold {entries:.2e} structure-matrix entries for {m} "
                          f"samples of {name}")
        A = _structures(arch, both)
    f0_host, A_host = np.asarray(f0), None if A is None else np.asarray(A)
    starts = np.cumsum([0] + sizes)
    parts = [(f0, A)] if len(sets) == 1 else [  # split on the host: a jax array's slice would compile
        (jnp.asarray(f0_host[a:b]), None if A is None else jnp.asarray(A_host[a:b]))
        for a, b in zip(starts[:-1], starts[1:])]
    Ws = (W_one,) if key_check is None else (W_one, normal(key_check, W_one.shape, W_one.dtype))
    worst = 0.0
    for a in starts[:-1]:
        head = jax.tree_util.tree_map(lambda x: np.asarray(x)[a:a + 4], both)  # on the host: a jax slice compiles
        f0h, Ah = f0_host[a:a + 4], None if A_host is None else A_host[a:a + 4]
        for W in Ws:
            err, scale = (float(v) for v in _form_gap(arch.apply, quadratic, W, head, f0h, Ah))
            if not err <= 1e-9 * max(scale, 1e-300):
                raise invalid("nqf_form", "equal the matrix-free NQF f_x(0) + D^2 f_x(0)[W, W]/2",
                              f"a form of {name} that does not equal the matrix-free NQF: largest difference "
                              f"{err:.3e} on the first inputs against outputs of size {scale:.3e}")
            worst = max(worst, err / max(scale, 1e-300))
    return parts, worst


# ----------------------------------------------------------------- the public function
def _leading(x) -> int:
    leaves = jax.tree_util.tree_leaves(x)
    if not leaves:
        raise invalid("data", "have inputs with at least one array", "inputs without arrays")
    sizes = {np.shape(l)[0] if np.ndim(l) else None for l in leaves}
    if len(sizes) != 1 or None in sizes:
        raise invalid("data", "have the same leading (sample) axis on every input array",
                      f"leading sizes {sorted(map(str, sizes))}")
    return sizes.pop()


def compare_with_nqf(
    module: Architecture | Callable | None,
    W0: Any,
    data: Any,
    optimizer: Any,
    num_steps: int,
    *,
    neuron_axes: Any = None,
    batches: Any = None,
    key: Any = None,
    probe: Any = None,
    probe_targets: Any = None,
    track: Names = ("loss",),
    linear_map: Callable | None = None,
    record_every: int = 1,
    threshold: float = 0.1,
    gap_on: str | None = None,
    check: bool = True,
    nqf_form: str | Callable = "matrix-free",
) -> Comparison:
    r"""Train a module and its NQF from the same $W(0)$ with the same optimiser; compare them.

    Both runs minimise the paper's MSE (Eq. 26, no $\frac12$) in the package's one convention
    (:func:`nqf.model.mse`: summed over outputs, averaged over samples),
    $\mathcal L = \frac1m\sum_\mu\|f_{x_\mu} - y_\mu\|^2$, with ``optimizer`` for ``steps`` steps; each
    run is one jitted ``lax.scan``. The NQF is $f_x(0) + \mathrm{Tr}[WW^\top A(x)]$ (Theorem 1, Eq. 2;
    one $A^{(o)}$ per output, Cor. 1), evaluated as $f_x(0) + \frac12D^2f_x(0)[W, W]$ (module docstring).

    Args:
        module: an :class:`~nqf.architectures.Architecture`, or a callable ``apply(params, x)`` (``None``
            with an ``equinox.Module`` ``W0`` means ``W0(x)``).
        W0: initial weights: ``(p, d)`` (or ``(B, p, d)``: ``B`` runs vmapped) for an Architecture; any
            parameter pytree for a callable.
        data: ``(xs, ys)`` — inputs with a leading sample axis (a pytree, e.g. ``(q, X)`` for attention)
            and targets ``(m,)`` or ``(m, o)`` — or a function ``sample(key) -> (x_batch, y_batch)`` for
            online SGD with fresh samples each step (then ``key`` is required).
        optimizer: an :class:`~nqf.training.Optimizer` (``nqf.training.optimizer("adam", 1e-3)``: a new
            learning rate compiles nothing) or an optax ``GradientTransformation`` (``optax.sgd(eta)``, ...).
            Both runs use the same one; each run is one configuration of :func:`nqf.training.train`.
        num_steps: number of optimiser steps (> 0).
        neuron_axes: for a pytree ``W0``, the neuron axis of each leaf, a prefix pytree like ``jax.vmap``'s
            ``in_axes`` (``None`` = a leaf shared by all neurons: held fixed, not trained).
        batches: ``None`` (full batch) or an int array ``(steps, b)`` of sample indices, one row per step.
        key: PRNG key for ``sample``; the module and the NQF see the same batches. With array ``data`` and a fast
            ``nqf_form``, the key of the random ``W`` (unit scale) at which the form is also checked against the
            matrix-free NQF (``None``: checked at ``W0`` only; the book passes ``jax.random.PRNGKey(17)``).
        probe: inputs (leading sample axis) on which ``"outputs"`` are recorded.
        probe_targets: their targets, for ``"probe_loss"``.
        track: any of ``"loss"`` (full training set; needs array ``data``), ``"probe_loss"``,
            ``"outputs"``, ``"singular_values"`` (of ``linear_map(params)``, the end-to-end linear map).
        linear_map: ``params -> matrix``, required for ``"singular_values"``.
        record_every: record every this many steps (must divide ``num_steps``), and after the last.
        threshold: relative gap in (0, 1) that ends the agreement window.
        gap_on: the tracked quantity the gap is measured on (default ``"outputs"`` if tracked, else the
            first of ``track``). Relative gap at a recorded step: $\|q_\text{module} - q_\text{NQF}\| /
            \|q_\text{module}\|$.
        check: measure Theorem 1's hypotheses on the first input first (:func:`check_hypotheses`) and
            refuse the module if they fail.
        nqf_form: how the NQF is evaluated (an Architecture and array ``data`` for the two fast forms):
            ``"matrix-free"`` (default, any module), ``"structure"`` (the closed-form $A(x)$ and $f_x(0)$ of
            every training and probe sample computed once: the output is linear in $WW^\top$), or a callable
            ``quadratic(W, x)`` returning $\mathrm{Tr}[WW^\top A(x)]$ (one value per output). A fast form is
            compared with the matrix-free NQF at ``W0`` and at a random ``W`` on the first four inputs and
            refused (``ValueError``) if they differ by more than $10^{-9}$ relative.

    Returns:
        a :class:`Comparison`.
    """
    # ---- the module
    if isinstance(module, Architecture):
        apply, name = module.apply, repr(module.name)
        W0 = jnp.asarray(W0)
        if W0.ndim not in (2, 3) or W0.shape[-2] != module.p:
            raise invalid("W0", f"have shape (p, d) = ({module.p}, *) or (B, {module.p}, *) for the "
                                f"architecture {module.name!r}", f"shape {W0.shape}")
        batched = W0.ndim == 3
        neuron_axes = 1
    else:
        name = model_name(module, W0)  # the class of an equinox Module W0 called as W0(x)
        module = model_function(module, W0, name="module", params_name="W0")
        if neuron_axes is None:
            raise invalid("neuron_axes", "be given with a callable module: the neuron axis of each leaf of `W0` as "
                                         "jax.vmap's in_axes (None for shared leaves)", "None")
        apply, batched = module, False
    # ---- the optimiser and the options
    optimizer = as_optimizer("optimizer", optimizer)
    steps = check_int("num_steps", num_steps)
    if key is not None:
        check_key("key", key)
    record_every = check_record_every(record_every, steps)
    if not (isinstance(threshold, (float, int, np.floating)) and 0.0 < float(threshold) < 1.0):
        raise invalid("threshold", "be a number in (0, 1)", repr(threshold))
    track = (track,) if isinstance(track, str) else tuple(track)
    bad = [t for t in track if t not in TRACKABLE]
    if bad or not track:
        raise invalid("track", f"be a non-empty subset of {TRACKABLE}", repr(track))
    if "singular_values" in track and not callable(linear_map):
        raise invalid("linear_map", "be a callable params -> matrix to track 'singular_values'", repr(linear_map))
    gap_on = gap_on or ("outputs" if "outputs" in track else track[0])
    if gap_on not in track:
        raise invalid("gap_on", f"be one of the tracked quantities {track}", repr(gap_on))
    # ---- the data
    sample = None
    if callable(data):
        if batches is not None:
            raise invalid("batches", "be None when `data` is a sampling function (give one of the two)", "an array")
        if key is None:
            raise invalid("key", "be given (a PRNG key) when `data` is a sampling function sample(key)", "None")
        if "loss" in track:
            raise invalid("track", "not hold 'loss' (the full training set) with a sampling function `data`: it needs "
                                 "array data; track 'probe_loss' with a `probe`", repr(track))
        sample = data
        xs = ys = None
        x_first = jax.tree_util.tree_map(lambda a: np.asarray(a)[0], sample(key)[0])  # host: no eager slice
    else:
        if not isinstance(data, (tuple, list)) or len(data) != 2:
            raise invalid("data", "be a pair (xs, ys) or a function sample(key)", type(data).__name__)
        xs, ys = data
        xs = jax.tree_util.tree_map(jnp.asarray, xs)
        ys = jnp.asarray(ys)
        m = _leading(xs)
        if ys.ndim not in (1, 2) or ys.shape[0] != m:
            raise invalid("data", f"have targets ys of shape (m,) or (m, o) with m = {m} (the inputs' leading axis)",
                          f"targets of shape {ys.shape}")
        # on the host (NumPy): a jax array's slice, min and max would each compile an eager program per shape
        x_first = jax.tree_util.tree_map(lambda a: np.asarray(a)[0], xs)
        if batches is not None:
            host = np.asarray(batches)
            if host.ndim != 2 or host.shape[0] != steps or not np.issubdtype(host.dtype, np.integer):
                raise invalid("batches", f"be an int array (num_steps, b) = ({steps}, *) of sample indices",
                              f"{host.dtype} array of shape {host.shape}")
            if int(host.min()) < 0 or int(host.max()) >= m:
                raise invalid("batches", f"hold indices in [0, {m})", f"range [{int(host.min())}, {int(host.max())}]")
            batches = jnp.asarray(host)
    px = None if probe is None else jax.tree_util.tree_map(jnp.asarray, probe)
    py = None if probe_targets is None else jnp.asarray(probe_targets)
    if px is not None and py is not None and _leading(px) != py.shape[0]:
        raise invalid("probe_targets", f"have one row per probe input ({_leading(px)})", f"shape {py.shape}")
    if ("outputs" in track or "probe_loss" in track) and px is None:
        raise invalid("probe", "be given (inputs with a leading sample axis) to track 'outputs' or 'probe_loss'",
                          "None")
    if "probe_loss" in track and py is None:
        raise invalid("probe_targets", "be given to track 'probe_loss'", "None")
    # ---- shapes of module, data and probe agree
    W_one = np.asarray(W0)[0] if batched else W0  # (a jax array's W0[0] would compile a slice)
    if batched and neuron_axes != 1:
        raise invalid("W0", "be one set of weights unless `module` is an Architecture (a batch (B, p, d) needs one)", f"a batch of shape {np.shape(W0)}")
    tr, frozen, ax_leaves, d = split_params(W_one, neuron_axes)
    try:
        out = jax.eval_shape(lambda t, x: module_out(apply, t, frozen, x), tr, x_first)
    except (TypeError, IndexError, ValueError) as err:
        raise invalid("module", "apply to `W0` and one input of `data` (shapes "
                                f"{jax.tree_util.tree_map(np.shape, x_first)})", f"{name}, which cannot: {err}") from err
    if ys is not None and tuple(ys.shape[1:]) != tuple(out.shape):
        raise invalid("data", f"have targets of shape (m, *out) with out = {tuple(out.shape)} (the module's "
                              f"output shape)", f"ys of shape {tuple(ys.shape)}")
    if py is not None and tuple(py.shape[1:]) != tuple(out.shape):
        raise invalid("probe_targets", f"have shape (n, *out) with out = {tuple(out.shape)}", f"{tuple(py.shape)}")
    if check:
        check_float64("W0", tr, f"of `module` {name}", also="pass check=False to skip the checks")
        require_hypotheses(check_hypotheses(apply, W_one, x_first, neuron_axes=neuron_axes), name)
    # ---- the NQF's form
    fast = nqf_form != "matrix-free"
    if fast:
        if not (callable(nqf_form) or nqf_form in NQF_FORMS):
            raise invalid("nqf_form", f"be one of {NQF_FORMS} or a callable quadratic(W, x)", repr(nqf_form))
        if not isinstance(module, Architecture) or sample is not None:
            raise invalid("nqf_form", "be 'matrix-free' unless `module` is an nqf Architecture with array `data` "
                                      "(xs, ys): a fast form's parts are computed once per sample",
                          repr(nqf_form))
        kc = key  # array data: the key of the random W at which the fast form is checked (None: at W0 only)
        parts, form_gap = _nqf_parts(nqf_form, module, [xs] if px is None else [xs, px], W_one, kc, name)
        (f0, A), (pf0, pA) = parts[0], parts[-1]
    # ---- run: the module and its NQF, each one configuration of the trainer
    tr0 = W0 if batched else tr  # an Architecture's W is one array: nothing frozen
    base = {"frozen": frozen, "py": py}
    common = dict(num_steps=steps, record_every=int(record_every), vmap=("params",) if batched else (),
                  on_divergence="ignore")
    if sample is not None:
        common.update(sample=_KeyOnly(sample), key=key)
    runs = {}
    for name_, is_nqf in (("module", False), ("nqf", True)):
        if is_nqf and fast:
            loss = NQFFromParts(None if nqf_form == "structure" else nqf_form)
            data_ = (xs, ys, f0, A)
            args = {**base, "train": data_, "probe": None if px is None else (px, pf0, pA)}
        else:
            loss = OutputLoss(apply, is_nqf)
            data_ = (xs, ys)
            args = {**base, "train": data_, "probe": px}
        extra = {} if sample is not None else dict(data=data_, batches=batches)
        runs[name_] = train(loss, tr0, optimizer, record=_Recorder(loss, tuple(track), linear_map), args=args,
                            **common, **extra)
    rec = {k: runs[k].record for k in runs}
    nb = 1 if batched else 0
    gap = relative_gap(rec["module"][gap_on], rec["nqf"][gap_on], time_axis=nb)
    rec_steps = runs["module"].steps
    window = first_exceedance(rec_steps, gap, threshold)
    final = {k: eqx.combine(runs[k].params, frozen) if not batched else runs[k].params for k in runs}
    return Comparison(rec_steps, rec["module"], rec["nqf"], {k: runs[k].batch_loss for k in runs}, gap, window,
                      float(threshold), gap_on, final, form_gap if fast else None)
