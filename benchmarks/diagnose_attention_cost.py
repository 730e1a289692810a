"""Where ``nqf.diagnose``'s time goes on a library model (issue 51, item 5), against training the model alone.

    .venv/bin/python benchmarks/diagnose_attention_cost.py [--model equinox|flax|cnn] [--samples 400] [--steps 3000]

The models (``library_models.py``): equinox's ``MultiheadAttention`` as self-attention (chapter 10's
``make_attention``: 4 heads of size 3, width 6, heads declared as ``nqf.structure.Blocks``), flax linen's
``MultiHeadDotProductAttention`` of the same sizes (heads on the kernels' head axis), both on ``token_teacher`` (5
tokens), and an equinox ``Conv1d`` CNN with a pooled readout on ``cnn_teacher``; init N(0, 1e-3^2), full-batch
``optax.sgd`` at ``LEARNING_RATE[model]`` (the issue's sizes: 400 samples, 3,000 steps).

* **training alone**: a plain ``jax.lax.scan`` of ``optax`` updates on the model's loss, written here without
  ``nqf``, in a fresh process, compile included (wall time of the subprocess from before ``import jax``);
* **diagnose**: ``nqf.diagnose`` with default options, in this process, under ``cProfile`` (its overhead counts
  against diagnose): the wall time of its phases (the two side-by-side runs, the A(x) stack, Theorem 1's probes, the
  fast-form search, the linearised run, the drive) and the time spent compiling.

Also a CPU reference figure (``bench_book.cpu_reference``) and the load average beside each timing (the machine
is shared). Writes the model's entry of ``benchmarks/diagnose-cost.json`` with the commit. Measures; asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "diagnose-cost.json"

_TRAIN_ALONE = r"""
import sys, time
sys.path.insert(0, {bench!r})
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import equinox as eqx, jax.numpy as jnp, optax
from library_models import LEARNING_RATE, build
model, apply, _, xs, ys = build({name!r}, 0, {m})
if apply is None:
    tr, static = eqx.partition(model, eqx.is_array)
    f = lambda tr, x: eqx.combine(tr, static)(x)
else:
    tr, f = model, apply
opt = optax.sgd(LEARNING_RATE[{name!r}])
def loss(tr):
    out = jax.vmap(lambda x: f(tr, x))(xs)
    return jnp.mean(jnp.sum((out - ys).reshape(ys.shape[0], -1) ** 2, axis=1))
p0 = tr
"""


PHASES = {  # (module file suffix, function name) -> label
    ("training/_compare.py", "compare_with_nqf"): "compare_with_nqf (model + NQF runs, parts, probes)",
    ("training/_trainer.py", "train"): "train (every optimiser run: model, NQF, linearised)",
    ("structure/_quadratic.py", "structure"): "the A(x) stack (flow reference and drive)",
    ("structure/_quadratic.py", "check"): "Theorem 1's probes",
    ("structure/_lowrank.py", "rank_two_form"): "the rank-two form search",
    ("structure/_factors.py", "low_rank_form"): "the low-rank (rank-2r) form search",
    ("structure/_quadratic.py", "parts"): "the NQF's parts (f_x(0), the form search and its factors)",
    ("solutions/_regimes.py", "linearised_run"): "the linearised run",
    ("solutions/_plateaus.py", "_drive"): "the drive",
    ("flow/_flow.py", "gradient_flow"): "the flow reference",
}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--model", default="equinox", choices=["equinox", "flax", "cnn"])
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "notebooks"))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_book import cpu_reference
    from bench_diagnose import PLAIN_SCAN

    ref = cpu_reference(Path(sys.executable))
    load0 = os.getloadavg()[0]
    code = (_TRAIN_ALONE.format(bench=str(ROOT / "benchmarks"), name=a.model, m=a.samples)
            + PLAIN_SCAN.format(steps=a.steps))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    run_s, process_s, l0, l1 = (float(v) for v in out.stdout.split())
    load1 = os.getloadavg()[0]

    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import optax

    import nqf
    from library_models import LEARNING_RATE, build

    model, apply, axes, xs, ys = build(a.model, 0, a.samples)
    q = nqf.quadratic_form(model if apply is None else apply, neuron_axes=axes)
    lowerings = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, duration, **_: lowerings.append(duration) if event == "/jax/compilation_cache/compile_requests_use_cache" or event.endswith("jaxpr_to_mlir_module_duration") else None)
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    rep = nqf.diagnose(q, (xs, ys), optax.sgd(LEARNING_RATE[a.model]), num_steps=a.steps,
                       params=None if apply is None else model)
    prof.disable()
    diag_s = time.perf_counter() - t
    load2 = os.getloadavg()[0]
    st = pstats.Stats(prof).stats
    phases = {}
    for (file, _, fn), (_, _, _, cum, _) in st.items():
        for (suffix, name), label in PHASES.items():
            if fn == name and file.endswith(suffix):
                phases[label] = round(phases.get(label, 0.0) + cum, 2)
    compile_s = sum(cum for (file, _, fn), (_, _, _, cum, _) in st.items() if fn == "backend_compile_and_load")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    result = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
        "cpu_reference": ref,
        "settings": {"model": a.model, "samples": a.samples, "steps": a.steps,
                     "optimizer": f"optax.sgd({LEARNING_RATE[a.model]})", "init": 1e-3},
        "train_alone": {"process_s": round(process_s, 2), "compiled_run_s": round(run_s, 2),
                        "loss": [l0, l1], "load_before": load0},
        "diagnose": {"seconds": round(diag_s, 2), "load_before": load1, "load_after": load2,
                     "backend_compile_s": round(compile_s, 2), "phases_cumulative_s": phases},
        "nqf_form": rep.run.form,
        "ratio": round(diag_s / process_s, 2),
        "report": str(rep),
    }
    out = Path(a.out)
    record = json.loads(out.read_text()) if out.exists() else {}
    record[a.model] = result  # one entry per model, each with its own commit and CPU reference
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "report"}, indent=1))
    return result


if __name__ == "__main__":
    main()
