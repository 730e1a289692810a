"""Sweeps split over a jax.sharding mesh give the numbers of the unsharded sweep.

The multi-device run needs ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` before JAX
starts, so it runs in a subprocess (four CPU "devices" on this host).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from nqf import flow

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import json
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import nqf
    from nqf import flow, solutions

    assert jax.local_device_count() == 4, jax.devices()
    mesh = flow.batch_mesh()
    rng = np.random.default_rng(0)
    G = rng.normal(size=(40, 3, 3))
    As = (G + G.transpose(0, 2, 1)) / 2
    W = rng.normal(size=(3, 3)) / 3
    data = nqf.NQFData(As, np.einsum("ij,mij->m", W @ W.T, As))
    M0s = np.stack([0.01 * (k + 1) * np.eye(3) for k in range(6)])  # 6 lanes on 4 devices: padded
    ts = np.linspace(0.0, 4.0, 11)
    out = {}
    for name, kw in (("plain", {}), ("mesh", {"mesh": mesh})):
        b = nqf.gradient_flow(M0s, data, ts, **kw)
        lanes = nqf.gradient_flow(M0s, [data] * 6, ts, statistics=False, **kw)
        P = np.linalg.qr(rng.normal(size=(3, 3)))[0] if name == "plain" else P
        lam = rng.uniform(0.5, 1.5, (4, 3)) if name == "plain" else lam
        ys = rng.uniform(0.5, 1.5, 4) if name == "plain" else ys
        sd = nqf.NQFData(np.einsum("ik,mk,jk->mij", P, lam, P), ys)
        sw = solutions.singular_limit_sweep(sd, np.geomspace(1e-2, 1e-30, 5), np.linspace(0.0, 3.0, 30),
                                            options=solutions.SweepOptions(**kw))
        out[name] = {"batch": np.asarray(b.ys).tolist(), "steps": np.asarray(b.num_steps).tolist(),
                     "lanes": np.asarray(lanes.ys).tolist(),
                     "loss": np.asarray(sw.loss).tolist(), "tau_star": np.asarray(sw.tau_star_samples).tolist(),
                     "sweep_steps": np.asarray(sw.num_steps).tolist(),
                     "sharding": str(getattr(b.ys, "sharding", None))}
    print("RESULT" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def four_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_ENABLE_X64="1",
               JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


def test_sharded_batch_equals_unsharded(four_devices):
    plain, mesh = four_devices["plain"], four_devices["mesh"]
    assert len(mesh["batch"]) == 6  # padding dropped
    np.testing.assert_allclose(mesh["batch"], plain["batch"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(mesh["lanes"], plain["lanes"], rtol=1e-12, atol=1e-15)
    assert mesh["steps"] == plain["steps"]


def test_sharded_sweep_equals_unsharded(four_devices):
    plain, mesh = four_devices["plain"], four_devices["mesh"]
    np.testing.assert_allclose(mesh["loss"], plain["loss"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(mesh["tau_star"], plain["tau_star"], rtol=1e-12)
    assert mesh["sweep_steps"] == plain["sweep_steps"]


def test_batch_mesh_and_bad_mesh():
    mesh = flow.batch_mesh()
    assert mesh.axis_names == ("batch",) and mesh.size >= 1
    with pytest.raises(ValueError, match="devices"):
        flow.batch_mesh(devices=[])
    with pytest.raises(TypeError, match="mesh"):
        flow.gradient_flow(np.stack([np.eye(2)] * 2), None, np.linspace(0, 1, 3), mesh=object())
