"""Where ``make test``'s time goes, per test: a pytest plugin (a profiling aid for issue 31).

    .venv/bin/python -m pytest -p benchmarks.suite_profile -n 2 --dist worksteal -m "not notebook" \
        --suite-profile /tmp/prof

Each worker writes ``<dir>/<worker>.json``: per test, its start (epoch seconds, so the workers'
timelines line up), wall seconds, CPU seconds of this process and of the subprocesses it waited for,
JAX lowerings, XLA backend-compile seconds and persistent-cache hits; and per jitted function, its
lowerings and compile seconds over the run.
``python benchmarks/suite_profile.py <dir>`` sums the workers' files into tables.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

_HIT = "/jax/compilation_cache/cache_retrieval_time_sec"  # a persistent-cache hit (the counter has no such event)


def pytest_addoption(parser):
    parser.addoption("--suite-profile", default=None, metavar="DIR", help="write a per-test profile to DIR")


class _Profile:
    def __init__(self, out: Path, worker: str):
        self.out, self.worker = out, worker
        self.tests: dict[str, dict] = {}
        self.funs: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
        self.cur = {"lowerings": 0, "backend": 0.0, "hits": 0}
        import jax

        from nqfbook.kit._chapter import _BACKEND, _LOWERING  # the events of the runner's compile counter

        self._events = (_LOWERING, _BACKEND)

        jax.monitoring.register_event_duration_secs_listener(self._event)

    def _event(self, event, duration, fun_name="?", **_):
        lowering, backend = self._events
        if event == lowering:
            self.cur["lowerings"] += 1
            self.funs[fun_name][0] += 1
            self.funs[fun_name][1] += duration
        elif event == backend:
            self.cur["backend"] += duration
            self.funs[fun_name][2] += duration
        elif event == _HIT:  # (this event names no function: hits are counted per test only)
            self.cur["hits"] += 1

    def write(self):
        self.out.mkdir(parents=True, exist_ok=True)
        funs = {k: {"lowerings": v[0], "lowering_s": round(v[1], 3), "backend_s": round(v[2], 3)}
                for k, v in self.funs.items()}
        (self.out / f"{self.worker}.json").write_text(json.dumps({"tests": self.tests, "functions": funs}))


_P: _Profile | None = None


def pytest_configure(config):
    global _P
    out = config.getoption("--suite-profile")
    if out:
        worker = getattr(config, "workerinput", {}).get("workerid", "main")
        _P = _Profile(Path(out), worker)


def pytest_runtest_protocol(item, nextitem):
    if _P is None:
        return None
    from _pytest.runner import runtestprotocol

    _P.cur = {"lowerings": 0, "backend": 0.0, "hits": 0}
    s0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=True)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    dt = time.perf_counter() - t0
    s1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    _P.tests[item.nodeid] = {
        "start": round(time.time() - dt, 3), "wall": round(dt, 3),
        "cpu_self": round(s1.ru_utime + s1.ru_stime - s0.ru_utime - s0.ru_stime, 3),
        "cpu_children": round(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime, 3),
        "lowerings": _P.cur["lowerings"], "backend_s": round(_P.cur["backend"], 3), "hits": _P.cur["hits"],
        "outcome": "/".join(r.outcome for r in reports),
    }
    return True


def pytest_sessionfinish(session):
    if _P is not None:
        _P.write()


def _summary(folder: Path, top: int = 40) -> None:
    tests, funs = {}, collections.defaultdict(lambda: [0, 0.0, 0.0])
    for f in folder.glob("*.json"):
        d = json.loads(f.read_text())
        tests.update(d["tests"])
        for k, v in d["functions"].items():
            a = funs[k]
            a[0] += v["lowerings"]; a[1] += v["lowering_s"]; a[2] += v["backend_s"]
    tot = lambda key: sum(t[key] for t in tests.values())  # noqa: E731
    print(f"{len(tests)} tests: wall {tot('wall'):.0f} s, cpu self {tot('cpu_self'):.0f} s, "
          f"cpu children {tot('cpu_children'):.0f} s, lowerings {tot('lowerings')}, "
          f"backend compile {tot('backend_s'):.0f} s, cache hits {tot('hits')}")
    files = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    for k, t in tests.items():
        f = files[k.split("::")[0]]
        f[0] += 1; f[1] += t["wall"]; f[2] += t["cpu_self"]; f[3] += t["cpu_children"]; f[4] += t["backend_s"]
    print("\nfiles by wall (n, wall, cpu self, cpu children, backend compile):")
    for k, f in sorted(files.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {f[0]:4d} {f[1]:7.1f} {f[2]:7.1f} {f[3]:7.1f} {f[4]:7.1f}  {k}")
    print("\ntests by wall:")
    for k, t in sorted(tests.items(), key=lambda kv: -kv[1]["wall"])[:top]:
        print(f"  {t['wall']:7.1f} {t['cpu_self']:7.1f} {t['cpu_children']:7.1f} {t['backend_s']:6.1f} "
              f"{t['lowerings']:4d}  {k}")
    print("\nfunctions by backend compile (lowerings, lowering s, backend s):")
    for k, v in sorted(funs.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"  {v[0]:5d} {v[1]:7.1f} {v[2]:7.1f}  {k}")


if __name__ == "__main__":
    _summary(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40)
