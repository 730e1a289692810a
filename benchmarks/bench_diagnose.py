"""``nqf.diagnose`` at the size of a real model, against training the model alone (issue 29, item 3).

    .venv/bin/python benchmarks/bench_diagnose.py [--steps 1000] [--repeats 2]

The model: a 784 -> 256 -> 10 tanh MLP without biases (an equinox Module, p = 784 + 10 = 794 parameters per
neuron, d = 256 neurons), 2,000 Gaussian inputs, targets from a rank-5 linear teacher with strengths
(1, 1/2, 1/4, 1/8, 1/16), init N(0, 1e-3^2), full-batch ``optax.sgd(0.05)``, 1,000 steps. Its (m, o, p, p) stack
of A(x) would hold 2000 x 10 x 794^2 float64 = 101 GB; diagnose evaluates the NQF through rank-two factors of
A(x) instead (``nqf.quadratic_form(model).parts``).

Measured side by side in one process, alternating, ``--repeats`` times each (the first of each is cold:
compilation included):

* **the model alone**: ``nqf.training.train`` of the model's loss (nqf.model.mse) with the same optimiser and
  steps, no records: what a user's own training loop costs;
* **diagnose**: ``nqf.diagnose(model, data, optimizer, steps)`` with default options (the prediction runs
  ``horizon = 2`` times the steps, plus the model's run, the checks and the records).

Issue 51's baseline beside them: a plain ``jax.lax.scan`` of ``optax`` updates written without nqf, in a fresh
process, compile included (``ratio_cold_to_plain``: diagnose's cold time over it). Reports wall times, their ratio
(target: at most 3), the peak resident memory of the process (``ru_maxrss``, target: at most 2.5 GB) and the load average beside each timing (the machine is shared: compare ratios of
side-by-side runs). Writes ``benchmarks/diagnose-size.json`` (commit it). Measures; asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import datetime as dt
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import equinox as eqx
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import nqf  # noqa: E402
from nqf.model import mse  # noqa: E402
from nqf.training import BatchLoss, train  # noqa: E402


def _model_loss(static, arrays, batch):
    """The model's loss (nqf.model.mse) on a batch, its array leaves trained."""
    return mse(jax.vmap(eqx.combine(arrays, static))(batch[0]), batch[1])

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from models_example import TwoLayerNet  # noqa: E402  (V tanh(U x): the tests' reader-style model)

OUT = Path(__file__).resolve().parent / "diagnose-size.json"

# issue 51's baseline: a plain jax.lax.scan of optax updates, written without nqf, in a fresh process, compile
# included (timed from before the first call of the jitted run to its result)
_PLAIN = r"""
import sys, time
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np, optax
sys.path.insert(0, {bench!r})
from bench_diagnose import problem
net, xs, ys = problem()
p0 = (net.U, net.V)
opt = optax.sgd(0.05)
def loss(p):
    out = jnp.tanh(xs @ p[0].T) @ p[1].T
    return jnp.mean(jnp.sum((out - ys) ** 2, axis=1))
"""

#: the loop every baseline times, after a setup that defines ``t0``, ``opt``, ``loss(p)`` and ``p0``: one jitted
#: ``lax.scan`` of optax updates; prints (seconds from the call: compile and run, seconds since ``t0``, first and
#: last loss)
PLAIN_SCAN = r"""
@jax.jit
def run(p):
    def step(c, _):
        p, s = c
        l, g = jax.value_and_grad(loss)(p)
        u, s = opt.update(g, s, p)
        return (optax.apply_updates(p, u), s), l
    return jax.lax.scan(step, (p, opt.init(p)), None, length={steps})
t1 = time.perf_counter()
_, ls = run(p0)
jax.block_until_ready(ls)
print(time.perf_counter() - t1, time.perf_counter() - t0, float(ls[0]), float(ls[-1]))
"""


def plain_training(steps: int) -> dict:
    """The plain-JAX/optax loop in a fresh process (compile included), with the load beside it."""
    import subprocess

    load = os.getloadavg()[0]
    code = _PLAIN.format(bench=str(Path(__file__).resolve().parent)) + PLAIN_SCAN.format(steps=steps)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    secs, _, l0, l1 = (float(v) for v in out.stdout.split())
    return {"seconds": round(secs, 2), "loss": [l0, l1], "load_before": load}


def problem(n_in=784, width=256, n_out=10, m=2000, init=1e-3, strengths=(1.0, 0.5, 0.25, 0.125, 0.0625), seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(m, n_in))
    P = np.linalg.qr(rng.normal(size=(n_in, len(strengths))))[0]
    Q = np.linalg.qr(rng.normal(size=(n_out, len(strengths))))[0]
    ys = xs @ (P * np.asarray(strengths)) @ Q.T
    net = TwoLayerNet(jnp.asarray(init * rng.normal(size=(width, n_in))), jnp.asarray(init * rng.normal(size=(n_out, width))))
    return net, jnp.asarray(xs), jnp.asarray(ys)


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    plain = plain_training(a.steps)
    print({"plain lax.scan + optax, fresh process": plain}, flush=True)
    net, xs, ys = problem()
    opt = optax.sgd(0.05)
    tr, static = eqx.partition(net, eqx.is_array)
    loss = BatchLoss(functools.partial(_model_loss, static))
    rows = []
    rep = None
    for r in range(a.repeats):
        load0 = os.getloadavg()[0]
        t = time.perf_counter()
        run = train(loss, tr, opt, num_steps=a.steps, data=(xs, ys))
        jax.block_until_ready(run.params)
        t_train = time.perf_counter() - t
        load1 = os.getloadavg()[0]
        t = time.perf_counter()
        rep = nqf.diagnose(net, (xs, ys), opt, num_steps=a.steps)
        t_diag = time.perf_counter() - t
        load2 = os.getloadavg()[0]
        rows.append({"repeat": r, "cold": r == 0, "train_s": round(t_train, 2), "diagnose_s": round(t_diag, 2),
                     "ratio": round(t_diag / t_train, 3), "load_before_train": load0, "load_before_diagnose": load1,
                     "load_after": load2, "peak_rss_gb_so_far": round(rss_gb(), 3)})
        print(rows[-1], flush=True)
    pl = rep.plateaus
    modes = [{"k": k + 1, "level": float(pl.levels[k]), "predicted": float(pl.predicted[k]),
              "measured": float(pl.module[k]), "rel_error": float(pl.module[k] / pl.predicted[k] - 1),
              "tolerance": float(pl.tolerance[k]), "valid": bool(pl.valid[k]), "within_run": bool(pl.within_run[k])}
             for k in range(pl.levels.size)]
    warm = [r for r in rows if not r["cold"]] or rows
    result = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
                    "jax": jax.__version__},
        "settings": {"model": "784 -> 256 -> 10 tanh MLP, no biases (equinox)", "samples": int(xs.shape[0]),
                     "steps": a.steps, "optimizer": "optax.sgd(0.05)", "init": 1e-3,
                     "teacher_strengths": [1.0, 0.5, 0.25, 0.125, 0.0625],
                     "dense_A_stack_gb": round(2000 * 10 * 794**2 * 8 / 1e9, 1)},
        "nqf_form": rep.run.form,
        "A_stack_formed": rep.run.As is not None,
        "rows": rows,
        "plain_training_fresh_process": plain,
        "ratio_cold_to_plain": round(rows[0]["diagnose_s"] / plain["seconds"], 3),
        "ratio_warm_median": float(np.median([r["ratio"] for r in warm])),
        "ratio_cold": rows[0]["ratio"],
        "peak_rss_gb": round(rss_gb(), 3),
        "targets": {"ratio": 3.0, "peak_rss_gb": 2.5},
        "commit": __import__("subprocess").run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                               cwd=str(Path(__file__).resolve().parents[1])).stdout.strip(),
        "cpu_reference": __import__("bench_book").cpu_reference(Path(sys.executable)),
        "report": str(rep),
        "modes": modes,
    }
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print(rep)
    print(f"ratio (warm median) {result['ratio_warm_median']:.2f}, cold {result['ratio_cold']:.2f}, "
          f"peak RSS {result['peak_rss_gb']:.2f} GB -> {a.out}")
    return result


if __name__ == "__main__":
    main()
