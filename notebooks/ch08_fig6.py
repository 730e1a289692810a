"""Chapter 8's recipe for Fig. 6: online SGD of a module and of its NQF (Eq. 2, matrix-free) from the same $W(0)$ on
the same fresh minibatches of a teacher of the same architecture, seeds vmapped: two runs of :func:`nqf.training.train`
(``sample``: a fresh minibatch every step), loss :class:`nqf.training.OutputLoss` (Eq. 26)."""

from typing import NamedTuple

import equinox as eqx
import jax
import numpy as np

from nqf.architectures import Architecture
from nqf.model import mse
from nqf.training import OutputLoss, optimizer, relative_gap, train


def draw(arch, teacher, Wt, key, n):
    """n inputs ``arch.sample_input`` and their targets ``teacher.apply(Wt, x)``."""
    xs = jax.vmap(arch.sample_input)(jax.random.split(key, n))
    return xs, jax.vmap(lambda x: teacher.apply(Wt, x))(xs)


class TeacherSample(eqx.Module):
    module: Architecture
    teacher: Architecture
    batch: int = eqx.field(static=True)

    def __call__(self, key, args):
        return draw(self.module, self.teacher, args["Wt"], key, self.batch)


class ProbeRecord(eqx.Module):
    loss: OutputLoss

    def __call__(self, W, args):
        pred = self.loss.predict(W, args, args["px"])
        return {"outputs": pred, "probe_loss": mse(pred, args["py"])}


@eqx.filter_jit
def probes(module, teacher, teacher_W, keys, n_probe):
    """Per seed: a probe set drawn from the first half of its key, and the second half (for the minibatches)."""
    return jax.vmap(lambda Wt, k: (draw(module, teacher, Wt, jax.random.split(k)[0], n_probe), jax.random.split(k)[1]))(
        teacher_W, keys)


class OnlineRun(NamedTuple):
    steps: np.ndarray  #: (T,) recorded steps
    probe_loss: dict  #: {"module", "nqf"} -> (S, T) MSE on the seed's probe set
    batch_loss: dict  #: {"module", "nqf"} -> (S, num_steps) MSE on each step's minibatch, before the step
    output_gap: np.ndarray  #: (S, T) ||f_module - f_NQF|| / ||y|| on the probe set


def online_teacher_student(module, teacher, W0, teacher_W, *, key, learning_rate, batch, num_steps, record_every,
                           n_probe) -> OnlineRun:
    """Seed s (of S = len(W0)) has its init W0[s] (p, d), teacher weights teacher_W[s] and key split(key, S)[s], from
    which it draws its probe set and, at every step, its minibatch."""
    (px, py), kd = probes(module, teacher, teacher_W, jax.random.split(key, len(W0)), n_probe)
    args = {"frozen": None, "Wt": teacher_W, "px": px, "py": py}
    runs = {name: train(OutputLoss(module.apply, is_nqf), W0, optimizer("sgd", float(learning_rate)),
                        num_steps=num_steps, sample=TeacherSample(module, teacher, batch), key=kd, args=args,
                        record=ProbeRecord(OutputLoss(module.apply, is_nqf)), record_every=record_every,
                        vmap=("params", "key", "args"), on_divergence="ignore")
            for name, is_nqf in (("module", False), ("nqf", True))}
    gap = relative_gap(runs["module"].record["outputs"], runs["nqf"].record["outputs"], time_axis=1, reference=py)
    return OnlineRun(runs["module"].steps, {k: r.record["probe_loss"] for k, r in runs.items()},
                     {k: r.batch_loss for k, r in runs.items()}, gap)
