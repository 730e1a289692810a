"""Chapter 9's recipe for Fig. 8: several models (a deep module, its 2-layer NQF, its 1-layer NQF) trained full batch
with one optimiser on a teacher's data, seeds vmapped (one dataset per seed), recording training and test loss (Eq. 26)
at every step (test loss: every ``record_every`` steps).

The models are trained in one :func:`nqf.training.train` on the tuple of their parameters with the sum of their losses:
their parameters are disjoint and the optimisers act leaf by leaf (GD, heavy-ball momentum, Adam), so this is the
separate runs, exactly. The three optimisers of the figure are one transformation, :func:`gd_momentum_adam`, chosen by
traced numbers, so every run of one module (optimiser, rate, initial scale) reuses one compiled program."""

from typing import Callable, NamedTuple

import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax

from nqf._random import normals
from nqf.model import mse
from nqf.training import Runs, optimizer, train


def teacher_data(arch, teacher_Ws, *, key, n_train: int, n_test: int):
    """Per seed (the leading axis of ``teacher_Ws``; key ``split(key, S)[s]``): inputs ``arch.sample_input`` and the
    teacher's targets over their std on the training set. Returns ``((x_train, y_train), (x_test, y_test))``."""
    n = n_train + n_test

    @jax.jit
    def one(Wt, k):
        xs = jax.vmap(arch.sample_input)(jax.random.split(k, n))
        ys = jax.vmap(lambda x: arch.apply(Wt, x))(xs)
        return xs, ys / jnp.std(ys[:n_train])

    S = jax.tree_util.tree_leaves(teacher_Ws)[0].shape[0]
    xs, ys = jax.vmap(one)(teacher_Ws, jax.random.split(key, S))
    return (xs[:, :n_train], ys[:, :n_train]), (xs[:, n_train:], ys[:, n_train:])


def seeded_inputs(arch, seeds, *, tag: int, n_train: int, n_test: int):
    """Per seed ``s`` (key ``fold_in(PRNGKey(s), tag)``, split into teacher, data and initialisation keys): the teacher
    weights ``N(0, 1)``, the data of :func:`teacher_data` (targets over their std on the training set) and unit-variance
    initial weights ``N(0, 1)`` (scale them by the initial standard deviation). Returns ``(train, test, Z)``, every
    leaf with the seed axis leading."""
    n = n_train + n_test

    @jax.jit
    def one(seed):
        kT, kD, kW = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), tag), 3)
        L, shapes = len(arch.ps), tuple(zip(arch.ps, arch.widths))
        # jax.random.normal(split(kT, L)[l], shapes[l]) and the same from kW, bit for bit, in one draw
        both = normals(zip(jnp.concatenate([jax.random.split(kT, L), jax.random.split(kW, L)]), shapes * 2))
        Wt, Z = both[:L], both[L:]
        xs = jax.vmap(arch.sample_input)(jax.random.split(kD, n))
        ys = jax.vmap(lambda x: arch.apply(Wt, x))(xs)
        return xs, ys / jnp.std(ys[:n_train]), Z

    xs, ys, Z = jax.vmap(one)(jnp.asarray([int(s) for s in seeds]))
    return (xs[:, :n_train], ys[:, :n_train]), (xs[:, n_train:], ys[:, n_train:]), Z


def gd_momentum_adam(learning_rate, momentum=0.0, adam=0.0):
    """GD with heavy-ball ``momentum`` (0: plain GD, exactly) when ``adam`` is 0, Adam (optax's defaults) when it is
    1, both at ``learning_rate``: the three optimisers of Fig. 8 as one transformation whose choice is a number, so
    ``nqf.training.optimizer(gd_momentum_adam, eta, momentum=m, adam=a)`` compiles once for all of them (both
    updates are computed, one is kept)."""
    sgd, ad = optax.sgd(learning_rate, momentum=momentum), optax.adam(learning_rate)

    def update(grads, state, params=None):
        us, ss = sgd.update(grads, state[0], params)
        ua, sa = ad.update(grads, state[1], params)
        return jax.tree_util.tree_map(lambda a, b: jnp.where(adam > 0.5, a, b), ua, us), (ss, sa)

    return optax.GradientTransformation(lambda params: (sgd.init(params), ad.init(params)), update)


class ModelLoss(eqx.Module):
    apply: Callable

    def __call__(self, params, batch, args):
        return mse(jax.vmap(lambda x: self.apply(params, x))(batch[0]), batch[1])


class SumLoss(eqx.Module):
    """The sum of the models' losses on the tuple of their parameters (disjoint: the separate runs)."""

    losses: tuple

    def __call__(self, params, batch, args):
        return sum(loss(p, batch, args) for loss, p in zip(self.losses, params))


class TrainAndParams(eqx.Module):
    """At every step: each model's training loss and its parameters (the test losses are read from these afterwards,
    on the recorded steps only)."""

    losses: tuple

    def __call__(self, params, args):
        return tuple(loss(p, args, None) for loss, p in zip(self.losses, params)), params


@eqx.filter_jit
def _test_losses(losses, params, test):
    """Each model's loss on ``test`` at its recorded parameters (leaves ``(S, T, ...)``, ``test`` ``(S, n, ...)``)."""

    def one_seed(ps, t):
        return tuple(jax.vmap(lambda p, loss=loss: loss(p, t, None))(pp) for loss, pp in zip(losses, ps))

    return jax.vmap(one_seed)(params, test)


class SideBySide(NamedTuple):
    steps: np.ndarray  #: (T,) recorded steps
    train_loss: tuple  #: one (S, T) array per model
    test_loss: tuple  #: one (S, T) array per model
    step_loss: tuple = ()  #: one (S, num_steps) array per model: the training loss before every step
    params: tuple = ()  #: the final parameters of each model (seed axis leading)
    diverged: tuple = ()  #: one (S,) bool array per model: the loss became non-finite


def train_side_by_side(applies, params0, optimizer, *, train_data, test_data, num_steps, record_every) -> SideBySide:
    """Model i is ``applies[i](params, x)`` from ``params0[i]``; every leaf and both datasets carry the seed axis.
    One :func:`nqf.training.train` for all the models; the training losses are recorded at every step
    (``step_loss``) and returned every ``record_every`` steps with the test losses there (``train_loss``,
    ``test_loss``)."""
    if num_steps % record_every:
        raise ValueError(f"record_every ({record_every}) must divide num_steps ({num_steps})")
    losses = tuple(ModelLoss(apply) for apply in applies)
    run = train(SumLoss(losses), tuple(params0), optimizer, num_steps=num_steps, data=train_data,
                record=TrainAndParams(losses), args=train_data, runs=Runs(1, ("params", "data", "args"), "ignore"))
    tr = tuple(np.asarray(a) for a in run.record[0])
    at = jax.tree_util.tree_map(lambda a: a[:, ::record_every], run.record[1])
    te = tuple(np.asarray(a) for a in _test_losses(losses, at, test_data))
    return SideBySide(run.steps[::record_every], tuple(a[:, ::record_every] for a in tr), te,
                      tuple(a[:, :num_steps] for a in tr), tuple(run.params),
                      tuple(~(np.isfinite(a).all(-1) & np.isfinite(b).all(-1)) for a, b in zip(tr, te)))


def log_loss_gap(reference, other):
    """Mean over recorded steps (last axis) of |ln L_other - ln L_reference|; inf where a loss is not finite and > 0."""
    a, b = np.asarray(reference, dtype=float), np.asarray(other, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    gap = np.mean(np.abs(np.log(np.where(ok, b, 1.0)) - np.log(np.where(ok, a, 1.0))), axis=-1)
    return np.where(ok.all(axis=-1), gap, np.inf)


def log_loss_gap_steps(reference, other):
    """Mean over every step (last axis) of |ln L_other - ln L_reference| (the training losses before each step, which
    the trainer keeps for every step: no recording grid); nan where a loss is not finite and > 0 (a diverged run,
    not judged)."""
    a, b = np.asarray(reference, dtype=float), np.asarray(other, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    gap = np.mean(np.abs(np.log(np.where(ok, b, 1.0)) - np.log(np.where(ok, a, 1.0))), axis=-1)
    return np.where(ok.all(axis=-1), gap, np.nan)


def sharpness(apply, params, data, *, iters: int = 50):
    """Largest Hessian eigenvalue (in absolute value) of the training MSE at ``params``, per run (power iteration on
    Hessian-vector products, vmapped over the leading run axis of ``params`` and ``data``)."""
    return np.asarray(_sharpness(apply, params, data, iters))


@eqx.filter_jit
def _sharpness(apply, params, data, iters):
    def one(p, d):
        flat, unravel = jax.flatten_util.ravel_pytree(p)

        def loss(f):
            return mse(jax.vmap(lambda x: apply(unravel(f), x))(d[0]), d[1])

        def hvp(v):
            return jax.jvp(jax.grad(loss), (flat,), (v,))[1]

        v = jax.random.normal(jax.random.PRNGKey(0), flat.shape)
        v = jax.lax.fori_loop(0, iters, lambda _, v: (w := hvp(v)) / jnp.linalg.norm(w), v / jnp.linalg.norm(v))
        return jnp.abs(jnp.vdot(v, hvp(v)))

    return jax.vmap(one)(params, data)


class ParamsRecord(eqx.Module):
    def __call__(self, params, args):
        return params


def curvature_along_gd(applies, params0, train_data, learning_rate, *, num_steps: int, check_every: int):
    """GD at ``learning_rate`` for every model (``applies[i]`` from ``params0[i]``, seed axis leading); the largest
    Hessian eigenvalue of each model's training loss at every ``check_every``-th step (steps 0, check_every, ...,
    num_steps). Returns ``(lam, diverged)``: ``lam`` (models, S, checks) and per model and seed whether the loss
    became non-finite."""
    lams, divs = [], []
    for apply, p0 in zip(applies, params0):
        run = train(ModelLoss(apply), p0, optimizer("sgd", float(learning_rate)), num_steps=num_steps, data=train_data,
                    record=ParamsRecord(), runs=Runs(check_every, ("params", "data"), "ignore"))
        S, n = np.shape(jax.tree_util.tree_leaves(run.record)[0])[:2]
        # every checked step of every seed in one vmapped call: lane k * S + s is seed s at check k
        at = jax.tree_util.tree_map(lambda a: jnp.swapaxes(a, 0, 1).reshape((n * S,) + a.shape[2:]), run.record)
        tiled = jax.tree_util.tree_map(lambda a: jnp.tile(a, (n,) + (1,) * (a.ndim - 1)), train_data)
        lam = sharpness(apply, at, tiled).reshape(n, S).T
        lams.append(np.where(np.isfinite(lam), lam, np.inf))
        divs.append(np.asarray(run.diverged))
    return np.stack(lams), np.stack(divs)


def pilot_learning_rate(applies, params0, train_data, *, num_steps: int, check_every: int, max_rounds: int = 8):
    r"""The GD learning-rate rule of Fig. 8, run on exploration seeds: the largest rate $\eta$ of the sequence
    $\eta_0 = 1/\lambda_0$ ($\lambda_0$: the largest Hessian eigenvalue at step 0 over the models and seeds),
    $\eta_{k+1} = \min(\eta_k/2, 1/\lambda_k)$, for which GD at $\eta$ stays finite and $\eta\,\lambda \le 1$ along the
    whole pilot run ($\lambda$: the largest eigenvalue over the checked steps, the models and the seeds), i.e. half
    the stability limit $2/\lambda$ everywhere on the run. Returns ``(eta, history)``, history a list of
    ``(eta_k, lambda_k, any diverged)``."""
    lam0 = max(float(np.max(sharpness(a, p, train_data))) for a, p in zip(applies, params0))
    eta, history = 1.0 / lam0, []
    for _ in range(max_rounds):
        lam, div = curvature_along_gd(applies, params0, train_data, eta, num_steps=num_steps, check_every=check_every)
        top = float(np.max(lam))
        history.append((eta, top, bool(div.any())))
        if not div.any() and np.isfinite(top) and eta * top <= 1.0 + 1e-12:  # (rounding: the step-0 check itself)
            return eta, history
        eta = min(eta / 2, 1.0 / top) if np.isfinite(top) and top > 0 else eta / 2
    raise RuntimeError(f"pilot_learning_rate: no stable rate in {max_rounds} rounds: {history}")
