"""Issue 29's closing evidence: ``nqf.diagnose`` on six models and five regimes, each prediction against a
measurement, in one committed record.

    /work/bin/cpu .venv/bin/python benchmarks/diagnose_models.py [--skip-large] [--out PATH]

**The models** (the tests' models where they exist; default diagnose options everywhere):

* equinox: ``V tanh(U x + b)``, 4 -> 8 -> 3, init 1e-3, a 3-strength linear teacher, ``optax.sgd(0.05)``,
  800 steps (tests/test_diagnose.py's ``equinox, sgd``);
* ``apply`` with a dict: the same function as ``apply(params, x)`` on ``{"U", "b", "V"}``;
* flax linen: ``Dense(8) -> tanh -> Dense(3)``, init 1e-3, its output bias (zeros) shared, hence frozen,
  600 steps (tests/test_diagnose_flax.py);
* flax nnx: the same without the output bias, ``optax.sgd(0.05, momentum=0.5)``, 400 steps (the test's);
* 5-mode teacher: ``V sin(U x)``, 6 -> 12 -> 5, strengths (1, .6, .36, .22, .13), 1500 steps;
* the 784 -> 256 -> 10 tanh MLP of benchmarks/bench_diagnose.py (2,000 samples, 1,000 steps, sgd 0.05).

**The regimes**: init scale 1.0; ``eqx.nn.MLP`` with its default biases (and the same MLP scaled to 1e-3);
Adam; heavy-ball and Nesterov momentum 0.9; a loss averaged over outputs (``loss="mean"``).

**What is measured, and by whom.** ``diagnose`` itself trains the model (its "measured" column): the model's own
loss and optimiser through ``nqf.training.train``, independent of the NQF run, except that its plateau ends
are read with the *predicted* learned levels (half of each level, the module's rule). As a check that the
measurement is what a user's own loop gives, every model is also trained here by a plain-JAX loop written
independently of nqf (``jax.grad`` of the loss written out, ``optax`` updates in a ``lax.scan``, **every** leaf
trained, frozen ones included), and its ends are read with the same levels (column "own loop"). For the
784-wide MLP that loop is also the "model alone" timing beside diagnose's.

Per mode the record holds: the predicted end (steps), diagnose's measured end, the own loop's, the stated
tolerance (relative, ``|measured / predicted - 1| <= tolerance``; also in steps), whether the report calls the
prediction valid, and whether the measured end is within the tolerance. Writes
``benchmarks/diagnose-models.json`` (commit it) and prints the Markdown tables. Measures; asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import nqf  # noqa: E402
from nqf.solutions._plateaus import mode_plateau_ends  # noqa: E402  (the rule; not re-exported)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from models_example import TwoLayerNet, dict_apply, flax_mlps, tanh_mlp, teacher_data  # noqa: E402

OUT = Path(__file__).resolve().parent / "diagnose-models.json"


# ----------------------------------------------------------------- the models (as in the tests)
def _eqx_mlp(scale=None):
    mlp = eqx.nn.MLP(4, 3, 8, 1, activation=jnp.tanh, key=jax.random.PRNGKey(0))
    if scale is not None:
        mlp = jax.tree_util.tree_map(lambda a: scale * a if eqx.is_array(a) else a, mlp)
    axes = eqx.tree_at(lambda m: (m.layers[0].weight, m.layers[0].bias, m.layers[1].weight), mlp, (0, 0, 1))
    axes = jax.tree_util.tree_map(lambda a: a if isinstance(a, int) and not isinstance(a, bool) else None, axes)
    return mlp, axes


def cases(skip_large=False):
    """name -> (kind, model, data, optimizer, steps, diagnose keywords, own-loop loss)."""
    xs, ys = teacher_data()
    net = tanh_mlp()
    params = {"U": net.U, "b": net.b, "V": net.V}
    x5, y5 = teacher_data(m=150, n_in=6, n_out=5, s=(1.0, 0.6, 0.36, 0.22, 0.13), seed=3)
    k1, k2 = jax.random.split(jax.random.PRNGKey(4))
    sin5 = TwoLayerNet(1e-3 * jax.random.normal(k1, (12, 6)), 1e-3 * jax.random.normal(k2, (5, 12)), jnp.sin)
    (lv, lapply, laxes), (ns, napply, naxes) = flax_mlps()
    mlp1, mlp_axes = _eqx_mlp()
    mlp3, _ = _eqx_mlp(1e-3)
    out = {}
    if not skip_large:
        from bench_diagnose import problem

        big, bx, by = problem()
        out["784 -> 256 -> 10 MLP"] = ("model", big, (bx, by), optax.sgd(0.05), 1000, {}, "sum")
    out.update({
        "equinox": ("model", net, (xs, ys), optax.sgd(0.05), 800, {}, "sum"),
        "apply with a dict": ("model", params, (xs, ys), optax.sgd(0.05), 800,
                              {"apply": dict_apply, "neuron_axes": {"U": 0, "b": 0, "V": 1}}, "sum"),
        "flax linen": ("model", lv, (xs, ys), optax.sgd(0.05), 600, {"apply": lapply, "neuron_axes": laxes}, "sum"),
        "flax nnx": ("model", ns, (xs, ys), optax.sgd(0.05, momentum=0.5), 400,
                     {"apply": napply, "neuron_axes": naxes}, "sum"),
        "5-mode teacher": ("model", sin5, (x5, y5), optax.sgd(0.05), 1500, {}, "sum"),
        "init 1.0": ("regime", tanh_mlp(init=1.0), (xs, ys), optax.sgd(0.05), 400, {}, "sum"),
        "eqx.nn.MLP, default biases": ("regime", mlp1, (xs, ys), optax.sgd(0.05), 300, {"neuron_axes": mlp_axes},
                                       "sum"),
        "eqx.nn.MLP, biases, scaled to 1e-3": ("regime", mlp3, (xs, ys), optax.sgd(0.05), 800,
                                               {"neuron_axes": mlp_axes}, "sum"),
        "adam 3e-3": ("regime", net, (xs, ys), optax.adam(3e-3), 800, {}, "sum"),
        "momentum 0.9 (sgd 0.005)": ("regime", net, (xs, ys), optax.sgd(0.005, momentum=0.9), 800, {}, "sum"),
        "nesterov 0.9 (sgd 0.005)": ("regime", net, (xs, ys), optax.sgd(0.005, momentum=0.9, nesterov=True), 800,
                                     {}, "sum"),
        "mean over outputs, loss='mean'": ("regime", net, (xs, ys), optax.sgd(0.05), 2400, {"loss": "mean"},
                                           "mean"),
        "mean over outputs, loss not given": ("regime", net, (xs, ys), optax.sgd(0.05), 2400, {}, "mean"),
    })
    return out


# ----------------------------------------------------------------- a user's own loop, written without nqf
def own_loop(model, apply, axes, data, opt, steps, every, loss_kind):
    """Train every leaf of the model with ``opt`` (plain JAX + optax), recording the Gram matrix of the packed
    neuron weights (leaves with a neuron axis) every ``every`` steps; returns (steps, eigenvalues descending, loss)."""
    xs, ys = data
    if apply is None:
        params, static = eqx.partition(model, eqx.is_array)
        f = lambda p, x: eqx.combine(p, static)(x)  # noqa: E731
        if axes is None:
            axes = model.neuron_axes()
    else:
        params, f = model, apply

    def outputs(p):
        return jax.vmap(lambda x: f(p, x))(xs)

    def loss(p):
        r = jnp.reshape(outputs(p) - ys, (ys.shape[0], -1))
        return jnp.mean(jnp.sum(r**2, axis=1)) if loss_kind == "sum" else jnp.mean(r**2)

    def gram(p):
        cols = []

        def take(a, leaf):
            if a is not None:
                v = jnp.moveaxis(leaf, a, 0)
                cols.append(jnp.reshape(v, (v.shape[0], -1)))
            return None

        jax.tree_util.tree_map(take, axes, p, is_leaf=lambda v: v is None)
        Wt = jnp.concatenate(cols, axis=1)  # (d, p): one row per neuron
        return Wt @ Wt.T

    @jax.jit
    def run(p0):
        def step(c, _):
            p, s = c
            g = jax.grad(loss)(p)
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), None

        def block(c, _):
            rec = (gram(c[0]), loss(c[0]))
            c, _ = jax.lax.scan(step, c, None, length=every)
            return c, rec

        c, (grams, losses) = jax.lax.scan(block, (p0, opt.init(p0)), None, length=steps // every)
        return (jnp.concatenate([grams, gram(c[0])[None]]), jnp.concatenate([losses, loss(c[0])[None]]))

    grams, losses = jax.block_until_ready(run(params))
    eigs = np.linalg.eigvalsh(np.asarray(grams))[:, ::-1]
    return np.arange(0, steps + 1, every, dtype=float), eigs, np.asarray(losses)


# ----------------------------------------------------------------- one case
def _f(v):
    v = float(v)
    return v if np.isfinite(v) else None


def run_case(name, kind, model, data, opt, steps, kw, loss_kind):
    load0 = os.getloadavg()
    t = time.perf_counter()
    q = (nqf.quadratic_form(kw["apply"], neuron_axes=kw["neuron_axes"]) if "apply" in kw else
         nqf.quadratic_form(model, neuron_axes=kw["neuron_axes"]) if "neuron_axes" in kw else model)
    loss = nqf.model.MSE(outputs="mean") if kw.get("loss") == "mean" else nqf.model.mse
    rep = nqf.diagnose(q, data, opt, num_steps=steps, params=model if "apply" in kw else None, loss=loss)
    t_diag = time.perf_counter() - t
    r, pl = rep.run, rep.plateaus
    t = time.perf_counter()
    own_steps, own_eigs, own_loss = own_loop(model, kw.get("apply"), kw.get("neuron_axes"), data, opt, steps,
                                             r.record_every, loss_kind)
    t_own = time.perf_counter() - t
    load1 = os.getloadavg()
    K = pl.levels.size
    own = mode_plateau_ends(own_steps, own_eigs[:, : r.eigs_module.shape[1]], pl.levels) if K else np.zeros(0)
    modes = []
    for k in range(K):
        err = pl.module[k] / pl.predicted[k] - 1
        own_err = own[k] / pl.predicted[k] - 1
        modes.append({
            "k": k + 1, "level": float(pl.levels[k]), "predicted": _f(pl.predicted[k]), "measured": _f(pl.module[k]),
            "own_loop": _f(own[k]), "flow": _f(pl.flow[k]), "lag": _f(pl.lag[k]),
            "rel_error": _f(err), "own_rel_error": _f(own_err), "tolerance": float(pl.tolerance[k]),
            "tolerance_steps": _f(pl.tolerance[k] * pl.predicted[k]),
            "abs_error_steps": _f(pl.module[k] - pl.predicted[k]),
            "valid": bool(pl.valid[k]), "within_run": bool(pl.within_run[k]),
            "within_tolerance": bool(np.isfinite(err) and abs(err) <= pl.tolerance[k]),
            "own_within_tolerance": bool(np.isfinite(own_err) and abs(own_err) <= pl.tolerance[k]),
        })
    L = np.asarray(r.comparison.module["loss"])
    text = str(rep)
    return {
        "name": name, "kind": kind, "steps": steps, "optimizer": r.optimizer.describe(), "loss": r.loss,
        "form": r.form, "A_stack_formed": r.As is not None, "frozen": [[p, list(s)] for p, s in r.frozen],
        "quadratic_error_W0": r.quadratic_error, "not_small": bool(rep.not_small), "threshold": r.threshold,
        "record_every": r.record_every, "window": _f(rep.window), "valid_until": _f(rep.valid_until_steps),
        "diverged": r.diverged, "model_loss_first_last": [float(L[0]), float(L[-1])],
        "own_loop_loss_first_last": [float(own_loss[0]), float(own_loss[-1])],
        "modes": modes, "report": text, "diagnose_s": round(t_diag, 2), "own_loop_s": round(t_own, 2),
        "load_before": list(load0), "load_after": list(load1),
        "peak_rss_gb_after": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3),
    }


# ----------------------------------------------------------------- verdicts of the regime cases
def judge(c, by_name):
    """Is the regime's verdict right? (what the report must say, and whether it does)."""
    t, modes = c["report"], c["modes"]
    valid = [m for m in modes if m["valid"]]
    all_within = all(m["within_tolerance"] for m in valid)
    learns = c["own_loop_loss_first_last"][1] < 0.2 * c["own_loop_loss_first_last"][0]
    n = c["name"]
    if n in ("init 1.0", "eqx.nn.MLP, default biases"):
        need = {"says W(0) is not small, with the number": c["not_small"] and
                f"W(0) is not small: the model is {c['quadratic_error_W0']:.3g}" in t,
                "calls no prediction valid": not valid,
                "does not say 'no mode is learned' (the model learns: loss falls 5x)":
                    "no mode is learned" not in t if learns else True}
        if "biases" in n:
            need["lists the frozen output bias"] = ".layers[1].bias (3,)" in t and "frozen (no neuron axis" in t
    elif n == "eqx.nn.MLP, biases, scaled to 1e-3":
        need = {"lists the frozen output bias": ".layers[1].bias (3,)" in t,
                "W(0) small (quadratic regime)": not c["not_small"],
                "a valid prediction exists": bool(valid), "every valid prediction within tolerance": all_within}
    elif n.startswith(("adam", "momentum", "nesterov")):
        need = {"optimiser recognised": ("not of the SGD family" in t) if n.startswith("adam")
                else ("momentum 0.9" in t),
                "a valid prediction exists": bool(valid), "every valid prediction within tolerance": all_within,
                "own loop's ends also within tolerance": all(m["own_within_tolerance"] for m in valid)}
    elif n == "mean over outputs, loss='mean'":
        s = by_name.get("equinox")
        ratio = (modes[0]["predicted"] / s["modes"][0]["predicted"]) if s and modes else None
        need = {"prints the convention (mean over samples and outputs)": "mean over samples and over the 3 outputs" in t,
                "plateaus ~o = 3 times later than the summed loss's (mode 1)": ratio is not None and
                    abs(ratio / 3 - 1) <= 0.1,
                "a valid prediction exists": bool(valid), "every valid prediction within tolerance": all_within,
                "the user's own mean-loss loop within tolerance": all(m["own_within_tolerance"] for m in valid)}
        c["mode1_ratio_to_sum"] = ratio
    elif n == "mean over outputs, loss not given":
        # the user trains with a mean loss but calls diagnose with the default: the report must print the summed
        # convention, and (being a different loss) its prediction does not match the user's own loop
        own_ratio = [m["own_loop"] / m["predicted"] for m in modes if m["own_loop"] and m["predicted"]]
        c["own_over_predicted"] = own_ratio
        need = {"prints the summed convention it assumed": "summed over the 3 outputs" in t,
                "the user's mean-loss loop is ~3x later than the default prediction (so the printed convention "
                "is what tells the user)": bool(own_ratio) and abs(own_ratio[0] / 3 - 1) <= 0.15}
    else:
        return None
    need = {k: bool(v) for k, v in need.items()}
    return {"checks": need, "right": all(need.values())}


# ----------------------------------------------------------------- tables
def md_tables(result):
    rows = ["| model | k | predicted | measured (diagnose) | own loop | tolerance (rel / steps) | valid? | within? "
            "| own loop within? |", "|---|---|---|---|---|---|---|---|---|"]

    def num(v):
        return "-" if v is None else f"{v:.1f}"

    def sig(v):
        return "-" if v is None else f"{v:+.3f}"

    for c in result["cases"]:
        if not c["modes"]:
            rows.append(f"| {c['name']} | - | no learned mode predicted | | | | | | |")
        for m in c["modes"]:
            note = "yes" if m["valid"] else ("after the run" if not m["within_run"] else "no (beyond range)")
            rows.append(f"| {c['name']} | {m['k']} | {num(m['predicted'])} | {num(m['measured'])} "
                        f"({sig(m['rel_error'])}) | {num(m['own_loop'])} | +-{m['tolerance']:.3f} / "
                        f"+-{num(m['tolerance_steps'])} | {note} | {'yes' if m['within_tolerance'] else 'NO'} | "
                        f"{'yes' if m['own_within_tolerance'] else 'NO'} ({sig(m['own_rel_error'])}) |")
    reg = ["| regime | verdict right? | checks | quadratic error at W(0) | frozen |", "|---|---|---|---|---|"]
    for c in result["cases"]:
        if c.get("verdict"):
            chk = "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in c["verdict"]["checks"].items())
            fr = ", ".join(p for p, _ in c["frozen"]) or "none"
            reg.append(f"| {c['name']} | {'yes' if c['verdict']['right'] else 'NO'} | {chk} | "
                       f"{c['quadratic_error_W0']:.3g} | {fr} |")
    return "\n".join(rows), "\n".join(reg)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-large", action="store_true", help="leave out the 784 -> 256 -> 10 MLP")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "nqf"], cwd=ROOT, capture_output=True, text=True).stdout
    load_start, t0 = os.getloadavg(), time.perf_counter()
    out = []
    for name, (kind, model, data, opt, steps, kw, lk) in cases(a.skip_large).items():
        c = run_case(name, kind, model, data, opt, steps, kw, lk)
        print(f"{name}: diagnose {c['diagnose_s']} s, own loop {c['own_loop_s']} s, load {c['load_after'][0]:.2f}",
              flush=True)
        out.append(c)
        Path(a.out).write_text(json.dumps({"partial": True, "cases": out}, indent=1) + "\n")  # a crash keeps these
    by_name = {c["name"]: c for c in out}
    for c in out:
        c["verdict"] = judge(c, by_name)
    valid = [(c["name"], m) for c in out if c["kind"] == "model" for m in c["modes"] if m["valid"]]
    result = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit, "nqf_sources_modified": bool(dirty.strip()),
        "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
                    "jax": jax.__version__, "optax": optax.__version__, "equinox": eqx.__version__},
        "load_before": list(load_start), "load_after": list(os.getloadavg()),
        "runtime_s": round(time.perf_counter() - t0, 1),
        "summary": {
            "models": sum(c["kind"] == "model" for c in out),
            "valid_predictions": len(valid),
            "valid_within_tolerance": sum(m["within_tolerance"] for _, m in valid),
            "valid_outside_tolerance": [[n, m["k"]] for n, m in valid if not m["within_tolerance"]],
            "valid_own_loop_outside_tolerance": [[n, m["k"]] for n, m in valid if not m["own_within_tolerance"]],
            "regimes_right": [c["name"] for c in out if c.get("verdict") and c["verdict"]["right"]],
            "regimes_wrong": [c["name"] for c in out if c.get("verdict") and not c["verdict"]["right"]],
        },
        "cases": out,
    }
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    t1, t2 = md_tables(result)
    print(t1, "\n", t2, sep="\n")
    print(json.dumps(result["summary"], indent=1))
    print(f"runtime {result['runtime_s']} s, load {load_start[0]:.2f} -> {result['load_after'][0]:.2f} -> {a.out}")
    return result


if __name__ == "__main__":
    main()
