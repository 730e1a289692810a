"""The library models of issue 51's Done-when, as a reader would write them (no ``nqf`` inside), with their data and
neuron axes: ``build(name, seed, samples) -> (model_or_params, apply_or_None, neuron_axes, xs, ys)``.

* ``"equinox"``: chapter 10's ``make_attention`` (equinox ``MultiheadAttention`` as self-attention, 4 heads of 3, width
  6, heads as ``nqf.structure.Blocks``), ``token_teacher`` targets;
* ``"flax"``: flax linen's ``MultiHeadDotProductAttention`` of the same sizes (no biases; its kernels' head axis is
  the neuron axis), the same data;
* ``"cnn"``: an equinox ``Conv1d`` CNN with a pooled readout (8 channels of kernel 3 on signals of length 12, tanh,
  mean over positions, a linear readout to 4 outputs; the channels are the neurons), targets a rank-3 map of the
  pooled windows (``cnn_teacher``), strengths 0.2, 0.1, 0.05.

Every weight N(0, 1e-3^2). Used by ``diagnose_attention_cost.py`` (cost) and ``diagnose_attention_check.py``
(predictions against an own loop).
"""

from __future__ import annotations

import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from ch10_models import make_attention, token_teacher  # noqa: E402

MODELS = ("equinox", "flax", "cnn")
INIT = 1e-3
#: full-batch ``optax.sgd`` learning rate of each model (the CNN's pooled features are small: its modes' levels are
#: 0.1-0.4, where the tanh stays nearly linear, and a larger rate reaches them within 3,000 steps)
LEARNING_RATE = {"equinox": 0.1, "flax": 0.1, "cnn": 2.0}


def _small(key, tree):
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    keys = iter(jax.random.split(key, len(leaves)))
    return jax.tree_util.tree_unflatten(treedef, [INIT * jax.random.normal(next(keys), jnp.shape(a)) if eqx.is_array(a)
                                                  else a for a in leaves])


def flax_attention(seed):
    """``(variables, apply, neuron_axes)`` of flax linen's attention, 4 heads of 3, width 6, self-attention."""
    import flax.linen as nn

    att = nn.MultiHeadDotProductAttention(num_heads=4, qkv_features=12, out_features=6, use_bias=False,
                                          param_dtype=jnp.float64, dtype=jnp.float64)
    x0 = jnp.zeros((5, 6))
    v = _small(jax.random.PRNGKey(seed), att.init(jax.random.PRNGKey(seed), x0, x0))

    def apply(v, x):
        return att.apply(v, x, x)

    axes = {"params": {"query": {"kernel": 1}, "key": {"kernel": 1}, "value": {"kernel": 1}, "out": {"kernel": 0}}}
    return v, apply, axes


class PooledCNN(eqx.Module):
    """``f(x) = R mean_t tanh(conv(x))_t``: one ``Conv1d`` layer (channels: the neurons), mean pooling, a readout."""

    conv: eqx.nn.Conv1d
    readout: eqx.nn.Linear

    def __call__(self, x):
        return self.readout(jnp.mean(jnp.tanh(self.conv(x)), axis=-1))


def make_cnn(key, channels=8, kernel=3, outputs=4):
    """``(model, neuron_axes)``: channel c is row c of the conv kernel and bias and column c of the readout."""
    k1, k2, k3 = jax.random.split(key, 3)
    model = PooledCNN(eqx.nn.Conv1d(1, channels, kernel, key=k1), eqx.nn.Linear(channels, outputs, use_bias=False, key=k2))
    model = _small(k3, model)
    axes = eqx.tree_at(lambda m: (m.conv.weight, m.conv.bias, m.readout.weight), model, (0, 0, 1))
    return model, jax.tree_util.tree_map(lambda a: a if isinstance(a, int) and not isinstance(a, bool) else None, axes)


def cnn_teacher(seed, m, length=12, kernel=3, outputs=4, s=(0.2, 0.1, 0.05)):
    """Inputs ``(m, 1, length)`` N(0, 1); targets ``sum_j s_j u_j phi_j(x)``, ``phi_j`` the mean over positions of an
    orthonormal filter ``g_j`` on the windows of ``x``, ``u_j`` orthonormal: what the CNN's NQF can represent."""
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(m, 1, length))
    g = np.linalg.qr(rng.normal(size=(kernel, len(s))))[0]  # (kernel, r)
    u = np.linalg.qr(rng.normal(size=(outputs, len(s))))[0]  # (outputs, r)
    windows = np.stack([xs[:, 0, i:i + kernel] for i in range(length - kernel + 1)], axis=1)  # (m, L', kernel)
    phi = (windows @ g).mean(axis=1)  # (m, r): the pooled features, as the CNN at W = 0 sees them
    return xs, (phi * np.asarray(s)) @ u.T


def build(name, seed, samples):
    """``(model or params, apply or None, neuron_axes, xs, ys)`` of model ``name`` (:data:`MODELS`)."""
    if name == "equinox":
        model, axes = make_attention(jax.random.PRNGKey(seed))
        xs, ys = token_teacher(seed + 1, samples)
        return model, None, axes, jnp.asarray(xs), jnp.asarray(ys)
    if name == "flax":
        v, apply, axes = flax_attention(seed)
        xs, ys = token_teacher(seed + 1, samples)
        return v, apply, axes, jnp.asarray(xs), jnp.asarray(ys)
    if name == "cnn":
        model, axes = make_cnn(jax.random.PRNGKey(seed))
        xs, ys = cnn_teacher(seed + 1, samples)
        return model, None, axes, jnp.asarray(xs), jnp.asarray(ys)
    raise ValueError(f"`name` must be one of {MODELS}, got {name!r}")


def heads(name, p):
    """``(d, p)``: each neuron's parameters of ``p`` (the trainable arrays) as one row, found by reshaping (not by
    nqf's packing), for an own loop's Gram matrix."""
    if name == "equinox":
        m = p.mha
        h = m.num_heads
        rows = [w.weight.reshape(h, -1) for w in (m.query_proj, m.key_proj, m.value_proj)]
        o = m.output_proj.weight  # (width, h * vo): head i is columns [i vo, (i + 1) vo)
        rows.append(jnp.moveaxis(o.reshape(o.shape[0], h, -1), 1, 0).reshape(h, -1))
        return jnp.concatenate(rows, axis=1)
    if name == "flax":
        k = p["params"]
        h = k["out"]["kernel"].shape[0]
        rows = [jnp.moveaxis(k[n]["kernel"], 1, 0).reshape(h, -1) for n in ("query", "key", "value")]
        rows.append(k["out"]["kernel"].reshape(h, -1))
        return jnp.concatenate(rows, axis=1)
    c = p.conv.weight.shape[0]
    return jnp.concatenate([p.conv.weight.reshape(c, -1), p.conv.bias.reshape(c, -1), p.readout.weight.T], axis=1)
