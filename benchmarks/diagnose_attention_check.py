"""Library models (issue 51, Done-when 1): equinox attention with its heads as blocks, flax linen attention with its
head axis, an equinox Conv1d CNN with a pooled readout (``library_models.py``); every plateau end ``nqf.diagnose``
calls valid against a plain-JAX/optax loop written here without ``nqf``.

    .venv/bin/python benchmarks/diagnose_attention_check.py [--samples 120] [--steps N] [--seeds 0 1 2]

The models and their data are ``library_models.build``'s (init N(0, 1e-3^2), full-batch ``optax.sgd`` at
``LEARNING_RATE[model]``), run for ``STEPS[model]`` steps unless ``--steps`` is given (the CNN's third mode ends
near step 1,700). The own loop trains every leaf with ``jax.grad`` of the loss written out and ``optax`` in a
``lax.scan``, records the Gram matrix of the neurons (each neuron's parameters found by reshaping,
``library_models.heads``, not by nqf's packing) every ``record_every`` steps, and its plateau ends are read by the rule
(half of each level the prediction learned). Writes ``benchmarks/diagnose-attention-check.json``. Measures; asserts
nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import nqf  # noqa: E402
from nqf.solutions._plateaus import mode_plateau_ends  # noqa: E402  (the rule)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from library_models import LEARNING_RATE, MODELS, build, heads  # noqa: E402

OUT = Path(__file__).resolve().parent / "diagnose-attention-check.json"
STEPS = {"equinox": 600, "flax": 600, "cnn": 2400}  #: steps per model (each model's judged modes end within them)


def own_loop(params, f, heads, xs, ys, opt, steps, every):
    def loss(p):
        out = jax.vmap(lambda x: f(p, x))(xs)
        return jnp.mean(jnp.sum((out - ys).reshape(ys.shape[0], -1) ** 2, axis=1))

    def gram(p):
        Wt = heads(p)
        return Wt @ Wt.T

    @jax.jit
    def run(p0):
        def step(c, _):
            p, s = c
            u, s = opt.update(jax.grad(loss)(p), s, p)
            return (optax.apply_updates(p, u), s), None

        def block(c, _):
            rec = gram(c[0])
            c, _ = jax.lax.scan(step, c, None, length=every)
            return c, rec

        c, grams = jax.lax.scan(block, (p0, opt.init(p0)), None, length=steps // every)
        return jnp.concatenate([grams, gram(c[0])[None]])

    eigs = np.linalg.eigvalsh(np.asarray(run(params)))[:, ::-1]
    return np.arange(0, steps + 1, every, dtype=float), eigs


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=120)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    runs = []
    for kind, seed in [(k, s) for k in a.models for s in a.seeds]:
        opt, steps = optax.sgd(LEARNING_RATE[kind]), a.steps or STEPS[kind]
        model, apply, axes, xs, ys = build(kind, seed, a.samples)
        if apply is None:  # an equinox Module: its arrays are the parameters
            q = nqf.quadratic_form(model, neuron_axes=axes)
            rep = nqf.diagnose(q, (xs, ys), opt, num_steps=steps)
            params, static = eqx.partition(model, eqx.is_array)
            f = lambda p, x, static=static: eqx.combine(p, static)(x)  # noqa: E731
        else:
            rep = nqf.diagnose(nqf.quadratic_form(apply, neuron_axes=axes), (xs, ys), opt, num_steps=steps,
                               params=model)
            params, f = model, apply
        st, eigs = own_loop(params, f, lambda p, kind=kind: heads(kind, p), xs, ys, opt, steps, rep.run.record_every)
        pl = rep.plateaus
        own = mode_plateau_ends(st, eigs, pl.levels) if pl.levels.size else np.zeros(0)
        modes = [{"k": k + 1, "level": float(pl.levels[k]), "predicted": float(pl.predicted[k]),
                  "diagnose_measured": float(pl.module[k]), "own_loop": float(own[k]),
                  "tolerance": float(pl.tolerance[k]), "valid": bool(pl.valid[k]),
                  "own_within_tolerance": bool(abs(own[k] / pl.predicted[k] - 1) <= pl.tolerance[k])}
                 for k in range(pl.levels.size)]
        runs.append({"model": kind, "seed": seed, "steps": steps, "regime": rep.regime, "modes": modes,
                     "valid_all_within": all(m["own_within_tolerance"] for m in modes if m["valid"]),
                     "valid_misses_in_report": [m["k"] for m in modes if m["valid"] and
                                                abs(m["diagnose_measured"] / m["predicted"] - 1) > m["tolerance"]],
                     "report": str(rep)})
        print(kind, seed, rep.regime, [(m["k"], m["valid"], m["own_within_tolerance"]) for m in modes], flush=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
              "settings": vars(a), "runs": runs,
              "every_valid_prediction_within_tolerance": all(r["valid_all_within"] for r in runs),
              "valid_predictions": sum(m["valid"] for r in runs for m in r["modes"]),
              "valid_outside_tolerance_own_loop": [[r["model"], r["seed"], m["k"]] for r in runs for m in r["modes"]
                                                   if m["valid"] and not m["own_within_tolerance"]],
              "valid_misses_in_report": [[r["model"], r["seed"], k] for r in runs for k in r["valid_misses_in_report"]]}
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print("every valid prediction within its tolerance (own loop):", result["every_valid_prediction_within_tolerance"],
          "| valid outside (own loop):", result["valid_outside_tolerance_own_loop"],
          "| printed 'valid: MISSES':", result["valid_misses_in_report"])
    return result


if __name__ == "__main__":
    main()
