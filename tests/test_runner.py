"""The book runner (nqfbook): chapters, claims, staleness, site builds, the toc.

Everything that executes notebooks or builds a site runs against a temporary
copy of the repository (``tmp_repo``), never against the real ``_build/``.
"""

from __future__ import annotations

import json
import time
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import nqfbook
from nqfbook.processes import QUICK_XLA_FLAG, xla_flags

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("ch*.ipynb"))
CH01 = "ch01_neural_quadratic_form"  # the name book/_toc.yml lists first


# ------------------------------------------------------------------ helpers
def make_notebook(path: Path, body: list[str], *, params: str | None = None, title: str = "Dummy chapter"):
    """Write a chapter notebook: a title, a parameters cell, then ``body`` code cells."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cell = nbformat.v4.new_code_cell(
        params if params is not None else 'fidelity = "full"\nout_dir = "../_build/output/full"\nseed = 0'
    )
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nSee {{cite}}`ziyin2026nqf`."), cell]
    nb.cells += [nbformat.v4.new_code_cell(src) for src in body]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def passing(chapter: str = "ch01") -> list[str]:
    """Cells of a chapter that draws a figure and whose two claims hold."""
    return [
        "import matplotlib.pyplot as plt\n"
        "from nqfbook.kit import Claims\n"
        "from nqfbook.kit import use_style, savefig, THEORY_KW, MEASURED_KW\n"
        "use_style()\n"
        "fig, ax = plt.subplots()\n"
        "ax.plot([0, 1], [0, 1], **THEORY_KW, label='theory')\n"
        "ax.plot([0, 1], [0, 1], **MEASURED_KW, label='measured')\n"
        "ax.set_xlabel('t (rescaled)'); ax.legend()\n"
        f"paths = savefig(fig, 'dummy', chapter={chapter!r}, out_dir=out_dir)",
        f"claims = Claims({chapter!r}, fidelity, out_dir)\n"
        "claims.close('seed echoes', seed, seed, atol=0, kind='sanity')\n"
        "claims.less('tiny', 1e-20, 1e-12, kind='paper')\n"
        "claims.table()",
        "claims.finish()",
    ]


PASSING = passing()


def claims_only(chapter: str) -> list[str]:
    """Cells of a chapter whose two claims hold, without a figure (0.7 s less per kernel than :func:`passing`:
    no matplotlib, no PNG or SVG written), for the chapters of a book whose figures no test looks at."""
    return ["from nqfbook.kit import Claims"] + passing(chapter)[1:]


FAILING_CLAIM = [
    "from nqfbook.kit import Claims\n"
    "claims = Claims('ch03', fidelity, out_dir)\n"
    "claims.close('slope equals three', 2.5, 3.0, atol=0.1, kind='paper')\n"
    "claims.less('this one holds', 0.0, 1.0, kind='sanity')\n"
    "claims.finish()",
]

CELL_ERROR = ["x = 1\n", "y = 1 / 0"]

NO_CLAIMS = ["print('forgot the claims cell')"]


@pytest.fixture
def tmp_repo(tmp_path):
    """A copy of the repository's book, package and runner, without notebooks or _build."""
    return copy_repo(tmp_path)


def copy_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("_config.yml", "pyproject.toml", "requirements-lock.txt", "CITATION.cff"):
        shutil.copy2(ROOT / name, repo / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_build")
    shutil.copytree(ROOT / "nqf", repo / "nqf", ignore=ignore)
    shutil.copytree(ROOT / "nqfbook", repo / "nqfbook", ignore=ignore)  # `python -m nqfbook` runs this copy
    shutil.copytree(ROOT / "book", repo / "book", ignore=ignore)
    (repo / "notebooks").mkdir()
    return repo


def run(repo: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = os.environ.copy()
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-m", "nqfbook", "--root", str(repo), *args],
        cwd=repo, env=env, capture_output=True, text=True, timeout=timeout,
    )


def out(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


# ------------------------------------------------------------- pure helpers
def test_parse_parameter():
    assert nqfbook.parse_parameter("n=100") == ("n", 100)
    assert nqfbook.parse_parameter("eta=1e-3") == ("eta", 1e-3)
    assert nqfbook.parse_parameter("flag=True") == ("flag", True)
    assert nqfbook.parse_parameter("sizes=[1, 2]") == ("sizes", [1, 2])
    assert nqfbook.parse_parameter("name=adam") == ("name", "adam")
    assert nqfbook.parse_parameter("name='1'") == ("name", "1")
    for bad in ("novalue", "1x=3", "fidelity=quick", "out_dir=/tmp"):
        with pytest.raises(nqfbook.RunnerError):
            nqfbook.parse_parameter(bad)


def test_select_chapters(tmp_path):
    paths = [tmp_path / f"{s}.ipynb" for s in ("ch01_a", "ch02_b", "ch10_c")]
    assert nqfbook.select_chapters(paths, []) == paths
    assert nqfbook.select_chapters(paths, ["ch02"]) == [paths[1]]
    assert nqfbook.select_chapters(paths, ["ch10_c", "ch01"]) == [paths[0], paths[2]]
    assert nqfbook.select_chapters(paths, ["notebooks/ch01_a.ipynb"]) == [paths[0]]
    with pytest.raises(nqfbook.RunnerError, match="matches no chapter"):
        nqfbook.select_chapters(paths, ["ch03"])


def test_parameter_names(tmp_path):
    nb = nbformat.read(make_notebook(tmp_path / "ch01_x.ipynb", []), as_version=4)
    assert nqfbook.parameter_names(nb) == ["fidelity", "out_dir", "seed"]
    nb.cells[1].metadata["tags"] = []
    with pytest.raises(nqfbook.RunnerError, match="tagged 'parameters'"):
        nqfbook.parameter_names(nb)


def test_parameters_are_typed_by_annotation_or_default(tmp_path):
    nb = make_notebook(tmp_path / "ch01_x.ipynb", [], params=(
        'fidelity = "full"\nout_dir = "../_build/output/full"\nsteps = 100  # optimiser steps\n'
        'mnist_dir: str = ""  # MNIST files\nrate = 0.1\nanything = None'))
    info = nqfbook.parameter_info(nb)
    assert info["steps"] == (100, "optimiser steps", "") and info["mnist_dir"][2] == "str"
    nqfbook.check_parameter_type("ch01_x", "steps", 100, 20)
    nqfbook.check_parameter_type("ch01_x", "rate", 0.1, 1)  # an int is a float
    nqfbook.check_parameter_type("ch01_x", "anything", None, [1, 2])
    with pytest.raises(nqfbook.RunnerError, match="-p steps must be of type int"):
        nqfbook.check_parameter_type("ch01_x", "steps", 100, "many")
    with pytest.raises(nqfbook.RunnerError, match="-p mnist_dir must be str; got int 3"):
        nqfbook.check_parameter_type("ch01_x", "mnist_dir", "", 3, hint="str")


_DECLARED = (
    'fidelity = "full"\nout_dir = "../_build/output/full"\n'
    "rays: int = None  # random directions (quick 2, full 8), as ch01 declares it\n"
    "rate: float = 0.1\nsteps = 100\nscale = 0.5\nteacher_s = [1.0, 0.5, 0.25]\netas: list = None\n"
    'xs: list[float] = None\nmnist_dir: str = ""\nflag = False\nanything = None\nmaybe: Optional[int] = 3\n'
)
_CASES = [  # (name, value, accepted): the one rule of nqfbook.kit.parameter_type
    ("rays", None, True), ("rays", 3, True), ("rays", 2.5, False), ("rays", True, False), ("rays", "3", False),
    ("rate", 1, True), ("rate", 0.5, True), ("rate", True, False), ("rate", "0.1", False), ("rate", None, False),
    ("steps", 20, True), ("steps", 2.0, False), ("steps", "many", False), ("steps", None, False),
    ("steps", False, False),
    ("scale", 1, True), ("scale", True, False),
    ("teacher_s", [1, 0.5], True), ("teacher_s", [], True), ("teacher_s", ["a"], False),
    ("teacher_s", [True], False), ("teacher_s", 1.0, False),
    ("etas", [0.1, "x"], True), ("etas", None, True), ("etas", 0.1, False),
    ("xs", [1, 2.5], True), ("xs", None, True), ("xs", ["a"], False), ("xs", [True], False),
    ("mnist_dir", "/data", True), ("mnist_dir", 3, False), ("mnist_dir", None, False),
    ("flag", True, True), ("flag", 1, False),
    ("anything", [1, 2], True), ("anything", "x", True), ("anything", None, True),
    ("maybe", None, True), ("maybe", 4, True), ("maybe", 4.5, False),
]


@pytest.fixture(scope="module")
def declared_info(tmp_path_factory):
    nb = make_notebook(tmp_path_factory.mktemp("params") / "ch01_x.ipynb", [], params=_DECLARED)
    return nqfbook.parameter_info(nb)


@pytest.mark.parametrize("name, value, accepted", _CASES, ids=[f"{n}={v!r}" for n, v, _ in _CASES])
def test_the_runner_and_the_kernel_share_one_parameter_rule(declared_info, name, value, accepted):
    """The same answer from both paths: the runner's ``-p`` check (the annotation as papermill reads it) and
    the kernel's check of papermill's injected cell (``start_chapter``, the cell's own source)."""
    from nqfbook.kit._chapter import check_injected_parameters

    default, _, hint = declared_info[name]
    try:
        nqfbook.check_parameter_type("ch01_x", name, default, value, hint=hint)
        runner = True
    except nqfbook.RunnerError as exc:
        assert f"-p {name} must be" in str(exc)
        runner = False
    try:
        check_injected_parameters([_DECLARED, f"# Parameters\n{name} = {value!r}\n"])
        kernel = True
    except TypeError as exc:
        assert f"`{name}` must be" in str(exc)
        kernel = False
    assert (runner, kernel) == (accepted, accepted)


def test_a_parameter_declared_int_none_says_so():
    """ch01's ``rays: int = None``: the declared default is accepted, and a refusal says what is accepted."""
    with pytest.raises(nqfbook.RunnerError, match=r"-p rays must be int or None; got float 2.5"):
        nqfbook.check_parameter_type("ch01_x", "rays", None, 2.5, hint="int")
    nqfbook.check_parameter_type("ch01_x", "rays", None, None, hint="int")


def test_wrongly_typed_parameter_fails_before_execution(tmp_repo):
    make_notebook(tmp_repo / "notebooks" / "ch01_x.ipynb", ["raise SystemExit('executed')"])
    p = run(tmp_repo, "--fidelity", "quick", "-p", "seed=zero")
    assert p.returncode == 2 and "-p seed must be of type int" in p.stderr and "executed" not in out(p), out(p)
    p = run(tmp_repo, "--list")
    assert p.returncode == 0 and "seed = 0" in p.stdout, out(p)


def test_the_runner_refuses_the_slow_optional_import_and_still_validates(tmp_repo):
    """``python -m nqfbook`` and its site build skip rfc3987_syntax (nqfbook.processes.SKIPPED_IMPORTS),
    whose import compiles grammars for seconds; nbformat still imports and still rejects an invalid notebook."""
    make_notebook(tmp_repo / "notebooks" / "ch01_x.ipynb", ["pass"])
    env = os.environ.copy()
    env.pop("PYTHONPATH", None)
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "nqfbook", "--root", str(tmp_repo), "--list"],
                       cwd=tmp_repo, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "seed = 0" in p.stdout, out(p)
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if "|" in line}
    assert "nbformat.validator" in imported and "jsonschema" in imported  # the listing read the notebook
    # a refused import is listed (microseconds, nothing loaded); a loaded one brings its submodules and lark
    assert not {m for m in imported if m.split(".")[0] in nqfbook.processes.SKIPPED_IMPORTS and "." in m}
    assert "lark" not in imported
    assert "rfc3987_syntax" in nqfbook.processes.SKIP_IMPORTS_SOURCE
    check = (
        "import sys; from nqfbook.processes import skip_slow_imports; skip_slow_imports()\n"
        "import nbformat\n"
        "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1')])\n"
        "nbformat.validate(nb)\n"
        "del nb.cells[0]['outputs']\n"
        "try:\n    nbformat.validate(nb)\nexcept nbformat.ValidationError as e:\n    print('rejected:', e.message)\n"
        "print('rfc3987_syntax' in sys.modules and sys.modules['rfc3987_syntax'] is not None)\n"
    )
    p = subprocess.run([sys.executable, "-c", check], cwd=tmp_repo, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, out(p)
    assert "rejected: 'outputs' is a required property" in p.stdout and p.stdout.endswith("False\n"), out(p)


def test_cache_key_depends_on_everything(tmp_path):
    nb = make_notebook(tmp_path / "ch01_x.ipynb", ["pass"])
    base = nqfbook.cache_key(nb, "tree", "quick", {})
    assert base == nqfbook.cache_key(nb, "tree", "quick", {})
    assert base != nqfbook.cache_key(nb, "tree2", "quick", {})
    assert base != nqfbook.cache_key(nb, "tree", "full", {})
    assert base != nqfbook.cache_key(nb, "tree", "quick", {"seed": 1})
    make_notebook(nb, ["pass  # edited"])
    assert base != nqfbook.cache_key(nb, "tree", "quick", {})


def test_cache_key_sees_the_compiler_flags(tmp_path, monkeypatch):
    """XLA_FLAGS change results in the last digits: an execution under other flags is not reused."""
    nb = make_notebook(tmp_path / "ch01_x.ipynb", ["pass"])
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    base = nqfbook.cache_key(nb, "tree", "quick", {})
    monkeypatch.setenv("XLA_FLAGS", QUICK_XLA_FLAG)
    assert nqfbook.cache_key(nb, "tree", "quick", {}) != base


def test_quick_runs_add_the_compile_light_xla_flag_and_full_runs_do_not(monkeypatch):
    from importlib import metadata

    assert xla_flags("quick") == QUICK_XLA_FLAG  # the pinned jaxlib accepts it
    assert xla_flags("quick", "--xla_force_host_platform_device_count=2") == \
        f"--xla_force_host_platform_device_count=2 {QUICK_XLA_FLAG}"
    assert xla_flags("full") == "" and xla_flags("full", "--a=1") == "--a=1"
    mine = QUICK_XLA_FLAG.replace("false", "true")  # a reader's own value of the flag wins
    assert xla_flags("quick", mine) == mine and xla_flags("quick", QUICK_XLA_FLAG) == QUICK_XLA_FLAG
    assert QUICK_XLA_FLAG in os.environ["XLA_FLAGS"].split()  # the tests run under it (conftest), and XLA took it
    monkeypatch.setattr(metadata, "version", lambda name: "99.0")  # a jaxlib not known to accept it: left out
    assert xla_flags("quick") == ""


def test_editing_the_runner_changes_no_key_editing_nqf_or_the_kit_does(tmp_repo):
    """The key hashes what the chapters import (nqf/, nqfbook/kit/, the pins), not the tool that runs them."""
    nb = make_notebook(tmp_repo / "notebooks" / "ch01_x.ipynb", ["pass"])

    def key():
        return nqfbook.cache_key(nb, nqfbook.source_tree_hash(tmp_repo), "quick", {})

    k0 = key()
    for path in sorted((tmp_repo / "nqfbook").glob("*.py")):
        path.write_text(path.read_text() + "\n# edited: help text, messages, anything\n")
    (tmp_repo / "nqfbook" / "new_module.py").write_text("X = 1\n")
    assert key() == k0
    (tmp_repo / "nqfbook" / "kit" / "new_module.py").write_text("X = 1\n")
    k_new = key()
    assert k_new != k0
    k0 = k_new
    helper = tmp_repo / "nqfbook" / "kit" / "_claims.py"  # the chapter kit
    helper.write_text(helper.read_text() + "\n# edited\n")
    k1 = key()
    assert k1 != k0
    science = next(p for p in sorted((tmp_repo / "nqf" / "training").glob("*.py")))
    science.write_text(science.read_text() + "\n# edited\n")
    assert key() != k1


def test_source_tree_hash_sees_every_package_file(tmp_repo):
    h0 = nqfbook.source_tree_hash(tmp_repo)
    (tmp_repo / "nqf" / "__pycache__").mkdir(exist_ok=True)
    (tmp_repo / "nqf" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    assert nqfbook.source_tree_hash(tmp_repo) == h0  # caches do not count
    (tmp_repo / "nqf" / "new_module.py").write_text("X = 1\n")
    h1 = nqfbook.source_tree_hash(tmp_repo)
    assert h1 != h0
    (tmp_repo / "requirements-lock.txt").write_text("changed\n")
    assert nqfbook.source_tree_hash(tmp_repo) != h1


# ------------------------------------------------------ the real repository
def test_every_toc_entry_exists():
    docs = nqfbook.toc_documents(ROOT)
    assert docs[0] == "book/intro"
    for doc in docs:
        assert any((ROOT / f"{doc}{s}").is_file() for s in (".md", ".ipynb")), f"toc lists missing {doc}"
    assert nqfbook.check_toc(ROOT, nqfbook.discover_chapters(ROOT)) == []


def test_every_chapter_is_in_the_toc():
    docs = set(nqfbook.toc_documents(ROOT))
    for nb in CHAPTERS:
        assert f"notebooks/{nb.stem}" in docs, f"{nb.name} is not listed in book/_toc.yml"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_source_notebook_is_clean_and_parameterised(path):
    import json

    raw = json.loads(path.read_text(encoding="utf-8"))  # as committed (nbformat.read fills in missing ids)
    ids = [c.get("id") for c in raw["cells"]]
    assert None not in ids, f"{path.name}: cell {ids.index(None)} has no id (nbformat 4.5 requires one)"
    assert len(set(ids)) == len(ids), f"{path.name}: duplicate cell ids"
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name}: cell {i} has outputs (commit notebooks without outputs)"
            assert cell.execution_count is None, f"{path.name}: cell {i} has an execution count"
    names = nqfbook.parameter_names(nb)
    assert "fidelity" in names and "out_dir" in names
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])][0]
    assert 'fidelity = "full"' in tagged.source, "the default fidelity must be full"
    import ast

    for node in ast.parse(tagged.source).body:  # a parameter defaulting to None (quick/full decide) states its range
        if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Constant) and node.value.value is None:
            assert isinstance(node.annotation, ast.Constant) and isinstance(node.annotation.value, str), (
                f"{path.name}: parameter {node.target.id} declares a bare type; declare its range "
                f'("positive int", "list[positive float]", ...)')


# ------------------------------------------------------ executing chapters
def test_passing_chapter_then_cache_then_staleness(tmp_repo):
    make_notebook(tmp_repo / "notebooks" / f"{CH01}.ipynb", PASSING)
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 0, out(p)
    assert "[1/1]" in p.stdout and "ok, 2 claims hold (1 paper, 1 sanity)" in p.stdout
    # a sound build's log holds no kernel noise (ipykernel's TCP warning, jupyter_client's shutdown SIGINT)
    noise = [line for line in out(p).splitlines() if "WARNING" in line or "ERROR" in line]
    assert not noise, out(p)
    claims = json.loads((tmp_repo / "_build/output/quick/claims/ch01.json").read_text())
    assert claims["passed"] and claims["fidelity"] == "quick" and claims["n_claims"] == 2
    assert (tmp_repo / "_build/output/quick/figures/ch01/dummy.png").is_file()
    assert (tmp_repo / "_build/output/quick/figures/ch01/dummy.svg").is_file()
    executed = nbformat.read(tmp_repo / f"_build/executed/quick/{CH01}.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and 'fidelity = "quick"' in injected[0].source
    assert 'out_dir = "../_build/output/quick"' in injected[0].source  # relative: no machine path on the page
    assert str(tmp_repo) not in (tmp_repo / f"_build/executed/quick/{CH01}.ipynb").read_text()
    timings = json.loads((tmp_repo / "_build/output/quick/timings.json").read_text())
    assert timings["chapters"][CH01]["seconds"] > 0 and timings["chapters"][CH01]["cached"] is False

    # unchanged: reused
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 0 and "up to date" in p.stdout, out(p)

    # a change to the runner itself re-executes nothing
    cli = tmp_repo / "nqfbook" / "cli.py"
    cli.write_text(cli.read_text().replace("problem sizes to run at", "problem sizes to run the chapters at"))
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 0 and "up to date" in p.stdout, out(p)

    # a change anywhere in nqf/ re-executes
    (tmp_repo / "nqf" / "_touched.py").write_text("# changed\n")
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 0 and "ok, 2 claims hold" in p.stdout, out(p)

    # deleted outputs re-execute
    (tmp_repo / "_build/output/quick/figures/ch01/dummy.png").unlink()
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 0 and "ok, 2 claims hold" in p.stdout, out(p)
    assert (tmp_repo / "_build/output/quick/figures/ch01/dummy.png").is_file()

    # other parameters re-execute, and unknown parameters are refused
    p = run(tmp_repo, "--fidelity", "quick", "--only", "ch01", "-p", "seed=3")
    assert p.returncode == 0 and "ok" in p.stdout, out(p)
    claims = json.loads((tmp_repo / "_build/output/quick/claims/ch01.json").read_text())
    assert next(c for c in claims["claims"] if c["name"] == "seed echoes")["measured"] == 3.0
    p = run(tmp_repo, "--fidelity", "quick", "-p", "sede=3")
    assert p.returncode == 2 and "no parameter sede" in p.stderr
    p = run(tmp_repo, "--build", "--only", "ch01")
    assert p.returncode == 2 and "--build" in p.stderr


def test_failed_claim_names_chapter_and_claim(tmp_repo):
    make_notebook(tmp_repo / "notebooks" / "ch03_bad_claim.ipynb", FAILING_CLAIM)
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 1, out(p)
    assert "ch03_bad_claim" in p.stderr
    assert "paper claim 'slope equals three': measured 2.5, required ≈ 3.0" in p.stderr, p.stderr
    assert "this one holds" not in p.stderr
    assert not (tmp_repo / "_build/executed/quick/ch03_bad_claim.ipynb").exists()
    assert (tmp_repo / "_build/executed/quick/failed/ch03_bad_claim.ipynb").exists()
    data = json.loads((tmp_repo / "_build/executed/quick/failed/ch03_bad_claim/claims/ch03.json").read_text())
    assert data["n_failed"] == 1
    assert not (tmp_repo / "_build/output/quick/claims/ch03.json").exists()  # no good outputs to keep
    timings = json.loads((tmp_repo / "_build/output/quick/timings.json").read_text())
    assert timings["chapters"]["ch03_bad_claim"]["status"] == "failed"


def test_cell_error_and_missing_claims_name_the_chapter(tmp_repo):
    make_notebook(tmp_repo / "notebooks" / "ch01_ok.ipynb", PASSING)
    make_notebook(tmp_repo / "notebooks" / "ch02_cell_error.ipynb", CELL_ERROR)
    make_notebook(tmp_repo / "notebooks" / "ch04_no_claims.ipynb", NO_CLAIMS)
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 1, out(p)
    assert "2 chapter(s) failed" in p.stderr
    assert "ch02_cell_error" in p.stderr and "ZeroDivisionError" in p.stderr
    assert "ch04_no_claims" in p.stderr and "no claims file" in p.stderr
    assert "ch01_ok: ok" in p.stdout  # keeps going past a failure by default
    p = run(tmp_repo, "--fidelity", "quick", "--fail-fast", "--force")
    assert p.returncode == 1 and "1 chapter(s) failed" in p.stderr and "ch04" not in p.stdout


def test_wrong_fidelity_in_claims_fails(tmp_repo):
    body = ["from nqfbook.kit import Claims\nc = Claims('ch01', 'full', out_dir)\n"
            "c.less('x', 0.5, 1, kind='paper')\nc.finish()"]
    make_notebook(tmp_repo / "notebooks" / "ch01_x.ipynb", body)
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 1 and "is for fidelity 'full'" in p.stderr, out(p)


def test_missing_parameters_cell_is_a_usage_error(tmp_repo):
    make_notebook(tmp_repo / "notebooks" / "ch01_x.ipynb", ["pass"], params="seed = 0")
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 2 and "ch01_x" in p.stderr and "fidelity" in p.stderr


# --------------------------------------------------------------- the site
def test_site_build_swaps_only_on_success(tmp_repo):
    """The real _config.yml, book pages and toc, with a dummy notebook for every listed chapter, build and
    replace the last site as a whole (the one build of the real book in the tests; the failing builds are
    in :func:`test_a_failed_chapter_or_a_sphinx_warning_keeps_the_last_site`, on the one-chapter book)."""
    site = tmp_repo / "_build" / "html-quick"
    site.mkdir(parents=True)
    (site / "sentinel.html").write_text("last good site")
    listed = [d.split("/", 1)[1] for d in nqfbook.toc_documents(ROOT) if d.startswith("notebooks/")]
    assert CH01 in listed
    # book pages that quote the chapters' glued numbers (errata) cannot build against dummy chapters: stubs
    for page in (tmp_repo / "book").glob("*.md"):
        if "{glue" in page.read_text():
            page.write_text(f"# {page.stem.title()}\n\nStub: the real page quotes the chapters' glued numbers.\n")
    make_notebook(tmp_repo / "notebooks" / f"{CH01}.ipynb", PASSING)
    for stem in listed:
        if stem != CH01:
            make_notebook(tmp_repo / "notebooks" / f"{stem}.ipynb", claims_only(nqfbook.chapter_id(stem)))

    p = run(tmp_repo, "--fidelity", "quick", "--build")
    assert p.returncode == 0, out(p)
    assert not (site / "sentinel.html").exists()
    assert (site / "index.html").is_file()
    page = (site / "notebooks" / f"{CH01}.html").read_text()
    # download links point at files of the build; launch links exist only for a published
    # repository (the placeholder address of _config.yml publishes none: nqfbook/site.py)
    assert "mybinder.org" not in page and "colab.research.google.com" not in page
    assert "github.com/nqf-book/nqf" not in page
    assert f"_sources/notebooks/{CH01}.ipynb" in page
    assert (site / "_sources" / "notebooks" / f"{CH01}.ipynb").is_file()
    assert "0 of 1 pass" not in page and "1 of 1 pass" in page  # the executed claims tables (by kind)
    api = (site / "book" / "api-kit.html").read_text()  # one API page per namespace
    assert 'id="nqfbook.kit.Claims"' in api
    tool = (site / "book" / "api-nqfbook.html").read_text()
    assert 'id="nqfbook.run_chapter"' in tool  # the book's tool, documented beside the science
    repro = (site / "book" / "reproduce.html").read_text()
    assert "Not measured yet." in repro  # the copy has no benchmarks/book-timings.json
    assert not (tmp_repo / "_build" / "html").exists()  # quick never overwrites the full site


def test_reproduce_page_shows_measured_benchmarks(tmp_repo):
    bench = {
        "date": "2026-01-01", "machine": {"cpus": 2, "platform": "test", "python": "3.11"},
        "cold_jax_cache": True, "commit": "0123456789abcdef", "where": "a fresh clone of HEAD",
        "load_average_before": [0.4, 0.3, 0.2],
        "chapters": {CH01: {"quick": 12.5, "full": 130.0}},
        "budgets": [{"what": "`make test`", "seconds": 300.0, "budget_seconds": 900.0, "passed": True}],
    }
    (tmp_repo / "benchmarks").mkdir(exist_ok=True)
    (tmp_repo / "benchmarks" / "book-timings.json").write_text(json.dumps(bench))  # committed record
    md = nqfbook.timings_markdown(tmp_repo, "full")
    assert "on 2026-01-01, at commit `0123456789`, in a fresh clone of HEAD" in md
    assert "load average 0.4 when it started" in md
    assert "### The flow solver against scipy" in md and "Not measured yet." in md  # no flow record yet
    flow = {"date": "2026-01-02", "machine": {"cpus": 2, "python": "3.11", "jax": "0.10.2"},
            "table_markdown": "| problem | ratio |\n|---|---:|\n| m = 16, p = 8 | 2.5 |\n"}
    (tmp_repo / "benchmarks" / "flow-timings.json").write_text(json.dumps(flow))
    md = nqfbook.timings_markdown(tmp_repo, "full")
    assert "| m = 16, p = 8 | 2.5 |" in md and "on 2026-01-02" in md
    assert f"| `{CH01}` | 12.5 s | 2.2 min |" in md
    assert "| `make test` | 5.0 min | 15.0 min | yes |" in md
    assert "Not measured" not in md


def test_intro_links_exactly_the_published_chapters():
    import re

    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\(\.\./(notebooks/ch\w+)\.ipynb\)", intro))
    published = {d for d in nqfbook.toc_documents(ROOT) if d.startswith("notebooks/")}
    assert linked == published, "book/intro.md's chapter table and book/_toc.yml disagree"


# ------------------------------------------ issue 13: holes of the runner
MINI_TOC = """format: jb-book
root: book/intro
chapters:
  - file: notebooks/ch01_mini
  - file: book/references
"""


def make_mini(repo: Path) -> Path:
    (repo / "book" / "_toc.yml").write_text(MINI_TOC)
    (repo / "book" / "intro.md").write_text("# Mini book\n\nOne chapter: {doc}`../notebooks/ch01_mini`.\n")
    make_notebook(repo / "notebooks" / "ch01_mini.ipynb", PASSING)
    return repo


@pytest.fixture
def mini_repo(tmp_repo):
    """``tmp_repo`` with a one-chapter book (intro, ch01_mini, references): a fast site build."""
    return make_mini(tmp_repo)


@pytest.fixture(scope="module")
def _executed_mini_once(tmp_path_factory):
    """The mini book with its chapter executed once by the runner (one kernel for the module's tests)."""
    repo = make_mini(copy_repo(tmp_path_factory.mktemp("executed-mini")))
    p = run(repo, "--fidelity", "quick")
    assert p.returncode == 0 and "ok, 2 claims hold" in p.stdout, out(p)
    return repo


@pytest.fixture
def executed_mini(_executed_mini_once, tmp_path):
    """A copy of the mini book whose chapter passed: its last good outputs, which the runner verifies as up to
    date (the cache key and the record hold no path), for the tests that start from a good run."""
    repo = tmp_path / "repo"
    shutil.copytree(_executed_mini_once, repo, symlinks=True)
    chapter = nqfbook.discover_chapters(repo)[0]
    assert nqfbook.verify_executed(repo, chapter, "quick")[0] == (repo / "_build/executed/quick/ch01_mini.ipynb").read_bytes()
    return repo


def test_a_failed_chapter_or_a_sphinx_warning_keeps_the_last_site(mini_repo):
    site = mini_repo / "_build" / "html-quick"
    site.mkdir(parents=True)
    (site / "sentinel.html").write_text("last good site")
    # 1. a failing chapter: nothing is built
    make_notebook(mini_repo / "notebooks" / "ch01_mini.ipynb", CELL_ERROR)
    p = run(mini_repo, "--fidelity", "quick", "--build", "--fail-fast")
    assert p.returncode == 1 and "ch01_mini" in p.stderr and "previous site is unchanged" in p.stderr, out(p)
    assert (site / "sentinel.html").read_text() == "last good site"

    # 2. the chapter passes but Sphinx warns (a broken cross-reference): the build fails, the site is kept
    make_notebook(mini_repo / "notebooks" / "ch01_mini.ipynb", PASSING)
    intro = mini_repo / "book" / "intro.md"
    intro.write_text(intro.read_text() + "\nSee {doc}`no-such-page`.\n")
    p = run(mini_repo, "--fidelity", "quick", "--build")
    assert p.returncode == 3, out(p)
    assert "no-such-page" in p.stderr and "previous site is unchanged" in p.stderr
    assert (site / "sentinel.html").read_text() == "last good site"
    assert not list((mini_repo / "_build").glob(".site-*")), "temporary build left behind"


def _procs_under(path: Path) -> list[str]:
    """Live processes whose command line or working directory mentions ``path`` (Linux /proc)."""
    hits = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (str(path) in cmd or cwd.startswith(str(path))):
            hits.append(f"{pid}: {cmd[:200]}")
    return hits


def _wait_for(predicate, timeout: float, what: str):
    import time

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _start(repo: Path, *args: str) -> subprocess.Popen:
    env = os.environ.copy()
    env.pop("PYTHONPATH", None)
    return subprocess.Popen([sys.executable, "-m", "nqfbook", "--root", str(repo), *args],
                            cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("value", ["2.5", "nan", "inf", "0", "-1", "ten"])
def test_cell_timeout_takes_a_positive_integer_or_refuses(tmp_repo, value):
    make_notebook(tmp_repo / "notebooks" / "ch01_x.ipynb", PASSING)
    p = run(tmp_repo, "--fidelity", "quick", "--cell-timeout", value)
    assert p.returncode == 2, out(p)
    assert "--cell-timeout" in p.stderr and "positive integer" in p.stderr and repr(value) in p.stderr
    assert not (tmp_repo / "_build").exists()  # refused before anything ran or moved


def test_cell_timeout_python_api():
    for bad in (2.5, 0, -1, True, float("inf"), "60"):
        with pytest.raises((ValueError, TypeError), match="cell_timeout"):  # TypeError: the test-time type checker
            nqfbook.run_chapter(ROOT, CHAPTERS[0], "quick", cell_timeout=bad)
    assert nqfbook.positive_int("60") == 60


def test_normalise_executed_is_a_function_of_the_outputs():
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"start_time": "t0", "end_time": "t1", "duration": 3.0, "input_path": "/home/x",
                                "output_path": "/home/y", "parameters": {"fidelity": "quick"}}
    nb.metadata["widgets"] = {"state": {"id": 1}}
    cell = nbformat.v4.new_code_cell("print(1); print(2)")
    cell.metadata["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00Z"}
    cell.metadata["papermill"] = {"duration": 0.1}
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="1\n"),
        nbformat.v4.new_output("stream", name="stderr", text="  3%|▎ | 1/30 [00:01<00:30, 1.00it/s]"),
        nbformat.v4.new_output("stream", name="stdout", text="2\n"),
        nbformat.v4.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "a1"},
                                                     "text/plain": "HBox()"}),
        nbformat.v4.new_output("stream", name="stdout", text="3\n"),
    ]
    nb.cells = [cell]
    nqfbook.normalise_executed(nb)
    assert [o["text"] for o in nb.cells[0].outputs] == ["1\n2\n3\n"]
    assert nb.cells[0].metadata == {}
    assert nb.metadata["papermill"] == {"parameters": {"fidelity": "quick"}}
    assert "widgets" not in nb.metadata


SPLIT_STDOUT = [
    "import sys, time\n"
    "for i in range(40):\n"
    "    print(f'line {i}', flush=True)\n"
    "    print(f'progress {i}', file=sys.stderr, flush=True)\n"
    "    time.sleep(0.005 * (i % 3))",
]


def test_same_inputs_give_byte_identical_executed_notebooks(tmp_repo):
    """Two executions: identical bytes although the kernel splits its stdout differently each time."""
    nb = make_notebook(tmp_repo / "notebooks" / f"{CH01}.ipynb", SPLIT_STDOUT + PASSING)
    executed = tmp_repo / "_build" / "executed" / "quick" / nb.name
    p = run(tmp_repo, "--fidelity", "quick")
    assert p.returncode == 0, out(p)
    first = executed.read_bytes()
    p = run(tmp_repo, "--fidelity", "quick", "--force")
    assert p.returncode == 0, out(p)
    assert executed.read_bytes() == first
    cell = nbformat.reads(first.decode(), as_version=4).cells[3]
    assert [o["name"] for o in cell.outputs] == ["stdout"] and cell.outputs[0]["text"].count("line") == 40
    text = first.decode()
    assert "start_time" not in text and "iopub" not in text and str(tmp_repo) not in text


def test_tampered_executed_notebook_is_never_up_to_date_nor_published(executed_mini):
    """The tamper test: edit an executed notebook, then run / build."""
    mini_repo = executed_mini  # verified up to date by the fixture
    executed = mini_repo / "_build" / "executed" / "quick" / "ch01_mini.ipynb"
    chapters = nqfbook.discover_chapters(mini_repo)

    def tamper():
        nb = nbformat.read(executed, as_version=4)
        nb.cells.append(nbformat.v4.new_markdown_cell("TAMPERED: 42 of 2 claims pass"))
        nbformat.write(nb, executed)

    # the site build refuses it (checked before jupyter-book starts)
    tamper()
    content, reason = nqfbook.verify_executed(mini_repo, chapters[0], "quick")
    assert content is None and "modified after the runner wrote it" in reason
    ok, msg, _ = nqfbook.build_site(mini_repo, "quick", chapters, log=lambda *a: None)
    assert not ok and "ch01_mini" in msg and "modified after the runner wrote it" in msg
    assert not (mini_repo / "_build" / "html-quick").exists()

    # the runner calls it stale and re-executes it
    p = run(mini_repo, "--fidelity", "quick")
    assert p.returncode == 0, out(p)
    assert "up to date" not in p.stdout and "ok, 2 claims hold" in p.stdout
    assert "TAMPERED" not in executed.read_text()
    assert nqfbook.verify_executed(mini_repo, chapters[0], "quick")[0] is not None

    # a changed source makes the executed notebook stale for the site build too
    make_notebook(mini_repo / "notebooks" / "ch01_mini.ipynb", PASSING + ["pass"])
    content, reason = nqfbook.verify_executed(mini_repo, chapters[0], "quick")
    assert content is None and "other inputs" in reason


def test_failed_run_keeps_the_last_good_outputs_and_names_the_source_cell(executed_mini):
    mini_repo = executed_mini
    nb_path = mini_repo / "notebooks" / "ch01_mini.ipynb"
    executed = mini_repo / "_build" / "executed" / "quick" / "ch01_mini.ipynb"
    claims = mini_repo / "_build" / "output" / "quick" / "claims" / "ch01.json"
    figure = mini_repo / "_build" / "output" / "quick" / "figures" / "ch01" / "dummy.png"
    good = executed.read_bytes(), claims.read_bytes(), figure.read_bytes()

    # --force with a broken cell: the error names the SOURCE cell; the good outputs stay
    make_notebook(nb_path, PASSING[:1] + ["x = 1", "y = 1 / 0"] + PASSING[1:])
    p = run(mini_repo, "--fidelity", "quick", "--force")
    assert p.returncode == 1, out(p)
    src = nbformat.read(nb_path, as_version=4)
    assert src.cells[4].source == "y = 1 / 0"
    assert "source cell 4 " in p.stderr and 'starting "y = 1 / 0"' in p.stderr, p.stderr
    assert "ZeroDivisionError" in p.stderr and "last good outputs" in p.stderr
    assert (executed.read_bytes(), claims.read_bytes(), figure.read_bytes()) == good
    assert (mini_repo / "_build/executed/quick/failed/ch01_mini.ipynb").is_file()
    assert not (mini_repo / "_build/executed/quick/.previous/ch01_mini").exists()
    # the kept outputs are not "up to date": no record, so they are neither cached nor published
    assert nqfbook.verify_executed(mini_repo, nqfbook.discover_chapters(mini_repo)[0], "quick")[0] is None
    make_notebook(nb_path, PASSING)
    p = run(mini_repo, "--fidelity", "quick")
    assert p.returncode == 0 and "ok, 2 claims hold" in p.stdout, out(p)
    assert not (mini_repo / "_build/executed/quick/failed/ch01_mini.ipynb").exists()


SLEEPER = [
    "import pathlib, time\n"
    "pathlib.Path(out_dir, 'started').write_text('yes')\n"
    "time.sleep(600)",
]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_interrupted_chapter_ends_its_kernel_and_keeps_the_last_good_outputs(executed_mini, sig):
    import signal

    mini_repo = executed_mini
    executed = mini_repo / "_build" / "executed" / "quick" / "ch01_mini.ipynb"
    claims = mini_repo / "_build" / "output" / "quick" / "claims" / "ch01.json"
    good = executed.read_bytes(), claims.read_bytes()
    make_notebook(mini_repo / "notebooks" / "ch01_mini.ipynb", SLEEPER + PASSING)
    proc = _start(mini_repo, "--fidelity", "quick")
    started = mini_repo / "_build" / "output" / "quick" / "started"
    try:
        _wait_for(started.exists, 300, "the kernel to start the sleeping cell")
        proc.send_signal(getattr(signal, sig))
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + getattr(signal, sig), stdout + stderr
    assert f"interrupted by {sig}" in stderr
    _wait_for(lambda: not _procs_under(mini_repo), 10, "the kernel to end")
    assert (executed.read_bytes(), claims.read_bytes()) == good
    assert not (mini_repo / "_build/executed/quick/.previous/ch01_mini").exists()


def test_interrupted_site_build_then_build(executed_mini):
    """The interrupt test: SIGTERM mid-build (jupyter-book running), then a build, then a rebuild."""
    import signal

    mini_repo = executed_mini
    site = mini_repo / "_build" / "html-quick"
    site.mkdir(parents=True)
    (site / "sentinel.html").write_text("last good site")
    build = mini_repo / "_build"

    proc = _start(mini_repo, "--fidelity", "quick", "--build")
    try:
        _wait_for(lambda: any(build.glob(".site-*")) and any("jupyter_book" in h for h in _procs_under(mini_repo)),
                  300, "jupyter-book to start")
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stdout + stderr
    assert "interrupted by SIGTERM" in stderr and "previous site is unchanged" in stderr
    _wait_for(lambda: not _procs_under(mini_repo), 10, "jupyter-book's process group to end")
    assert not list(build.glob(".site-*")), "temporary build left behind"
    assert (site / "sentinel.html").read_text() == "last good site"

    # a kill -9 between the two renames of the swap, and a stale temporary: repaired by a run of any kind
    os.rename(site, build / "html-quick.old")
    stale = build / ".site-stale"
    stale.mkdir()
    os.utime(stale, (0, 0))
    p = run(mini_repo, "--fidelity", "quick")
    assert p.returncode == 0, out(p)
    assert "restored _build/html-quick" in p.stdout and (site / "sentinel.html").is_file()
    assert not stale.exists() and not (build / "html-quick.old").exists()

    p = run(mini_repo, "--fidelity", "quick", "--build")
    assert p.returncode == 0, out(p)
    assert (site / "index.html").is_file() and not (site / "sentinel.html").exists()
    assert not list(build.glob(".site-*")) and not (build / "stage" / "quick").exists()

    # the same commit, built again from a fresh execution: byte-identical pages
    first = {p.relative_to(site): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}
    p = run(mini_repo, "--fidelity", "quick", "--build", "--force")
    assert p.returncode == 0, out(p)
    second = {p.relative_to(site): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}
    assert sorted(first) == sorted(second)
    differ = [str(k) for k in first if first[k] != second[k]]
    assert not differ, f"pages differ between two builds of the same inputs: {differ}"


def test_a_killed_run_is_repaired_by_the_next_run(tmp_path):
    """kill -9 mid-chapter leaves the last good outputs in .previous/: housekeeping puts them back."""
    lay = nqfbook.Layout(tmp_path, "quick")
    stem = "ch07_x"
    good_nb = lay.previous(stem) / lay.executed_nb(stem).relative_to(lay.build)
    good_claims = lay.previous(stem) / lay.claim_candidates(stem)[0].relative_to(lay.build)
    for path, text in [(good_nb, "good notebook"), (good_claims, "good claims"),
                       (lay.running_nb(stem), "half-run notebook"),
                       (lay.claim_candidates(stem)[0], "half-written claims")]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    nqfbook.housekeeping(tmp_path, log=lambda *a: None)
    assert lay.executed_nb(stem).read_text() == "good notebook"
    assert lay.claim_candidates(stem)[0].read_text() == "good claims"
    assert lay.failed_nb(stem).read_text() == "half-run notebook"
    assert (lay.failed_outputs(stem) / "claims" / "ch07.json").read_text() == "half-written claims"
    assert not lay.previous(stem).exists() and not lay.record(stem).exists()


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_parameter_help_states_the_defaults_the_chapter_uses(path):
    """Each ``by_fidelity("name", name, fidelity, quick=..., full=...)`` reads a parameter of the cell tagged
    ``parameters``, and where that parameter's help says ``(quick Q, full F)`` these are the defaults used
    (``--list`` shows the help line, so it must not drift from the code)."""
    import ast
    import re

    nb = nbformat.read(path, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])][0].source
    helps = dict(re.findall(r"^(\w+)\s*(?::[^=]+)?=[^#\n]*#(.*)$", params, re.M))
    calls = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "by_fidelity":
                kw = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
                calls.append((ast.literal_eval(node.args[0]), kw["quick"], kw["full"]))
    for name, quick, full in calls:
        assert name in helps, f"{path.name}: by_fidelity reads {name!r}, which its parameters cell does not declare"
        m = re.search(r"\((?:None: )?quick (\[[^\]]*\]|[^,]+), full (\[[^\]]*\]|[^;)]+)", helps[name])
        if not m:
            continue
        try:
            stated = (ast.literal_eval(m.group(1).strip()), ast.literal_eval(m.group(2).strip()))
        except (ValueError, SyntaxError):
            continue  # a description ("4 values"), not a literal
        assert stated == (quick, full), f"{path.name}: `{name}` help says {stated}, the chapter uses {(quick, full)}"


# ------------------------------------------- issue 30 / issue 29 item 4: -p values checked, a model's source keyed
_MODEL_PARAMS = ('fidelity = "full"\nout_dir = "../_build/output/full"\nseed = 0\n'
                 'model: "import path" = "ch01_helper:make"  # the factory to call\n'
                 'width: "positive int" = 3  # neurons\n')


def _run_env(repo: Path, *args: str, pythonpath: Path) -> subprocess.CompletedProcess:
    env = os.environ.copy()
    env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, "-m", "nqfbook", "--root", str(repo), *args],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args, says", [
    (["-p", "model=nosuch.mod:f"], ["-p model", "no module 'nosuch'", "PYTHONPATH"]),
    (["-p", "model=usermod:nosuch"], ["-p model", "usermod", "defines no `nosuch`"]),
    (["-p", "model=usermod"], ["-p model", "not of the form", "PYTHONPATH"]),
    (["-p", "width=-3"], ["-p width must be an int >= 1; got -3"]),
    (["-p", "width=1", "-p", "width=2"], ["-p width is given twice"]),
])
def test_bad_parameters_fail_before_any_cell_runs(tmp_repo, args, says):
    mods = tmp_repo / "usermods"
    mods.mkdir()
    (mods / "usermod.py").write_text("def make():\n    return 1\n")
    make_notebook(tmp_repo / "notebooks" / "ch01_x.ipynb", ["raise SystemExit('executed')"], params=_MODEL_PARAMS)
    p = _run_env(tmp_repo, "--fidelity", "quick", *args, pythonpath=mods)
    assert p.returncode == 2 and "executed" not in out(p) and "[1/1]" not in p.stdout, out(p)
    for word in says:
        assert word in p.stderr, out(p)


def test_cache_key_includes_the_source_of_a_model_module(tmp_path):
    nb = make_notebook(tmp_path / "ch01_x.ipynb", ["pass"], params=_MODEL_PARAMS)
    mod = tmp_path / "usermod.py"
    mod.write_text("def make():\n    return 1\n")
    base = nqfbook.cache_key(nb, "tree", "quick", {"model": "usermod:make"})
    assert base == nqfbook.cache_key(nb, "tree", "quick", {"model": "usermod:make"}, sources={})  # no source: as before
    with_src = nqfbook.cache_key(nb, "tree", "quick", {"model": "usermod:make"}, sources={"model": mod})
    assert with_src != base
    mod.write_text("def make():\n    return 2\n")
    assert nqfbook.cache_key(nb, "tree", "quick", {"model": "usermod:make"}, sources={"model": mod}) != with_src


def test_an_edited_model_module_re_executes_the_chapter(tmp_repo):
    """Issue 29: after the ``-p model`` module was edited the runner answered "up to date (cached)"."""
    mods = tmp_repo / "usermods"
    mods.mkdir()
    (mods / "usermod.py").write_text("def make():\n    return 1\n")
    body = ["import importlib\npath, _, name = model.partition(':')\nvalue = getattr(importlib.import_module(path), name)()",
            *PASSING]
    make_notebook(tmp_repo / "notebooks" / f"{CH01}.ipynb", body, params=_MODEL_PARAMS)
    args = ("--fidelity", "quick", "--only", "ch01", "-p", "model=usermod:make")
    p = _run_env(tmp_repo, *args, pythonpath=mods)
    assert p.returncode == 0 and "ok, 2 claims hold" in p.stdout, out(p)
    p = _run_env(tmp_repo, *args, pythonpath=mods)
    assert p.returncode == 0 and "up to date" in p.stdout, out(p)
    (mods / "usermod.py").write_text("def make():\n    return 2  # edited\n")
    p = _run_env(tmp_repo, *args, pythonpath=mods)
    assert p.returncode == 0 and "ok, 2 claims hold" in p.stdout and "up to date" not in p.stdout, out(p)


def test_a_long_chapter_prints_progress_lines_and_a_summary_with_verdict_counts(tmp_path):
    from nqfbook.execute import _progress_lines, chapter_summary
    from nqfbook.layout import Layout

    running = tmp_path / "ch06_x.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("a"), nbformat.v4.new_code_cell("b"), nbformat.v4.new_code_cell("c")]
    nb.cells[1].metadata["papermill"] = {"status": "running"}
    nbformat.write(nb, running)
    lines = []
    with _progress_lines(running, "ch06_x", lines.append, every=0.05):
        time.sleep(0.3)
    assert lines and all(line.startswith("    ch06: ") and line.endswith("cell 2 of 3") for line in lines), lines
    with _progress_lines(running, "ch06_x", None, every=0.01):  # a terminal: papermill's own bar, no lines
        time.sleep(0.05)

    lay = Layout(tmp_path, "quick")
    path = lay.claim_candidates("ch06_x")[0]
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"n_claims": 5, "n_paper": 2, "n_finding": 0, "n_sanity": 3,
                                "verdict_counts": {"holds": 3, "against": 1, "inconclusive": 2},
                                "verdict_kinds": {"holds": 3, "against": 1, "depends on X": 0, "too few runs": 2}}))
    assert chapter_summary(lay, "ch06_x") == ("5 claims hold (2 paper, 3 sanity); verdicts: 3 holds, 1 against, "
                                              "2 too few runs")
