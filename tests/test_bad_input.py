"""Bad input across the public API gets a clear error (issue 13).

Each case calls one public function or constructor with exactly one bad
argument and asserts

* the exception type: ``TypeError`` for the wrong kind of object, ``ValueError``
  for the wrong value or shape (``nqf._checks``' convention). Under the
  test-time type checker (``--jaxtyping-packages`` in pyproject.toml) an
  annotated argument of the wrong type or shape raises jaxtyping's
  ``TypeCheckError`` first; it is a ``TypeError`` and names the parameter, so
  shape cases accept it too (``tests/helpers.BAD_INPUT``);
* that the message names the argument: `` `name` `` (nqf's wording) or
  ``parameter 'name'`` (the type checker's).

The cases the issue found silent (a wrong answer without an error) are marked
``silent`` in their id.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import BAD_INPUT

import nqf
from nqf import architectures, datasets, flow, model, solutions, structure, training, updates


class Case(NamedTuple):
    id: str
    call: Callable[[], Any]
    exc: Any
    name: str


CASES: list[Case] = []


def case(id: str, exc, name: str):
    """Register ``fn`` (no arguments) as one bad-input case."""

    def deco(fn):
        CASES.append(Case(id, fn, exc, name))
        return fn

    return deco


# ------------------------------------------------------------------ good data
M_, P_ = 4, 3


def _data(**kw) -> model.NQFData:
    rng = np.random.default_rng(0)
    As = rng.normal(size=(M_, P_, P_))
    As = 0.5 * (As + np.swapaxes(As, 1, 2))
    ys = rng.normal(size=M_)
    return model.NQFData(jnp.asarray(As), jnp.asarray(ys), **kw)


def _general(**overrides) -> dict:
    rng = np.random.default_rng(1)
    sym = lambda a: 0.5 * (a + np.swapaxes(a, -1, -2))  # noqa: E731
    kw = dict(
        As=sym(rng.normal(size=(M_, P_, P_))),
        ys=rng.normal(size=M_),
        gs=rng.normal(size=(M_, P_)),
        Bs=sym(rng.normal(size=(M_, P_, P_))),
        f0=rng.normal(size=M_),
    )
    kw.update(overrides)
    return kw


def _nqf_data(kw: dict) -> model.NQFData:
    As, ys = kw.pop("As"), kw.pop("ys")
    return model.NQFData(As, ys, **kw)


DATA = None
M0 = 0.1 * jnp.eye(P_)
MU0 = jnp.zeros(P_)
TS = jnp.linspace(0.0, 1.0, 5)
BATCHES = jnp.array([[0, 1], [2, 3]])


@pytest.fixture(scope="module", autouse=True)
def _good_data():
    global DATA
    DATA = _data()
    yield


def _state():
    return updates._discrete.sgd_state(M0, MU0)


def _sym_not_psd():
    return jnp.diag(jnp.array([1.0, -1.0, 0.5]))


# ------------------------------------------------------------- architectures
for _arg, _bad, _exc in [
    ("k", 0, ValueError), ("k", -3, ValueError), ("k", 2.5, TypeError), ("k", "4", TypeError),
    ("k", None, TypeError), ("k", True, TypeError),
]:
    case(f"two_layer_mlp {_arg}={_bad!r}" + (" silent" if _bad == 0 else ""), _exc, _arg)(
        lambda _bad=_bad: architectures.two_layer_mlp(_bad))

case("two_layer_mlp activation not callable", TypeError, "activation")(
    lambda: architectures.two_layer_mlp(3, activation="tanh"))
case("two_layer_mlp outputs=0", ValueError, "outputs")(lambda: architectures.two_layer_mlp(3, outputs=0))
case("two_layer_mlp outputs=1.5", TypeError, "outputs")(lambda: architectures.two_layer_mlp(3, outputs=1.5))
case("two_layer_mlp ReLU (not C^3)", ValueError, "activation")(
    lambda: architectures.two_layer_mlp(3, activation=jax.nn.relu))

for _arg in ("D", "N", "d_k", "d_v"):
    for _bad, _exc in [(0, ValueError), (-1, ValueError), (2.0, TypeError), ("3", TypeError)]:
        _kw = dict(D=3, N=4, d_k=2, d_v=2)
        _kw[_arg] = _bad
        case(f"multihead_attention {_arg}={_bad!r}" + (" silent" if _bad == 0 and _arg in ("D", "N") else ""),
             _exc, _arg)(lambda _kw=dict(_kw): architectures.multihead_attention(**_kw))

for _arg in ("height", "width", "kh", "kw"):
    _kw = dict(height=4, width=4, kh=2, kw=2)
    _kw[_arg] = 0
    case(f"cnn {_arg}=0", ValueError, _arg)(lambda _kw=dict(_kw): architectures.cnn(**_kw))
case("cnn kernel larger than image", ValueError, "kh")(lambda: architectures.cnn(3, 3, 4, 2))
case("cnn activation not callable", TypeError, "activation")(lambda: architectures.cnn(4, 4, 2, 2, activation=3))

case("mixture_of_experts k=0", ValueError, "k")(lambda: architectures._modules.mixture_of_experts(0))
case("mixture_of_experts k=1.5", TypeError, "k")(lambda: architectures._modules.mixture_of_experts(1.5))
case("mixture_of_experts gate not callable", TypeError, "gate")(
    lambda: architectures._modules.mixture_of_experts(3, gate="tanh"))
case("phase_retrieval n=0", ValueError, "n")(lambda: architectures._modules.phase_retrieval(0))
case("phase_retrieval n='2'", TypeError, "n")(lambda: architectures._modules.phase_retrieval("2"))
case("diagonal_linear_network n=-2", ValueError, "n")(lambda: architectures.diagonal_linear_network(-2))
case("diagonal_linear_network n=2.0", TypeError, "n")(lambda: architectures.diagonal_linear_network(2.0))
case("qk_attention N=0", ValueError, "N")(lambda: architectures.qk_attention(3, 0, 2))
case("qk_attention d_k=0", ValueError, "d_k")(lambda: architectures.qk_attention(3, 4, 0))


def _mlp():
    return architectures.two_layer_mlp(3)


case("Architecture.apply W wrong p", BAD_INPUT, "W")(lambda: _mlp().apply(jnp.ones((5, 2)), jnp.ones(3)))
case("Architecture.apply W 1-d", BAD_INPUT, "W")(lambda: _mlp().apply(jnp.ones(4), jnp.ones(3)))
case("Architecture.apply x wrong shape", BAD_INPUT, "x")(lambda: _mlp().apply(jnp.ones((4, 2)), jnp.ones(5)))
case("Architecture.structure x wrong shape", BAD_INPUT, "x")(lambda: _mlp().structure(jnp.ones(2)))
case("Architecture.structure x with NaN", ValueError, "x")(lambda: _mlp().structure(jnp.array([1.0, jnp.nan, 0.0])))
case("Architecture.sample_input key=42", TypeError, "key")(lambda: _mlp().sample_input(42))

# ----------------------------------------------------------------- structure
X3 = jnp.array([0.3, -0.2, 0.5])


def _tanh_module(W, x):
    return jnp.sum(W[-1] * jnp.tanh(W[:-1].T @ x))


case("structure_matrix module not callable", TypeError, "module")(lambda: nqf.structure_matrix(3, X3, p=4))
case("structure_matrix p=0", ValueError, "p")(lambda: nqf.structure_matrix(_tanh_module, X3, p=0))
case("structure_matrix p=2.5", TypeError, "p")(lambda: nqf.structure_matrix(_tanh_module, X3, p=2.5))
case("structure_matrix d=0", ValueError, "d")(lambda: nqf.structure_matrix(_tanh_module, X3, p=4, d=0))
case("structure_matrix d=1.5", TypeError, "d")(lambda: nqf.structure_matrix(_tanh_module, X3, p=4, d=1.5))
case("structure_matrix int-valued module", TypeError, "module")(
    lambda: nqf.structure_matrix(lambda W, x: jnp.sum(W > 0).astype(jnp.int32), X3, p=4))
case("structure_matrix complex-valued module", TypeError, "module")(
    lambda: nqf.structure_matrix(lambda W, x: jnp.sum(W).astype(jnp.complex128), X3, p=4))
case("structure_matrix key=42", TypeError, "key")(lambda: nqf.structure_matrix(_tanh_module, X3, p=4, key=42))
case("structure_report rtol=-1 silent", ValueError, "rtol")(
    lambda: nqf.structure_report(_tanh_module, X3, p=4, rtol=-1.0))
case("structure_report rtol=nan", ValueError, "rtol")(
    lambda: nqf.structure_report(_tanh_module, X3, p=4, rtol=float("nan")))
case("structure_report rtol='1e-6'", TypeError, "rtol")(
    lambda: nqf.structure_report(_tanh_module, X3, p=4, rtol="1e-6"))
case("structure_report p=-1", ValueError, "p")(lambda: nqf.structure_report(_tanh_module, X3, p=-1))
case("structure_stack method unknown", ValueError, "method")(
    lambda: structure._autodiff.structure_stack(_mlp(), jnp.ones((2, 3)), method="magic"))
case("nqf_expansion W wrong rows", BAD_INPUT, "W")(
    lambda: structure._expansion.nqf_expansion(jnp.eye(3), jnp.ones((4, 2))))
case("nqf_expansion g wrong length", BAD_INPUT, "g")(
    lambda: structure._expansion.nqf_expansion(jnp.eye(3), jnp.ones((3, 2)), g=jnp.ones(4)))
case("nqf_expansion A not square", BAD_INPUT, "A")(
    lambda: structure._expansion.nqf_expansion(jnp.ones((3, 2)), jnp.ones((3, 2))))
case("remainder_scaling scales negative", ValueError, "scales")(
    lambda: structure.remainder_scaling(_tanh_module, X3, jnp.ones((4, 2)), jnp.eye(4),
                                        scales=jnp.array([-1.0, 0.1])))
case("check_theorem1 arch not an Architecture", TypeError, "arch")(
    lambda: structure.check_theorem1(_tanh_module, seed=0))
case("check_theorem1 rays=0", ValueError, "rays")(lambda: structure.check_theorem1(_mlp(), rays=0, seed=0))
case("check_theorem1 width=0", ValueError, "width")(lambda: structure.check_theorem1(_mlp(), width=0, seed=0))

# --------------------------------------------------------------------- model
case("NQFData As not square", BAD_INPUT, "As")(lambda: model.NQFData(jnp.ones((4, 3, 2)), jnp.ones(4)))
case("NQFData As 2-d", BAD_INPUT, "As")(lambda: model.NQFData(jnp.eye(3), jnp.ones(1)))
case("NQFData As not symmetric", ValueError, "As")(
    lambda: model.NQFData(jnp.ones((2, 3, 3)) + jnp.triu(jnp.ones((3, 3)), 1)[None], jnp.ones(2)))
case("NQFData As with NaN", ValueError, "As")(
    lambda: model.NQFData(jnp.full((2, 3, 3), jnp.nan), jnp.ones(2)))
case("NQFData As empty (m=0)", ValueError, "As")(lambda: model.NQFData(jnp.ones((0, 3, 3)), jnp.ones(0)))
case("NQFData ys length 1 (broadcast) silent", BAD_INPUT, "ys")(
    lambda: model.NQFData(jnp.stack([jnp.eye(3)] * 4), jnp.ones(1)))
case("NQFData ys wrong length", BAD_INPUT, "ys")(
    lambda: model.NQFData(jnp.stack([jnp.eye(3)] * 4), jnp.ones(5)))
case("NQFData ys with inf", ValueError, "ys")(
    lambda: model.NQFData(jnp.stack([jnp.eye(3)] * 2), jnp.array([1.0, jnp.inf])))
case("NQFData gs wrong shape", BAD_INPUT, "gs")(lambda: _nqf_data(_general(gs=np.ones((M_, P_ + 1)))))
case("NQFData gs with NaN silent", ValueError, "gs")(
    lambda: _nqf_data(_general(gs=np.full((M_, P_), np.nan))))
case("NQFData Bs wrong shape", BAD_INPUT, "Bs")(lambda: _nqf_data(_general(Bs=np.ones((M_, P_, P_ + 1)))))
case("NQFData Bs with NaN silent", ValueError, "Bs")(
    lambda: _nqf_data(_general(Bs=np.full((M_, P_, P_), np.nan))))
case("NQFData f0 wrong length", BAD_INPUT, "f0")(lambda: _nqf_data(_general(f0=np.ones(M_ + 2))))
case("NQFData f0 string", TypeError, "f0")(lambda: _nqf_data(_general(f0="zero")))
case("NQFData As string", TypeError, "As")(lambda: model.NQFData("As", jnp.ones(2)))
case("outputs data not NQFData", TypeError, "data")(lambda: model.outputs(M0, (jnp.ones((4, 3, 3)), jnp.ones(4))))
case("outputs M wrong size", BAD_INPUT, "M")(lambda: model.outputs(jnp.eye(4), DATA))
case("outputs M not symmetric", ValueError, "M")(lambda: model.outputs(jnp.triu(jnp.ones((3, 3))), DATA))
case("outputs mu wrong length", BAD_INPUT, "mu")(lambda: model.outputs(M0, _nqf_data(_general()), mu=jnp.ones(5)))
case("mse_loss M with NaN", ValueError, "M")(lambda: model.mse_loss(jnp.full((3, 3), jnp.nan), DATA))
case("mse_loss mu wrong length", BAD_INPUT, "mu")(lambda: model.mse_loss(M0, _nqf_data(_general()), mu=jnp.ones(2)))
case("h_matrix M wrong size", BAD_INPUT, "M")(lambda: model.h_matrix(jnp.eye(2), DATA))
case("h_matrix data not NQFData", TypeError, "data")(lambda: model.h_matrix(M0, None))
case("h_matrix M with NaN", ValueError, "M")(lambda: model.h_matrix(jnp.full((3, 3), jnp.nan), DATA))
case("ntk d=0", ValueError, "d")(lambda: model.ntk(M0, MU0, DATA, d=0))
case("ntk d=2.5", TypeError, "d")(lambda: model.ntk(M0, MU0, DATA, d=2.5))
case("ntk mu wrong length", BAD_INPUT, "mu")(lambda: model.ntk(M0, jnp.ones(4), DATA, d=3))

# ------------------------------------------------------------------ dynamics
case("nqf_sgd batch index 10 with m=4 silent", ValueError, "batches")(
    lambda: updates.nqf_sgd(_state(), DATA, jnp.array([[0, 10]]), eta=0.1, d=3))
case("nqf_sgd batch index -7 silent", ValueError, "batches")(
    lambda: updates.nqf_sgd(_state(), DATA, jnp.array([[-7, 1]]), eta=0.1, d=3))
case("nqf_sgd batch indices float", TypeError, "batches")(
    lambda: updates.nqf_sgd(_state(), DATA, jnp.array([[0.0, 1.0]]), eta=0.1, d=3))
case("nqf_sgd batches 1-d", BAD_INPUT, "batches")(
    lambda: updates.nqf_sgd(_state(), DATA, jnp.array([0, 1]), eta=0.1, d=3))
case("nqf_sgd d=2.5 silent", TypeError, "d")(lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta=0.1, d=2.5))
case("nqf_sgd d=0", ValueError, "d")(lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta=0.1, d=0))
case("nqf_sgd eta=-0.1", ValueError, "eta")(lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta=-0.1, d=3))
case("nqf_sgd eta=nan", ValueError, "eta")(lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta=float("nan"), d=3))
case("nqf_sgd eta='0.1'", TypeError, "eta")(lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta="0.1", d=3))
case("nqf_sgd momentum=1.5", ValueError, "momentum")(
    lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta=0.1, d=3, momentum=1.5))
case("nqf_sgd weight_decay=-1", ValueError, "weight_decay")(
    lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta=0.1, d=3, weight_decay=-1.0))
case("nqf_sgd data not NQFData", TypeError, "data")(
    lambda: updates.nqf_sgd(_state(), (jnp.ones((4, 3, 3)), jnp.ones(4)), BATCHES, eta=0.1, d=3))
case("nqf_sgd state not a state", TypeError, "state")(lambda: updates.nqf_sgd(M0, DATA, BATCHES, eta=0.1, d=3))
case("nqf_sgd M not PSD silent", ValueError, "M")(
    lambda: updates.nqf_sgd(updates._discrete.sgd_state(_sym_not_psd(), MU0), DATA, BATCHES, eta=0.1, d=3))
case("nqf_sgd eta=0", ValueError, "eta")(lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta=0.0, d=3))
case("sgd_state mu wrong length", BAD_INPUT, "mu")(lambda: updates._discrete.sgd_state(M0, jnp.ones(4)))
case("sgd_state M not square", BAD_INPUT, "M")(lambda: updates._discrete.sgd_state(jnp.ones((3, 2)), MU0))
case("nqf_sgd momentum=1", ValueError, "momentum")(
    lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta=0.1, d=3, momentum=1.0))
case("nqf_sgd batch index 4 with m=4 (momentum)", ValueError, "batches")(
    lambda: updates.nqf_sgd(_state(), DATA, jnp.array([[4, 0]]), eta=0.1, d=3, momentum=0.9))
case("gradient_flow rtol=-1 silent", ValueError, "rtol")(lambda: flow.gradient_flow(M0, DATA, TS, options=flow.ODEOptions(rtol=-1.0)))
case("gradient_flow rtol=0", ValueError, "rtol")(lambda: flow.gradient_flow(M0, DATA, TS, options=flow.ODEOptions(rtol=0.0)))
case("gradient_flow atol=inf", ValueError, "atol")(lambda: flow.gradient_flow(M0, DATA, TS, options=flow.ODEOptions(atol=float("inf"))))
case("gradient_flow solver unknown", ValueError, "solver")(
    lambda: flow.gradient_flow(M0, DATA, TS, options=flow.ODEOptions(solver="euler-ish")))
case("gradient_flow time unknown", ValueError, "time")(lambda: flow.gradient_flow(M0, DATA, TS, options=flow.ODEOptions(time="loglog")))
case("gradient_flow ts decreasing", ValueError, "ts")(
    lambda: flow.gradient_flow(M0, DATA, jnp.array([0.0, 2.0, 1.0])))
case("gradient_flow ts 2-d", BAD_INPUT, "ts")(lambda: flow.gradient_flow(M0, DATA, jnp.ones((2, 2))))
case("gradient_flow ts with NaN", ValueError, "ts")(
    lambda: flow.gradient_flow(M0, DATA, jnp.array([0.0, jnp.nan])))
case("gradient_flow M0 wrong size", BAD_INPUT, "M0")(lambda: flow.gradient_flow(jnp.eye(4), DATA, TS))
case("gradient_flow M0 not PSD", ValueError, "M0")(lambda: flow.gradient_flow(_sym_not_psd(), DATA, TS))
case("gradient_flow max_steps=0", ValueError, "max_steps")(
    lambda: flow.gradient_flow(M0, DATA, TS, options=flow.ODEOptions(max_steps=0)))
case("gradient_flow max_steps=10.5", TypeError, "max_steps")(
    lambda: flow.gradient_flow(M0, DATA, TS, options=flow.ODEOptions(max_steps=10.5)))
case("gradient_flow data not NQFData", TypeError, "data")(
    lambda: flow.gradient_flow(M0, (jnp.ones((4, 3, 3)), jnp.ones(4)), TS))
case("gradient_flow M0 4-d", BAD_INPUT, "M0")(lambda: flow.gradient_flow(M0[None, None], DATA, TS))
case("gradient_flow batch max_steps=0", ValueError, "max_steps")(
    lambda: flow.gradient_flow(M0[None], DATA, TS, options=flow.ODEOptions(max_steps=0)))
case("gradient_flow batch M0 not PSD", ValueError, "M0")(
    lambda: flow.gradient_flow(_sym_not_psd()[None], DATA, TS))
case("gradient_flow progress not bool", TypeError, "progress")(
    lambda: flow.gradient_flow(M0, DATA, TS, options=flow.ODEOptions(progress="yes")))
case("gradient_flow mesh without a batch", ValueError, "mesh")(
    lambda: flow.gradient_flow(M0, DATA, TS, mesh=flow.batch_mesh()))
case("log_times n=1 silent", ValueError, "n")(lambda: flow.log_times(10.0, n=1))
case("log_times n=0", ValueError, "n")(lambda: flow.log_times(10.0, n=0))
case("log_times n=2.5", TypeError, "n")(lambda: flow.log_times(10.0, n=2.5))
case("log_times t_max=-1", ValueError, "t_max")(lambda: flow.log_times(-1.0, 200))
case("log_times t_min > t_max", ValueError, "t_min")(lambda: flow.log_times(1.0, 200, t_min=5.0))


case("compare_with_nqf optimizer string", TypeError, "optimizer")(
    lambda: training.compare_with_nqf(_mlp(), None, "adam", num_steps=5, params=jnp.ones((4, 3))))
case("compare_with_nqf num_steps=0", ValueError, "num_steps")(
    lambda: training.compare_with_nqf(_mlp(), None, optax.sgd(0.1), num_steps=0, params=jnp.ones((4, 3))))
case("compare_with_nqf key=42", TypeError, "key")(
    lambda: training.compare_with_nqf(_mlp(), (jnp.ones((5, 3)), jnp.ones(5)), optax.sgd(0.1), num_steps=5,
                                      params=0.1 * jnp.ones((4, 3)), key=42))
case("compare_with_nqf module not callable", TypeError, "model")(
    lambda: training.compare_with_nqf("mlp", None, optax.sgd(0.1), num_steps=5, params=jnp.ones((4, 3))))
case("compress d=0", ValueError, "d")(lambda: updates.compress(_state(), DATA, d=0, eta=0.1))
case("compress eta=-1", ValueError, "eta")(lambda: updates.compress(_state(), DATA, d=3, eta=-1.0))
case("compress rtol=0", ValueError, "rtol")(lambda: updates.compress(_state(), DATA, d=3, eta=0.1, rtol=0.0))
case("weights_from_statistics d=0", ValueError, "d")(lambda: updates.weights_from_statistics(M0, MU0, 0))
case("weights_from_statistics M not PSD", ValueError, "M")(
    lambda: updates.weights_from_statistics(_sym_not_psd(), MU0, 3))
case("weights_from_statistics mu wrong length", BAD_INPUT, "mu")(
    lambda: updates.weights_from_statistics(M0, jnp.ones(2), 3))
case("same_statistics W 1-d", BAD_INPUT, "W")(lambda: updates.same_statistics(jnp.ones(3), seed=0))

# ----------------------------------------------------------------- solutions
case("switch_on_time C_kk=-1 silent", ValueError, "C_kk")(lambda: solutions.switch_on_time(1.0, C_kk=-1.0, z0=1e-3))
case("switch_on_time z0=-1e-3 silent", ValueError, "z0")(lambda: solutions.switch_on_time(1.0, C_kk=1.0, z0=-1e-3))
case("switch_on_time r=0", ValueError, "r")(lambda: solutions.switch_on_time(0.0, C_kk=1.0, z0=1e-3))
case("switch_on_time rho=1.5", ValueError, "rho")(lambda: solutions.switch_on_time(1.0, 1.0, 1e-3, rho=1.5))
case("switch_on_time a=0", ValueError, "a")(lambda: solutions.switch_on_time(1.0, 1.0, 1e-3, a=0.0))
case("switch_on_time z0 above the plateau", ValueError, "z0")(lambda: solutions.switch_on_time(1.0, 1.0, 2.0))
case("logistic_solution z0<0", ValueError, "z0")(lambda: solutions.logistic_solution(1.0, 1.0, 1.0, -1e-3))
case("logistic_solution C_kk=-1", ValueError, "C_kk")(lambda: solutions.logistic_solution(1.0, 1.0, -1.0, 1e-3))
case("features P not orthogonal silent", ValueError, "P")(lambda: solutions.features(M0, 2.0 * jnp.eye(P_)))
case("features P wrong size", BAD_INPUT, "P")(lambda: solutions.features(M0, jnp.eye(P_ + 1)))
case("features M not square", BAD_INPUT, "M")(lambda: solutions.features(jnp.ones((3, 2)), jnp.eye(P_)))
case("lv_flow z0 wrong length", BAD_INPUT, "z0")(
    lambda: solutions.lv_flow(jnp.ones(3), jnp.eye(3), jnp.ones(2), TS))
case("lv_flow z0 negative", ValueError, "z0")(
    lambda: solutions.lv_flow(jnp.ones(3), jnp.eye(3), -jnp.ones(3), TS))
case("lv_flow rtol=-1", ValueError, "rtol")(
    lambda: solutions.lv_flow(jnp.ones(3), jnp.eye(3), jnp.ones(3), TS, options=flow.ODEOptions(rtol=-1.0)))
case("lv_flow solver unknown", ValueError, "solver")(
    lambda: solutions.lv_flow(jnp.ones(3), jnp.eye(3), jnp.ones(3), TS, options=flow.ODEOptions(solver="rk99")))
case("lv_coefficients tol=-1", ValueError, "tol")(lambda: solutions.lv_coefficients(DATA, tol=-1.0))
case("lv_coefficients data not NQFData", TypeError, "data")(lambda: solutions.lv_coefficients(jnp.ones((4, 3, 3))))
case("growth_and_competition ys wrong length", BAD_INPUT, "ys")(
    lambda: solutions.growth_and_competition(jnp.ones((4, 3)), jnp.ones(5)))
case("growth_and_competition lambdas 1-d", BAD_INPUT, "lambdas")(
    lambda: solutions.growth_and_competition(jnp.ones(4), jnp.ones(4)))
case("commuting_eigenbasis As not square", BAD_INPUT, "As")(
    lambda: solutions._lotka_volterra.commuting_eigenbasis(jnp.ones((2, 3, 2)), seed=0))
case("commuting_eigenbasis tol=0", ValueError, "tol")(
    lambda: solutions._lotka_volterra.commuting_eigenbasis(jnp.stack([jnp.eye(3)] * 2), tol=0.0, seed=0))
case("saxe_learning_time s=0", ValueError, "s")(lambda: solutions.saxe_learning_time(0.0, 1e-3, 0.5))
case("saxe_learning_time uf > s", ValueError, "uf")(lambda: solutions.saxe_learning_time(1.0, 1e-3, 2.0))
case("saxe_learning_time u0=-1", ValueError, "u0")(lambda: solutions.saxe_learning_time(1.0, -1.0, 0.5))
case("implicit_xi t negative", ValueError, "t")(
    lambda: solutions.implicit_xi(jnp.array([-1.0, 0.0]), jnp.ones(2), jnp.ones(2), jnp.array(1.0)))

# ------------------------------------------------------------------ datasets
case("random_orthogonal n=0", ValueError, "n")(lambda: datasets.random_orthogonal(0, seed=0))
case("random_orthogonal n=2.5", TypeError, "n")(lambda: datasets.random_orthogonal(2.5, seed=0))


case("orthogonal_features_data r 2-d", BAD_INPUT, "r")(lambda: datasets.orthogonal_features_data(jnp.ones((2, 2)), 1.0, seed=0))
case("orthogonal_features_data C_kk=0", ValueError, "C_kk")(
    lambda: datasets.orthogonal_features_data(jnp.ones(3), 0.0, seed=0))
case("isotropic_dataset c=-1", ValueError, "c")(lambda: datasets.isotropic_dataset(jnp.eye(3), -1.0, seed=0))
case("isotropic_dataset Y not symmetric", ValueError, "Y")(
    lambda: datasets.isotropic_dataset(jnp.triu(jnp.ones((3, 3))), 0.25, seed=0))
case("linear_network_dataset n_in=0", ValueError, "n_in")(
    lambda: datasets.linear_network_dataset(jnp.ones(2), 0, 3, seed=0))
case("linear_network_dataset n_out=2.5", TypeError, "n_out")(
    lambda: datasets.linear_network_dataset(jnp.ones(2), 3, 2.5, seed=0))
case("commuting_dataset ys wrong length", BAD_INPUT, "ys")(
    lambda: datasets.commuting_dataset(jnp.ones((4, 3)), jnp.ones(5)))
case("proportional_dataset ys and cs lengths differ", BAD_INPUT, "ys")(
    lambda: datasets.proportional_dataset(jnp.ones(3), jnp.ones(4), jnp.ones(5)))
case("gaussian_init p=0", ValueError, "p")(lambda: datasets.gaussian_init(0, 3, 0.1, seed=0))
case("gaussian_init d=1.5", TypeError, "d")(lambda: datasets.gaussian_init(3, 1.5, 0.1, seed=0))
case("gaussian_init sigma=-0.1", ValueError, "sigma")(lambda: datasets.gaussian_init(3, 3, -0.1, seed=0))
case("power_law_spectrum K=0", ValueError, "K")(lambda: datasets._spectra.power_law_spectrum(0, 1.5, 1.0, eps=1e-3))
case("power_law_spectrum eps=0", ValueError, "eps")(lambda: datasets._spectra.power_law_spectrum(8, 1.5, 1.0, eps=0.0))
case("sample_power_law m=0", ValueError, "m")(lambda: datasets.sample_power_law(0, 1.5, 1.0, eps=1e-3))
case("fourier_dataset P=0", ValueError, "P")(lambda: datasets.fourier_dataset(P=0, M=256))
case("teacher_dataset module not callable", TypeError, "module")(
    lambda: datasets.teacher_dataset("mlp", 3, 5, p=4, seed=0))

# ------------------------------------------------------------------- pipeline
from nqfbook import kit  # noqa: E402

case("Claims fidelity empty", ValueError, "fidelity")(lambda: kit.Claims("ch01", "", "/tmp"))
case("Claims chapter with a slash", ValueError, "chapter")(lambda: kit.Claims("ch01/x", "quick", "/tmp"))
case("crossing_time t not increasing", ValueError, "times")(
    lambda: kit.crossing_time(jnp.array([0.0, 2.0, 1.0]), jnp.array([0.0, 1.0, 2.0]), 0.5))
case("intercept_fit x, y lengths differ", BAD_INPUT, "y")(
    lambda: kit.intercept_fit(jnp.ones(3), jnp.ones(4)))
case("step_deviation margin=-1", ValueError, "margin")(
    lambda: kit.step_deviation(jnp.linspace(0, 1, 5), jnp.ones(5), jnp.ones(5), jnp.array([0.5]), -1.0))


# ------------------------------------------------------------------- the test
# ------------------------------------------- issue 22: silent answers and obscure errors
case("NQFData.subset index out of range silent", ValueError, "index")(lambda: DATA.subset(jnp.array([0, M_])))
case("NQFData.subset negative index silent", ValueError, "index")(lambda: DATA.subset(jnp.array([-1])))
case("NQFData.subset float index", TypeError, "index")(lambda: DATA.subset(np.array([0.5])))
case("nqf_sgd eta<0 silent", ValueError, "eta")(lambda: updates.nqf_sgd(_state(), DATA, BATCHES, eta=-0.1, d=3))
case("lv_coefficients all-zero A silent", ValueError, "data")(
    lambda: solutions.lv_coefficients(model.NQFData(jnp.zeros((M_, P_, P_)), jnp.ones(M_))))
case("structure_report module returns NaN silent", ValueError, "module")(
    lambda: nqf.structure_report(lambda W, x: jnp.sum(W) * jnp.nan, X3, p=4))
case("structure_stack xs without batch axis", ValueError, "xs")(lambda: structure._autodiff.structure_stack(_mlp(), X3))
case("structure_stack empty batch", ValueError, "xs")(lambda: structure._autodiff.structure_stack(_mlp(), jnp.ones((0, 3))))
case("cnn activation string", TypeError, "activation")(
    lambda: architectures.cnn(4, 4, 2, 2, activation="tanh", check_smooth=False))
case("two_layer_mlp activation string, unchecked", TypeError, "activation")(
    lambda: architectures.two_layer_mlp(3, activation="tanh", check_smooth=False))
case("mixture_of_experts expert string", TypeError, "expert")(
    lambda: architectures._modules.mixture_of_experts(3, expert="linear", n_theta=3))


def _quad(w, batch, args):
    X, y = batch
    return jnp.mean((X @ w - y) ** 2)


_XY = (jnp.ones((6, 3)), jnp.ones(6))
for _label, _bad in [("string", "adam"), ("uncalled factory", optax.sgd), ("None", None), ("int", 3)]:
    case(f"train optimizer {_label}", TypeError, "optimizer")(
        lambda _bad=_bad: training.train(_quad, jnp.ones(3), _bad, num_steps=3, data=_XY))
case("train num_steps=2.5", TypeError, "num_steps")(
    lambda: training.train(_quad, jnp.ones(3), optax.sgd(0.1), num_steps=2.5, data=_XY))
case("train num_steps=0", ValueError, "num_steps")(
    lambda: training.train(_quad, jnp.ones(3), optax.sgd(0.1), num_steps=0, data=_XY))
case("train loss not callable", TypeError, "loss")(
    lambda: training.train("mse", jnp.ones(3), optax.sgd(0.1), num_steps=3, data=_XY))
case("train loss returns a vector", TypeError, "loss")(
    lambda: training.train(lambda w, b, a: w**2, jnp.ones(3), optax.sgd(0.1), num_steps=3))
case("train integer params", TypeError, "params0")(
    lambda: training.train(_quad, jnp.array([1, 2, 3]), optax.sgd(0.1), num_steps=3, data=_XY))
case("train NaN params silent", ValueError, "params0")(
    lambda: training.train(_quad, jnp.array([1.0, jnp.nan, 0.0]), optax.sgd(0.1), num_steps=3, data=_XY))
case("train diverges, on_divergence=raise", RuntimeError, "learning_rate")(
    lambda: training.train(_quad, jnp.ones(3), training.optimizer("sgd", 1e3), num_steps=100, data=_XY,
                           runs=training.Runs(on_divergence="raise")))
case("train on_divergence unknown", ValueError, "on_divergence")(
    lambda: training.train(_quad, jnp.ones(3), optax.sgd(0.1), num_steps=3, data=_XY,
                           runs=training.Runs(on_divergence="stop")))
case("train record_every does not divide", ValueError, "record_every")(
    lambda: training.train(_quad, jnp.ones(3), optax.sgd(0.1), num_steps=5, data=_XY,
                           runs=training.Runs(record_every=2)))
case("train batches out of range silent", ValueError, "batches")(
    lambda: training.train(_quad, jnp.ones(3), optax.sgd(0.1), num_steps=2,
                           data=training.Minibatches(_XY, jnp.array([[0, 9]] * 2))))
case("train sample without key", ValueError, "key")(
    lambda: training.train(_quad, jnp.ones(3), optax.sgd(0.1), num_steps=2,
                           data=training.Stream(lambda k, a: _XY, None)))
case("optimizer learning_rate<0 silent", ValueError, "learning_rate")(lambda: training.optimizer("sgd", -0.1))
case("optimizer learning_rate NaN", ValueError, "learning_rate")(lambda: training.optimizer("sgd", float("nan")))
case("optimizer unknown name", ValueError, "name")(lambda: training.optimizer("sgdd", 0.1))
case("optimizer hyperparameter list", TypeError, "momentum")(lambda: training.optimizer("sgd", 0.1, momentum=[0.9]))
case("compare_with_nqf float32 model", ValueError, "params")(
    lambda: training.compare_with_nqf(_mlp(), (jnp.ones((5, 3)), jnp.ones(5)), optax.sgd(0.1), num_steps=2,
                                      params=0.01 * jnp.ones((4, 3), jnp.float32)))
case("compare_with_nqf optimizer uncalled factory", TypeError, "optimizer")(
    lambda: training.compare_with_nqf(_mlp(), (jnp.ones((5, 3)), jnp.ones(5)), optax.adam, num_steps=2,
                                      params=0.01 * jnp.ones((4, 3))))
case("Agreement.window gap without time axis", BAD_INPUT, "gap")(
    lambda: training.Agreement(0.1).window(np.arange(3), np.float64(0.1)))
case("relative_gap shapes differ", ValueError, "a")(lambda: training.relative_gap(np.ones((3, 2)), np.ones((3, 3))))


def test_a_diverging_nqf_sgd_run_warns_naming_eta():
    with pytest.warns(RuntimeWarning, match="`eta`"):
        run = updates.nqf_sgd(_state(), DATA, jnp.tile(jnp.arange(M_), (60, 1)), eta=1e3, d=3)
    assert not np.all(np.isfinite(np.asarray(run.M[-1])))


def test_a_diverging_training_run_is_flagged_not_silent():
    with pytest.warns(RuntimeWarning, match="diverged"):
        res = training.train(_quad, jnp.ones(3), training.optimizer("sgd", 1e3), num_steps=100, data=_XY)
    assert bool(res.diverged) and int(res.first_nonfinite) >= 0


def _names_argument(message: str, name: str) -> bool:
    return bool(re.search(rf"`{re.escape(name)}`|parameter '{re.escape(name)}'", message))


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_a_clear_error(c):
    with pytest.raises(c.exc) as info:
        c.call()
    assert _names_argument(str(info.value), c.name), (
        f"the error does not name the argument `{c.name}`: {type(info.value).__name__}: {info.value}")


def test_there_are_at_least_100_kinds():
    assert len(CASES) >= 100
    assert len({c.id for c in CASES}) == len(CASES)


# ------------------------------------------- issue 30: the new surfaces, one test per class
# Each test checks a class of bad input the issue found (crash, obscure error, silent result) with several
# neighbours of the value it reported: the error is a TypeError for the wrong kind and a ValueError for the
# wrong value, and it names the argument; a diverging run warns naming its cause.
def _raises_naming(exc, name: str, fn, *also: str):
    with pytest.raises(exc) as info:
        fn()
    text = str(info.value)
    assert _names_argument(text, name), f"does not name `{name}`: {type(info.value).__name__}: {text}"
    for word in also:
        assert word in text, f"does not say {word!r}: {text}"
    return text


def _sq(w, batch, args):
    return jnp.sum(w**2)


@pytest.mark.parametrize("num_steps", [2**62, 10**30, 2**31, 2**40 + 1, 2**27 + 1])
def test_30_crash_a_huge_num_steps_is_refused_before_jax_sees_it(num_steps):
    _raises_naming(ValueError, "num_steps", lambda: training.train(_sq, jnp.ones(3), optax.sgd(0.1),
                                                                     num_steps=num_steps), str(2**27))
    _raises_naming(ValueError, "num_steps", lambda: training.train(_sq, jnp.ones((4, 3)), optax.sgd(0.1),
                                                                   num_steps=2**25 + 1,
                                                                   runs=training.Runs(vmap=("params",))))
    _raises_naming(ValueError, "max_steps", lambda: flow.gradient_flow(
        0.01 * np.eye(P_), DATA, np.linspace(0, 1, 5), options=flow.ODEOptions(max_steps=num_steps * 2**62)))


@pytest.mark.parametrize("vmap", [0, 1.5, [0], ("params", 3), (3, "params"), {"params": 0}])
def test_30_obscure_train_vmap_of_the_wrong_kind(vmap):
    # Called ten times: a tuple with one bad item once got the type checker's unnamed error or ours at random
    # (beartype, under the tests' jaxtyping hook, checks one random item of a ``tuple[str, ...]``).
    for _ in range(10):
        _raises_naming(TypeError, "vmap", lambda: training.train(_sq, jnp.ones(3), optax.sgd(0.1), num_steps=2,
                                                                 runs=training.Runs(vmap=vmap)))


def _loss2(params, batch):
    return jnp.sum(params**2)


def _loss4(params, batch, args, extra):
    return jnp.sum(params**2)


@pytest.mark.parametrize("loss", [_loss2, lambda p: jnp.sum(p), _loss4], ids=["two args", "one arg", "four args"])
def test_30_obscure_train_a_loss_of_another_signature_says_which_to_write(loss):
    _raises_naming(TypeError, "loss", lambda: training.train(loss, jnp.ones(3), optax.sgd(0.1), num_steps=2),
                   "loss(params, batch, args)", "BatchLoss")
    _raises_naming(TypeError, "record", lambda: training.train(_sq, jnp.ones(3), optax.sgd(0.1), num_steps=2,
                                                               record=lambda p: p), "Record")


@pytest.mark.parametrize("leaf", ["x", b"x", object(), True, "1.0"])
def test_30_obscure_train_a_params_leaf_that_is_not_an_array(leaf):
    text = _raises_naming(TypeError, "params0", lambda: training.train(_sq, {"a": jnp.ones(3), "b": leaf},
                                                                       optax.sgd(0.1), num_steps=2))
    assert "'b'" in text  # the leaf's path


@pytest.mark.parametrize("leaf", [np.array(["x", "y"]), np.array([b"x"]), np.array([object()]), np.array([1, 2])],
                         ids=["str array", "bytes array", "object array", "int array"])
def test_30_obscure_train_a_numpy_params_leaf_of_a_non_float_dtype(leaf):
    """A NumPy array of strings or objects is an array, but not one JAX takes: our error names `params0`, the
    leaf's path and its dtype, not JAX's 'not a valid JAX array type' (found by benchmarks/bad_input_audit.py)."""
    text = _raises_naming(TypeError, "params0", lambda: training.train(_sq, {"a": jnp.ones(3), "b": leaf},
                                                                       optax.sgd(0.1), num_steps=2), str(leaf.dtype))
    assert "'b'" in text


def _vector(params, batch):
    return params**2


def _matrix(params, batch):
    return jnp.outer(params, params)


@pytest.mark.parametrize("fn", [_vector, _matrix])
def test_30_obscure_train_a_batch_loss_of_a_vector_names_the_users_function(fn):
    _raises_naming(TypeError, "loss", lambda: training.train(training.BatchLoss(fn), jnp.ones(3), optax.sgd(0.1),
                                                             num_steps=2), fn.__name__)


@pytest.mark.parametrize("name", ["apply_updates", "lbfgs", "polyak_sgd", "chain", "_private", "sgdd", optax.lbfgs,
                                  optax.apply_updates])
def test_30_obscure_optimizer_names_the_accepted_optimisers(name):
    _raises_naming(ValueError, "name", lambda: training.optimizer(name, 0.1), "'sgd'", "'adam'")


@pytest.mark.parametrize("factory, hyper, value", [
    ("sgd", "momentum", 1.0), ("sgd", "momentum", 1.5), ("sgd", "momentum", -0.1), ("sgd", "momentum", float("nan")),
    ("adam", "b1", 2.0), ("adam", "b1", 1.0), ("adam", "b2", 1.0), ("adam", "b2", -1e-3), ("adamw", "b1", 1.0),
    ("rmsprop", "decay", 1.0), ("adam", "eps", -1.0), ("adamw", "weight_decay", -0.1),
    ("sgd", "learning_rate", 0.0), ("sgd", "learning_rate", -1.0), ("adam", "learning_rate", float("inf")),
])
def test_30_obscure_optimizer_hyperparameters_out_of_range(factory, hyper, value):
    kw = {"learning_rate": 0.1, hyper: value}
    _raises_naming(ValueError, hyper, lambda: training.optimizer(factory, **kw))


@pytest.mark.parametrize("value", ["no", "yes", 1, 0, None, 0.5])
def test_30_silent_optimizer_a_boolean_option_must_be_a_bool(value):
    _raises_naming(TypeError, "nesterov", lambda: training.optimizer("sgd", 0.1, momentum=0.9, nesterov=value))
    assert training.optimizer("sgd", 0.1, momentum=0.9, nesterov=False) is not None


def test_30_silent_optimizer_in_range_is_still_accepted():
    for name, kw in [("sgd", {"momentum": 0.0}), ("sgd", {"momentum": 0.99}), ("adam", {"b1": 0.0, "b2": 0.999}),
                     ("rmsprop", {"decay": 0.9}), ("adamw", {"weight_decay": 0.0})]:
        assert isinstance(training.optimizer(name, 0.1, **kw), training.Optimizer)


@pytest.mark.parametrize("opt", [optax.sgd(-1.0), optax.sgd(-1e-3), optax.sgd(0.1, momentum=1.5),
                                 optax.adam(0.3, b1=2.0)], ids=["sgd(-1)", "sgd(-1e-3)", "momentum 1.5", "adam b1=2"])
def test_30_silent_train_a_run_that_climbs_warns_naming_the_cause(opt):
    with pytest.warns(RuntimeWarning, match="diverged") as rec:
        res = training.train(_sq, jnp.ones(3), opt, num_steps=100)
    assert bool(res.climbed) and not bool(res.diverged)
    assert any("negative learning rate" in str(w.message) or "momentum" in str(w.message) for w in rec)
    with pytest.raises(RuntimeError, match="diverged"):
        training.train(_sq, jnp.ones(3), opt, num_steps=100, runs=training.Runs(on_divergence="raise"))


def test_30_silent_train_a_run_that_descends_does_not_warn():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for opt in [optax.sgd(0.1), optax.sgd(0.1, momentum=0.9), optax.adam(0.1), training.optimizer("sgd", 0.4)]:
            res = training.train(_sq, jnp.ones(3), opt, num_steps=100)
            assert not bool(res.climbed) and not bool(res.diverged)


@pytest.mark.parametrize("data", [{"x": jnp.ones((5, 2)), "y": jnp.ones(3)}, (jnp.ones((4, 2)), jnp.ones(6)),
                                  {"x": jnp.ones((5, 2)), "s": jnp.float64(1.0)}], ids=["5 and 3", "4 and 6", "scalar"])
def test_30_silent_train_batches_into_data_leaves_of_different_lengths(data):
    def loss(p, b, a):
        return jnp.sum(p) * sum(jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(b))

    _raises_naming(ValueError, "data", lambda: training.train(loss, jnp.ones(2), optax.sgd(0.1), num_steps=2,
                                                              data=training.Minibatches(data, jnp.array([[3], [3]]))))


@pytest.mark.parametrize("rtol", [1.0, 2.0, 1e3])
def test_30_obscure_gradient_flow_an_rtol_of_one_or_more_is_refused_at_once(rtol):
    import time

    t0 = time.perf_counter()
    options = flow.ODEOptions(rtol=rtol)
    _raises_naming(ValueError, "rtol", lambda: flow.gradient_flow(0.01 * np.eye(P_), DATA, np.linspace(0, 1, 5), options=options))
    _raises_naming(ValueError, "rtol", lambda: flow.solve_ode(_decay, np.ones(2), np.linspace(0, 1, 5), options=options))
    assert time.perf_counter() - t0 < 5.0


def _decay(t, y, args):
    return -y


@pytest.mark.parametrize("which, bad", [
    ("ts", np.linspace(0, 1, 5) + 0j), ("ts", np.linspace(0, 1, 5) + 1e-3j), ("ts", np.array([True, False])),
    ("ts", ["0", "1"]), ("M0", 0.01 * np.eye(P_) + 0j), ("M0", np.eye(P_, dtype=int)),
    ("M0", np.eye(P_, dtype=bool)), ("M0", jnp.eye(P_, dtype=jnp.int32)),
    ("M0", np.stack([np.eye(P_, dtype=int)] * 2)),
], ids=["complex ts", "complex ts, imaginary part", "bool ts", "string ts", "complex M0", "int M0", "bool M0",
        "int32 M0", "int batch M0"])
def test_30_silent_gradient_flow_complex_and_integer_inputs_are_refused(which, bad):
    import warnings

    args = {"M0": 0.01 * np.eye(P_), "ts": np.linspace(0, 1, 5), which: bad}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ComplexWarning is not the answer
        _raises_naming(BAD_INPUT + (TypeError,), which, lambda: flow.gradient_flow(args["M0"], DATA, args["ts"]))


@pytest.mark.parametrize("times, gap, name", [
    (np.zeros(0), np.zeros(0), "times"), (np.zeros(0), np.zeros((3, 0)), "times"),
    (np.arange(2), np.array(["a", "b"]), "gap"), (np.array(["a", "b"]), np.array([0.0, 1.0]), "times"),
    (np.arange(2), np.array([0j, 1.0]), "gap"), (np.arange(2), np.array([object(), 1.0]), "gap"),
], ids=["nothing recorded", "no records for 3 runs", "string gap", "string times", "complex gap", "object gap"])
def test_30_obscure_agreement_window_empty_or_non_numeric_records(times, gap, name):
    _raises_naming(BAD_INPUT + (TypeError,), name, lambda: training.Agreement(0.1).window(times, gap))


@pytest.mark.parametrize("times, threshold, name", [
    ([0, 1, 2], -0.1, "threshold"), ([0, 1, 2], 0.0, "threshold"), ([0, 1, 2], -np.inf, "threshold"),
    ([2, 1, 0], 0.1, "times"), ([0, 2, 1], 0.1, "times"), ([0, 0, 1], 0.1, "times"), ([0, np.nan, 2], 0.1, "times"),
    ([0, 1, np.inf], 0.1, "times"),
])
def test_30_silent_agreement_window_a_threshold_or_steps_that_cannot_be_right(times, threshold, name):
    gap = np.array([0.0, 0.05, 0.5])
    _raises_naming(ValueError, name, lambda: training.Agreement(threshold).window(np.array(times, dtype=float), gap))
    assert float(training.Agreement(0.1).window(np.arange(3), gap)) == 2.0  # the good call answers


@pytest.mark.parametrize("value", [["a"], [0.1, "a"], "0.1", {"a": 1.0}, [[0.1]], [None]])
def test_30_silent_by_fidelity_a_value_of_another_kind_than_the_defaults(value):
    from nqfbook.kit import by_fidelity

    _raises_naming(TypeError, "etas", lambda: by_fidelity("etas", value, "quick", quick=[0.0, 1e-3], full=[0.0, 1e-4]))
    assert by_fidelity("etas", [0.0, 1], "quick", quick=[0.0, 1e-3], full=[0.0]) == [0.0, 1]


@pytest.mark.parametrize("out_dir, exc", [(None, TypeError), (3, TypeError), (b"out", TypeError), ("", ValueError),
                                          ("FILE", ValueError), ("FILE/sub", ValueError)])
def test_30_obscure_start_chapter_out_dir_none_or_a_file(tmp_path, out_dir, exc):
    from nqfbook.kit import start_chapter

    (tmp_path / "afile").write_text("not a folder")
    if isinstance(out_dir, str) and out_dir.startswith("FILE"):
        out_dir = str(tmp_path / "afile") + out_dir[4:]
    _raises_naming(exc, "out_dir", lambda: start_chapter("ch01", "quick", out_dir))


def _chapter_parameters(stem: str):
    import nqfbook

    return nqfbook.parameter_info(next((Path(__file__).resolve().parents[1] / "notebooks").glob(f"{stem}_*.ipynb")))


@pytest.mark.parametrize("stem, name, value, exc", [
    ("ch01", "rays", -1, ValueError), ("ch01", "rays", 0, ValueError), ("ch01", "n_scales", -8, ValueError),
    ("ch10", "width", -3, ValueError), ("ch10", "width", 0, ValueError), ("ch10", "eta", -0.05, ValueError),
    ("ch10", "eta", 0, ValueError), ("ch10", "init_scale", -1e-3, ValueError),
    ("ch10", "num_steps", "abc", TypeError), ("ch10", "num_steps", -5, ValueError),
    ("ch10", "m_samples", 2.5, TypeError), ("ch10", "teacher_s", [], ValueError),
    ("ch10", "teacher_s", [1.0, -0.5], ValueError), ("ch04", "etas", ["a"], TypeError),
    ("ch04", "etas", [-1e-3], ValueError), ("ch04", "etas", [], ValueError), ("ch05", "eps_min", -1e-38, ValueError),
    ("ch05", "n_tau", 0, ValueError), ("ch03", "width_thm2", -1, ValueError), ("ch02", "steps", -10, ValueError),
])
def test_30_runner_parameters_are_checked_for_their_range_by_the_runner_and_the_kernel(stem, name, value, exc):
    """The declaration of the real chapter's parameters cell: the runner's ``-p`` check and the kernel's check of
    papermill's injected cell refuse the value, naming the parameter; the declared defaults pass both."""
    import nqfbook
    from nqfbook.kit._chapter import check_injected_parameters

    info = _chapter_parameters(stem)
    default, _, hint = info[name]
    with pytest.raises(nqfbook.RunnerError, match=rf"-p {name} must be"):
        nqfbook.check_parameter_type(stem, name, default, value, hint=hint)
    cell = "".join(f"{n}: {h!r} = {d!r}\n" if h else f"{n} = {d!r}\n" for n, (d, _, h) in info.items())
    _raises_naming(exc, name, lambda: check_injected_parameters([cell, f"# Parameters\n{name} = {value!r}\n"]))
    check_injected_parameters([cell, f"# Parameters\n{name} = {default!r}\n"])  # the default is in range


@pytest.mark.parametrize("value", ["float('nan')", "float('inf')", 'float("-inf")'])
def test_30_runner_parameters_a_non_finite_float_as_papermill_writes_it(value):
    """papermill injects NaN and infinities as ``float('nan')``: the kernel's range check sees them too."""
    from nqfbook.kit._chapter import check_injected_parameters

    cell = 'eta: "positive float" = 0.05\nthreshold: "positive float" = 0.1\n'
    _raises_naming(ValueError, "eta", lambda: check_injected_parameters([cell, f"# Parameters\neta = {value}\n"]))


@pytest.mark.parametrize("texts", [["rays=1", "rays=2"], ["rays=1", "rays=1"], ["seed=0", "rays=1", "seed=1"]])
def test_30_runner_a_duplicated_parameter_is_refused(texts):
    import nqfbook.chapters

    with pytest.raises(nqfbook.RunnerError, match="given twice"):
        nqfbook.chapters.parse_parameters(texts)
    assert nqfbook.chapters.parse_parameters(sorted(set(t.split("=")[0] + "=1" for t in texts))) != {}


@pytest.mark.parametrize("value, says", [
    ("nosuch.mod:f", "no module 'nosuch'"), ("nosuch:f", "no module 'nosuch'"), ("ch10_models.sub:f", "ch10_models.sub"),
    ("ch10_models:nosuch", "defines no `nosuch`"), ("ch10_models", "not of the form"),
    ("ch10_models:", "not of the form"), (":make_model", "not of the form"), ("ch10 models:make", "not of the form"),
])
def test_30_runner_a_bad_model_path_names_model_the_module_and_pythonpath(value, says):
    import nqfbook
    import nqfbook.chapters

    nb = next((Path(__file__).resolve().parents[1] / "notebooks").glob("ch10_*.ipynb"))
    default, _, hint = nqfbook.parameter_info(nb)["model"]
    with pytest.raises(nqfbook.RunnerError) as info:
        nqfbook.check_parameter_type("ch10", "model", default, value, hint=hint,
                                     path=nqfbook.chapters.kernel_path(nb.parents[1], nb))
    text = str(info.value)
    assert "-p model" in text and says in text and "PYTHONPATH" in text, text
    found = nqfbook.check_parameter_type("ch10", "model", default, default, hint=hint,
                                         path=nqfbook.chapters.kernel_path(nb.parents[1], nb))
    assert found == nb.parent / "ch10_models.py"


# ----------------------------------------------------- no cache for other inputs
SCALE = 1.0


def _global_module(W, x):  # reads a global that changes: a cache keyed on the function would go stale
    return SCALE * jnp.sum(W[-1] * jnp.tanh(W[:-1].T @ x))


def test_structure_matrix_never_returns_a_result_for_other_inputs():
    global SCALE
    SCALE = 1.0
    A1 = nqf.structure_matrix(_global_module, X3, p=4)
    SCALE = 2.0
    try:
        A2 = nqf.structure_matrix(_global_module, X3, p=4)
    finally:
        SCALE = 1.0
    np.testing.assert_allclose(np.asarray(A2), 2.0 * np.asarray(A1), rtol=1e-12)


class _EqModule:
    """A callable with ``__eq__`` (unhashable): accepted as a module."""

    __hash__ = None

    def __eq__(self, other):
        return isinstance(other, _EqModule)

    def __call__(self, W, x):
        return _tanh_module(W, x)


def test_unhashable_callable_module_is_accepted():
    A = nqf.structure_matrix(_EqModule(), X3, p=4)
    np.testing.assert_allclose(np.asarray(A), np.asarray(nqf.structure_matrix(_tanh_module, X3, p=4)))


# ------------------------------------------------ values that exist only under jit
def test_out_of_range_batch_indices_under_jit_raise_naming_the_argument():
    """Under a caller's ``jit`` the indices are traced: ``equinox.error_if`` checks them at run time."""
    state = _state()
    run = jax.jit(lambda b: updates.nqf_sgd(state, DATA, b, eta=0.1, d=3).M)
    assert np.all(np.isfinite(np.asarray(run(BATCHES))))
    with pytest.raises(Exception, match="`batches` must hold sample indices in \\[0, 4\\)"):
        jax.block_until_ready(run(jnp.array([[0, 10]])))


def test_equinox_module_as_the_module_is_accepted():
    """An equinox Module holding an array (unhashable) works as a plain callable module."""
    import equinox as eqx

    class Scaled(eqx.Module):
        scale: jax.Array

        def __call__(self, W, x):
            return self.scale * _tanh_module(W, x)

    A = nqf.structure_matrix(Scaled(jnp.asarray(2.0)), X3, p=4)
    np.testing.assert_allclose(np.asarray(A), 2.0 * np.asarray(nqf.structure_matrix(_tanh_module, X3, p=4)),
                               rtol=1e-12)


# --- diagnose (issue 30) ---
import equinox as eqx  # noqa: E402


from models_example import TwoLayerNet  # noqa: E402


class _IntNet(eqx.Module):
    U: jax.Array
    V: jax.Array

    def __call__(self, x):
        return jnp.round(self.V @ jnp.tanh(self.U @ x)).astype(jnp.int64)

    def neuron_axes(self):
        return _IntNet(0, 1)


def _diag_setup(m=12):
    rng = np.random.default_rng(0)
    net = TwoLayerNet(jnp.asarray(1e-3 * rng.normal(size=(4, 3))), jnp.asarray(1e-3 * rng.normal(size=(2, 4))))
    xs = jnp.asarray(rng.normal(size=(m, 3)))
    return net, xs, xs[:, :2] * 0.5


def test_30_diagnose_inputs_of_the_wrong_width_name_data_and_the_shapes():
    net, xs, ys = _diag_setup()
    with pytest.raises(ValueError, match=r"`data` must hold inputs TwoLayerNet accepts; got inputs of shape \(5,\)"):
        solutions.diagnose(net, (jnp.ones((12, 5)), ys), optax.sgd(0.05), num_steps=10)


def test_30_diagnose_nan_inputs_name_the_users_data():
    net, xs, ys = _diag_setup()
    with pytest.raises(ValueError, match=r"`data` must hold finite inputs xs; got inputs with 1 NaN"):
        solutions.diagnose(net, (xs.at[3, 1].set(jnp.nan), ys), optax.sgd(0.05), num_steps=10)
    with pytest.raises(ValueError, match=r"`data` must hold finite targets ys"):
        solutions.diagnose(net, (xs, ys.at[0, 0].set(jnp.inf)), optax.sgd(0.05), num_steps=10)


def test_30_diagnose_momentum_one_is_refused_with_its_range():
    net, xs, ys = _diag_setup()
    with pytest.raises(ValueError, match=r"`optimizer` must have a momentum in \[0, 1\).*momentum 1"):
        solutions.diagnose(net, (xs, ys), optax.sgd(0.05, momentum=1.0), num_steps=10)
    with pytest.raises(ValueError, match=r"momentum"):  # refused by nqf.optimizer itself or by diagnose
        solutions.diagnose(net, (xs, ys), training.optimizer("sgd", 0.05, momentum=1.0), num_steps=10)
    with pytest.raises(ValueError, match=r"`optimizer` must descend \(a positive learning rate\)"):
        solutions.diagnose(net, (xs, ys), optax.sgd(-0.05), num_steps=10)


def test_30_diagnose_no_samples_is_a_clear_error():
    net, _, _ = _diag_setup()
    with pytest.raises(ValueError, match=r"`data` must hold at least one sample; got inputs with 0 samples"):
        solutions.diagnose(net, (jnp.zeros((0, 3)), jnp.zeros((0, 2))), optax.sgd(0.05), num_steps=10)


def test_30_diagnose_a_model_returning_ints_is_a_wrong_kind():
    net, xs, ys = _diag_setup()
    bad = _IntNet(net.U, net.V)
    with pytest.raises(TypeError, match=r"`model` must return floating-point outputs.*_IntNet, which returns int64"):
        solutions.diagnose(bad, (xs, ys), optax.sgd(0.05), num_steps=10)


def test_30_diagnose_n_probe_zero_is_refused():
    net, xs, ys = _diag_setup()
    with pytest.raises(ValueError, match=r"`probe`"):
        solutions.diagnose(net, (xs, ys), optax.sgd(0.05), num_steps=10, track=training.Track(probe=0))


def test_30_diagnose_a_diverging_learning_rate_warns_with_the_cause_and_prints_no_table():
    net, xs, ys = _diag_setup()
    with pytest.warns(RuntimeWarning, match=r"the optimiser diverges \(learning rate 1000: lower it\)"):
        rep = solutions.diagnose(net, (xs, ys), optax.sgd(1e3), num_steps=40)
    text = str(rep)
    assert "DIVERGED" in text and "plateau ends" not in text and rep.plateaus.levels.size == 0
