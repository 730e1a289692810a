r"""Chapter 3's recipe: the runs behind its figures, each a few calls of :mod:`nqf`.

* :func:`pair_trainer` — optax on two weight matrices at once (Theorem 2, Corollary 2): one
  :func:`nqf.training.train` of the pair, recording $(M, \mu)$ of both and the first $W$;
* :func:`output_trainer` — optax on one wide $W$ (Theorem 3), recording the training outputs and $(M, \mu)$;
* :func:`truncation_sweep` — Corollary 3: compress below $k_{\mathcal V} + 1$ at every width $d'$, run the closed
  update (Eqs. 23–24) from each start, and measure the gap $e_t$, the Lipschitz constant and Eq. (237);
* :func:`ntk_width_sweep` — App. B.6: the drift of the NTK (Eq. 245) along full-batch GD for a range of widths.

The loss throughout is the paper's minibatch MSE $\frac1b\sum_{x\in\mathcal B}(f_x - y_x)^2$ (no ½).
"""

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

import nqf
from nqf.model import NQFData, ntk_change, ntk_trajectory, width_scaled
from nqf.training import BatchLoss, Record
from nqf.updates import compress, compression_bound, compression_error, nqf_sgd, statistics, update_lipschitz
from nqf.updates import weight_outputs

__all__ = ["minibatch_mse", "pair_trainer", "output_trainer", "truncation_sweep", "ntk_width_sweep"]


def minibatch_mse(data: NQFData) -> Callable:
    """The paper's minibatch MSE (:data:`nqf.model.mse`) of the general NQF at weights ``W`` on the samples ``idx``
    of ``data``."""

    def loss(W, idx):
        batch = data.subset(idx)
        return nqf.model.mse(weight_outputs(W, batch), batch.ys)

    return loss


def pair_trainer(data: NQFData) -> Callable:
    """``run(Ws, optimizer, batches)``: two independent runs of optax on ``Ws = (W_a, W_b)`` in one loop (the
    gradient of each ``W`` only sees its own term); step ``k`` sees the samples ``batches[k]``. Returns
    ``((M_a, mu_a), (M_b, mu_b), W_a)`` at every step. One compiled run serves every call with the same data."""
    loss1 = minibatch_mse(data)
    m = int(data.ys.shape[0])

    def loss_pair(Ws, idx):
        return loss1(Ws[0], idx) + loss1(Ws[1], idx)

    def record_pair(Ws):
        return statistics(Ws[0]), statistics(Ws[1]), Ws[0]

    loss, record = BatchLoss(loss_pair), Record(record_pair)

    def run(Ws, optimizer, batches):
        return nqf.train(loss, Ws, optimizer, num_steps=int(batches.shape[0]),
                         data=nqf.training.Minibatches(jnp.arange(m), batches), record=record).record

    return run


def output_trainer(data: NQFData) -> Callable:
    """``run(W, optimizer, batches)``: optax on one ``W``, recording the outputs on every sample of ``data`` and
    ``(M, mu)`` at every step."""
    loss = minibatch_mse(data)
    m = int(data.ys.shape[0])

    def run(W, optimizer, batches):
        return nqf.train(BatchLoss(loss), W, optimizer, num_steps=int(batches.shape[0]),
                         data=nqf.training.Minibatches(jnp.arange(m), batches),
                         record=Record(lambda W: (weight_outputs(W, data), *statistics(W)))).record

    return run


def truncation_sweep(state, data: NQFData, batches, *, eta: float, d: int) -> dict:
    r"""Corollary 3 at every compressed width $d' = 2, \dots, p + 1$ of the state ``(M, mu)`` of width ``d``.

    Returns ``{d': result}``; each result holds ``exact`` (whether $d' \ge k_{\mathcal V} + 1$), the gap ``e``
    (Eq. 237's left side at every step), its prefactor ``tail``, ``e0`` and the predicted ``e0_pred``; below
    $k_{\mathcal V} + 1$ also the largest measured Lipschitz constant ``L``, the bound in logs ``log_bound`` (it
    overflows float64 within a few hundred steps), the largest ``ratio`` gap/bound, the decades ``log10_overshoot``
    by which the bound exceeds the last gap, and ``ratio_step``, the same against $e_0\prod_s(1 + \eta L_s)$."""
    M0, mu0 = state
    steps = int(batches.shape[0])

    def run(M, mu, data, eta, d):  # the closed SGD update of Eqs. (23)-(24): one compiled scan for every width
        return nqf_sgd((M, mu), data, batches, eta=eta, d=d)[:2]

    Ms, mus = run(M0, mu0, data, eta, d)
    out = {}
    for dp in range(2, data.p + 2):
        c = compress((M0, mu0), data, d=d, eta=eta, d_prime=dp)
        Mc, muc = run(c.M, c.mu, c.data, c.eta, c.d)
        e = compression_error(Ms, mus, Mc, muc, scale=c.scale)
        res = dict(exact=c.exact, e=np.asarray(e), tail=c.tail, e0=float(e[0]), e0_pred=c.initial_error)
        if not c.exact:
            L = update_lipschitz((Ms, mus), (c.scale * Mc, muc), data, batches, eta=eta, d=d)
            res["L"] = float(L.max())
            res["log_bound"] = np.asarray(compression_bound(c.tail, eta=eta, L=res["L"], t=np.arange(steps + 1),
                                                            log=True))
            res["ratio"] = float(np.exp(np.max(np.log(res["e"]) - res["log_bound"])))
            res["log10_overshoot"] = float((res["log_bound"][-1] - np.log(res["e"][-1])) / np.log(10))
            # the stepwise form of the same argument, e_t <= e_0 prod_s (1 + eta L_s)
            res["ratio_step"] = float(np.max(res["e"][1:] / (res["e0"] * np.cumprod(1 + eta * np.asarray(L)))))
        out[dp] = res
    return out


def ntk_width_sweep(data: NQFData, widths, *, alpha_A: float, alpha_B: float, eta: float, T: float,
                    seed: int = 8) -> list[dict]:
    r"""Full-batch GD (the closed update with every sample in each step) up to time ``T`` for each width $d$ of
    ``widths``, with the structure scaled as in App. B.6 (:func:`nqf.model.width_scaled`) and $W(0)$ of variance
    $1/d$. Per width: ``d``, the largest relative NTK ``change``, the relative ``loss_drop`` and the initial kernel
    scale ``ntk0`` ($\|\Theta_0\|_F/m$)."""
    m, p = int(data.ys.shape[0]), data.p
    steps = int(round(T / eta))
    full_batch = jnp.tile(jnp.arange(m), (steps, 1))
    rows = []
    for d in widths:
        scaled = width_scaled(data, d=d, alpha_A=alpha_A, alpha_B=alpha_B)
        W0 = jnp.asarray(np.random.default_rng(seed).normal(size=(p, d)) / np.sqrt(d))
        M0, mu0 = statistics(W0)
        st = nqf_sgd((M0, mu0), scaled, full_batch, eta=eta, d=d)  # full batch: plain GD
        Th = ntk_trajectory((st.M[::20], st.mu[::20]), scaled, d=d)
        L0 = nqf.model.mse_loss(st.M[0], scaled, mu=st.mu[0])
        L1 = nqf.model.mse_loss(st.M[-1], scaled, mu=st.mu[-1])
        rows.append(dict(d=d, change=float(ntk_change(Th[0], Th).max()), loss_drop=float(1 - L1 / L0),
                         ntk0=float(jnp.linalg.norm(Th[0]) / m)))
    return rows
