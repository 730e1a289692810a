"""The export cache of the flow (nqf/flow/_export.py): the exported program gives the normal
path's numbers bit for bit (in this process and, loaded from disk, in a new one that never traces
diffrax), a stale or damaged file falls back with no error and no wrong number, every shape and
option has its own key, and without a cache folder nothing is written.

The cache serves only programs without host callbacks, i.e. with equinox's checks traced by its documented
switch ``EQX_ON_ERROR=nan`` (read when equinox is imported; nqf never changes it). This module's tests run in a
child pytest with that mode (:func:`test_the_export_tests_under_equinox_nan_mode`); in the session's own mode
(equinox's default, ``raise``) only the tests that say so run, and nothing is written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import nqf
from nqf import NQFData
from nqf.flow import _export
from nqf.flow import _flow

ROOT = Path(__file__).resolve().parents[1]
TS = np.linspace(0.0, 5.0, 26)
NAN_MODE = os.environ.get("EQX_ON_ERROR") == "nan"
in_nan_mode = pytest.mark.skipif(not NAN_MODE, reason="run in a child with EQX_ON_ERROR=nan by "
                                                        "test_the_export_tests_under_equinox_nan_mode")


def test_the_export_tests_under_equinox_nan_mode(tmp_path):
    """This module in a child pytest whose equinox traces its checks as NaN (no host callbacks): every test
    passes there (only this one and the default-mode one skip)."""
    if NAN_MODE:
        pytest.skip("this is the child")
    env = dict(os.environ, EQX_ON_ERROR="nan")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:randomly", "-p",
                          "no:cacheprovider", "-rs", str(Path(__file__))], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=1200)
    skipped = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert run.returncode == 0 and len(skipped) == 2, run.stdout[-4000:]  # only the two tests of the parent's mode


def test_equinox_default_mode_writes_nothing_and_gives_the_normal_numbers(cache):
    """Under equinox's default mode its checks are host callbacks, which cannot be serialized: no file, the
    normal path's numbers."""
    if NAN_MODE:
        pytest.skip("needs equinox's default mode")
    M0, data = _M0(3), _data(7, 3)
    _same(nqf.gradient_flow(M0, data, TS, options=nqf.flow.ODEOptions(max_steps=4096)), _normal(M0, data, options=nqf.flow.ODEOptions(max_steps=4096)))
    assert _files(cache) == [] and not _export.callback_free()


def _data(m, p, seed=0):
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(m, p, p))
    As = (G + np.swapaxes(G, 1, 2)) / (2 * np.sqrt(p))
    W = rng.normal(size=(p, p)) / np.sqrt(p)
    return NQFData(As, np.einsum("ij,mij->m", W @ W.T, As))


def _M0(p, seed=1):
    W = 0.3 * np.random.default_rng(seed).normal(size=(p, p)) / np.sqrt(p)
    return W @ W.T + 1e-3 * np.eye(p)


CASES = {  # name: (M0, data, options)
    "statistics": lambda: (_M0(3), _data(40, 3), {"statistics": True}),
    "samples": lambda: (_M0(3), _data(7, 3), {"statistics": False}),
    "dopri8, log time": lambda: (_M0(3), _data(40, 3),
                                 {"options": nqf.flow.ODEOptions(solver="dopri8", time="log", rtol=1e-9)}),
    "batch, shared": lambda: (np.stack([_M0(3, 1), _M0(3, 2)]), _data(40, 3), {}),
    "batch, per lane": lambda: (np.stack([_M0(3, 1), _M0(3, 2)]), [_data(7, 3, 1), _data(7, 3, 2)], {}),
}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh export folder and an empty in-memory table: every call starts from the disk."""
    folder = tmp_path / "nqf-export"
    monkeypatch.setattr(_export, "folder", lambda: folder)
    monkeypatch.setattr(_export, "_calls", {})
    return folder


def _normal(M0, data, **options):
    """The flow without the export cache (the path taken when JAX has no cache folder)."""
    os.environ["NQF_EXPORT_CACHE"] = "0"
    try:
        return nqf.gradient_flow(M0, data, TS, **options)
    finally:
        del os.environ["NQF_EXPORT_CACHE"]


def _same(a, b):
    for name in ("ts", "ys", "num_steps", "num_accepted", "num_rejected", "successful"):
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert x.shape == y.shape and x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)  # bit for bit


def _files(folder):
    return sorted(folder.glob("*.bin")) if folder.exists() else []


@in_nan_mode
@pytest.mark.parametrize("name", sorted(CASES))
def test_exported_path_equals_normal_path(cache, name):
    M0, data, options = CASES[name]()
    ref = _normal(M0, data, **options)
    written = nqf.gradient_flow(M0, data, TS, **options)  # exports, writes, calls the export
    assert len(_files(cache)) == 1
    _export._calls.clear()
    loaded = nqf.gradient_flow(M0, data, TS, **options)  # reads the file back
    _same(written, ref)
    _same(loaded, ref)
    assert isinstance(loaded, _flow.ODESolution) and np.all(np.asarray(loaded.num_steps) > 0)
@in_nan_mode
def test_new_data_of_the_same_shapes_reuses_the_export(cache):
    nqf.gradient_flow(_M0(3), _data(40, 3), TS)
    (path,) = _files(cache)
    before = path.stat().st_mtime_ns
    other = _data(40, 3, seed=5)
    options = nqf.flow.ODEOptions(rtol=1e-9)
    _same(nqf.gradient_flow(_M0(3, 4), other, TS, options=options), _normal(_M0(3, 4), other, options=options))
    assert _files(cache) == [path] and path.stat().st_mtime_ns == before


DAMAGE = {
    "garbage": lambda blob: b"not an export at all",
    "empty": lambda blob: b"",
    "truncated": lambda blob: blob[: len(blob) // 2],
    "one byte flipped in the program": lambda blob: blob[:-100] + bytes([blob[-100] ^ 0x40]) + blob[-99:],
    "header of another key": lambda blob: _reheader(blob, key="another call"),
}


def _reheader(blob, **changes):
    first, header, payload = blob.split(b"\n", 2)
    meta = json.loads(header) | changes
    return first + b"\n" + json.dumps(meta).encode() + b"\n" + payload


@in_nan_mode
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_file_falls_back_and_is_rewritten(cache, damage):
    M0, data = _M0(3), _data(40, 3)
    ref = _normal(M0, data)
    nqf.gradient_flow(M0, data, TS)
    (path,) = _files(cache)
    good = path.read_bytes()
    path.write_bytes(DAMAGE[damage](good))
    _export._calls.clear()
    _same(nqf.gradient_flow(M0, data, TS), ref)
    key = json.loads(good.split(b"\n", 2)[1])["key"]
    assert json.loads(path.read_bytes().split(b"\n", 2)[1])["key"] == key  # rewritten for its own key ...
    avals = [_export._aval(x) for x in jax.tree.leaves((M0, data, TS, 1e-10, 1e-14))]
    assert _export._read(path, key, avals) is not None  # ... and whole
    _export._calls.clear()
    _same(nqf.gradient_flow(M0, data, TS), ref)
@in_nan_mode
def test_stale_file_of_another_program_is_not_called(cache):
    """A whole, checksummed file of another call (other shapes) put where this call's file goes."""
    nqf.gradient_flow(_M0(3), _data(7, 3), TS, statistics=False)
    nqf.gradient_flow(_M0(3), _data(40, 3), TS, statistics=True)
    small, large = sorted(_files(cache), key=lambda f: f.stat().st_mtime_ns)
    large.write_bytes(small.read_bytes())
    _export._calls.clear()
    _same(nqf.gradient_flow(_M0(3), _data(40, 3), TS, statistics=True),
          _normal(_M0(3), _data(40, 3), statistics=True))


def _two_outputs():
    """Data of 20 samples with 2 outputs: 40 rows like ``_data(40, 3)``, another tree (``num_outputs``)."""
    rng = np.random.default_rng(3)
    G = rng.normal(size=(20, 2, 3, 3))
    return NQFData(G + np.swapaxes(G, -1, -2), rng.normal(size=(20, 2)))
@in_nan_mode
def test_shapes_options_and_environment_make_different_keys(cache):
    base = dict(lanes=None, statistics=True, solver="tsit5", time="linear", max_steps=1000, progress=False, mesh=None)

    def key(M0=np.zeros((3, 3)), data=_data(40, 3), ts=TS, dynamic=("x64",), **changes):
        leaves, tree = jax.tree.flatten((M0, data, ts, 1e-10, 1e-14))
        return _export._full_key("gradient_flow", base | changes, tree, [_export._aval(x) for x in leaves], dynamic)

    keys = [key(), key(data=_data(41, 3)), key(M0=np.zeros((4, 4)), data=_data(40, 4)), key(ts=TS[:-1]),
            key(M0=np.zeros((2, 3, 3))), key(data=_two_outputs()),
            key(statistics=False), key(solver="dopri8"), key(time="log"), key(max_steps=1001),
            key(lanes="shared"), key(dynamic=("x32",))]
    assert len(set(keys)) == len(keys)
    assert len({_export._path(cache, "gradient_flow", k) for k in keys}) == len(keys)
    assert key() == key(data=_data(40, 3, seed=9))  # new data of the same shapes: the same key
    env = json.loads(_export.environment())
    assert set(env["versions"]) == {"jax", "jaxlib", "diffrax", "equinox", "flatbuffers", "nqf"}
    assert None not in env["versions"].values() and len(env["nqf_sources"]) == 64


def test_no_cache_folder_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(_export, "_calls", {})
    assert _export.folder_in(None) is None and _export.folder_in("") is None
    assert _export.folder_in("gs://bucket/jax") is None
    assert _export.folder_in(tmp_path) == tmp_path / "nqf-export"
    monkeypatch.setenv("NQF_EXPORT_CACHE", "0")
    assert _export.folder() is None
    assert _export.call("gradient_flow", _flow._flow_jit, (), {}) is None


def test_failed_export_takes_the_normal_path(cache, monkeypatch):
    def refuse(*args, **kwargs):
        raise NotImplementedError("serialization of host_callbacks is not yet implemented")

    monkeypatch.setattr(jax.export, "export", refuse)
    M0, data = _M0(3), _data(40, 3)
    _same(nqf.gradient_flow(M0, data, TS), _normal(M0, data))
    _same(nqf.gradient_flow(M0, data, TS), _normal(M0, data))  # remembered: no second attempt needed
    assert _files(cache) == []


def test_unwritable_folder_still_serves_the_export(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setattr(_export, "folder", lambda: blocker / "nqf-export")
    monkeypatch.setattr(_export, "_calls", {})
    M0, data = _M0(3), _data(40, 3)
    _same(nqf.gradient_flow(M0, data, TS), _normal(M0, data))


def test_failed_solve_still_raises_through_the_export(cache):
    with pytest.raises(RuntimeError, match="max_steps"):
        nqf.gradient_flow(_M0(3), _data(40, 3), TS, options=nqf.flow.ODEOptions(max_steps=3))
    _export._calls.clear()
    with pytest.raises(RuntimeError, match="max_steps"):
        nqf.gradient_flow(_M0(3), _data(40, 3), TS, options=nqf.flow.ODEOptions(max_steps=3))


CHILD = """
import sys, numpy as np, jax
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", {dtype_promotion!r})  # the parent's (conftest's) strict numerics:
jax.config.update("jax_numpy_rank_promotion", {rank_promotion!r})  # JAX options are part of the export key
import diffrax, nqf
calls = []
solve = diffrax.diffeqsolve
diffrax.diffeqsolve = lambda *a, **k: calls.append(1) or solve(*a, **k)
sys.path.insert(0, {tests!r})
from test_flow_export import _M0, _data, TS
sol = nqf.gradient_flow(_M0(3), _data(40, 3), TS)
np.save({out!r}, np.asarray(sol.ys))
print("TRACED", len(calls))
from nqf.flow import _export
print("STATE", _export.environment(), repr(_export._dynamic_environment()), "EQX_ON_ERROR" in __import__("os").environ)
"""
@in_nan_mode
def test_a_new_process_calls_the_file_without_tracing(tmp_path, monkeypatch):
    """The parent writes the export where the child's JAX cache folder puts it; the child's first
    call never reaches ``diffrax.diffeqsolve`` and gives the parent's numbers bit for bit."""
    monkeypatch.setattr(_export, "folder", lambda: tmp_path / _export.FOLDER)
    monkeypatch.setattr(_export, "_calls", {})
    if _export._source_digest() != _export._LOADED_SOURCES:  # the child would load other code: a new key, rightly
        pytest.skip("nqf's sources were edited after this process imported them")
    ref = _normal(_M0(3), _data(40, 3))
    nqf.gradient_flow(_M0(3), _data(40, 3), TS)
    out = tmp_path / "ys.npy"
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(tmp_path), JAX_ENABLE_X64="1")
    env.pop("NQF_EXPORT_CACHE", None)
    option = lambda name: getattr(getattr(jax.config, name), "value", getattr(jax.config, name))  # noqa: E731 (enum)
    child = CHILD.format(tests=str(ROOT / "tests"), out=str(out), dtype_promotion=option("jax_numpy_dtype_promotion"),
                         rank_promotion=option("jax_numpy_rank_promotion"))
    run = subprocess.run([sys.executable, "-c", child],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    # on failure, both processes' key material side by side (the parent's first)
    parent = f"STATE {_export.environment()} {_export._dynamic_environment()!r} {'EQX_ON_ERROR' in os.environ}"
    files = sorted(p.name for p in (tmp_path / _export.FOLDER).glob("*"))
    assert "TRACED 0" in run.stdout, f"{run.stdout}\nparent: {parent}\nfiles: {files}\n{run.stderr[-3000:]}"
    np.testing.assert_array_equal(np.load(out), np.asarray(ref.ys))


def test_the_key_names_the_sources_this_process_loaded(monkeypatch):
    """An edit after the import must not rename this process's exports: their programs were traced from the
    loaded code (the cause of a child that re-traced when sources were edited during a test run)."""
    monkeypatch.setattr(_export, "_environment", None)
    monkeypatch.setattr(_export, "_source_digest", lambda: "0" * 64)  # as if the files had changed since
    assert json.loads(_export.environment())["nqf_sources"] == _export._LOADED_SOURCES != "0" * 64
