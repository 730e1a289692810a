"""Chapter 9's recipes for the deep NQF: Theorem 14 checked as chapter 3 checked Theorem 2 (:func:`theorem14`), and
Theorem 15 (:func:`theorem15`) through full-batch GD on the weights of a deep NQF with one learning rate per layer (a
compressed model runs at $\\eta\\,d_l/d'_l$), one run of :func:`nqf.training.train` recording its outputs. The
comparisons are read on the host (NumPy) or in one compiled function, never op by op on the device."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from nqf.model import compress_statistics, deep_nqf_apply, deep_nqf_loss, layer_statistics, scale_forms
from nqf.training import Minibatches, Optimizer, Record, optimizer, train
from nqf.updates import deep_nqf_sgd, same_statistics, weights_from_statistics


def layerwise_sgd(learning_rate):
    """Plain GD with learning rate ``learning_rate[l]`` for the ``l``-th leaf of a tuple of weights."""

    def update(grads, state, params=None):
        return tuple(jax.tree_util.tree_map(lambda g, l=l: -learning_rate[l] * g, gl) for l, gl in enumerate(grads)), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


class DeepLoss(eqx.Module):
    forms: tuple = eqx.field(static=True)

    def __call__(self, Ws, batch, args):
        return deep_nqf_loss(layer_statistics(Ws), self.forms, *args)


class DeepOutputs(eqx.Module):
    forms: tuple = eqx.field(static=True)

    def __call__(self, Ws, args):
        return jax.vmap(lambda x: deep_nqf_apply(Ws, self.forms, x))(args[0])


def deep_nqf_gd(Ws0, forms, xs, ys, *, learning_rates, num_steps):
    """GD from the weights ``Ws0`` (one per layer) on the loss of the deep NQF of ``forms`` at ``(xs, ys)``, rate
    ``learning_rates[l]`` for layer l (traced: a new set compiles nothing); the outputs on ``xs`` before every step."""
    opt = Optimizer(layerwise_sgd, {"learning_rate": jnp.asarray([float(e) for e in learning_rates])}, ())
    res = train(DeepLoss(tuple(forms)), tuple(Ws0), opt, num_steps=num_steps, args=(xs, jnp.asarray(ys)),
                record=DeepOutputs(tuple(forms)))
    return jnp.asarray(res.record[:-1])


class StatsLoss(eqx.Module):
    """The deep NQF's loss on a minibatch ``(xs, ys)`` (rows of the data), in the weights."""

    forms: tuple = eqx.field(static=True)

    def __call__(self, Ws, batch, args):
        return deep_nqf_loss(layer_statistics(Ws), self.forms, *batch)


def _max_dev(u, v) -> float:
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(jax.tree_util.tree_leaves(u), jax.tree_util.tree_leaves(v)))


@eqx.filter_jit
def _forms_deviation(arch, Ws, xs):
    """Largest relative |form(M, mu, h) - Tr[M A(h)]| over the inputs and the layers (the dense structures)."""

    def one(x):
        h, dev = x, jnp.zeros(())
        for (M, mu), form, structure in zip(layer_statistics(Ws), arch.forms, arch.structures):
            new = form(M, mu, h)
            dev = jnp.maximum(dev, jnp.max(jnp.abs(new - jnp.einsum("...ij,ji->...", structure(h), M)))
                              / jnp.max(jnp.abs(new)))
            h = new
        return dev

    return jnp.max(jax.vmap(one)(xs))


def _weights_and_inputs(arch, widths, kW, kX, m, scale):
    """Weights ``scale * N(0, 1)`` per layer (keys ``split(kW, layers)``) and ``m`` inputs (keys ``split(kX, m)``)."""
    W = tuple(scale * jax.random.normal(k, (p, d)) for k, p, d in zip(jax.random.split(kW, len(arch.ps)), arch.ps,
                                                                       widths))
    return W, jax.vmap(arch.sample_input)(jax.random.split(kX, m))


@eqx.filter_jit
def _theorem14_data(arch, widths, key, m, batch, num_steps, scale):
    """Theorem 14's draws from ``key`` in one compiled program (op by op, each would compile on its own)."""
    kW, kX, kB = jax.random.split(key, 3)
    Wa, xs = _weights_and_inputs(arch, widths, kW, kX, m, scale)
    ys = jnp.tanh(jax.vmap(lambda x: arch.apply(Wa, x))(xs) * 5.0)  # any targets will do
    return Wa, xs, ys, jax.random.randint(kB, (num_steps, batch), 0, m)


@eqx.filter_jit
def _theorem15_data(arch, wide, key, m, scale):
    """Theorem 15's draws from ``key`` in one compiled program."""
    W, xs = _weights_and_inputs(arch, wide, *jax.random.split(key), m, scale)
    return W, xs, jnp.sin(xs[:, 0]), layer_statistics(W)


def theorem14(arch, widths, *, key, m: int, batch: int, num_steps: int, eta: float, scale: float = 0.3,
              n_forms: int = 3) -> dict:
    r"""Theorem 14 for the deep module ``arch`` at ``widths``: weights $W_a \sim \mathcal N(0, \mathrm{scale}^2)$
    and $W_b$ with the same per-layer $(M, \mu)$ (``same_statistics``), ``m`` inputs and targets
    $\tanh(5 f(W_a, x))$, minibatches of ``batch`` rows; SGD at ``eta`` on both weight sets, and Eqs. 222-223
    (``nqf.updates.deep_nqf_sgd``) on the order parameters. Returns the relative deviations ``same`` (the two
    weights' runs) and ``update`` (Eqs. 222-223 against the weights' run), how far the order parameters moved
    (``moved``), the largest neuron change between $W_a$ and $W_b$ (``neurons``), and Def. 2's forms against
    $\mathrm{Tr}[MA_k]$ of the dense structures on the first ``n_forms`` inputs (``forms``)."""
    Wa, xs, ys, batches = _theorem14_data(arch, tuple(widths), key, m, batch, num_steps, scale)
    Wb = tuple(same_statistics(W, seed=10 + l) for l, W in enumerate(Wa))
    runs = [train(StatsLoss(tuple(arch.forms)), W, optimizer("sgd", eta), num_steps=num_steps,
                  data=Minibatches((xs, ys), batches), record=Record(layer_statistics)).record for W in (Wa, Wb)]
    stat = deep_nqf_sgd(layer_statistics(Wa), arch.forms, xs, ys, batches, eta=eta, widths=widths)
    runs, stat = jax.tree_util.tree_map(np.asarray, (runs, stat))
    top = max(float(np.max(np.abs(a))) for a in jax.tree_util.tree_leaves(runs[0]))
    moved = max(float(np.max(np.abs(a[-1] - a[0]))) for a in jax.tree_util.tree_leaves(runs[0]))
    return dict(same=_max_dev(runs[0], runs[1]) / top, update=_max_dev(runs[0], stat) / top, moved=moved / top,
                neurons=_max_dev(Wa, Wb),
                forms=float(_forms_deviation(arch, Wa, jax.tree_util.tree_map(lambda a: np.asarray(a)[:n_forms], xs))))


def theorem15(arch, wide, *, key, m: int, num_steps: int, eta: float, scale: float = 0.2) -> dict:
    r"""Theorem 15 with $V_l = I$: a width-``wide`` deep NQF of ``arch`` ($\mathcal N(0, \mathrm{scale}^2)$ weights,
    ``m`` inputs, targets $\sin x_0$) and its compression to widths $p_l + 1$ (``compress_statistics``, forms scaled
    by $d'_l/d_l$, rates $\eta d_l/d'_l$), trained by GD for ``num_steps``. Returns the largest deviation of the
    outputs over the run relative to their largest value (``dev``), how far they moved (``moved``) and the widths
    (``narrow``)."""
    narrow = tuple(p + 1 for p in arch.ps)
    W, xs, ys, stats = _theorem15_data(arch, tuple(wide), key, m, scale)
    small = compress_statistics(stats, wide, narrow)
    Wn = tuple(weights_from_statistics(M, mu, d) for (M, mu), d in zip(small, narrow))
    forms = scale_forms(arch.forms, [dn / d for dn, d in zip(narrow, wide)])
    out_wide = np.asarray(deep_nqf_gd(W, arch.forms, xs, ys, learning_rates=(eta,) * len(wide), num_steps=num_steps))
    out_narrow = np.asarray(deep_nqf_gd(Wn, forms, xs, ys, learning_rates=tuple(eta * d / dn for d, dn in
                                                                                zip(wide, narrow)),
                                        num_steps=num_steps))
    top = float(np.max(np.abs(out_wide)))
    return dict(dev=float(np.max(np.abs(out_wide - out_narrow))) / top,
                moved=float(np.max(np.abs(out_wide[-1] - out_wide[0]))) / top, narrow=narrow)
