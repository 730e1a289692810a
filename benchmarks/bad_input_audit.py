"""Issue 30's closing evidence: every class of bad input the issue lists, and a new neighbour of each, against
the public API, with what the user sees now.

    nice -n 10 /work/bin/cpu .venv/bin/python benchmarks/bad_input_audit.py [--out PATH]

**The cases** are written from the issue's wording (``before`` is the issue's own description of what a user
met at 25f02e5); a case marked ``neighbour`` is a new input of the same class that neither the issue nor
tests/test_bad_input.py names (another wrong width, another bad optimiser name, ...). Each case calls the
public API the way a user would: ``nqf.train``, ``nqf.optimizer``, ``nqf.diagnose``, ``nqf.gradient_flow``,
``nqf.training.Agreement.window``, ``nqfbook.kit.start_chapter``, ``nqfbook.kit.by_fidelity``, and the runner
``python -m nqfbook --only chNN --fidelity quick -p ...`` as a child process.

**Where they run.** Crash cases (and any case that could abort or run for long: huge step counts, a too tight
``rtol``) run in a child process of this script (``--one ID``) with a timeout, so an abort cannot end the audit.
Runner cases run in a child process on a scratch copy of the repository (``git archive HEAD`` with the working
tree's ``nqf/`` and ``nqfbook/`` over it), so a parameter the runner failed to refuse would execute a chapter
there and not in the checkout; their timeout is 120 s. The other cases run here, each under a 120 s alarm.

**The verdict** is mechanical, per case:

* an *error* case is ``clear`` when the exception is a ``TypeError`` or ``ValueError`` (the runner: exit status
  2, its refusal before any chapter runs) whose message names the argument (`` `name` `` or ``-p name``) and
  shows the expected and the actual (the words ``must`` and ``got``; a few cases name other words that carry
  them, e.g. "given twice (1 and 2)"), with no chapter executed for a runner case;
* a *warning* case (a run that diverges or climbs) is ``clear`` when the call returns with a warning whose text
  holds the named cause (e.g. ``negative learning rate``), and, for ``diagnose``, a report without a plateau
  table;
* anything else is ``NOT CLEAR`` (a different exception type, a message that does not name the argument, no
  error, a timeout, an abort).

Writes ``benchmarks/bad-input-audit.json`` (the commit, the date, one record per case: class, item, input,
outcome, seconds, verdict, why) and prints the Markdown table. Measures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CASE_TIMEOUT = 120  # seconds, every kind of case


@dataclass
class Case:
    id: str
    cls: str  # the class: "crash", "obscure: train", "silent: optimizer", "runner", ...
    before: str  # the wording, short ("" for a neighbour)
    input: str  # what the user passed
    arg: str  # the argument the message must name ("" when the answer is a warning)
    call: Callable[[], Any] | None = None  # in-process cases
    runner: list[str] | None = None  # runner cases: arguments after `python -m nqfbook`
    child: bool = False  # run in a child process (crash cases, anything that could abort or run long)
    warn: tuple[str, ...] = ()  # a warning case: words its warning must hold
    shows: tuple[str, ...] = ("must", "got")  # words that carry the expected and the actual
    after: Callable[[Any], str] | None = None  # a check of the returned value (a problem, or "")
    neighbour: bool = False


CASES: list[Case] = []


def case(*args, **kw) -> None:
    CASES.append(Case(*args, **kw))


# ------------------------------------------------------------------ good pieces
def _setup():
    import jax

    jax.config.update("jax_enable_x64", True)  # as the book and diagnose's users do (diagnose needs float64)


def _np():
    import numpy as np

    return np


def _sq(w, batch, args):
    import jax.numpy as jnp

    return jnp.sum(w**2)


def _train(**kw):
    import jax.numpy as jnp
    import optax

    import nqf

    args = dict(loss=_sq, params0=jnp.ones(3), optimizer=optax.sgd(0.1), num_steps=2)
    args.update(kw)
    loss, params0, opt = args.pop("loss"), args.pop("params0"), args.pop("optimizer")
    # nqf 1.0's spelling of the cases written for 0.x: vmap= is Runs(vmap=...), batches= is Minibatches(data, ...)
    if "vmap" in args:
        args["runs"] = nqf.training.Runs(vmap=args.pop("vmap"))
    if "batches" in args:
        args["data"] = nqf.training.Minibatches(args.pop("data"), args.pop("batches"))
    return nqf.train(loss, params0, opt, **args)


def _net_model():
    sys.path.insert(0, str(ROOT / "tests"))
    from models_example import TwoLayerNet  # the tests' reader-style V tanh(U x)

    return TwoLayerNet


def _diag(*, xs=None, ys=None, opt=None, model=None, steps=10, **options):
    import jax.numpy as jnp
    import optax

    import nqf

    np = _np()
    rng = np.random.default_rng(0)
    net = _net_model()(jnp.asarray(1e-3 * rng.normal(size=(4, 3))), jnp.asarray(1e-3 * rng.normal(size=(2, 4))))
    good_x = jnp.asarray(rng.normal(size=(12, 3)))
    xs = good_x if xs is None else xs
    ys = 0.5 * good_x[:, :2] if ys is None else ys
    model = net if model is None else model(net)
    if "n_probe" in options:  # the probe size is now the diagnosis's Track(probe=n)
        options["track"] = nqf.training.Track(probe=options.pop("n_probe"))
    return nqf.diagnose(model, (xs, ys), optax.sgd(0.05) if opt is None else opt, num_steps=steps, **options)


def _odd_model(kind):
    """A TwoLayerNet whose outputs are cast to ``kind`` (int64, complex128)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    class OddNet(eqx.Module):
        U: jax.Array
        V: jax.Array

        def __call__(self, x):
            out = self.V @ jnp.tanh(self.U @ x)
            return jnp.round(out).astype(jnp.int64) if kind == "int" else out.astype(jnp.complex128)

        def neuron_axes(self):
            return OddNet(0, 1)

    return lambda net: OddNet(net.U, net.V)


def _data():
    import nqf

    np = _np()
    rng = np.random.default_rng(0)
    As = rng.normal(size=(4, 3, 3))
    As = 0.5 * (As + np.swapaxes(As, 1, 2))
    return nqf.NQFData(As, rng.normal(size=4))


def _ode(**kw):
    import nqf

    return nqf.flow.ODEOptions(**kw)


def _flow(M0=None, ts=None, *old, **kw):
    import nqf

    np = _np()
    M0 = 0.01 * np.eye(3) if M0 is None else M0
    ts = np.linspace(0.0, 1.0, 5) if ts is None else ts
    if old:
        return nqf.gradient_flow(*old, **kw)
    return nqf.gradient_flow(M0, _data(), ts, **kw)


def _exceed(times, gap, threshold=0.1):
    import nqf

    np = _np()
    return nqf.training.Agreement(threshold).window(np.asarray(times) if not isinstance(times, list) else times,
                                                    np.asarray(gap) if not isinstance(gap, list) else gap)


def _start(out_dir):
    from nqfbook.kit import start_chapter

    return start_chapter("ch01", "quick", out_dir)


_SCRATCH: list[Path] = []  # folders made for the cases, removed at the end


def _a_file() -> str:
    _SCRATCH.append(Path(tempfile.mkdtemp(prefix="nqf-audit-")))
    path = _SCRATCH[-1] / "afile"
    path.write_text("not a folder")
    return str(path)


def _by_fidelity(value):
    from nqfbook.kit import by_fidelity

    return by_fidelity("etas", value, "quick", quick=[0.0, 1e-3], full=[0.0, 1e-4])


def _no_table(rep) -> str:
    text = str(rep)
    return "" if "plateau ends" not in text and "DIVERGED" in text else "a plateau table printed from a diverged run"


# ------------------------------------------------------------------ crash
case("crash-2**62", "crash", "`train(num_steps=2**62)` aborts: 'overflow in static extent product'",
     "train(num_steps=2**62)", "num_steps", lambda: _train(num_steps=2**62), child=True)
case("crash-vmap-2**40", "crash", "", "train(params (4, 3), vmap=('params',), num_steps=2**40)", "num_steps",
     lambda: _train(params0=__import__("jax.numpy").numpy.ones((4, 3)), vmap=("params",), num_steps=2**40),
     child=True, neighbour=True)
case("crash-np-uint64", "crash", "", "train(num_steps=np.uint64(2**63))", "num_steps",
     lambda: _train(num_steps=_np().uint64(2**63)), child=True, neighbour=True)

# ------------------------------------------------------------------ obscure: train
case("train-1e30", "obscure: train", "`num_steps=10**30`: MLIR 'incompatible function arguments'",
     "train(num_steps=10**30)", "num_steps", lambda: _train(num_steps=10**30), child=True)
case("train-neg-1e30", "obscure: train", "", "train(num_steps=-10**30)", "num_steps",
     lambda: _train(num_steps=-10**30), child=True, neighbour=True)
case("train-vmap-0", "obscure: train", "`vmap=0`: \"'int' object is not iterable\"", "train(vmap=0)", "vmap",
     lambda: _train(vmap=0))
case("train-vmap-misspelt", "obscure: train", "", "train(vmap=('param',)) (a misspelt name)", "vmap",
     lambda: _train(vmap=("param",)), neighbour=True)


def _loss2(params, batch):
    import jax.numpy as jnp

    return jnp.sum(params**2)


def _loss_kwonly(params, batch, *, args):
    import jax.numpy as jnp

    return jnp.sum(params**2)


case("train-loss-2args", "obscure: train", "loss `(params, batch)`: '_two_args() takes 2 positional arguments'",
     "train(loss=lambda params, batch: ...)", "loss", lambda: _train(loss=_loss2))
case("train-loss-kwonly", "obscure: train", "", "train(loss=def f(params, batch, *, args))", "loss",
     lambda: _train(loss=_loss_kwonly), neighbour=True)
case("train-str-leaf", "obscure: train", "a string leaf in params: 'not a valid JAX type'",
     "train(params0={'a': ones(3), 'b': 'x'})", "params0",
     lambda: _train(params0={"a": __import__("jax.numpy").numpy.ones(3), "b": "x"}))
case("train-np-str-leaf", "obscure: train", "", "train(params0={'a': ones(3), 'b': np.array(['x', 'y'])})",
     "params0", lambda: _train(params0={"a": __import__("jax.numpy").numpy.ones(3), "b": _np().array(["x", "y"])}),
     neighbour=True)


def loss_fn(params, batch):  # the user's function: the message must name it
    return params**2


def vector_loss(params, batch, args):
    return params**2


case("train-vector-batchloss", "obscure: train", "a loss returning a vector names `loss`, not the user's `loss_fn`",
     "train(BatchLoss(loss_fn)) with loss_fn returning params**2", "loss",
     lambda: _train(loss=__import__("nqf").training.BatchLoss(loss_fn)), shows=("must", "got", "loss_fn"))
case("train-vector-plain", "obscure: train", "", "train(loss=vector_loss) (3 arguments, returns params**2)", "loss",
     lambda: _train(loss=vector_loss), neighbour=True)

# ------------------------------------------------------------------ obscure: optimizer
def _opt(name, *args, **kw):
    import nqf

    return nqf.optimizer(name, *args, **kw)


case("opt-apply_updates", "obscure: optimizer", "`optimizer('apply_updates')`: optax internals",
     "optimizer('apply_updates', 0.1)", "name", lambda: _opt("apply_updates", 0.1))
case("opt-lbfgs", "obscure: optimizer", "`optimizer('lbfgs')`: optax internals", "optimizer('lbfgs', 0.1)", "name",
     lambda: _opt("lbfgs", 0.1))
case("opt-scale_by_adam", "obscure: optimizer", "", "optimizer('scale_by_adam', 0.1)", "name",
     lambda: _opt("scale_by_adam", 0.1), neighbour=True)
case("opt-Adam", "obscure: optimizer", "", "optimizer('Adam', 0.1) (capital A)", "name",
     lambda: _opt("Adam", 0.1), neighbour=True)
case("opt-momentum-neg", "obscure: optimizer", "momentum, b1 and friends taken without a range check",
     "optimizer('sgd', 0.1, momentum=-0.5)", "momentum", lambda: _opt("sgd", 0.1, momentum=-0.5))
case("opt-b1-1", "obscure: optimizer", "momentum, b1 and friends taken without a range check",
     "optimizer('adam', 0.1, b1=1.0)", "b1", lambda: _opt("adam", 0.1, b1=1.0))
case("opt-adamw-b2", "obscure: optimizer", "", "optimizer('adamw', 0.1, b2=1.5)", "b2",
     lambda: _opt("adamw", 0.1, b2=1.5), neighbour=True)
case("opt-lr-str", "obscure: optimizer", "", "optimizer('sgd', '0.1')", "learning_rate",
     lambda: _opt("sgd", "0.1"), neighbour=True)

# ------------------------------------------------------------------ obscure: diagnose
case("diag-width", "obscure: diagnose", "wrong input width: 'dot_general requires contracting dimensions'",
     "diagnose(TwoLayerNet 3 -> 2, xs of shape (12, 5))", "data",
     lambda: _diag(xs=__import__("jax.numpy").numpy.ones((12, 5))))
case("diag-ys-width", "obscure: diagnose", "", "diagnose(TwoLayerNet 3 -> 2, ys of shape (12, 5))", "data",
     lambda: _diag(ys=__import__("jax.numpy").numpy.ones((12, 5))), neighbour=True)
case("diag-nan", "obscure: diagnose", "NaN inputs: '`As` must be finite' (an array the user never passed)",
     "diagnose(xs with 3 NaN entries)", "data", lambda: _diag(xs=_np().where(_np().eye(12, 3) > 0, _np().nan, 1.0)))
case("diag-ys-nan", "obscure: diagnose", "", "diagnose(ys with 2 NaN entries)", "data",
     lambda: _diag(ys=_np().where(_np().eye(12, 2) > 0, _np().nan, 0.5)), neighbour=True)
case("diag-momentum-1", "obscure: diagnose", "`momentum=1.0`: ZeroDivisionError",
     "diagnose(optax.sgd(0.05, momentum=1.0))", "optimizer",
     lambda: _diag(opt=__import__("optax").sgd(0.05, momentum=1.0)))
case("diag-momentum-1.2", "obscure: diagnose", "", "diagnose(optax.sgd(0.05, momentum=1.2))", "optimizer",
     lambda: _diag(opt=__import__("optax").sgd(0.05, momentum=1.2)), neighbour=True)
case("diag-no-samples", "obscure: diagnose", "no samples: IndexError", "diagnose(xs (0, 3), ys (0, 2))", "data",
     lambda: _diag(xs=_np().zeros((0, 3)), ys=_np().zeros((0, 2))))
case("diag-rows-differ", "obscure: diagnose", "", "diagnose(xs (12, 3), ys (11, 2))", "data",
     lambda: _diag(ys=_np().zeros((11, 2))), neighbour=True)
case("diag-int-model", "obscure: diagnose", "a model returning ints: 'dtype argument to `normal`'",
     "diagnose(model returning int64)", "model", lambda: _diag(model=_odd_model("int")))
case("diag-complex-model", "obscure: diagnose", "", "diagnose(model returning complex128)", "model",
     lambda: _diag(model=_odd_model("complex")), neighbour=True)

# ------------------------------------------------------------------ obscure: gradient_flow
case("flow-rtol-2", "obscure: gradient_flow", "`rtol=2.0`: runs to 10^6 steps, then advises loosening rtol",
     "gradient_flow(options=ODEOptions(rtol=2.0))", "rtol", lambda: _flow(options=_ode(rtol=2.0)), child=True)
case("flow-rtol-nan", "obscure: gradient_flow", "", "gradient_flow(options=ODEOptions(rtol=nan))", "rtol",
     lambda: _flow(options=_ode(rtol=float("nan"))), child=True, neighbour=True)
case("flow-old-order", "obscure: gradient_flow", "the old positional order: bare 'takes 3 positional arguments'",
     "gradient_flow(As, ys, ts) (0.x's arrays where 1.0 takes M0 and an NQFData)", "data",
     lambda: _flow(None, None, _data().As, _data().ys, _np().linspace(0, 1, 5)), shows=("NQFData", "got"))
case("flow-swapped", "obscure: gradient_flow", "", "gradient_flow(data, M0, ts) (data first)", "data",
     lambda: _flow(None, None, _data(), 0.01 * _np().eye(3), _np().linspace(0, 1, 5)),
     shows=("must", "got", "gradient_flow(M0, data, ts"), neighbour=True)

# ------------------------------------------------------------------ obscure: first_exceedance
case("exc-empty", "obscure: first_exceedance", "nothing recorded: 'argmax of an empty sequence'",
     "first_exceedance(times=[], gap=[])", "times", lambda: _exceed(_np().zeros(0), _np().zeros(0)))
case("exc-empty-list-runs", "obscure: first_exceedance", "", "first_exceedance([], [[], []]) (2 runs, no records)",
     "times", lambda: _exceed([], [[], []]), neighbour=True)
case("exc-str-gap", "obscure: first_exceedance", "string gaps: 'could not convert string to float'",
     "first_exceedance([0, 1], ['a', 'b'])", "gap", lambda: _exceed(_np().arange(2), _np().array(["a", "b"])))
case("exc-none-gap", "obscure: first_exceedance", "", "first_exceedance([0, 1], [None, None])", "gap",
     lambda: _exceed([0, 1], [None, None]), neighbour=True)

# ------------------------------------------------------------------ obscure: start_chapter
case("start-none", "obscure: start_chapter", "`out_dir=None`: a bare os.fspath TypeError",
     "start_chapter('ch01', 'quick', None)", "out_dir", lambda: _start(None))
case("start-list", "obscure: start_chapter", "", "start_chapter('ch01', 'quick', ['out'])", "out_dir",
     lambda: _start(["out"]), neighbour=True)
case("start-file", "obscure: start_chapter", "an `out_dir` that is a file: NotADirectoryError only at finish()",
     "start_chapter(out_dir=<a file>)", "out_dir", lambda: _start(_a_file()))
case("start-under-file", "obscure: start_chapter", "", "start_chapter(out_dir=<a file>/claims/x)", "out_dir",
     lambda: _start(_a_file() + "/claims/x"), neighbour=True)

# ------------------------------------------------------------------ silent: train
case("train-leaves-differ", "silent: train", "batches past one data leaf's end clamped (leaves of different lengths)",
     "train(data={'x': (5, 2), 'y': (3,)}, batches=[[3], [3]])", "data",
     lambda: _train(loss=lambda p, b, a: __import__("jax.numpy").numpy.sum(p) * b["y"].sum(),
                    params0=_np().ones(2), data={"x": _np().ones((5, 2)), "y": _np().ones(3)},
                    batches=_np().array([[3], [3]])))
case("train-leaves-differ-tuple", "silent: train", "", "train(data=((4, 2), (6,)), batches=[[5]])", "data",
     lambda: _train(loss=lambda p, b, a: __import__("jax.numpy").numpy.sum(p) * b[1].sum(),
                    params0=_np().ones(2), num_steps=1, data=(_np().ones((4, 2)), _np().ones(6)),
                    batches=_np().array([[5]])), neighbour=True)
case("train-sgd-neg", "silent: train", "`optax.sgd(-1.0)` climbs without a word", "train(optax.sgd(-1.0), 100 steps)",
     "", lambda: _train(optimizer=__import__("optax").sgd(-1.0), num_steps=100), warn=("negative learning rate",))
case("train-adam-neg", "silent: train", "", "train(optax.adam(-0.01), 100 steps)", "",
     lambda: _train(optimizer=__import__("optax").adam(-0.01), num_steps=100), warn=("negative learning rate",),
     neighbour=True)

# ------------------------------------------------------------------ silent: optimizer
case("opt-momentum-1.5", "silent: optimizer", "`momentum=1.5` reaches a loss of about 1e35",
     "optimizer('sgd', 0.1, momentum=1.5)", "momentum", lambda: _opt("sgd", 0.1, momentum=1.5))
case("train-optax-momentum-1.5", "silent: optimizer", "", "train(optax.sgd(0.1, momentum=1.5), 100 steps)", "",
     lambda: _train(optimizer=__import__("optax").sgd(0.1, momentum=1.5), num_steps=100), warn=("momentum",),
     neighbour=True)
case("opt-b1-2", "silent: optimizer", "Adam with `b1=2.0` grows", "optimizer('adam', 0.1, b1=2.0)", "b1",
     lambda: _opt("adam", 0.1, b1=2.0))
case("opt-b1-neg", "silent: optimizer", "", "optimizer('nadam', 0.1, b1=-0.5)", "b1",
     lambda: _opt("nadam", 0.1, b1=-0.5), neighbour=True)
case("opt-nesterov-no", "silent: optimizer", "`nesterov='no'` taken as True",
     "optimizer('sgd', 0.1, momentum=0.9, nesterov='no')", "nesterov",
     lambda: _opt("sgd", 0.1, momentum=0.9, nesterov="no"))
case("opt-nesterov-1", "silent: optimizer", "", "optimizer('sgd', 0.1, momentum=0.9, nesterov=1)", "nesterov",
     lambda: _opt("sgd", 0.1, momentum=0.9, nesterov=1), neighbour=True)

# ------------------------------------------------------------------ silent: diagnose
case("diag-n_probe-0", "silent: diagnose", "`n_probe=0`: 'never parts', 'valid until the end' from no probes",
     "diagnose(track=Track(probe=0))", "probe", lambda: _diag(n_probe=0))
case("diag-n_probe-2.5", "silent: diagnose", "", "diagnose(track=Track(probe=2.5))", "probe", lambda: _diag(n_probe=2.5),
     neighbour=True)
case("diag-lr-1e3", "silent: diagnose", "lr 1e3: loss 1e109, a plateau table, only numpy's overflow warning",
     "diagnose(optax.sgd(1e3), 40 steps)", "", lambda: _diag(opt=__import__("optax").sgd(1e3), steps=40),
     warn=("diverges", "learning rate"), after=_no_table)
case("diag-lr-30-momentum", "silent: diagnose", "", "diagnose(optax.sgd(30.0, momentum=0.9), 60 steps)", "",
     lambda: _diag(opt=__import__("optax").sgd(30.0, momentum=0.9), steps=60), warn=("diverges",), after=_no_table,
     neighbour=True)

# ------------------------------------------------------------------ silent: gradient_flow
case("flow-complex-ts", "silent: gradient_flow", "complex `ts`: only numpy's ComplexWarning",
     "gradient_flow(ts=linspace(0, 1, 5) + 0j)", "ts", lambda: _flow(ts=_np().linspace(0, 1, 5) + 0j))
case("flow-complex-ts-list", "silent: gradient_flow", "", "gradient_flow(ts=[0j, 0.5+0j, 1+0j]) (a list)", "ts",
     lambda: _flow(ts=[0j, 0.5 + 0j, 1 + 0j]), neighbour=True)
case("flow-complex-M0", "silent: gradient_flow", "complex `M0`: only numpy's ComplexWarning",
     "gradient_flow(M0=0.01 eye(3) + 0j)", "M0", lambda: _flow(M0=0.01 * _np().eye(3) + 0j))
case("flow-int-M0", "silent: gradient_flow", "integer `M0` taken silently", "gradient_flow(M0=eye(3, dtype=int))",
     "M0", lambda: _flow(M0=_np().eye(3, dtype=int)))
case("flow-int-M0-list", "silent: gradient_flow", "", "gradient_flow(M0=[[1, 0, 0], [0, 1, 0], [0, 0, 1]])", "M0",
     lambda: _flow(M0=[[1, 0, 0], [0, 1, 0], [0, 0, 1]]), neighbour=True)

# ------------------------------------------------------------------ silent: first_exceedance
_GAP = [0.0, 0.05, 0.5]
case("exc-neg-threshold", "silent: first_exceedance", "a negative threshold returns step 0",
     "first_exceedance([0, 1, 2], gap, -0.1)", "threshold", lambda: _exceed(_np().arange(3.0), _GAP, -0.1))
case("exc-nan-threshold", "silent: first_exceedance", "", "first_exceedance([0, 1, 2], gap, nan)", "threshold",
     lambda: _exceed(_np().arange(3.0), _GAP, float("nan")), neighbour=True)
case("exc-unsorted", "silent: first_exceedance", "unsorted steps return a step",
     "first_exceedance([0, 2, 1], gap, 0.1)", "times", lambda: _exceed(_np().array([0.0, 2.0, 1.0]), _GAP))
case("exc-length-differs", "silent: first_exceedance", "", "first_exceedance([0, 1, 2, 3], gap of 3, 0.1)", "gap",
     lambda: _exceed(_np().arange(4.0), _GAP), neighbour=True)
case("exc-nan-step", "silent: first_exceedance", "a NaN step returns NaN", "first_exceedance([0, nan, 2], gap, 0.1)",
     "times", lambda: _exceed(_np().array([0.0, _np().nan, 2.0]), _GAP))
case("exc-neg-inf-step", "silent: first_exceedance", "", "first_exceedance([-inf, 1, 2], gap, 0.1)", "times",
     lambda: _exceed(_np().array([-_np().inf, 1.0, 2.0]), _GAP), neighbour=True)

# ------------------------------------------------------------------ silent: by_fidelity
case("byfid-strings", "silent: by_fidelity", "a list of strings where floats are expected is returned as is",
     "by_fidelity('etas', ['a'], quick=[0.0, 1e-3])", "etas", lambda: _by_fidelity(["a"]))
case("byfid-bools", "silent: by_fidelity", "", "by_fidelity('etas', [True, False], quick=[0.0, 1e-3])", "etas",
     lambda: _by_fidelity([True, False]), neighbour=True)

# ------------------------------------------------------------------ runner parameters
def _runner(chapter: str, *params: str) -> list[str]:
    out = ["--only", chapter, "--fidelity", "quick"]
    for p in params:
        out += ["-p", p]
    return out


_R = "runner"
case("run-width", _R, "`-p width=-3` starts executing", "ch10 -p width=-3", "width", runner=_runner("ch10", "width=-3"))
case("run-threshold-1.5", "round 5: silent", "ch10 `-p threshold=1.5` (declared a positive float, diagnose needs a "
     "fraction) starts executing", "ch10 -p threshold=1.5", "threshold", runner=_runner("ch10", "threshold=1.5"))
case("run-seed-neg", "round 5: silent", "", "ch10 -p seed=-1", "seed", runner=_runner("ch10", "seed=-1"),
     neighbour=True)
case("run-eta-0", _R, "", "ch10 -p eta=0", "eta", runner=_runner("ch10", "eta=0"), neighbour=True)
case("run-rays", _R, "`-p rays=-1` starts executing", "ch01 -p rays=-1", "rays", runner=_runner("ch01", "rays=-1"))
case("run-n_tau", _R, "", "ch05 -p n_tau=1.5", "n_tau", runner=_runner("ch05", "n_tau=1.5"), neighbour=True)
case("run-etas-a", _R, "ch04 `-p etas=['a']` starts executing", "ch04 -p etas=['a']", "etas",
     runner=_runner("ch04", "etas=['a']"))
case("run-etas-neg", _R, "", "ch04 -p etas=[0.0, -0.1]", "etas", runner=_runner("ch04", "etas=[0.0, -0.1]"),
     neighbour=True)
case("run-twice", _R, "the same `-p` twice starts executing", "ch10 -p seed=0 -p seed=1", "seed",
     runner=_runner("ch10", "seed=0", "seed=1"), shows=("given twice", "0 and 1"))
case("run-twice-same", _R, "", "ch10 -p width=8 -p width=8 (the same value)", "width",
     runner=_runner("ch10", "width=8", "width=8"), shows=("given twice",), neighbour=True)
case("run-num_steps-abc", _R, "`-p num_steps=abc` (untyped None default) starts executing", "ch10 -p num_steps=abc",
     "num_steps", runner=_runner("ch10", "num_steps=abc"))
case("run-n_scales-abc", _R, "", "ch01 -p n_scales=2.5", "n_scales", runner=_runner("ch01", "n_scales=2.5"),
     neighbour=True)
case("run-model-nosuch", _R, "ch10 `-p model=nosuch.mod:f` starts, fails 7 s later in a misnamed cell",
     "ch10 -p model=nosuch.mod:f", "model", runner=_runner("ch10", "model=nosuch.mod:f"),
     shows=("nosuch", "PYTHONPATH"))
case("run-model-attr", _R, "", "ch10 -p model=ch10_models:no_factory", "model",
     runner=_runner("ch10", "model=ch10_models:no_factory"), shows=("no_factory", "PYTHONPATH"), neighbour=True)
case("run-unknown", _R, "", "ch10 -p widht=8 (a misspelt name)", "widht", runner=_runner("ch10", "widht=8"),
     shows=("no parameter", "width"), neighbour=True)


# ------------------------------------------------------------------ round 5 (issue 50) and nqf 1.0's surfaces
def _eqx_mlp():
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    mlp = eqx.nn.MLP(4, 2, 6, 1, activation=jnp.tanh, use_bias=False, use_final_bias=False, key=jax.random.PRNGKey(0))
    mlp = jax.tree_util.tree_map(lambda w: 0.01 * w if eqx.is_array(w) else w, mlp)
    axes = eqx.tree_at(lambda m: (m.layers[0].weight, m.layers[1].weight), mlp, replace=(0, 1))
    return mlp, axes


def _q():
    import nqf

    mlp, axes = _eqx_mlp()
    return nqf.quadratic_form(mlp, neuron_axes=axes)


def _xy(m=40, width=4):
    import jax

    xs = jax.random.normal(jax.random.PRNGKey(1), (m, width))
    return xs, xs[:, :2]


def _compare(data=None, q=None, **kw):
    import optax

    import nqf

    kw.setdefault("num_steps", 5)
    return nqf.compare_with_nqf(_q() if q is None else q, _xy() if data is None else data,
                                kw.pop("optimizer", optax.sgd(0.1)), **kw)


def _track(**kw):
    import nqf

    return nqf.training.Track(**kw)


def _linen():
    import flax.linen as nn
    import jax.numpy as jnp

    class Lin(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2, use_bias=False, param_dtype=jnp.float64)(
                jnp.tanh(nn.Dense(6, use_bias=False, param_dtype=jnp.float64)(x)))

    return Lin()


_LINEN_AXES = {"params": {"Dense_0": {"kernel": 1}, "Dense_1": {"kernel": 0}}}


def _dln_data():
    import jax.numpy as jnp

    import nqf

    return nqf.NQFData(nqf.structure_matrix(nqf.architectures.diagonal_linear_network(3), jnp.eye(3), batch=True),
                       jnp.array([1.0, 0.1, 0.01]))


def _record(fn):
    import jax.numpy as jnp
    import optax

    import nqf

    return nqf.train(_sq, jnp.ones(3), optax.sgd(0.1), num_steps=3, record=fn)


def _nan_at(a, i, j):
    return a.at[i, j].set(float("nan"))


_R5 = "round 5: "
# silent (issue 50)
case("r5-compare-nan-probe", _R5 + "silent", "compare_with_nqf: NaN in the probe inputs returns non-finite results",
     "compare_with_nqf(track=Track(probe=xs with a NaN))", "probe",
     lambda: _compare(track=_track(quantities=("loss", "outputs"), probe=_nan_at(_xy()[0][:10], 2, 1))))
case("r5-compare-nan-targets", _R5 + "silent", "compare_with_nqf: NaN in the targets returns non-finite results",
     "compare_with_nqf((xs, ys with a NaN))", "data",
     lambda: _compare(data=(_xy()[0], _nan_at(_xy()[1], 3, 0))))
case("r5-compare-inf-probe", _R5 + "silent", "", "compare_with_nqf(track=Track(probe=xs with an inf))", "probe",
     lambda: _compare(track=_track(quantities=("loss", "outputs"), probe=_xy()[0][:10].at[0, 0].set(float("inf")))),
     neighbour=True)
case("r5-flow-M0-zero", _R5 + "silent", "gradient_flow from M0 = 0 returns M(t) = 0 without a word",
     "gradient_flow(zeros((3, 3)), ...)", "", lambda: _flow_zero(), warn=("`M0` is exactly 0", "fixed point"))
case("r5-flow-M0-zero-lane", _R5 + "silent", "", "gradient_flow(stack([1e-3 I, zeros])) (one lane at 0)", "",
     lambda: _flow_zero(batch=True), warn=("`M0` is exactly 0", "initial conditions [1]"), neighbour=True)
case("r5-diag-1-step", _R5 + "silent", "diagnose(num_steps=1) returns a report that cannot hold a plateau end",
     "diagnose(num_steps=1)", "num_steps", lambda: _diag(steps=1))
case("r5-diag-2-steps", _R5 + "silent", "", "diagnose(num_steps=2)", "num_steps", lambda: _diag(steps=2),
     neighbour=True)
# obscure (issue 50)
case("r5-compare-probe-width", _R5 + "obscure", "a probe of the wrong width is reported as `x`",
     "compare_with_nqf(track=Track(probe=ones((10, 5)))) for 4-wide inputs", "probe",
     lambda: _compare(track=_track(quantities=("loss", "outputs"), probe=__import__("jax.numpy").numpy.ones((10, 5)))))
case("r5-compare-probe-rank", _R5 + "obscure", "", "compare_with_nqf(track=Track(probe=ones(4))) (one sample, no "
     "sample axis)", "probe",
     lambda: _compare(track=_track(quantities=("loss", "outputs"), probe=__import__("jax.numpy").numpy.ones(4))),
     neighbour=True)
case("r5-matrix-output", _R5 + "obscure", "a model returning a matrix: JAX's ShapeDtypeStruct(...) repr",
     "structure_matrix(lambda W, x: outer(W[0], W[1]), x, p=2)", "module",
     lambda: __import__("nqf").structure_matrix(lambda W, x: __import__("jax.numpy").numpy.outer(W[0], W[1]),
                                                 __import__("jax.numpy").numpy.ones(3), p=2), shows=("must", "got an output of shape (3, 3)"))
case("r5-linen-module", _R5 + "obscure", "a flax linen Module given instead of its .apply: 'inputs refused'",
     "quadratic_form(linen_module, neuron_axes=...)", "model",
     lambda: __import__("nqf").quadratic_form(_linen(), neuron_axes=_LINEN_AXES), shows=("must", "model.apply", "got"))
case("r5-eqx-params", _R5 + "obscure", "", "compare_with_nqf(q, ..., params=the equinox model)", "params",
     lambda: _compare(params=_eqx_mlp()[0]), shows=("must", "got a MLP"), neighbour=True)
case("r5-record-str", _R5 + "obscure", "a record= returning a string: JAX's scan message",
     "train(record=Record(lambda W: 'hello'))", "record",
     lambda: _record(__import__("nqf").training.Record(lambda W: "hello")))
case("r5-record-dict-str", _R5 + "obscure", "", "train(record=lambda W, a: {'x': 's'})", "record",
     lambda: _record(lambda W, a: {"x": "s"}), shows=("must", "got", "['x']"), neighbour=True)
case("r5-nqfdata-ragged", _R5 + "obscure", "NQFData from matrices of different shapes: NumPy's inhomogeneous shape",
     "NQFData([eye(3), eye(4)], ys)", "As",
     lambda: __import__("nqf").NQFData([_np().eye(3), _np().eye(4)], _np().ones(2)))
case("r5-nqfdata-ragged-tuple", _R5 + "obscure", "", "NQFData((eye(2), ones((2, 3))), ys)", "As",
     lambda: __import__("nqf").NQFData((_np().eye(2), _np().ones((2, 3))), _np().ones(2)), neighbour=True)
case("r5-hypotheses-p", _R5 + "obscure", "check_hypotheses with W of another p: dot_general's message",
     "check_hypotheses(lambda W, x: tanh(x @ W[:-1]) @ W[-1], ones((3, 5)), ones(4))", "W",
     lambda: __import__("nqf").check_hypotheses(lambda W, x: __import__("jax.numpy").numpy.tanh(x @ W[:-1]) @ W[-1],
                                                 __import__("jax.numpy").numpy.ones((3, 5)),
                                                 __import__("jax.numpy").numpy.ones(4)))
# the 1.0 surfaces: the NQF of a model, the option objects, the kit
case("q-not-callable", _R5 + "1.0: quadratic_form", "", "quadratic_form(3)", "model",
     lambda: __import__("nqf").quadratic_form(3), neighbour=True)
case("q-apply-no-axes", _R5 + "1.0: quadratic_form", "", "quadratic_form(lambda P, x: ...) without neuron_axes",
     "neuron_axes", lambda: __import__("nqf").quadratic_form(lambda P, x: x), neighbour=True)
case("q-bad-form", _R5 + "1.0: quadratic_form", "", "quadratic_form(mlp, neuron_axes=..., form='fast')", "form",
     lambda: __import__("nqf").quadratic_form(_eqx_mlp()[0], neuron_axes=_eqx_mlp()[1], form="fast"), neighbour=True)
case("q-eqx-no-axes", _R5 + "1.0: quadratic_form", "", "quadratic_form(eqx MLP) without neuron_axes",
     "neuron_axes", lambda: __import__("nqf").quadratic_form(_eqx_mlp()[0]), neighbour=True)
case("q-axes-out-of-range", _R5 + "1.0: quadratic_form", "", "quadratic_form(mlp, neuron_axes with axis 2 on a "
     "matrix)", "neuron_axes",
     lambda: __import__("nqf").quadratic_form(_eqx_mlp()[0], neuron_axes=__import__("equinox").tree_at(
         lambda m: (m.layers[0].weight, m.layers[1].weight), _eqx_mlp()[0], replace=(2, 1))), neighbour=True)
case("ode-rtol-neg", _R5 + "1.0: options", "", "gradient_flow(options=ODEOptions(rtol=-1e-8))", "rtol",
     lambda: _flow(options=_ode(rtol=-1e-8)), neighbour=True)
case("ode-solver-name", _R5 + "1.0: options", "", "gradient_flow(options=ODEOptions(solver='rk4'))", "solver",
     lambda: _flow(options=_ode(solver="rk4")), neighbour=True)
case("ode-max-steps-0", _R5 + "1.0: options", "", "gradient_flow(options=ODEOptions(max_steps=0))", "max_steps",
     lambda: _flow(options=_ode(max_steps=0)), neighbour=True)
case("track-unknown", _R5 + "1.0: options", "", "Track(quantities=('loss', 'weights'))", "track",
     lambda: _track(quantities=("loss", "weights")), neighbour=True)
case("track-every-0", _R5 + "1.0: options", "", "Track(record_every=0) in compare_with_nqf", "record_every",
     lambda: _compare(track=_track(record_every=0)), neighbour=True)
case("agreement-1.5", _R5 + "1.0: options", "", "Agreement(1.5)", "threshold",
     lambda: __import__("nqf").training.Agreement(1.5), neighbour=True)
case("agreement-on", _R5 + "1.0: options", "", "Agreement(0.1, on='weights') in compare_with_nqf", "on",
     lambda: _compare(track=_track(agreement=__import__("nqf").training.Agreement(0.1, on="weights"))),
     neighbour=True)
case("runs-on-divergence", _R5 + "1.0: options", "", "Runs(on_divergence='stop')", "on_divergence",
     lambda: _train(runs=__import__("nqf").training.Runs(on_divergence="stop")), neighbour=True)
case("runs-vmap-unknown", _R5 + "1.0: options", "", "Runs(vmap=('weights',))", "vmap",
     lambda: __import__("nqf").training.Runs(vmap=("weights",)), neighbour=True)
case("mse-outputs", _R5 + "1.0: options", "", "MSE(outputs='median')", "outputs",
     lambda: __import__("nqf").model.MSE(outputs="median"), neighbour=True)
case("minibatch-range", _R5 + "1.0: options", "", "train(data=Minibatches(data with 5 rows, indices up to 9))",
     "batches", lambda: _minibatches(), neighbour=True)
case("compare-batches-shape", _R5 + "1.0: compare_with_nqf", "", "compare_with_nqf((xs, ys, batches (3, 2)), "
     "num_steps=5)", "batches",
     lambda: _compare(data=(*_xy(), _np().zeros((3, 2), dtype=int))), neighbour=True)
case("compare-no-key-sampler", _R5 + "1.0: compare_with_nqf", "", "compare_with_nqf(data=sample, key=None)", "key",
     lambda: _compare(data=lambda key: _xy(8)), neighbour=True)
case("compare-ys-rows", _R5 + "1.0: compare_with_nqf", "", "compare_with_nqf((xs (40, 4), ys (30, 2)))", "data",
     lambda: _compare(data=(_xy()[0], _xy(30)[1])), neighbour=True)
case("compare-float32", _R5 + "1.0: compare_with_nqf", "", "compare_with_nqf(float32 model)", "params",
     lambda: _compare(q=_q32()), shows=("float32", "float64"), neighbour=True)
case("diag-linen-module", _R5 + "1.0: diagnose", "", "diagnose(quadratic_form(linen_module, ...), params=variables)",
     "model", lambda: __import__("nqf").diagnose(__import__("nqf").quadratic_form(_linen(), neuron_axes=_LINEN_AXES),
                                                 _xy(), __import__("optax").sgd(0.1), num_steps=10),
     shows=("must", "model.apply", "got"), neighbour=True)
case("kit-claim-kind", _R5 + "1.0: kit", "", "Claims.close(..., kind='theorem')", "kind",
     lambda: _claims().close("x", 1.0, 1.0, atol=0.1, kind="theorem"), neighbour=True)
case("kit-savefig-data-clash", _R5 + "1.0: kit", "", "savefig(fig, ..., data={'panel0/line0/x': ...})", "data",
     lambda: _savefig_clash(), shows=("clashes",), neighbour=True)
case("kit-glue-name", _R5 + "1.0: kit", "", "glue('', 1.0)", "name", lambda: __import__("nqfbook.kit").kit.glue("", 1.0),
     neighbour=True)
case("kit-rule-seeds", _R5 + "1.0: kit", "", "Rule(..., confirm_seeds=(6100,), explore_seeds=(6100,))",
     "confirm_seeds", lambda: _bad_rule(), neighbour=True)


def _flow_zero(batch=False):
    import jax.numpy as jnp

    import nqf

    M0 = jnp.stack([1e-3 * jnp.eye(3), jnp.zeros((3, 3))]) if batch else jnp.zeros((3, 3))
    return nqf.gradient_flow(M0, _dln_data(), nqf.flow.log_times(10.0, 5))


def _minibatches():
    import jax.numpy as jnp
    import optax

    import nqf

    return nqf.train(_sq, jnp.ones(3), optax.sgd(0.1), num_steps=2,
                     data=nqf.training.Minibatches(jnp.ones((5, 3)), _np().array([[0, 9], [1, 2]])))


def _q32():
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import nqf

    mlp, axes = _eqx_mlp()
    mlp = jax.tree_util.tree_map(lambda w: w.astype(jnp.float32) if eqx.is_array(w) else w, mlp)
    return nqf.quadratic_form(mlp, neuron_axes=axes)


def _claims():
    return _start(tempfile.mkdtemp(prefix="nqf-audit-"))


def _savefig_clash():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nqfbook.kit import savefig

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    try:
        return savefig(fig, "x", chapter="ch99", out_dir=tempfile.mkdtemp(prefix="nqf-audit-"),
                       data={"panel0/line0/x": [1.0]})
    finally:
        plt.close(fig)


def _bad_rule():
    from nqfbook.kit import Rule

    return Rule("r", "one run's statistic", "below", "the paper's bound", fixed_at="0000000",
                explore_seeds=(6100,), confirm_seeds=(6100,))


# ------------------------------------------------------------------ running one case
def _first_line(text: str) -> str:
    text = str(text).strip()
    return text.splitlines()[0] if text else ""


def _names(msg: str, arg: str) -> bool:
    a = re.escape(arg)
    return bool(re.search(rf"`{a}`|-p {a}\b|parameter '{a}'|no parameter {a}\b", msg))


class _Timeout(Exception):
    pass


def run_in_process(c: Case) -> dict:
    """Call the case here; the outcome as a record (exception, warnings, returned value)."""

    def on_alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(CASE_TIMEOUT)
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"exception": None, "message": "", "warnings": [], "problem": ""}
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("always")
            try:
                value = c.call()
                if c.after is not None:
                    rec["problem"] = c.after(value)
            except _Timeout:
                rec["exception"] = "TIMEOUT"
                rec["message"] = f"no answer within {CASE_TIMEOUT} s"
            except BaseException as exc:  # noqa: BLE001 (recorded, not hidden)
                rec["exception"] = type(exc).__name__
                rec["message"] = str(exc)
                rec["mro"] = [k.__name__ for k in type(exc).__mro__]
        rec["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    rec["seconds"] = time.perf_counter() - t0
    return rec


def run_in_child(c: Case) -> dict:
    """The case in a child process (``--one``): an abort is recorded as one."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([PY, __file__, "--one", c.id], capture_output=True, text=True, timeout=CASE_TIMEOUT,
                              cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"exception": "TIMEOUT", "message": f"no answer within {CASE_TIMEOUT} s (child process)",
                "warnings": [], "problem": "", "seconds": time.perf_counter() - t0}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("AUDIT ")]
    if proc.returncode != 0 or not lines:
        why = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        tail = _first_line(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "")
        return {"exception": "ABORT", "message": f"the interpreter ended ({why}): {tail}", "warnings": [],
                "problem": "", "seconds": time.perf_counter() - t0}
    rec = json.loads(lines[-1][len("AUDIT "):])
    rec["seconds_child_total"] = time.perf_counter() - t0  # with the child's own start-up (imports)
    return rec


def scratch_repository() -> Path:
    """``git archive HEAD`` with the working tree's nqf/ and nqfbook/ over it (this audit's fixes included)."""
    tmp = Path(tempfile.mkdtemp(prefix="nqf-audit-repo-"))
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    for pkg in ("nqf", "nqfbook"):
        shutil.rmtree(tmp / pkg)
        shutil.copytree(ROOT / pkg, tmp / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def run_runner(c: Case, repo: Path) -> dict:
    """``python -m nqfbook`` on the scratch copy; whether any chapter started (``_build`` appeared)."""
    shutil.rmtree(repo / "_build", ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([PY, "-m", "nqfbook", "--root", str(repo), *c.runner], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CASE_TIMEOUT)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the runner ends its own children on SIGTERM
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        timed_out = True
    seconds = time.perf_counter() - t0
    started = (repo / "_build").exists()
    message = re.sub(r"^(python -m )?nqfbook: error: ", "", err.strip())
    rec = {"exception": "TIMEOUT" if timed_out else (f"exit {proc.returncode}"), "message": message,
           "warnings": [], "problem": "", "seconds": seconds, "returncode": proc.returncode,
           "chapter_started": started}
    if started:
        rec["problem"] = "a chapter started executing (_build appeared) before the parameter was refused"
    return rec


def verdict(c: Case, rec: dict) -> tuple[str, str]:
    """``("clear", why)`` or ``("NOT CLEAR", why)``: the rule in the module's docstring."""
    msg, exc = rec["message"], rec["exception"]
    if rec.get("problem"):
        return "NOT CLEAR", rec["problem"]
    if c.warn:
        if exc is not None:
            return "NOT CLEAR", f"an exception ({exc}) where a warning naming the cause was expected"
        hits = [w for w in rec["warnings"] if all(word in w for word in c.warn)]
        if not hits:
            return "NOT CLEAR", f"no warning holding {c.warn!r} (warnings: {len(rec['warnings'])})"
        return "clear", f"warns: {' + '.join(c.warn)}"
    if exc is None:
        return "NOT CLEAR", "no error" + (f" ({len(rec['warnings'])} warnings)" if rec["warnings"] else "")
    if c.runner is not None:
        if rec.get("returncode") != 2:
            return "NOT CLEAR", f"runner {exc}, not the refusal (exit 2) before any chapter runs"
    elif not {"TypeError", "ValueError"} & set(rec.get("mro", [])):
        return "NOT CLEAR", f"{exc}, not a TypeError/ValueError"
    if not _names(msg, c.arg):
        return "NOT CLEAR", f"the message does not name `{c.arg}`"
    missing = [w for w in c.shows if w not in msg]
    if missing:
        return "NOT CLEAR", f"the message lacks {missing!r} (expected and actual)"
    return "clear", f"{'exit 2' if c.runner else exc}, names {c.arg}, shows {' / '.join(c.shows)}"


def outcome_text(c: Case, rec: dict) -> str:
    if c.warn and rec["exception"] is None:
        hits = [w for w in rec["warnings"] if all(word in w for word in c.warn)] or rec["warnings"]
        return _first_line(hits[0]) if hits else "no warning"
    if rec["exception"] is None:
        return "no error" + (f"; warnings: {_first_line(rec['warnings'][0])}" if rec["warnings"] else "")
    return f"{rec['exception']}: {_first_line(rec['message'])}"


def _short(text: str, n: int = 100) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= n else text[: n - 1] + "…"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "bad-input-audit.json"))
    ap.add_argument("--one", help="run one in-process case and print its record (used for child cases)")
    ap.add_argument("--only", action="append", help="run only these case ids (repeatable; no record written)")
    args = ap.parse_args()
    _setup()
    by_id = {c.id: c for c in CASES}
    assert len(by_id) == len(CASES), "case ids must be unique"
    if args.one:
        print("AUDIT " + json.dumps(run_in_process(by_id[args.one])), flush=True)
        return 0

    selected = [by_id[i] for i in args.only] if args.only else CASES
    repo = scratch_repository() if any(c.runner for c in selected) else None
    records = []
    t_all = time.perf_counter()
    try:
        for c in selected:
            if c.runner is not None:
                rec = run_runner(c, repo)
            elif c.child:
                rec = run_in_child(c)
            else:
                rec = run_in_process(c)
            v, why = verdict(c, rec)
            out = outcome_text(c, rec)
            records.append({"id": c.id, "class": c.cls, "neighbour": c.neighbour, "before": c.before,
                            "input": c.input, "argument": c.arg, "where": "runner" if c.runner else
                            ("child process" if c.child else "in process"),
                            "outcome": out, "message": rec["message"], "warnings": rec["warnings"][:5],
                            "seconds": round(rec["seconds"], 3), "verdict": v, "why": why,
                            **({"chapter_started": rec["chapter_started"]} if c.runner else {})})
            print(f"  {c.id:28s} {v:9s} {rec['seconds']:7.2f} s  {_short(out, 110)}", file=sys.stderr, flush=True)
    finally:
        for folder in ([repo] if repo is not None else []) + _SCRATCH:
            shutil.rmtree(folder, ignore_errors=True)

    n_clear = sum(r["verdict"] == "clear" for r in records)
    print("\n| class | before (issue 30) | after (now) | verdict |")
    print("|---|---|---|---|")
    for r in records:
        before = r["before"] or f"neighbour: {r['input']}"
        print(f"| {r['class']} | {_short(before, 90)} | {_short(r['outcome'])} ({r['seconds']:.1f} s) "
              f"| {r['verdict']} |")
    print(f"\n{n_clear} clear, {len(records) - n_clear} not clear, of {len(records)} cases "
          f"({sum(not r['neighbour'] for r in records)} from the issue, {sum(r['neighbour'] for r in records)} "
          f"neighbours); {time.perf_counter() - t_all:.0f} s")
    if args.only:
        return 0
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "nqf", "nqfbook"], cwd=ROOT, capture_output=True,
                           text=True).stdout.rstrip()
    import jax
    import optax

    record = {"what": "issue 30's and issue 50's bad-input classes and a new neighbour of each, against the public API (nqf "
                      "1.0: the NQF of a model, the option objects, the kit)",
              "commit": commit,
              # files of nqf/ and nqfbook/ that differ from `commit` when measured (a fix committed with this record)
              "uncommitted_in_nqf_nqfbook": [ln[3:] for ln in dirty.splitlines()],
              "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "python": sys.version.split()[0], "jax": jax.__version__, "optax": optax.__version__,
              "rule": "clear: TypeError/ValueError (runner: exit 2 before any chapter runs) naming the argument "
                      "and showing expected and actual; for a diverging run a warning naming the cause",
              "counts": {"cases": len(records), "clear": n_clear, "not_clear": len(records) - n_clear,
                         "from_issue": sum(not r["neighbour"] for r in records),
                         "neighbours": sum(r["neighbour"] for r in records)},
              "cases": records}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
