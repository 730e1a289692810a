"""Locks, child processes and signals, and the environment the children inherit.

The kernels (papermill) and the site build (jupyter-book) each lead their own process group;
on SIGTERM or SIGINT the CLI's handler raises :class:`~nqfbook.Interrupted` and
:func:`end_children` ends every group as a whole, so nothing is orphaned.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from .layout import KERNEL_NAME, Interrupted, RunnerError


#: Optional imports that the runner and its site build refuse. ``rfc3987_syntax`` (installed for
#: jupyterlab: jupyter-events asks for ``jsonschema[format-nongpl]``) compiles 38 Earley grammars
#: when ``jsonschema`` is imported, which ``nbformat`` does: 2.7 s of every runner call on the
#: developers' 2-core machine (3.6 s against 0.9 s for a refused call, load 0.6). jsonschema uses
#: it only to check the "iri" string formats, if it imports; nbformat's notebook schemas name no
#: ``format``, so validation is unchanged without it (tests/test_runner.py checks both).
SKIPPED_IMPORTS = ("rfc3987_syntax",)

#: The same refusal as Python source, for a child process started with ``python -c``.
SKIP_IMPORTS_SOURCE = "".join(f"sys.modules.setdefault({m!r}, None); " for m in SKIPPED_IMPORTS)


def skip_slow_imports() -> None:
    """Make ``import`` of each of :data:`SKIPPED_IMPORTS` fail in this process (``sys.modules[m] = None``),
    unless it is already imported. Called by ``python -m nqfbook`` only: importing :mod:`nqfbook` as a
    library changes nothing."""
    for name in SKIPPED_IMPORTS:
        sys.modules.setdefault(name, None)


@contextlib.contextmanager
def locked(path: Path, *, wait: bool = True, log=None):
    """Hold an exclusive ``flock`` on ``path`` (created if needed); yields False if not ``wait`` and busy."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if not wait:
                yield False
                return
            if log is not None:
                log(f"  waiting for another runner that holds {path.name} ...")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)


# ------------------------------------------------------------ child processes
# child processes started by this runner in their own process group (jupyter-book)
CHILD_GROUPS: set[int] = set()


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _group_alive(pgid: int) -> bool:
    return _signal_group(pgid, 0)


def _own_children() -> list[int]:
    """PIDs whose parent is this process (Linux /proc; empty elsewhere)."""
    me, kids = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return kids
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            kids.append(int(e))
    return kids


def end_children(grace: float = 5.0) -> None:
    """End every child process of the runner with its whole process group: SIGTERM, then SIGKILL.

    The jupyter-book child and the papermill kernel each lead their own process group, so
    a signal to the runner alone would orphan them (and anything they started).
    """
    groups = set(CHILD_GROUPS)
    mine = os.getpgrp()
    singles = set()
    for pid in _own_children():
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            continue
        if pgid == pid and pgid != mine:
            groups.add(pgid)
        else:
            singles.add(pid)
    for pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    for pid in singles:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
        time.sleep(0.05)
    for pgid in groups:
        _signal_group(pgid, signal.SIGKILL)
    for pid in singles:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in _own_children():  # reap
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def on_signal(signum, frame):
    """The CLI's SIGTERM/SIGINT handler: ignore further signals, raise :class:`~nqfbook.Interrupted`."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


# ---------------------------------------------------- the children's environment
def source_date_epoch(root: Path) -> Optional[str]:
    """The commit time of HEAD (for reproducible dates in Sphinx and matplotlib), if git knows it."""
    try:
        out = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%ct"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    value = out.stdout.strip()
    return value if out.returncode == 0 and value.isdigit() else None


#: XLA's CPU compiler without its fusion emitters (it then emits fusions as before them): where programs are
#: compiled once and run briefly. Measured on this project's 2-core machine, one core each, the quick chapters
#: compiled about 40 % less (ch06 17.3 -> 10.6 s of XLA compile, ch09 22.5 -> 15.5 s) and the quick book ran in
#: 181 s instead of 222 s; at full the execution it costs outweighs it (ch06 86.7 -> 95.2 s), so full keeps XLA's
#: default (issue 31). The numbers agree to rounding: 6 of 10 quick chapters bit for bit, 4 in the last digits.
QUICK_XLA_FLAG = "--xla_cpu_use_fusion_emitters=false"
#: jaxlib releases known to accept it (an unknown flag in XLA_FLAGS aborts XLA at start): the pinned one
QUICK_XLA_JAXLIB = ("0.10.2",)


def xla_flags(fidelity: str, flags: str = "") -> str:
    """``flags`` (the value of XLA_FLAGS) with :data:`QUICK_XLA_FLAG` added at quick fidelity, unless the flag
    is set there already (to any value) or this jaxlib is not one known to accept it."""
    name = QUICK_XLA_FLAG.split("=")[0]
    if fidelity != "quick" or any(f.split("=")[0] == name for f in flags.split()):
        return flags
    try:
        from importlib.metadata import version

        known = version("jaxlib") in QUICK_XLA_JAXLIB
    except Exception:  # no jaxlib: nothing to set
        known = False
    return " ".join(f for f in (flags, QUICK_XLA_FLAG) if f) if known else flags


def prepare_environment(root: Path, fidelity: str = "full") -> None:
    """Environment inherited by the kernels and the site build (only the CLI calls this)."""
    os.environ["JAX_ENABLE_X64"] = "1"
    # equinox's documented error mode for the chapters' programs (read when equinox is imported): traced checks
    # give NaN (which fails a claim) instead of a host callback, so JAX's persistent cache and nqf.flow's export
    # cache can serve the flows (a quick chapter's flows: ch04 16-17 s against 24-29 s under "raise"); a reader's
    # own value wins
    os.environ.setdefault("EQX_ON_ERROR", "nan")
    flags = xla_flags(fidelity, os.environ.get("XLA_FLAGS", ""))
    if flags:
        os.environ["XLA_FLAGS"] = flags
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(root / "_build" / "jax_cache"))
    # every compilation is cached, also an eager op's (tens of ms): later chapters reuse them (issue 31)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    pp = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(root), *([pp] if pp else [])])
    Path(os.environ["JAX_COMPILATION_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)
    epoch = source_date_epoch(root)
    if epoch:  # reproducible dates in figure files and pages
        os.environ.setdefault("SOURCE_DATE_EPOCH", epoch)
    # The kernel is this interpreter's own, installed by `make venv` (`ipykernel install
    # --sys-prefix`); JUPYTER_PATH puts it before a user-level "python3" kernelspec, which
    # Jupyter would otherwise prefer and which may point at another environment.
    prefix_share = str(Path(sys.prefix) / "share" / "jupyter")
    jp = [d for d in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if d and d != prefix_share]
    os.environ["JUPYTER_PATH"] = os.pathsep.join([prefix_share, *jp])
    check_kernel()


def check_kernel() -> None:
    """Raise RunnerError unless the ``python3`` kernel Jupyter finds runs this interpreter."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        raise RunnerError(f"no Jupyter kernel {KERNEL_NAME!r} for {sys.executable}; run `make venv` "
                          f"(it runs `{sys.executable} -m ipykernel install --sys-prefix`)") from None
    exe = spec.argv[0] if spec.argv else ""
    # jupyter_client runs a bare "python"/"python3" as the interpreter that starts the kernel (this one)
    bare = {"python", f"python{sys.version_info[0]}", "python%i.%i" % sys.version_info[:2]}
    same = exe in bare or (os.path.exists(exe) and os.path.samefile(exe, sys.executable))
    if not same:
        raise RunnerError(f"the Jupyter kernel {KERNEL_NAME!r} ({spec.resource_dir}) runs {exe}, not "
                          f"{sys.executable}; run `make venv` (`ipykernel install --sys-prefix`)")


def kernel_manager_class() -> type:
    """The kernel manager papermill starts each chapter's kernel with: jupyter_client's
    ``AsyncKernelManager`` with two changes that keep a sound build's log free of kernel noise.

    - **IPC transport** (Unix sockets beside the connection file in Jupyter's runtime directory)
      instead of TCP on localhost: ipykernel warns "Kernel is running over TCP without encryption"
      at every TCP start (one WARNING line per chapter), and nothing but this process talks to the
      kernel.
    - **No SIGINT at shutdown.** jupyter_client interrupts a kernel before it asks it to shut down;
      a kernel still inside a message handler then logs "KeyboardInterrupt caught in kernel." as an
      ERROR on a build that passed. The chapter's last cell has finished when papermill shuts the
      kernel down, so the shutdown request alone ends it (and :func:`end_children` still ends the
      kernel's process group on SIGTERM/SIGINT of the runner).
    """
    global _KERNEL_MANAGER
    if _KERNEL_MANAGER is None:
        from jupyter_client import AsyncKernelManager

        class QuietKernelManager(AsyncKernelManager):
            def __init__(self, **kwargs):
                kwargs.setdefault("transport", "ipc")
                super().__init__(**kwargs)

            async def _async_interrupt_kernel(self) -> None:
                if self.shutting_down:
                    return
                await super()._async_interrupt_kernel()

        _KERNEL_MANAGER = QuietKernelManager
    return _KERNEL_MANAGER


_KERNEL_MANAGER: Optional[type] = None
