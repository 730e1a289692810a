"""Library attention layers (issue 51, Done-when 1): equinox's with its heads as blocks, flax linen's with its head
axis; every plateau end ``nqf.diagnose`` calls valid against a plain-JAX/optax loop written here without ``nqf``.

    .venv/bin/python benchmarks/diagnose_attention_check.py [--samples 120] [--steps 600] [--seeds 0 1 2]

The models: chapter 10's ``make_attention`` (equinox ``MultiheadAttention``, 4 heads of 3, width 6; heads declared
as ``nqf.structure.Blocks``) and flax linen's ``MultiHeadDotProductAttention`` of the same sizes (no biases; its
kernels' head axis is the neuron axis), init N(0, 1e-3^2), 5 tokens, ``token_teacher`` targets, full-batch
``optax.sgd(0.1)``.
The own loop trains every leaf with ``jax.grad`` of the loss written out and ``optax`` in a ``lax.scan``, records
the Gram matrix of the heads (each head's rows of the q/k/v projections and columns of the output projection,
found by reshaping, not by nqf's packing) every ``record_every`` steps, and its plateau ends are read by the rule
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
sys.path.insert(0, str(ROOT / "notebooks"))
from ch10_models import make_attention, token_teacher  # noqa: E402

OUT = Path(__file__).resolve().parent / "diagnose-attention-check.json"


def _eqx_heads(p):
    m = p.mha
    h = m.num_heads
    rows = [w.weight.reshape(h, -1) for w in (m.query_proj, m.key_proj, m.value_proj)]
    o = m.output_proj.weight  # (width, h * vo): head i is columns [i vo, (i + 1) vo)
    rows.append(jnp.moveaxis(o.reshape(o.shape[0], h, -1), 1, 0).reshape(h, -1))
    return jnp.concatenate(rows, axis=1)  # (heads, p)


def _flax_heads(v):
    k = v["params"]
    h = k["out"]["kernel"].shape[0]
    rows = [jnp.moveaxis(k[n]["kernel"], 1, 0).reshape(h, -1) for n in ("query", "key", "value")]
    rows.append(k["out"]["kernel"].reshape(h, -1))
    return jnp.concatenate(rows, axis=1)


def flax_attention(seed):
    import flax.linen as nn

    att = nn.MultiHeadDotProductAttention(num_heads=4, qkv_features=12, out_features=6, use_bias=False,
                                          param_dtype=jnp.float64, dtype=jnp.float64)
    x0 = jnp.zeros((5, 6))
    v = att.init(jax.random.PRNGKey(seed), x0, x0)
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 4))
    v = jax.tree_util.tree_map(lambda a: 1e-3 * jax.random.normal(next(keys), a.shape), v)

    def apply(v, x):
        return att.apply(v, x, x)

    axes = {"params": {"query": {"kernel": 1}, "key": {"kernel": 1}, "value": {"kernel": 1}, "out": {"kernel": 0}}}
    return v, apply, axes


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
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--models", nargs="+", default=["equinox", "flax"], choices=["equinox", "flax"])
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    opt = optax.sgd(0.1)
    runs = []
    for kind, seed in [(k, s) for k in a.models for s in a.seeds]:
        xs, ys = (jnp.asarray(v) for v in token_teacher(seed + 1, a.samples))
        if kind == "equinox":
            model, axes = make_attention(jax.random.PRNGKey(seed))
            rep = nqf.diagnose(nqf.quadratic_form(model, neuron_axes=axes), (xs, ys), opt, num_steps=a.steps)
            params, static = eqx.partition(model, eqx.is_array)
            st, eigs = own_loop(params, lambda p, x: eqx.combine(p, static)(x), _eqx_heads, xs, ys, opt, a.steps,
                                rep.run.record_every)
        else:
            params, apply, axes = flax_attention(seed)
            rep = nqf.diagnose(nqf.quadratic_form(apply, neuron_axes=axes), (xs, ys), opt, num_steps=a.steps,
                               params=params)
            st, eigs = own_loop(params, apply, _flax_heads, xs, ys, opt, a.steps, rep.run.record_every)
        pl = rep.plateaus
        own = mode_plateau_ends(st, eigs, pl.levels) if pl.levels.size else np.zeros(0)
        modes = [{"k": k + 1, "level": float(pl.levels[k]), "predicted": float(pl.predicted[k]),
                  "diagnose_measured": float(pl.module[k]), "own_loop": float(own[k]),
                  "tolerance": float(pl.tolerance[k]), "valid": bool(pl.valid[k]),
                  "own_within_tolerance": bool(abs(own[k] / pl.predicted[k] - 1) <= pl.tolerance[k])}
                 for k in range(pl.levels.size)]
        runs.append({"model": kind, "seed": seed, "regime": rep.regime, "modes": modes,
                     "valid_all_within": all(m["own_within_tolerance"] for m in modes if m["valid"]),
                     "report": str(rep)})
        print(kind, seed, rep.regime, [(m["k"], m["valid"], m["own_within_tolerance"]) for m in modes], flush=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
              "settings": vars(a), "runs": runs,
              "every_valid_prediction_within_tolerance": all(r["valid_all_within"] for r in runs)}
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print("every valid prediction within its tolerance (own loop):", result["every_valid_prediction_within_tolerance"])
    return result


if __name__ == "__main__":
    main()
