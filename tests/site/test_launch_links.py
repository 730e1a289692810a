"""Launch (Binder, Colab) and download links: one repository address, files that exist.

``_config.yml``'s ``repository`` is the one place that names the repository
(README, "Where the book lives"). These tests check that every chapter opens with
the Colab-only install cell pointing at that address, and build a one-chapter book
with the real configuration to check the launch links Jupyter Book makes from it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_site  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("ch*.ipynb"))


def _install_cell(nb: dict) -> str:
    first = nb["cells"][0]
    assert first["cell_type"] == "code", "a chapter opens with the Colab install cell"
    return "".join(first["source"])


def test_repository_is_named_once_in_config():
    url, branch = check_site.repository_url()
    assert url.startswith("https://github.com/") and url.count("/") == 4, url
    assert branch
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert cfg["launch_buttons"]["colab_url"] and cfg["launch_buttons"]["binderhub_url"]
    assert cfg["repository"]["path_to_book"] == ""  # links name notebooks/chNN.ipynb of the repository


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_opens_with_colab_only_install_of_the_configured_repository(path):
    url, branch = check_site.repository_url()
    nb = json.loads(path.read_text(encoding="utf-8"))
    src = _install_cell(nb)
    assert 'if "google.colab" in sys.modules:' in src  # does nothing outside Colab
    assert f"git+{url}@{branch}" in src, f"{path.name}: install cell does not use {url}@{branch}"
    assert "remove-cell" in nb["cells"][0].get("metadata", {}).get("tags", [])
    # and it really is inert here: executing it neither fails nor installs anything
    code = compile(src, path.name, "exec")
    exec(code, {"__name__": "__not_colab__"})


def test_placeholder_config_publishes_no_launch_repository_edit_or_issue_link():
    from nqfbook.site import PLACEHOLDER_REPOSITORY, published_config, unpublished_notebook

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    real = {**cfg, "repository": {**cfg["repository"], "url": "https://github.com/someone/nqf"}}
    assert published_config(real) is real  # a real address: the configuration as written
    placeholder = {**cfg, "repository": {**cfg["repository"], "url": PLACEHOLDER_REPOSITORY}}
    out = published_config(placeholder)
    assert out["repository"]["url"] == ""
    assert not any(out["html"][k] for k in ("use_repository_button", "use_issues_button", "use_edit_page_button"))
    assert not out["launch_buttons"].get("binderhub_url") and not out["launch_buttons"].get("colab_url")
    assert "once the book is published" in out["parse"]["myst_substitutions"]["launch_buttons"]
    assert placeholder["html"]["use_repository_button"] is cfg["html"]["use_repository_button"]  # not mutated
    nb = json.loads(CHAPTERS[0].read_text(encoding="utf-8"))
    if PLACEHOLDER_REPOSITORY in _install_cell(nb):
        fixed = json.loads(unpublished_notebook(CHAPTERS[0].read_bytes()))
        src = "".join(fixed["cells"][0]["source"])
        assert PLACEHOLDER_REPOSITORY not in src and "not published yet" in src
        exec(compile(src, "install", "exec"), {"__name__": "__not_colab__"})  # inert outside Colab
        assert fixed["cells"][1:] == nb["cells"][1:]


def _build_one_chapter(tmp_path, url: str):
    from nqfbook.site import published_config

    stage = tmp_path / "stage"
    (stage / "book").mkdir(parents=True)
    (stage / "notebooks").mkdir()
    shutil.copy2(ROOT / "_config.yml", stage / "_config.yml")
    shutil.copy2(ROOT / "book" / "references.bib", stage / "book" / "references.bib")
    (stage / "book" / "intro.md").write_text("# Intro\n", encoding="utf-8")
    stem = CHAPTERS[0].stem
    nb = {"cells": [{"cell_type": "markdown", "id": "t", "metadata": {}, "source": ["# A chapter\n"]}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (stage / "notebooks" / f"{stem}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    toc = {"format": "jb-book", "root": "book/intro",
           "parts": [{"caption": "Chapters", "chapters": [{"file": f"notebooks/{stem}"}]}]}
    (stage / "book" / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
    cfg = yaml.safe_load((stage / "_config.yml").read_text(encoding="utf-8"))
    cfg["repository"]["url"] = url
    cfg = published_config(cfg)  # what the runner's staging builds with
    cfg["sphinx"]["config"]["nitpicky"] = False  # no API page here
    cfg["sphinx"].pop("local_extensions", None)
    cfg["sphinx"]["config"]["bibtex_default_style"] = "plain"  # its label style lives in book/_ext
    (stage / "_config.yml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", str(stage),
         "--path-output", str(out), "--builder", "html", "--toc", str(stage / "book" / "_toc.yml"),
         "--config", str(stage / "_config.yml")],
        capture_output=True, text=True, cwd=stage, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out / "_build" / "html", stem


def test_built_links_with_the_configured_address(tmp_path):
    """Build a one-chapter book with the real _config.yml and check its links (about 20 s)."""
    url, branch = check_site.repository_url()
    site, stem = _build_one_chapter(tmp_path, url)
    problems = [p for p in check_site.check_launch_links(site) if stem in p]
    problems += check_site.check_no_placeholder_links(site)
    assert not problems, "\n".join(problems)


def test_built_launch_links_once_published(tmp_path):
    """With a real address, Binder and Colab links name the chapter's notebook there (about 20 s)."""
    url = "https://github.com/someone/nqf"
    site, stem = _build_one_chapter(tmp_path, url)
    problems = [p for p in check_site.check_launch_links(site, url=url) if stem in p]
    assert not problems, "\n".join(problems)
    assert not check_site.check_no_placeholder_links(site, url=url)


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_colab_cell_installs_the_science_package_only_and_refuses_other_pythons(path, monkeypatch):
    """On Colab the first cell installs ``nqf`` (no book toolchain: no extra), refuses a Python outside
    pyproject's range with a message naming the versions, and asks for a restart only when it replaced
    a package the runtime had imported. The chapters take ``glue`` from ``nqfbook.kit`` (myst-nb is
    not installed there)."""
    import subprocess
    import sys
    import types

    url, branch = check_site.repository_url()
    nb = json.loads(path.read_text(encoding="utf-8"))
    src = _install_cell(nb)
    assert "myst_nb" not in path.read_text(encoding="utf-8"), f"{path.name} imports myst_nb (Colab lacks it)"
    code = compile(src, path.name, "exec")
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    import os

    calls, moved = [], []
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: calls.append(args))
    monkeypatch.setattr(os, "chdir", moved.append)
    monkeypatch.setattr(os.path, "isdir", lambda p: False)  # no clone yet
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(code, {"__name__": "__colab__"})  # same versions afterwards: no restart asked
    assert calls and calls[0][-1] == f"nqf @ git+{url}@{branch}", calls
    # the recipes (notebooks/chNN_*.py) come from a shallow clone of the same repository and branch, the
    # chapter runs in its notebooks directory and imports them from there
    clone = calls[1]
    assert clone[:2] == ["git", "clone"] and url in clone and clone[clone.index("--branch") + 1] == branch, clone
    assert moved == [os.path.join(clone[-1], "notebooks")] and sys.path[0] == moved[0]
    monkeypatch.setattr(sys, "version_info", (3, 10, 14, "final", 0))
    with pytest.raises(RuntimeError, match=r"Python 3\.11 to 3\.13"):
        exec(code, {"__name__": "__colab__"})
    assert len(calls) == 2  # nothing installed on an unsupported Python
