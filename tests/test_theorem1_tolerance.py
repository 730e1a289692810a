"""THE Theorem-1 tolerance set: the dense check (structure_report) and the matrix-free one (check_hypotheses,
require_hypotheses: what compare_with_nqf and diagnose refuse) read one set, so they agree on every module."""

from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import nqf  # noqa: E402
from nqf._checks import theorem1_tolerance  # noqa: E402
from nqf.structure._matrix_free import require_hypotheses  # noqa: E402

NQF = Path(__file__).resolve().parents[1] / "nqf"
X3 = jnp.array([0.7, -1.3, 0.4])
W = 0.3 * jnp.arange(1.0, 13.0).reshape(4, 3) / 12


def _broken(kind: str, delta: float):
    """A tanh MLP with a planted break of relative size ``delta``: of Def. 1 (neuron 1 weighs more) or of ZGZ
    (a linear term in every neuron, which keeps the symmetry)."""
    def f(W, x):
        out = jnp.sum(W[3] * jnp.tanh(W[:3].T @ x))
        return out + delta * (W[0, 0] ** 2 if kind == "symmetry" else jnp.sum(W[0]))
    return f


def _verdicts(f) -> tuple[bool, bool]:
    """(dense accepts, matrix-free accepts)."""
    rep = nqf.structure_report(f, X3, p=4)
    try:
        require_hypotheses(nqf.check_hypotheses(f, W, X3), "planted")
        loose = True
    except ValueError:
        loose = False
    dense = rep.permutation_symmetric and rep.zgz and rep.zgz_property and rep.smooth_at_zero
    return dense, loose


def test_the_tolerance_set_and_its_derivation():
    t64, t32 = theorem1_tolerance(jnp.float64), theorem1_tolerance(jnp.float32)
    eps = float(jnp.finfo(jnp.float64).eps)
    assert t64.rounding == 1e3 * eps and t64.residual == pytest.approx(1.49e-8, rel=1e-2)
    assert (t64.step, t32.step, t64.smooth_ratio) == (1e-3, 3e-2, 3.0)
    assert t32.residual == pytest.approx(np.sqrt(float(jnp.finfo(jnp.float32).eps)))


@pytest.mark.parametrize("kind", ["symmetry", "zgz"])
@pytest.mark.parametrize("delta, holds", [(0.0, True), (1e-11, True), (1e-6, False), (1e-2, False)])
def test_dense_and_matrix_free_checks_agree_on_a_planted_break(kind, delta, holds):
    """Before one set, a break of 1e-11 made structure_report say 'fails' (1e-12, 1e3 eps) while
    compare_with_nqf accepted the module (1e-8): a planted disagreement now fails this test."""
    assert _verdicts(_broken(kind, delta)) == (holds, holds)


def test_no_check_writes_its_own_hypothesis_tolerance():
    for path in [*(NQF / "structure").glob("*.py"), *(NQF / "training").glob("*.py")]:
        text = path.read_text()
        for literal in ("eps_tol = 1e-", "1e-12 if eps", "1e3 * eps", "1e3*eps"):
            assert literal not in text, (path.name, literal)
