# Two commands do all the set-up on a fresh machine:
#   make demo   creates .venv, installs evoforge, runs `evoforge quickstart` (no GPU, no API key needed)
#   make test   same set-up, then the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check
HAS_NVIDIA := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo yes)

.PHONY: demo test setup sysdeps lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
ifeq ($(HAS_NVIDIA),yes)
	$(PIP) install torch "numpy<2.4"
else
	# No NVIDIA GPU: the CPU build of torch and the Triton the lent H200 runs (its interpreter needs numpy<2.4).
	$(PIP) install torch==2.13.0 triton==3.6.0 "numpy<2.4"
endif
	$(PIP) install -e ".[test,dashboard,cute]"
	touch $@

setup: $(VENV)/.installed

# System packages the tests use: Chromium (dashboard test), PostgreSQL (cluster storage test) and bubblewrap
# (candidates' processes run contained where it is installed: judge/containment.py).
# Installed when running as root and missing; elsewhere those tests say what is missing and skip.
sysdeps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  need=""; command -v chromium >/dev/null || need="$$need chromium"; \
	  command -v bwrap >/dev/null || need="$$need bubblewrap"; \
	  [ -x /usr/lib/postgresql/*/bin/postgres ] 2>/dev/null || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need="$$need postgresql"; \
	  if [ -n "$$need" ]; then echo "installing$$need"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$need >/dev/null) \
	    || echo "could not install$$need: the tests that need them will skip"; fi; \
	fi

# The quickstart campaign shipped in the package (evoforge/data/quickstart.toml, a link to experiments/quickstart.toml),
# as `evoforge quickstart` runs it from any folder; a second `make demo` continues the first run (nothing recorded
# is ever overwritten).
demo: setup
	$(VENV)/bin/evoforge quickstart

# Two test processes, each a whole test file at a time (a module's campaign fixture runs once): most of a test's
# time is waiting on processes it started (Ray, evaluation processes, a CLI), so two share two cores well.
test: setup sysdeps
	$(PY) -m pytest -n 2 --dist loadfile

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) runs .pytest_cache
