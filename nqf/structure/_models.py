r"""A user's module as nqf reads it (its function, name and neuron axes): THE resolution rule. ``TypeError``
when the kind is wrong, ``ValueError`` when a value is missing or inconsistent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx

from .._checks import check_size, invalid, wrong_kind
from ..architectures import Architecture


def call_module(m, x):
    """``m(x)``: the ``apply(params, x)`` of a callable equinox Module ``params``."""
    return m(x)


def module_function(module: Any, *, p: int | None = None, name: str = "module") -> tuple[Callable, int]:
    """``(apply, p)`` of an :class:`~nqf.architectures.Architecture` or of a callable ``apply(W, x)`` on
    ``(p, d)`` weights (then ``p`` is required). ``TypeError`` for a module that is neither."""
    if isinstance(module, Architecture):
        if p is not None and p != module.p:
            raise invalid("p", f"match the architecture {module.name!r}, which has p = {module.p}", p)
        return module.apply, module.p
    if not callable(module):
        raise wrong_kind(name, "be an nqf Architecture or a callable apply(W, x)", type(module).__name__)
    if p is None:
        raise invalid("p", "be given: `p` (parameters per neuron) is required for a plain callable module", "None")
    check_size("p", p)
    return module, int(p)


def model_function(apply: Callable | None, params: Any, *, name: str = "apply", params_name: str = "params") -> Callable:
    """The ``apply(params, x)`` of a pytree model: ``apply`` itself, or, when ``apply`` is ``None``, the call of
    the callable equinox Module ``params`` (:func:`call_module`). ``TypeError`` for any other kind."""
    if apply is None:
        if not (isinstance(params, eqx.Module) and callable(params)):
            raise wrong_kind(params_name, f"be a callable equinox Module when `{name}` is None, or give "
                                          f"`{name}(params, x)` with `{params_name}` its parameters (e.g. a flax "
                                          f"model's `apply` and its variables)", type(params).__name__)
        return call_module
    if not callable(apply):
        raise wrong_kind(name, "be a callable apply(params, x)", type(apply).__name__)
    return apply
