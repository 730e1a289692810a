"""Chapter 10's default model, as a reader would write one: ``make_model(key, n_in, n_out, width, init_scale)``.

A sine MLP with hidden biases and vector outputs, ``f(x) = V sin(U x + b)``: in no table of the paper. Rerun the
chapter on your own model with ``papermill ... -p model yourpackage.yourmodule:your_factory``; the factory takes
the same arguments and returns a callable equinox Module with a method ``neuron_axes()`` (the neuron axis of each
parameter leaf, as ``jax.vmap``'s ``in_axes``). Beside it, a library attention layer whose heads are blocks of one axis.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from nqf.structure import Blocks


class SinMLP(eqx.Module):
    """``f(x) = V sin(U x + b)``, ``width`` neurons: neuron i is row i of ``U``, entry i of ``b``, column i of ``V``."""

    U: jax.Array
    b: jax.Array
    V: jax.Array

    def __call__(self, x):
        return self.V @ jax.numpy.sin(self.U @ x + self.b)

    def neuron_axes(self):
        return SinMLP(0, 0, 1)


def make_model(key, n_in, n_out, width=16, init_scale=1e-3):
    k1, k2, k3 = jax.random.split(key, 3)
    return SinMLP(init_scale * jax.random.normal(k1, (width, n_in)), init_scale * jax.random.normal(k2, (width,)),
                  init_scale * jax.random.normal(k3, (n_out, width)))


class SelfAttention(eqx.Module):
    """A library attention layer as a reader has it: equinox's ``MultiheadAttention`` as self-attention, its heads
    packed in the rows of each projection (``query_proj.weight`` is ``(heads * head_size, width)``)."""

    mha: eqx.nn.MultiheadAttention

    def __call__(self, x):
        return self.mha(x, x, x)


def make_attention(key, width=6, heads=4, head_size=3, init_scale=1e-3):
    """``(model, neuron_axes)``: the heads are the neurons, ``nqf.structure.Blocks`` of ``head_size`` rows of the
    query, key and value projections and columns of the output projection (weights N(0, init_scale^2))."""
    mha = eqx.nn.MultiheadAttention(heads, width, qk_size=head_size, vo_size=head_size, inference=True, key=key)
    keys = iter(jax.random.split(key, 4))
    mha = jax.tree_util.tree_map(lambda a: init_scale * jax.random.normal(next(keys), a.shape) if eqx.is_array(a)
                                 else a, mha)
    model = SelfAttention(mha)
    axes = eqx.tree_at(lambda m: (m.mha.query_proj.weight, m.mha.key_proj.weight, m.mha.value_proj.weight,
                                  m.mha.output_proj.weight), model,
                       (Blocks(0, head_size), Blocks(0, head_size), Blocks(0, head_size), Blocks(1, head_size)))
    return model, jax.tree_util.tree_map(lambda a: a if isinstance(a, Blocks) else None, axes,
                                         is_leaf=lambda a: isinstance(a, Blocks))


class HeadAxisAttention(eqx.Module):
    """The same layer written with a separate head axis: Q, K, V ``(heads, head_size, width)``, O
    ``(width, heads, head_size)``; neuron axes 0, 0, 0, 1."""

    Q: jax.Array
    K: jax.Array
    V: jax.Array
    O: jax.Array

    def __call__(self, x):
        q, k, v = (jnp.einsum("hse,te->hts", P, x) for P in (self.Q, self.K, self.V))
        w = jax.nn.softmax(jnp.einsum("hts,hus->htu", q, k) / jnp.sqrt(q.shape[-1]), axis=-1)
        return jnp.einsum("htu,hus,ehs->te", w, v, self.O)


def head_axis_layer(model):
    """``(layer, neuron_axes)``: ``model`` of :func:`make_attention` rewritten with a separate head axis."""
    m = model.mha
    h, s = m.num_heads, m.qk_size
    split = lambda w: w.reshape(h, s, -1)  # noqa: E731
    return (HeadAxisAttention(split(m.query_proj.weight), split(m.key_proj.weight), split(m.value_proj.weight),
                              m.output_proj.weight.reshape(-1, h, s)), HeadAxisAttention(0, 0, 0, 1))


def token_teacher(seed, m, tokens=5, width=6, s=(2.0, 1.0)):
    """Inputs ``(m, tokens, width)`` N(0, 1); every token's target a linear map of the token mean, of singular values
    ``s`` (what attention sees at W = 0, where its weights are uniform)."""
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(m, tokens, width))
    P, Q = (np.linalg.qr(rng.normal(size=(width, len(s))))[0] for _ in range(2))
    ys = (xs.mean(axis=1) @ ((P * np.asarray(s, dtype=float)) @ Q.T))[:, None, :]
    return xs, np.repeat(ys, tokens, axis=1)


class TanhMLP(eqx.Module):
    """``f(x) = V tanh(U x + b)``: the init-scale sweep's model (neuron i: row i of U, entry i of b, column i of V)."""

    U: jax.Array
    b: jax.Array
    V: jax.Array

    def __call__(self, x):
        return self.V @ jnp.tanh(self.U @ x + self.b)

    def neuron_axes(self):
        return TanhMLP(0, 0, 1)


def scaled_default_mlp(key, n_in, n_out, width, scale):
    """A tanh MLP at ``scale`` times the library default initialisation (LeCun: U ~ N(0, 1/n_in), V ~
    N(0, 1/width), b = 0; below scale 1e-2 a bias draw of 1e-3 scale, so that no neuron parameter is exactly 0)."""
    k1, k2, k3 = jax.random.split(key, 3)
    b = (1e-3 * scale if scale < 1e-2 else 0.0) * jax.random.normal(k2, (width,))
    return TanhMLP(scale * jax.random.normal(k1, (width, n_in)) / np.sqrt(n_in), b,
                   scale * jax.random.normal(k3, (n_out, width)) / np.sqrt(width))


def init_scale_sweep(key, data, widths, scales, num_steps, lr_width=0.8):
    """The two-regime report of each (width, scale): rows of the classification and what it rests on. Learning rate
    ``lr_width / width`` (the kernel regime's step stays stable as the width grows)."""
    import warnings

    import optax

    import nqf

    xs, ys = data
    rows = []
    for width in widths:
        for scale in scales:
            net = scaled_default_mlp(key, xs.shape[1], ys.shape[1], width, scale)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a surrogate that blows up is in the report
                rep = nqf.diagnose(net, (xs, ys), optax.sgd(lr_width / width), num_steps=num_steps)
            rows.append({"width": width, "scale": scale, "regime": rep.regime, "half_way": rep.half_way_step,
                         "valid": rep.regime_validity, "reached": rep.regime_reached,
                         "quadratic_error": rep.run.quadratic_error, "record_every": rep.run.record_every,
                         "threshold": rep.run.threshold})
    return rows
