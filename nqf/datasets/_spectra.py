r"""Power-law spectra for the scaling laws of Sec. 6 and the data of Figs. 3 (right) and 5: decoupled modes with
$r_k\propto k^{-\alpha_2}$, $V_k\propto k^{-\alpha_1}$, $C_{kk} = r_k^2/(8V_k)$, $z_k(0) = \epsilon k^{-\beta}$ (Thm 9), the
one-hot NQF data of App. C that realise them, orthogonal samples with power-law targets (Thm 11), Nam et al.
(2024)'s skills as NQF modes, and the grid and target of Fig. 5.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Float

from .._checks import check_size as _positive_int, invalid, wrong_kind
from .._types import ArrayLike
from ..architectures import fourier_features
from ..model._data import NQFData


def _finite(name, v, *, positive=False):
    try:
        f = float(v)
    except (TypeError, ValueError) as exc:
        raise wrong_kind(name, 'be a real number', f'{v!r}') from exc
    if not np.isfinite(f) or (positive and f <= 0):
        raise invalid(name, f"be finite{(' and > 0' if positive else '')}", f'{f!r}')
    return f


class FeatureSpectrum(NamedTuple):
    """Decoupled logistic modes (Thm 6): growth rates, self-competition, targets and initial features."""

    k: np.ndarray  # mode index 1..K
    r: np.ndarray  # growth rate r_k (zeta_k)
    C: np.ndarray  # C_kk
    V: np.ndarray  # V_k = r_k^2 / (8 C_kk), the loss mode k removes (Eq. 163)
    z0: np.ndarray  # z_k(0)

    @property
    def log_ratio(self) -> np.ndarray:
        r"""$\ln(r_k/(C_{kk}z_k(0)))$, the quantity that sets the finite-$\epsilon$ correction (Eq. 292)."""
        return np.log(self.r / (self.C * self.z0))


def power_law_spectrum(K: int, alpha1: float, alpha2: float, *, eps: float, beta: float = 0.0, r_scale: float = 1.0,
                       V_scale: float = 1.0) -> FeatureSpectrum:
    r"""Modes $k = 1..K$ with $r_k = r_0k^{-\alpha_2}$, $V_k = V_0k^{-\alpha_1}$, $C_{kk} = r_k^2/(8V_k)$ (Thm 9's
    $V_k$) and $z_k(0) = \epsilon k^{-\beta}$. Raises if a mode would start at or above half its final value
    $r_k/C_{kk}$ (no switch-on to observe)."""
    K = _positive_int("K", K)
    a1, a2 = _finite("alpha1", alpha1), _finite("alpha2", alpha2)
    e = _finite("eps", eps, positive=True)
    b = _finite("beta", beta)
    k = np.arange(1, K + 1, dtype=float)
    r = _finite("r_scale", r_scale, positive=True) * k ** (-a2)
    V = _finite("V_scale", V_scale, positive=True) * k ** (-a1)
    C = r**2 / (8 * V)
    z0 = e * k ** (-b)
    if np.any(2 * C * z0 >= r):
        bad = int(np.argmax(2 * C * z0 >= r)) + 1
        raise invalid("eps", "be small enough that every mode starts below half its final value (z0 < r/(2C)); lower "
                      "`eps` or raise `beta`", f"mode k = {bad} starts at or above half its final value")
    return FeatureSpectrum(k, r, C, V, z0)


def fig3_right_spectrum(K: int, *, eps: float = 1e-6, beta: float = 1.2) -> FeatureSpectrum:
    r"""Fig. 3 (right), App. C: $r_k = k^{-0.8}$, $V_k = k^{-2}$ ($\alpha_1 = 2$, $\alpha_2 = 0.8$),
    $C_{kk} = r_k^2/(8V_k)$, $z_k(0) = 10^{-6}k^{-1.2}$, $K = 1000$ modes. ``K``, ``eps`` and ``beta`` can be
    changed for the erratum-5 measurements (``beta = 0`` is a uniform $z_k(0) = \epsilon$)."""
    return power_law_spectrum(K, 2.0, 0.8, eps=eps, beta=beta)


class OneHotData(NamedTuple):
    """NQF data realising a feature spectrum: ``As[i]`` has one non-zero entry, at ``(i, i)``."""

    As: Float[ArrayLike, "m m m"]  # one-hot structure matrices, A_mu = sqrt(C_kk m / 8) e_mu e_mu^T
    ys: Float[ArrayLike, " m"]  # the targets y_mu
    k: np.ndarray  # which modes of the spectrum
    z0: np.ndarray  # their initial features

    @property
    def data(self) -> NQFData:
        """``(As, ys)`` as a validated :class:`~nqf.model.NQFData`."""
        return NQFData(self.As, self.ys)


def one_hot_dataset(spec: FeatureSpectrum, modes) -> OneHotData:
    r"""The construction of App. C for Fig. 3 (right), restricted to ``modes`` (1-based indices):
    $m = p = $ ``len(modes)``, $A_{i,ii} = \sqrt{C_{kk}m/8}$, $y_i = mr_k/(8A_{i,ii})$, so that Eq. (32)
    gives back exactly $r_k$ and $C_{kk}$ whatever the subset (features orthogonal: Thm 6)."""
    modes = np.asarray(modes, dtype=int)
    if modes.ndim != 1 or modes.size < 1 or np.any(modes < 1) or np.any(modes > spec.k.size) or np.unique(modes).size != modes.size:
        raise invalid("modes", f'be distinct 1-based indices in 1..{spec.k.size}', f'{modes}')
    m = modes.size
    r, C = spec.r[modes - 1], spec.C[modes - 1]
    A = np.sqrt(C * m / 8)
    As = np.zeros((m, m, m))
    As[np.arange(m), np.arange(m), np.arange(m)] = A
    return OneHotData(jnp.asarray(As), jnp.asarray(m * r / (8 * A)), modes, spec.z0[modes - 1])


def nam_emergence_spectrum(alpha: float, K: int, *, eps: float) -> FeatureSpectrum:
    r"""Nam et al. (2024)'s multitask sparse parity as NQF modes: skill $k$ is a one-hot feature that makes
    up a share $p_k = k^{-(\alpha+1)}/\sum_jj^{-(\alpha+1)}$ of the data, with label 1 and eigenvalue 1,
    so $r_k = C_{kk} = 8p_k$ and $V_k = p_k$ (Eq. 32): $\alpha_1 = \alpha_2 = \alpha + 1$, $z_k(0) = \epsilon$
    ($\beta = 0 = \alpha_1 - \alpha_2$, allowed by Thm 9)."""
    a = _finite("alpha", alpha, positive=True)
    K = _positive_int("K", K)
    e = _finite("eps", eps, positive=True)
    k = np.arange(1, K + 1, dtype=float)
    pk = k ** (-(a + 1))
    pk = pk / pk.sum()
    if e >= 0.5:
        raise invalid("eps", 'be < 1/2 (final value of every skill is 1)', f'{e!r}')
    return FeatureSpectrum(k, 8 * pk, 8 * pk, pk, np.full(K, e))


class SampleSpectrum(NamedTuple):
    """Orthogonal samples (Thm 5): sample mu owns ``lambdas.shape[1]`` directions."""

    mu: np.ndarray  # sample index 1..m
    ys: np.ndarray  # labels y_mu
    lambdas: np.ndarray  # (m, K) eigenvalues of the directions sample mu owns
    zeta: np.ndarray  # (8/m) lambda_max y_mu (Eq. 174)
    z0: np.ndarray  # (m, K) initial features


def sample_power_law(
    m: int, gamma1: float, gamma2: float, *, eps: float, block=(0.5, 0.75, 1.0), c_zeta: float = 1.0,
) -> SampleSpectrum:
    r"""Sample-wise data for Thm 11: $y_\mu = \mu^{-\gamma_1}$, and sample $\mu$ owns ``len(block)`` directions
    with eigenvalues $\lambda_{\mu,\max}\cdot$``block`` (as in Fig. 4, whose block is $(1, 1.5, 2)/2$), where
    $\lambda_{\mu,\max} = mc_\zeta\mu^{-\gamma_2}/(8y_\mu)$ so that $\zeta_\mu = c_\zeta\mu^{-\gamma_2}$ (Eq. 174).
    All features start at $z_k(0) = \epsilon$ (Thm 10). Its structure matrices, diagonal with disjoint
    supports ($A_\mu A_\nu = 0$), are :func:`orthogonal_samples_dataset` ``(lambdas, ys)``."""
    m = _positive_int("m", m)
    g1, g2 = _finite("gamma1", gamma1), _finite("gamma2", gamma2)
    e = _finite("eps", eps, positive=True)
    block = np.asarray(block, dtype=float)
    if block.ndim != 1 or block.size < 1 or np.any(block <= 0) or block.max() != 1.0:
        raise invalid("block", 'be positive relative eigenvalues with maximum 1', f'{block}')
    mu = np.arange(1, m + 1, dtype=float)
    ys = mu ** (-g1)
    zeta = _finite("c_zeta", c_zeta, positive=True) * mu ** (-g2)
    lmax = m * zeta / (8 * ys)
    lam = lmax[:, None] * block[None]
    z0 = np.full(lam.shape, e)
    if np.any(np.sum(lam * z0, axis=1) >= ys):
        raise invalid("eps", "be small enough that every sample starts below its label (sum_j lambda_j z0 < y_mu); "
                      "lower `eps`", "some sample starts at or above its label")
    return SampleSpectrum(mu, ys, lam, zeta, z0)


class FourierData(NamedTuple):
    """The grid, target and NQF coefficients of Fig. 5."""

    xs: np.ndarray  # uniform grid, M points in [0, 1)
    ys: np.ndarray  # target sum_k b_k psi_k(x)
    b: np.ndarray  # target coefficients k^-beta
    r: np.ndarray  # growth rate of the growing feature of unit k (Eq. 297): 4 c_k b_k
    C: np.ndarray  # its self-competition 2 c_k^2
    lambdas: np.ndarray  # (M, 2P) eigenvalues of A(x_mu) in the eigenbasis (a_k +- W_k)/sqrt2

    def folded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""``(xs, ys, weights)`` on the $M/2 + 1$ distinct points of the grid: features and target are even
        about $x = 1/2$, so $x_\mu$ and $x_{M-\mu}$ merge into one point of weight 2 (the mean loss is unchanged)."""
        M = self.xs.size
        if M % 2:
            raise invalid("M", "be even (folding needs an even number of grid points)", f"{M}")
        h = M // 2 + 1
        w = np.full(h, 2.0)
        w[0] = w[-1] = 1.0
        return self.xs[:h], self.ys[:h], w


def fourier_dataset(P: int, M: int, *, beta: float = 1.5, theta: float = 1.0, normalise: bool = True) -> FourierData:
    r"""Fig. 5's data: $x_\mu = \mu/M$, $y(x) = \sum_{k\le P}k^{-\beta}\psi_k(x)$. The NQF of the Fourier MLP
    (Eq. 296) is block-diagonal; in the basis $(a_k\pm W_k)/\sqrt2$ its eigenvalues are
    $\pm\frac{c_k}2\psi_k(x_\mu)$ ($c_k = s_k/\sqrt P$, or $s_k$ with ``normalise=False``), and Eq. (32) gives
    (orthonormal $\psi_k$ on the grid, $M > 2P$) $r_k = 4c_kb_k$, $C_{kk} = 2c_k^2$ for the growing
    feature $z_k = (a_k + W_k)^2/2$ (the other decays), i.e. Eq. (297) with its constants. Returned
    ``r`` and ``C`` are computed from the eigenvalues, not from this formula."""
    P, M = _positive_int("P", P), _positive_int("M", M)
    if M <= 2 * P:
        raise invalid("M", "be > 2P: need M > 2P grid points for orthonormal features", f"M = {M}, P = {P}")
    b_, theta = _finite("beta", beta), _finite("theta", theta)
    scales = jnp.arange(1, P + 1, dtype=float) ** (-float(theta))  # s_k, and c_k = s_k / sqrt(P) as printed
    coupling = scales / jnp.sqrt(P) if normalise else scales
    xs = np.arange(M) / M
    psi = np.asarray(fourier_features(xs, P))
    b = np.arange(1, P + 1, dtype=float) ** (-b_)
    ys = psi @ b
    half = 0.5 * np.asarray(coupling)[None] * psi
    lambdas = np.concatenate([half, -half], axis=1)  # growing (a+W) block first, then (a-W)
    r = 8.0 / M * lambdas.T @ ys
    C = 8.0 / M * np.sum(lambdas**2, axis=0)
    return FourierData(xs, ys, b, r[:P], C[:P], lambdas)
