r"""Teacher-student runs beside the NQF with independent seeds vmapped (App. C, Figs. 6 and 8).

:func:`nqf.training.compare_with_nqf` trains one module beside its NQF; with a batch of initial
weights its runs share one data stream. The two runs here need *independent runs*, each with its
own teacher and its own data, vmapped over seeds in one compiled ``lax.scan``:

* :func:`online_teacher_student` (Fig. 6): online SGD, a fresh minibatch of Gaussian inputs at every
  step, labelled by a teacher of the same architecture; the module and its NQF
  ($f_x(0) + \mathrm{Tr}[WW^\top A(x)]$, Eq. 2, evaluated matrix-free by
  :func:`nqf.structure.nqf_output`) start from the same $W(0)$ and see the same minibatches.
* :func:`train_side_by_side` (Fig. 8): several models (e.g. a deep module, its 2-layer NQF and a
  1-layer NQF) trained full batch with one optax optimiser, each from its own initial parameters,
  recording training and test loss.

Loss: the paper's MSE (Eq. 26, no $\frac12$) in the package's one convention, :func:`nqf.model.mse`.
Each run is a configuration of :func:`nqf.training.train`; agreement windows are
:func:`nqf.training.first_exceedance` of :func:`nqf.training.relative_gap`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_size
from .._checks import check_int
from ..architectures._base import Architecture
from ..model._model import mse
from ._agreement import relative_gap
from ._losses import OutputLoss
from ._trainer import optimizer as make_optimizer
from ._trainer import train as run_trainer


class OnlineRun(NamedTuple):
    """Result of :func:`online_teacher_student`; arrays have a leading seed axis ``S``."""

    steps: np.ndarray  #: (T,) recorded steps 0, every, ..., steps
    probe_loss: dict  #: {"module", "nqf"} -> (S, T) MSE on a fixed probe set of the seed
    batch_loss: dict  #: {"module", "nqf"} -> (S, steps) MSE on each step's minibatch (before the step)
    output_gap: np.ndarray  #: (S, T) ||f_module - f_NQF|| / ||y|| on the probe set


class ModelLoss(eqx.Module):
    """The loss of Eq. 26 (:func:`nqf.model.mse`) of ``apply(params, x)`` on a batch ``(xs, ys)``."""

    apply: Callable

    def __call__(self, params, batch, args):
        xs, ys = batch
        return mse(jax.vmap(lambda x: self.apply(params, x))(xs), ys)


def _draw(arch, teacher, Wt, key, n):
    xs = jax.vmap(arch.sample_input)(jax.random.split(key, n))
    return xs, jax.vmap(lambda x: teacher.apply(Wt, x))(xs)


class _TeacherSample(eqx.Module):
    module: Architecture
    teacher: Architecture
    batch: int = eqx.field(static=True)

    def __call__(self, key, args):
        return _draw(self.module, self.teacher, args["Wt"], key, self.batch)


class _ProbeRecord(eqx.Module):
    loss: OutputLoss

    def __call__(self, W, args):
        pred = self.loss.predict(W, args, args["px"])
        return {"outputs": pred, "probe_loss": mse(pred, args["py"])}


@eqx.filter_jit
def _probes(module, teacher, Wt, keys, n_probe):
    def one(Wt, key):
        kp, kd = jax.random.split(key)
        return _draw(module, teacher, Wt, kp, n_probe), kd

    return jax.vmap(one)(Wt, keys)


def online_teacher_student(
    module: Architecture,
    teacher: Architecture,
    W0: Any,
    teacher_W: Any,
    keys: Any,
    *,
    eta: float,
    batch: int,
    steps: int,
    record_every: int = 10,
    n_probe: int = 1000,
) -> OnlineRun:
    r"""Online SGD of a module and of its NQF from the same $W(0)$ on the same fresh minibatches (Fig. 6).

    Seed ``s`` (vmapped) has its own student init ``W0[s]`` ``(p, d)``, teacher weights ``teacher_W[s]``
    and key ``keys[s]``, from which it draws a probe set of ``n_probe`` inputs (``module.sample_input``)
    and, at every step, a minibatch of ``batch`` inputs; targets are ``teacher.apply(teacher_W[s], x)``.
    Both students take ``steps`` steps $W \leftarrow W - \eta\nabla_W\frac1b\sum_x(f(x) - y)^2$; the NQF is
    :func:`nqf.structure.nqf_output` (Eq. 2). Compiled once per (module, teacher, sizes).
    """
    if not isinstance(module, Architecture) or not isinstance(teacher, Architecture):
        raise TypeError("`module` and `teacher` must be nqf Architectures.")
    W0, teacher_W, keys = jnp.asarray(W0), jnp.asarray(teacher_W), jnp.asarray(keys)
    if W0.ndim != 3 or W0.shape[1] != module.p:
        raise ValueError(f"`W0` must have shape (S, p, d) = (S, {module.p}, d) (one init per seed); got {W0.shape}.")
    S = W0.shape[0]
    if teacher_W.ndim != 3 or teacher_W.shape[:2] != (S, teacher.p):
        raise ValueError(f"`teacher_W` must have shape (S, p_teacher, d_teacher) = ({S}, {teacher.p}, *); "
                         f"got {teacher_W.shape}.")
    if keys.shape[0] != S:
        raise ValueError(f"`keys` must hold one PRNG key per seed ({S}); got shape {keys.shape}.")
    for name, v in (("batch", batch), ("steps", steps), ("record_every", record_every), ("n_probe", n_probe)):
        check_size(name, v)
    if steps % record_every:
        raise ValueError(f"`record_every` ({record_every}) must divide `steps` ({steps}).")
    if not float(eta) > 0:
        raise ValueError(f"`eta` must be > 0; got {eta!r}.")
    (px, py), kd = _probes(module, teacher, teacher_W, keys, int(n_probe))
    args = {"frozen": None, "Wt": teacher_W, "px": px, "py": py}
    runs = {}
    for name, is_nqf in (("module", False), ("nqf", True)):
        loss = OutputLoss(module.apply, is_nqf)
        runs[name] = run_trainer(loss, W0, make_optimizer("sgd", float(eta)), num_steps=int(steps),
                           sample=_TeacherSample(module, teacher, int(batch)), key=kd, args=args,
                           record=_ProbeRecord(loss), record_every=int(record_every),
                           vmap=("params", "key", "args"), on_divergence="ignore")
    fm, fn = runs["module"].record["outputs"], runs["nqf"].record["outputs"]
    gap = relative_gap(fm, fn, time_axis=1, reference=py)
    return OnlineRun(runs["module"].steps, {k: runs[k].record["probe_loss"] for k in runs},
                     {k: runs[k].batch_loss for k in runs}, gap)


def relative_loss_gap(a, b):
    """$|L_b - L_a| / L_a$ elementwise (the module's loss ``a`` as reference): :func:`relative_gap` with
    the last axis as time."""
    a = np.asarray(a, dtype=float)
    return relative_gap(a, np.asarray(b, dtype=float), time_axis=a.ndim - 1)


class SideBySide(NamedTuple):
    """Result of :func:`train_side_by_side`; arrays ``(S, T)`` with a leading seed axis."""

    steps: np.ndarray  #: (T,) recorded steps
    train_loss: tuple  #: one (S, T) array per model
    test_loss: tuple  #: one (S, T) array per model


class _TrainTest(eqx.Module):
    loss: ModelLoss

    def __call__(self, params, args):
        return self.loss(params, args["train"], None), self.loss(params, args["test"], None)


def train_side_by_side(
    applies: tuple[Callable, ...],
    params0: tuple,
    optimizer: Any,
    train: tuple,
    test: tuple,
    steps: int,
    *,
    record_every: int = 1,
) -> SideBySide:
    r"""Train several models with one optimiser (an :class:`~nqf.training.Optimizer` or optax transformation),
    full batch, seeds vmapped (Fig. 8); each model one configuration of :func:`nqf.training.train`.

    ``applies[i](params, x)`` is model ``i``; ``params0[i]`` its initial parameters with a leading seed
    axis ``S`` on every leaf; ``train = (xs, ys)`` and ``test = (xt, yt)`` carry the same leading seed axis
    (one dataset per seed, e.g. one teacher per seed). Each model minimises
    $\frac1m\sum_\mu (f(x_\mu) - y_\mu)^2$ for ``steps`` steps; training and test losses are recorded
    every ``record_every`` steps and after the last. One compiled function per (models, optimiser, sizes).
    """
    if not isinstance(applies, tuple) or not all(callable(a) for a in applies):
        raise ValueError("`applies` must be a tuple of callables apply(params, x) (hashable: e.g. bound methods).")
    if not isinstance(params0, tuple) or len(params0) != len(applies):
        raise ValueError(f"`params0` must be a tuple with one parameter pytree per model ({len(applies)}).")
    for name, v in (("steps", steps), ("record_every", record_every)):
        check_size(name, v)
    if steps % record_every:
        raise ValueError(f"`record_every` ({record_every}) must divide `steps` ({steps}).")
    (xs, ys), (xt, yt) = train, test
    S = {np.shape(l)[0] for l in jax.tree_util.tree_leaves((params0, xs, ys, xt, yt))}
    if len(S) != 1:
        raise ValueError(f"every leaf of `params0`, `train` and `test` must carry the same leading seed axis; "
                         f"got sizes {sorted(S)}.")
    runs = [run_trainer(ModelLoss(apply), p0, optimizer, num_steps=int(steps), data=(xs, ys),
                  args={"train": (xs, ys), "test": (xt, yt)}, record=_TrainTest(ModelLoss(apply)),
                  record_every=int(record_every), vmap=("params", "data", "args"), on_divergence="ignore")
            for apply, p0 in zip(applies, params0)]
    return SideBySide(runs[0].steps, tuple(r.record[0] for r in runs), tuple(r.record[1] for r in runs))


def teacher_data(arch, teacher_Ws, keys, n_train: int, n_test: int) -> tuple[tuple, tuple]:
    r"""Inputs ``arch.sample_input`` and targets of a fixed teacher, one dataset per seed (Fig. 8).

    ``teacher_Ws`` is the teacher's weights with a leading seed axis on every leaf (any ``Ws`` accepted
    by ``arch.apply``); ``keys`` one PRNG key per seed. Targets are divided by their standard deviation
    over the seed's training set (so every seed's loss starts near 1). Returns
    ``((x_train, y_train), (x_test, y_test))``, each with a leading seed axis.
    """
    for name, v in (("n_train", n_train), ("n_test", n_test)):
        check_int(name, v, minimum=2)
    n = int(n_train) + int(n_test)

    @jax.jit
    def one(Wt, key):
        xs = jax.vmap(arch.sample_input)(jax.random.split(key, n))
        ys = jax.vmap(lambda x: arch.apply(Wt, x))(xs)
        return xs, ys / jnp.std(ys[:n_train])

    xs, ys = jax.vmap(one)(teacher_Ws, jnp.asarray(keys))
    cut = lambda a, s: jax.tree_util.tree_map(lambda l: l[:, s], a)  # noqa: E731
    return (cut(xs, slice(0, n_train)), ys[:, :n_train]), (cut(xs, slice(n_train, n)), ys[:, n_train:])


def log_loss_gap(reference, other) -> np.ndarray:
    r"""Mean over recorded steps of $|\ln L_\text{other} - \ln L_\text{reference}|$ (last axis); ``inf`` if
    either loss is not finite and positive at some step (a run that diverged)."""
    a, b = np.asarray(reference, dtype=float), np.asarray(other, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.mean(np.abs(np.log(np.where(ok, b, 1.0)) - np.log(np.where(ok, a, 1.0))), axis=-1)
    return np.where(ok.all(axis=-1), gap, np.inf)
