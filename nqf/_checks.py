"""Input validation shared by every public function of :mod:`nqf`, and THE tolerances of Theorem 1.

One wording, the argument's name first: ``TypeError`` when the kind of object is wrong, ``ValueError`` when the
value or shape is, with ``"`name` must be <expected>; got <actual>."``. Value checks need concrete arrays; under
``jax.jit`` the ``*_traced`` variants attach an ``equinox.error_if`` instead.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Collection, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


def is_concrete(x) -> bool:
    """Whether ``x`` is a value now (not a tracer under ``jit``): value checks run only on concrete arrays."""
    return not isinstance(x, jax.core.Tracer)


def check_ndim(name: str, x, ndim: int, meaning: str = "") -> None:
    """Raise unless ``x`` has ``ndim`` dimensions."""
    shape = np.shape(x)
    if len(shape) != ndim:
        what = f" ({meaning})" if meaning else ""
        raise ValueError(f"`{name}` must have {ndim} dimension(s){what}; got shape {shape}.")


def check_shape(name: str, x, expected: Sequence[int | None], meaning: str = "") -> None:
    """Raise unless ``x.shape`` matches ``expected`` (``None`` = any size)."""
    shape = tuple(np.shape(x))
    if not (len(shape) == len(expected) and all(e is None or s == e for s, e in zip(shape, expected))):
        exp = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        what = f" ({meaning})" if meaning else ""
        raise ValueError(f"`{name}` must have shape {exp}{what}; got shape {shape}.")


def check_finite(name: str, x) -> None:
    """Raise if ``x`` holds NaN or infinite entries (concrete arrays only)."""
    if is_concrete(x):
        arr = np.asarray(x)
        if not np.all(np.isfinite(arr)):
            bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
            raise ValueError(f"`{name}` must be finite; got {bad} NaN/inf entr{'y' if bad == 1 else 'ies'} "
                             f"in an array of shape {arr.shape}.")


def check_square_stack(name: str, x) -> tuple[int, int]:
    """Check a stack of square matrices of shape ``(m, p, p)``; return ``(m, p)``."""
    shape = np.shape(x)
    if len(shape) != 3 or shape[1] != shape[2]:
        raise ValueError(f"`{name}` must be a stack of square matrices with shape (m, p, p); got shape {shape}.")
    return shape[0], shape[1]


def check_symmetric(name: str, x, rtol: float = 1e-10) -> None:
    """Raise unless the last two axes of ``x`` are symmetric (concrete arrays only)."""
    shape = np.shape(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"`{name}` must be square in its last two axes; got shape {shape}.")
    if is_concrete(x):
        arr = np.asarray(x, dtype=float)
        asym = np.max(np.abs(arr - np.swapaxes(arr, -1, -2))) if arr.size else 0.0
        scale = max(np.max(np.abs(arr)) if arr.size else 0.0, 1e-300)
        if asym > rtol * scale:
            raise ValueError(f"`{name}` must be symmetric (A = A^T); got max |A - A^T| = {asym:.3g} "
                             f"(relative {asym / scale:.3g}, tolerance {rtol:g}).")


def check_psd(name: str, x, rtol: float = 1e-10) -> None:
    """Raise unless ``x`` is symmetric positive semi-definite (concrete arrays only)."""
    check_symmetric(name, x, rtol=rtol)
    if is_concrete(x):
        arr = np.asarray(x, dtype=float)
        eig = np.linalg.eigvalsh(0.5 * (arr + np.swapaxes(arr, -1, -2)))
        scale = max(np.max(np.abs(eig)) if eig.size else 0.0, 1e-300)
        if np.min(eig) < -rtol * scale:
            raise ValueError(f"`{name}` must be positive semi-definite (M = W W^T); got smallest "
                             f"eigenvalue {np.min(eig):.3g} (largest |eigenvalue| {scale:.3g}).")


def _describe(value) -> str:
    """``repr`` for scalars and short things, type and shape for arrays."""
    shape = getattr(value, "shape", None)
    if shape is not None and shape != ():
        return f"{type(value).__name__} of shape {tuple(shape)} and dtype {getattr(value, 'dtype', '?')}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _real_scalar(name: str, value, what: str):
    """``value`` as a Python/NumPy real scalar (or a tracer), else TypeError."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be {what}; got the bool {value!r}.")
    if isinstance(value, jax.core.Tracer):
        return value  # a value under jit: checked (if at all) with error_if by the caller
    if isinstance(value, (np.ndarray, jax.Array)) and np.shape(value) == ():
        value = value.item()
    if isinstance(value, numbers.Real):
        return value
    raise TypeError(f"`{name}` must be {what}; got {type(value).__name__} {_describe(value)}.")


def check_positive(name: str, value, strict: bool = True) -> None:
    """Raise unless a real scalar is finite and positive (or non-negative with ``strict=False``).

    ``TypeError`` for non-numbers (strings, ``None``, bools, arrays of size > 1), ``ValueError``
    for NaN, infinities and values out of range. Tracers pass (check them with ``error_if``).
    """
    rel = "> 0" if strict else ">= 0"
    if isinstance(value, (np.ndarray, jax.Array)) and is_concrete(value) and np.size(value) == 1:
        value = np.asarray(value).reshape(()).item()
    v = _real_scalar(name, value, f"a finite real number {rel}")
    if is_concrete(v):
        v = float(v)
        if not np.isfinite(v) or (v <= 0 if strict else v < 0):
            raise ValueError(f"`{name}` must be a finite real number {rel}; got {v!r}.")


def check_tolerance(name: str, value) -> float:
    """A solver or comparison tolerance: a finite real number > 0. Returns it as ``float``."""
    check_positive(name, value, strict=True)
    return float(value)


def check_real(name: str, value, *, finite: bool = True):
    """A real scalar (finite unless ``finite=False``); returns it unchanged."""
    v = _real_scalar(name, value, "a finite real number" if finite else "a real number")
    if finite and is_concrete(v) and not np.isfinite(float(v)):
        raise ValueError(f"`{name}` must be a finite real number; got {float(v)!r}.")
    return value


def check_int(name: str, value, *, minimum: int | None = 1, maximum: int | None = None) -> int:
    """A whole number in ``[minimum, maximum]`` (sizes: ``minimum=1``). Returns a Python ``int``.

    Floats (even ``3.0``), bools, strings and arrays of size > 1 are a ``TypeError``.
    """
    if isinstance(value, (np.ndarray, jax.Array)) and is_concrete(value) and np.shape(value) == () \
            and np.issubdtype(np.asarray(value).dtype, np.integer):
        value = int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        lo = "" if minimum is None else f" >= {minimum}"
        raise TypeError(f"`{name}` must be an integer{lo}; got {type(value).__name__} {_describe(value)}.")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        want = f">= {minimum}" if maximum is None else f"<= {maximum}" if minimum is None else \
            f"in [{minimum}, {maximum}]"
        raise ValueError(f"`{name}` must be an integer {want}; got {value}.")
    return value


def check_size(name: str, value) -> int:
    """A size (number of neurons, samples, heads, steps...): an integer >= 1."""
    return check_int(name, value, minimum=1)


def check_option(name: str, value, options: Collection):
    """One of a known set of options (strings, usually); returns it."""
    try:
        ok = value in options
    except TypeError:  # unhashable value against a set
        ok = False
    if not ok:
        listed = ", ".join(repr(o) for o in options)
        raise ValueError(f"`{name}` must be one of {listed}; got {_describe(value)}.")
    return value


def check_callable(name: str, value, what: str = "a callable") -> Callable:
    """A callable (a function, a module with ``__call__``); returns it."""
    if not callable(value):
        raise TypeError(f"`{name}` must be {what}; got {type(value).__name__} {_describe(value)}.")
    return value


def invalid(name: str, expected: str, got) -> ValueError:
    """THE ``ValueError`` of a rule too particular for a ``check_*`` function (a relation between two
    arguments, a structural mismatch), in the one wording ``"`name` must <expected>; got <got>."``::

        if t_min >= t_max:
            raise invalid("t_min", "be < `t_max`", f"t_min={t_min!r}, t_max={t_max!r}")

    Outside this file every ``raise`` raises what a helper of this file builds (tests/test_conventions.py).
    """
    return ValueError(f"`{name}` must {expected}; got {got}.")


def wrong_kind(name: str, expected: str, got) -> TypeError:
    """THE ``TypeError`` (the kind of object is wrong), worded as :func:`invalid`: ``"`name` must <expected>;
    got <got>."`` (``got``: e.g. ``type(x).__name__``)."""
    return TypeError(f"`{name}` must {expected}; got {got}.")


def failed(what: str, why: str) -> RuntimeError:
    """THE ``RuntimeError`` of a computation that did not succeed although its arguments passed their checks
    (a solver out of steps, a root not bracketed): ``"<what> failed: <why>"``, ``why`` saying what to change."""
    return RuntimeError(f"{what} failed: {why}")


def error_if(x, pred, message: str):
    """``equinox.error_if``: return ``x``, raising ``message`` when ``pred`` holds at run time.

    Use for values that only exist inside ``jit`` (the two-tier convention: plain checks outside ``jit``,
    ``eqx.error_if`` inside).
    """
    import equinox as eqx

    return eqx.error_if(x, pred, message)


def check_index_traced(name: str, idx, n: int, *, what: str = "sample"):
    """Integer indices into an axis of length ``n``, each in ``[0, n)`` (no negative wrap-around): concrete arrays
    are checked now, traced ones guarded by ``equinox.error_if`` (returned)."""
    dtype = getattr(idx, "dtype", None)
    dtype = np.asarray(idx).dtype if dtype is None else dtype
    if not (np.issubdtype(dtype, np.integer) or (np.size(idx) == 0)):
        raise TypeError(f"`{name}` must hold integer {what} indices; got dtype {dtype}.")
    if not is_concrete(idx):
        return error_if(idx, jnp.any((idx < 0) | (idx >= n)),
                        f"`{name}` must hold {what} indices in [0, {n}); got some out of range.")
    arr = np.asarray(idx)
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        bad = arr[(arr < 0) | (arr >= n)]
        raise ValueError(f"`{name}` must hold {what} indices in [0, {n}); got "
                         f"{bad.size} out of range (e.g. {int(bad.flat[0])}).")
    return idx


def check_key(name: str, key) -> None:
    """A JAX PRNG key: ``jax.random.key(seed)`` or a legacy ``jax.random.PRNGKey(seed)``."""
    hint = " (make one with jax.random.key(seed))"
    if isinstance(key, (bool, numbers.Number, str)) or key is None:
        raise TypeError(f"`{name}` must be a JAX PRNG key{hint}; got {type(key).__name__} {key!r}.")
    dtype = getattr(key, "dtype", None)
    if dtype is None:
        raise TypeError(f"`{name}` must be a JAX PRNG key{hint}; got {type(key).__name__} {_describe(key)}.")
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if np.shape(key) != ():
            raise ValueError(f"`{name}` must be a single PRNG key; got a batch of shape {np.shape(key)} "
                             "(split it and pass one, or vmap).")
        return
    if dtype != np.uint32 or np.shape(key) != (2,):
        raise TypeError(f"`{name}` must be a JAX PRNG key{hint}; got an array of shape {np.shape(key)} "
                        f"and dtype {dtype}.")


def check_optimizer(name: str, opt) -> None:
    """An optax optimiser, i.e. an ``optax.GradientTransformation`` such as ``optax.sgd(0.1)``."""
    import optax

    if isinstance(opt, optax.GradientTransformation):
        return
    if isinstance(opt, str):
        raise TypeError(f"`{name}` must be an optax.GradientTransformation (e.g. optax.{opt}(learning_rate)); "
                        f"got the string {opt!r}.")
    if callable(opt) and getattr(opt, "__module__", "").startswith("optax"):
        raise TypeError(f"`{name}` must be an optax.GradientTransformation; got the uncalled factory "
                        f"{getattr(opt, '__qualname__', opt)!r} (call it: e.g. optax.sgd(learning_rate)).")
    if callable(getattr(opt, "init", None)) and callable(getattr(opt, "update", None)):
        return  # duck-typed (init, update) pair
    raise TypeError(f"`{name}` must be an optax.GradientTransformation (e.g. optax.sgd(0.1)); "
                    f"got {type(opt).__name__} {_describe(opt)}.")


def check_real_output(name: str, out) -> None:
    """The output of a user's module/function: a real floating-point array (not int, bool, complex)."""
    dtype = getattr(out, "dtype", None)
    dtype = np.asarray(out).dtype if dtype is None else dtype
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"`{name}` must return real floating-point values; it returned dtype {dtype} "
                        "(cast integer outputs to float; complex outputs are not supported).")


def require_x64(what: str) -> None:
    """Raise unless JAX runs in float64 (the book's tolerances need it)."""
    if not jax.config.jax_enable_x64:
        raise RuntimeError(f"{what} needs float64: call `jax.config.update('jax_enable_x64', True)` "
                           "(or set JAX_ENABLE_X64=1) before creating arrays.")


def shape_of(name: str, x) -> tuple:
    """``np.shape(x)``; for a ragged sequence (a list of arrays of different shapes), ``ValueError`` naming
    ``name`` and the entries' shapes (instead of NumPy's "inhomogeneous shape")."""
    try:
        return np.shape(x)
    except ValueError:
        shapes = [np.shape(v) if not isinstance(v, (list, tuple)) else f"a {type(v).__name__} of {len(v)}"
                  for v in x] if isinstance(x, (list, tuple)) else []
        raise invalid(name, "be an array, or a list of arrays of one shape", f"a {type(x).__name__} of entries "
                            f"of shapes {', '.join(map(str, shapes[:6]))}{', ...' if len(shapes) > 6 else ''}") from None


def as_real_array(name: str, x, dtype=float):
    """``x`` as a ``jnp`` array of real floats; ``TypeError`` naming ``name`` for strings, ``None``,
    objects and complex numbers (instead of NumPy's "could not convert string to float")."""
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"`{name}` must be an array of real numbers; got {type(x).__name__} {_describe(x)}.")
    if is_concrete(x) and not isinstance(x, jax.Array):
        try:
            kind = np.asarray(x).dtype.kind
        except (TypeError, ValueError) as err:
            raise TypeError(f"`{name}` must be an array of real numbers; got {type(x).__name__} "
                            f"({err}).") from None
        if kind not in "biuf":
            raise TypeError(f"`{name}` must be an array of real numbers; got {type(x).__name__} "
                            f"{_describe(x)} (dtype kind {kind!r}).")
    elif jnp.issubdtype(jnp.result_type(x), jnp.complexfloating):
        raise TypeError(f"`{name}` must be an array of real numbers; got dtype {jnp.result_type(x)}.")
    return jnp.asarray(x, dtype=dtype)


def require_kind(name: str, ok: object, expected: str, value) -> None:
    """``TypeError`` ``"`name` must be <expected>; got <type> <value>."`` unless ``ok``: the kind check of a
    rule the caller decides (a chapter parameter's declared type, a claim's kind). It raises
    :func:`wrong_kind` (one wording rule: ``invalid``/``wrong_kind`` build, ``require_*`` test and raise)."""
    if not ok:
        raise wrong_kind(name, f"be {expected}", f"{type(value).__name__} {_describe(value)}")


def require_value(name: str, ok: object, expected: str, got: str) -> None:
    """``ValueError`` ``"`name` must be <expected>; got <got>."`` unless ``ok`` (``got``: the text that says what
    was given, e.g. ``repr(value)`` or ``f"shape {x.shape}"``): the value check of a rule the caller decides.
    It raises :func:`invalid`, the one builder of that wording."""
    if not ok:
        raise invalid(name, f"be {expected}", got)


def check_record_every(record_every, num_steps: int) -> int:
    """THE rule of every recorded run: ``record_every`` is an int >= 1 that divides ``num_steps`` (records at
    steps 0, record_every, ..., num_steps). Returns it as an int; ``TypeError``/``ValueError`` naming it."""
    every = check_int("record_every", record_every)
    if num_steps % every:
        raise ValueError(f"`record_every` must divide `num_steps` = {num_steps}; got {every}.")
    return every


def check_float64(name: str, tree, owner: str = "", *, also: str = "") -> None:
    """THE float64 rule of Theorem 1's probes: ``ValueError`` naming ``name`` (and ``owner``, e.g. the model's
    class) unless every inexact leaf of the pytree ``tree`` is 64-bit.

    The probes (permutation residuals, the Taylor ratio of the gradient at 0), the NQF's second derivatives and
    its flow measure quantities near 1e-8 and below: in float32 round-off alone makes a smooth, symmetric model
    look kinked or asymmetric. The library never flips JAX's flags, so the message says how to (``also``: a
    further way out, e.g. ``"pass check=False to skip the checks"``)."""
    low = sorted({str(leaf.dtype) for leaf in jax.tree_util.tree_leaves(tree)
                  if hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.inexact)
                  and jnp.finfo(leaf.dtype).bits < 64})
    if low:
        hint = ("call jax.config.update('jax_enable_x64', True) before building it" if not jax.config.jax_enable_x64
                else "cast it: jax.tree_util.tree_map(lambda a: a.astype('float64') if eqx.is_inexact_array(a) "
                     "else a, model)")
        who = f"`{name}` {owner}" if owner else f"`{name}`"
        raise ValueError(
            f"{who} has {'/'.join(low)} parameters: Theorem 1's checks and the NQF's second derivatives and flow "
            f"need float64 (in float32 round-off alone fails the smoothness and symmetry probes). Enable float64: "
            f"{hint}{'; or ' + also if also else ''}.")


def require(ok: object, error: type[Exception], message: str) -> None:
    """Raise ``error(message)`` unless ``ok``: for the errors that are not about one argument (a chapter whose
    claims failed raises the book's ``ClaimError``)."""
    if not ok:
        raise error(message)


class Theorem1Tolerance(NamedTuple):
    r"""THE tolerances of Theorem 1's hypothesis checks for a float dtype of machine epsilon $\epsilon$
    (:func:`theorem1_tolerance`), read by :func:`nqf.structure_report` and :func:`nqf.check_hypotheses` (and through
    them every check and refusal of the package).

    * ``rounding`` $= 10^3\epsilon$: zero, relative to a scale, for what autodiff computes exactly up to rounding
      (the derivatives at $W = 0$: Eqs. 54, 56; a Hessian entry sums a few hundred rounded products at most),
      and the floor under which a Taylor residual carries no information.
    * ``residual`` $= \sqrt\epsilon$: the largest relative residual of a value test at a random $W$ read as rounding
      ($|f(W) - f(W\sigma)|/|f(W)|$, Def. 1; a zeroed neuron's gradient, Property 1); about eight decades on either
      side of both rounding ($n\epsilon\kappa$) and a broken hypothesis (of the weights' scale) in float64.
    * ``step`` $h$: the smoothness probe's step, $10^{-3}$ in float64 and $3\cdot10^{-2}$ below it, so that the
      $O(h^2)$ Taylor residual of a $C^3$ module stays $10^{4}$ above ``rounding``.
    * ``smooth_ratio`` $= 3$: smooth at 0 when $|r(h)|/|r(h/2)| \ge 3$ ($C^3$: 4, 8 with a $\mathbb Z_2$
      symmetry; a kink such as ReLU: 2).
    """

    rounding: float
    residual: float
    step: float
    smooth_ratio: float = 3.0


def theorem1_tolerance(dtype) -> Theorem1Tolerance:
    """THE :class:`Theorem1Tolerance` of a float dtype (its machine epsilon)."""
    eps = float(jnp.finfo(dtype).eps)
    return Theorem1Tolerance(rounding=1e3 * eps, residual=float(np.sqrt(eps)), step=1e-3 if eps < 1e-10 else 3e-2)
