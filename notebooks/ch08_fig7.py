"""Chapter 8's recipe for Fig. 7: a module of a paper table and its NQF trained side by side by full-batch Adam on a
binary digit task (:func:`nqf.compare_with_nqf`), several initialisations vmapped as lanes, with the test accuracy
of each read off the recorded probe outputs.

Every model is trained on the targets $y + f_x(0)$, so that $f_x(W) - f_x(0)$ starts at 0 next to the targets
and predicts the class by its sign (a no-op for the MLP and the CNN, where $f_x(0) = 0$)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nqf import quadratic_form
from nqf.training import Comparison, Track, compare_with_nqf, optimizer


class Fig7Run(NamedTuple):
    comparison: Comparison  #: both runs (:func:`nqf.compare_with_nqf`), lanes = initialisations
    accuracy: dict  #: ``{"module", "nqf"}`` -> ``(lanes, T)`` test accuracy at each recorded step
    f0_max: float  #: the largest $|f_x(0)|$ over the training inputs (0 for the MLP and the CNN)


def zero_outputs(arch, xs, like):
    """$f_x(0)$ of every input of ``xs``, shaped ``like`` (zeros passed as an argument: a zero constant under ``jit``
    is constant-folded)."""
    f0 = jax.jit(jax.vmap(lambda Z, x: arch.apply(Z, x), in_axes=(None, 0)))
    return np.asarray(f0(jnp.zeros((arch.p, like[1])), xs)).reshape(like[0])


def fig7_run(arch, d, data, seeds, *, tag: int, form, num_steps: int, record_every: int) -> Fig7Run:
    """Train ``arch`` with ``d`` neurons and its NQF (evaluated by ``form``, :func:`nqf.quadratic_form`) from
    $W(0) = 0.01\\,Z$, one lane per seed (``Z`` from ``fold_in(PRNGKey(seed), tag)``), by Adam at rate 1e-3 for
    ``num_steps`` steps on ``data = (x_train, y_train, x_test, y_test)`` (inputs already in the module's form),
    recording every ``record_every`` steps."""
    xtr, ytr, xte, yte = data
    W0 = 0.01 * jnp.stack([jax.random.normal(jax.random.fold_in(jax.random.PRNGKey(s), tag), (arch.p, d)) for s in seeds])
    f0_tr, f0_te = zero_outputs(arch, xtr, (ytr.shape, d)), zero_outputs(arch, xte, (yte.shape, d))
    cmp = compare_with_nqf(quadratic_form(arch, form=form), (xtr, ytr + f0_tr), optimizer("adam", 1e-3),
                           num_steps=num_steps, params=W0,
                           track=Track(("loss", "probe_loss", "outputs"), probe=xte, probe_targets=yte + f0_te,
                                       record_every=record_every))
    acc = {k: (np.sign(getattr(cmp, k)["outputs"].reshape(len(seeds), cmp.steps.size, -1) - f0_te) == yte).mean(-1)
           for k in ("module", "nqf")}
    return Fig7Run(cmp, acc, float(np.max(np.abs(f0_tr))))
