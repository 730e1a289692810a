"""The environments readers get agree with the pins: Binder's environment.yml, the lock, pyproject."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;#]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(3)
    return out


def test_binder_environment_pins_what_the_lock_pins_and_leaves_the_server_to_binder():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    binder = _pins(pip)
    lock = _pins((ROOT / "requirements-lock.txt").read_text().splitlines())
    assert binder, "environment.yml pins nothing"
    assert {k: v for k, v in binder.items() if lock.get(k) != v} == {}, "environment.yml disagrees with the lock"
    assert not any(p.strip().startswith("-e") for p in pip if isinstance(p, str)), "the package belongs in postBuild"
    for server in ("jupyterlab", "notebook", "jupyter-server", "jupyterhub"):
        assert server not in binder, f"{server} would replace Binder's own server"
    assert "pip install --no-deps -e ." in (ROOT / "postBuild").read_text()


def test_pyproject_pins_match_the_lock_and_admit_python_3_11_to_3_13():
    text = (ROOT / "pyproject.toml").read_text()
    deps = _pins(re.findall(r'^\s*"([^"]+)",?$', text, re.M))
    lock = _pins((ROOT / "requirements-lock.txt").read_text().splitlines())
    assert {k: v for k, v in deps.items() if k in lock and lock[k] != v} == {}
    assert 'requires-python = ">=3.11,<3.14"' in text


def test_importing_nqf_creates_no_jax_array():
    """A chapter enables float64 after ``import nqf`` (nqfbook.kit.start_chapter): a module-level JAX array
    would be float32 then (it was: ch05's Gauss-Legendre nodes, which moved a Thm 10 exponent by 0.1)."""
    import subprocess
    import sys

    code = "import jax, nqf, nqfbook.kit; print(len(jax.live_arrays()))"
    env = {"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


def test_binder_environment_holds_every_dependency_of_nqf():
    """postBuild installs nqf with ``--no-deps``: a dependency of pyproject.toml missing from
    environment.yml would be missing on Binder."""
    import tomllib

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    deps = _pins(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    assert sorted(set(deps) - set(_pins(pip))) == [], "environment.yml lacks dependencies of nqf"


def test_package_version_is_pyproject_version():
    import tomllib

    import nqf

    assert nqf.__version__ == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


#: what the science imports, by the distribution that provides it (an import name differs from it for sklearn)
IMPORT_TO_DISTRIBUTION = {"sklearn": "scikit-learn"}
BOOK_PACKAGES = {"papermill", "jupyter-book", "myst-nb", "myst-parser", "sphinx", "nbformat", "nbclient", "ipykernel",
                 "jupyterlab", "sphinxcontrib-bibtex", "sphinx-mathjax-offline", "nqfbook"}


def test_pip_install_nqf_gets_no_book_dependency():
    """``pip install nqf`` (no extra) installs the science's dependencies only: none of the book's toolchain is
    among them, and every package nqf/ imports is one of them (or the standard library)."""
    import ast
    import sys
    import tomllib

    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {re.match(r"[A-Za-z0-9_.\-]+", d).group(0).lower() for d in spec["dependencies"]}
    assert not core & BOOK_PACKAGES, core & BOOK_PACKAGES
    imported = set()
    for path in sorted((ROOT / "nqf").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {IMPORT_TO_DISTRIBUTION.get(n, n) for n in imported - set(sys.stdlib_module_names) - {"nqf"}}
    assert third_party <= core, f"nqf imports packages that `pip install nqf` does not install: {third_party - core}"
