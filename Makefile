# nqf book: the two commands are `make book` and `make test` (see README.md).
# Works on a fresh clone with only python3.11 and pip.

PYTHON      ?= python3.11
VENV        ?= .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.nqf-installed
# Extra flags for the runner, e.g. `make book RUNNER_FLAGS=--force`.
RUNNER_FLAGS ?=
PYTEST_FLAGS ?=

.PHONY: venv test book quick-book check-site bench clean help

help:
	@echo "make book        execute every chapter at full fidelity and build _build/html"
	@echo "make test        unit tests + every chapter at quick fidelity"
	@echo "make quick-book  site at quick fidelity in _build/html-quick"
	@echo "make check-site  quick site in headless Chromium, network off (screenshots in _build/site-check)"
	@echo "make bench       measure chapter times, make test/make book and the flow solver against scipy (_build/output/benchmarks.json)"
	@echo "make venv        create/refresh .venv from requirements-lock.txt"
	@echo "make clean       remove _build and caches (keeps .venv)"

venv: $(STAMP)

# Re-installs whenever pyproject.toml or requirements-lock.txt changes.
$(STAMP): pyproject.toml requirements-lock.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -c requirements-lock.txt -e ".[dev]"
	$(PY) -m ipykernel install --sys-prefix
	@touch $@

test: venv
	$(PY) -m pytest $(PYTEST_FLAGS)

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
