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

Reports wall times, their ratio (target: at most 3), the peak resident memory of the process (``ru_maxrss``,
target: at most 2 GB) and the load average beside each timing (the machine is shared: compare ratios of
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
        "ratio_warm_median": float(np.median([r["ratio"] for r in warm])),
        "ratio_cold": rows[0]["ratio"],
        "peak_rss_gb": round(rss_gb(), 3),
        "targets": {"ratio": 3.0, "peak_rss_gb": 2.0},
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
