# nqf book: the two commands are `make book` and `make test` (see README.md).
# Works on a fresh clone with only python3.11 and pip.

PYTHON      ?= python3.11
VENV        ?= .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.nqf-installed
# Extra flags for the runner, e.g. `make book RUNNER_FLAGS=--force`.
RUNNER_FLAGS ?=
PYTEST_FLAGS ?=

.PHONY: venv test test-shuffled test-py313 lab book quick-book check-site bench clean help

help:
	@echo "make book        execute every chapter at full fidelity and build _build/html"
	@echo "make test        unit tests + every chapter at quick fidelity"
	@echo "make quick-book  site at quick fidelity in _build/html-quick"
	@echo "make check-site  quick site in headless Chromium, network off (screenshots in _build/site-check)"
	@echo "make bench       measure chapter times, make test/make book and the flow solver against scipy (_build/output/benchmarks.json)"
	@echo "make venv        create/refresh .venv from requirements-lock.txt"
	@echo "make lab         JupyterLab on notebooks/ with the project's kernel (chapters run by hand: quick, into _build/output/interactive)"
	@echo "make test-py313  the unit tests (no chapters) on Python 3.13 in .venv-py313"
	@echo "make test-shuffled  the unit tests in three shuffled orders"
	@echo "make clean       remove _build and caches (keeps .venv)"

venv: $(STAMP)
	@test "$$(cat $(STAMP))" = "$(CURDIR)" || { echo "the clone moved: reinstalling nqf and its kernel here"; \
	  rm -f $(STAMP); $(MAKE) --no-print-directory VENV=$(VENV) PYTHON=$(PYTHON) $(STAMP); }

# Re-installs whenever pyproject.toml or requirements-lock.txt changes.
$(STAMP): pyproject.toml requirements-lock.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -c requirements-lock.txt -e ".[dev]"
	$(PY) -m ipykernel install --sys-prefix
	@echo "$(CURDIR)" > $@

# Two workers by default (one per core here): the chapters (scheduled first) run beside the unit
# tests. `make test PYTEST_WORKERS=0` runs everything in one process.
PYTEST_WORKERS ?= auto
XDIST = $(if $(filter 0,$(PYTEST_WORKERS)),-p no:xdist,-n $(PYTEST_WORKERS) --dist worksteal)
test: venv
	$(PY) -m pytest $(XDIST) $(PYTEST_FLAGS)

# The unit tests in three shuffled orders (no test may depend on another having run first).
test-shuffled: venv
	for seed in 1 2 3; do $(PY) -m pytest $(XDIST) -m "not notebook" --shuffle $$seed -q $(PYTEST_FLAGS) || exit 1; done

# The unit tests on Python 3.13 (pyenv's, or any python3.13 on PATH), in their own venv.
PY313 ?= $(shell for p in $$HOME/.pyenv/versions/3.13*/bin/python3.13 $$(command -v python3.13); do \
             test -x "$$p" && "$$p" -c pass 2>/dev/null && { echo "$$p"; break; }; done)
test-py313:
	@test -n "$(PY313)" || { echo "make test-py313: no python3.13 found (set PY313=/path/to/python3.13)"; exit 2; }
	$(MAKE) VENV=.venv-py313 PYTHON=$(PY313) venv
	.venv-py313/bin/python -m pytest -m "not notebook" $(PYTEST_FLAGS)

# JupyterLab with the project's kernel (installed into the venv by `make venv`; --allow-root for
# containers run as root). Moving the clone and running `make venv` again repairs the kernelspec.
ROOT_FLAG := $(shell test "$$(id -u)" -eq 0 && echo --allow-root)
# A chapter run by hand runs at NQF_FIDELITY (quick unless given: `make lab NQF_FIDELITY=full`) and
# writes to _build/output/interactive/<fidelity>, never over a build (nqfbook.kit.interactive_settings).
NQF_FIDELITY ?= quick
# At quick, XLA's compile-light CPU setting of the runner (nqfbook.processes.QUICK_XLA_FLAG).
lab: venv
	NQF_FIDELITY=$(NQF_FIDELITY) EQX_ON_ERROR=$${EQX_ON_ERROR:-nan} XLA_FLAGS="$$($(PY) -c 'import os, sys; from nqfbook.processes import xla_flags; \
	  print(xla_flags(sys.argv[1], os.environ.get("XLA_FLAGS", "")))' $(NQF_FIDELITY))" \
	  $(PY) -m jupyter lab --notebook-dir=notebooks $(ROOT_FLAG)

book: venv
	$(PY) -m nqfbook --fidelity full --build $(RUNNER_FLAGS)

quick-book: venv
	$(PY) -m nqfbook --fidelity quick --build $(RUNNER_FLAGS)

# The quick site as a reader's browser sees it, with the network off: every page loads
# without console errors, images load, math is typeset, no build paths, links resolve
# (tests/site/check_site.py). Installs Debian's chromium when it is missing; it is driven
# over the DevTools protocol (websocket-client), so no chromedriver is needed.
SUDO := $(shell test "$$(id -u)" -eq 0 || echo sudo)
check-site: venv
	@command -v chromium >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }
	$(PY) -m nqfbook --fidelity quick --build $(RUNNER_FLAGS)
	$(PY) tests/site/check_site.py --site _build/html-quick --out _build/site-check

bench: venv
	$(PY) benchmarks/bench_book.py
	$(PY) benchmarks/bench_flow.py

clean:
	rm -rf _build .pytest_cache *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print -exec rm -rf {} +
