"""Chapter 8's recipe for Fig. 6: online SGD of a module and of its NQF (Eq. 2, matrix-free) from the same $W(0)$ on
the same fresh minibatches of a teacher of the same architecture, every run vmapped in one compiled scan.

Each run has its own seed, from which it draws its teacher, its initialisation, its probe set, its minibatch stream
and (for a module with a readout, ``readout=True``) its own Gaussian readout $c \\sim \\mathcal N(0, I_D)$, shared by
teacher and student. Such a module is built with the identity readout (``c = I_D``: the ``D`` outputs
$g(W, x)$) and contracted with the run's $c$: $f = c^\\top g(W, x)$; the NQF is linear in the readout too, so
$\\mathrm{NQF}(f) = c^\\top\\mathrm{NQF}(g)$. Module and NQF are trained in one :func:`nqf.training.train` on the pair
$(W_\\text{module}, W_\\text{NQF})$ with the sum of their losses (plain SGD on a sum of losses of disjoint parameters is
the two SGD runs, exactly), and the per-run learning rate multiplies the loss (plain SGD at rate 1 on
$\\eta\\,\\mathcal L$ is SGD at rate $\\eta$ on $\\mathcal L$, exactly), so runs at different rates share one program.
At every step the record holds the two probe losses and the two gaps on the probe set, so the agreement window is
read to one step."""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from nqf import quadratic_form
from nqf.architectures import Architecture
from nqf.model import mse
from nqf.training import Agreement, Runs, Stream, optimizer, train
from nqfbook.kit import SeedMean, seed_mean_reading


class Pair(eqx.Module):
    """The module (``nqf=False``) or its NQF (``nqf=True``) of ``arch``, contracted with the run's readout
    ``args["c"]`` when ``readout``."""

    arch: Architecture
    readout: bool = eqx.field(static=True)
    fast: bool = eqx.field(static=True, default=False)

    def predict(self, W, args, xs, *, nqf: bool):
        # the NQF is a model called like the module (Eq. 2): matrix-free, or through the architecture's closed form
        # f_x(0) + Tr[W W^T A(x)] when `fast` (checked in the tests)
        model = quadratic_form(self.arch, form="auto" if self.fast else "matrix-free") if nqf else self.arch.apply
        out = jax.vmap(lambda x: model(W, x))(xs)
        return out @ args["c"] if self.readout else out

    def teacher(self, args, xs):
        return self.predict(args["Wt"], args, xs, nqf=False)


class PairLoss(eqx.Module):
    pair: Pair

    def __call__(self, params, batch, args):
        xb, yb = batch
        Wm, Wn = params
        lm = mse(self.pair.predict(Wm, args, xb, nqf=False), yb)
        ln = mse(self.pair.predict(Wn, args, xb, nqf=True), yb)
        return args["eta"] * (lm + ln)


class TeacherSample(eqx.Module):
    pair: Pair
    batch: int = eqx.field(static=True)

    def __call__(self, key, args):
        xs = jax.vmap(self.pair.arch.sample_input)(jax.random.split(key, self.batch))
        return xs, self.pair.teacher(args, xs)


class ProbeRecord(eqx.Module):
    pair: Pair

    def __call__(self, params, args):
        Wm, Wn = params
        px, py = args["px"], args["py"]
        fm, fn = self.pair.predict(Wm, args, px, nqf=False), self.pair.predict(Wn, args, px, nqf=True)
        lm, ln = mse(fm, py), mse(fn, py)
        return {"module": lm, "nqf": ln, "output_gap": jnp.linalg.norm(fm - fn) / jnp.linalg.norm(py),
                "loss_gap": jnp.abs(ln - lm) / lm}


class OnlineRun(NamedTuple):
    steps: np.ndarray  #: (T,) recorded steps (every step: 0, 1, ..., num_steps)
    probe_loss: dict  #: {"module", "nqf"} -> (S, T) MSE on the run's probe set
    output_gap: np.ndarray  #: (S, T) ||f_module - f_NQF|| / ||y|| on the probe set
    loss_gap: np.ndarray  #: (S, T) |L_NQF - L_module| / L_module on the probe set
    c_norm2: np.ndarray  #: (S,) |c|^2 of each run's readout (nan without a readout)
    diverged: np.ndarray  #: (S,) bool: a loss became non-finite


def run_inputs(arch: Architecture, seed: int, *, d: int, eps: float, n_probe: int, readout: bool):
    """What run ``seed`` draws from ``PRNGKey(seed)``: initialisation ``eps * N(0, 1)`` (p, d), teacher ``N(0, 1)``
    (p, d), readout ``N(0, I_D)`` (zeros(()) without a readout), probe inputs and the key of its minibatch stream."""
    return _inputs(arch, jnp.asarray([int(seed)]), d=d, eps=eps, n_probe=n_probe, readout=readout)


@eqx.filter_jit
def _inputs(arch, seeds, *, d, eps, n_probe, readout):
    def one(seed):
        kW, kT, kC, kP, kD = jax.random.split(jax.random.PRNGKey(seed), 5)
        W0 = eps * jax.random.normal(kW, (arch.p, d))
        Wt = jax.random.normal(kT, (arch.p, d))
        c = jax.random.normal(kC, (arch.outputs,)) if readout else jnp.zeros(())
        px = jax.vmap(arch.sample_input)(jax.random.split(kP, n_probe))
        return W0, Wt, c, px, kD
    return jax.vmap(one)(seeds)


def online_teacher_student(arch: Architecture, seeds, learning_rates, *, d: int, eps: float, batch: int,
                           num_steps: int, n_probe: int, readout: bool = False, fast: bool = False) -> OnlineRun:
    r"""Run ``i`` has seed ``seeds[i]`` (:func:`run_inputs`) and learning rate ``learning_rates[i]``; all runs are
    vmapped in one compiled scan. With ``readout``, ``arch`` must have the identity readout (``arch.outputs = D``
    outputs) and each run draws its own ``c``. ``fast``: the NQF through ``arch.quadratic`` (its closed form of
    $\mathrm{Tr}[WW^\top A(x)]$) plus the output at zero weights, instead of the matrix-free second derivative."""
    seeds = [int(s) for s in seeds]
    etas = np.asarray(learning_rates, dtype=float)
    if etas.shape != (len(seeds),):
        raise ValueError(f"learning_rates: one per seed ({len(seeds)}), got shape {etas.shape}")
    pair = Pair(arch, readout, fast)
    W0, Wt, c, px, keys = _inputs(arch, jnp.asarray(seeds), d=d, eps=eps, n_probe=n_probe, readout=readout)
    args = {"Wt": Wt, "px": px, "eta": jnp.asarray(etas), "c": c}
    args["py"] = jax.vmap(lambda a: pair.teacher(a, a["px"]))(args)
    res = train(PairLoss(pair), (W0, W0), optimizer("sgd", 1.0), num_steps=num_steps,
                data=Stream(TeacherSample(pair, batch), keys), args=args, record=ProbeRecord(pair),
                runs=Runs(1, ("params", "data", "args"), "ignore"))
    rec = res.record
    c2 = np.sum(np.asarray(c) ** 2, axis=-1) if readout else np.full(len(seeds), np.nan)
    diverged = res.diverged | ~np.all(np.isfinite(rec["module"]) & np.isfinite(rec["nqf"]), axis=-1)
    return OnlineRun(res.steps, {"module": rec["module"], "nqf": rec["nqf"]}, rec["output_gap"], rec["loss_gap"],
                     c2, np.asarray(diverged))


def windows(run: OnlineRun, threshold: float, *, metric: str) -> np.ndarray:
    """Per run: the agreement window, :meth:`nqf.training.Agreement.window` of the gap (``metric`` ``"loss"`` or
    ``"output"``; a non-finite gap has parted; ``inf``: never), then one documented censoring step: a window that
    never ends within the run counts as the run's length (a lower bound); ``nan`` for a diverged run (not judged).
    A non-finite gap occurs only in diverged runs (Fig. 6 at quick and at full)."""
    gap = run.loss_gap if metric == "loss" else run.output_gap
    w = np.minimum(Agreement(threshold).window(run.steps, gap), float(run.steps[-1]))
    return np.where(run.diverged, np.nan, w)


def mean_window(run: OnlineRun, threshold: float, *, metric: str, seeds, grid: int = 1) -> SeedMean:
    """The seed-mean reading of the window, as Fig. 6 (mean of 5 runs) is read: the agreement window of the gap between
    the seed-mean probe losses of module and NQF (``metric="loss"``: $|\\bar L_\\text{NQF} - \\bar L_\\text{module}|/
    \\bar L_\\text{module}$, the two curves the figure plots), or of the seed-mean output gap (``"output"``), read on
    every ``grid``-th step, censored at the run's length as :func:`windows`; diverged runs are left out of the mean
    (:func:`nqfbook.kit.seed_mean_reading`, jackknife standard error over runs)."""
    agree, end = Agreement(threshold), float(run.steps[-1])
    steps = run.steps[::grid]

    def read(*curves):
        gap = np.abs(curves[1] - curves[0]) / curves[0] if metric == "loss" else curves[0]
        return min(float(agree.window(steps, gap)), end)

    curves = (run.probe_loss["module"], run.probe_loss["nqf"]) if metric == "loss" else run.output_gap
    return seed_mean_reading(curves, read, seeds=seeds, diverged=run.diverged, grid=grid)


def split_runs(run: OnlineRun, sizes) -> list:
    """The runs of one call in consecutive groups of ``sizes`` runs (vmapped together, read apart)."""
    edges = np.cumsum([0, *[int(n) for n in sizes]])
    if edges[-1] != run.diverged.size:
        raise ValueError(f"sizes: they must add up to the {run.diverged.size} runs, got {list(sizes)}")
    return [OnlineRun(run.steps, {k: v[a:b] for k, v in run.probe_loss.items()}, run.output_gap[a:b],
                      run.loss_gap[a:b], run.c_norm2[a:b], run.diverged[a:b]) for a, b in zip(edges[:-1], edges[1:])]
