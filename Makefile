# Two commands a newcomer needs: `make run` and `make test`. Both create .venv and install
# what is missing first; a second run only checks a stamp file and is quick.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
PY := $(VENV)/bin/python
# The web UI's third-party front-end files (htmx) come from the npm registry, pinned by
# package-lock.json; re-installed only when the lock changes (or node_modules is gone).
NODE_STAMP := node_modules/.kandev-installed

.PHONY: run test install lint format clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "npm is needed for the web UI's front-end files (install Node.js 20+)"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

install: $(STAMP) $(NODE_STAMP)

# `make run PORT=9000 DATA_DIR=/tmp/k HOST=0.0.0.0`; unset ones fall back to KANDEV_PORT /
# KANDEV_HOME / KANDEV_HOST, then to 127.0.0.1:8420 and ~/.kandev.
run: $(STAMP) $(NODE_STAMP)
	$(VENV)/bin/kandev serve $(if $(HOST),--host '$(HOST)') $(if $(PORT),--port '$(PORT)') $(if $(DATA_DIR),--data-dir '$(DATA_DIR)')

# The tests run in PYTEST_WORKERS processes (pytest-xdist), a module per worker at a time:
# most of a test's time is waiting on real servers, agents, git and the browser, so three
# workers keep two cores busy. `make test PYTEST_WORKERS=0` runs them in this one process.
# compileall first: with PYTHONDONTWRITEBYTECODE set (CI images do) every `kandev` process
# the tests start would otherwise compile the whole package from source again.
PYTEST_WORKERS ?= 3
test: $(STAMP) $(NODE_STAMP)
	$(PY) -m compileall -q src tests bench >/dev/null
	$(PY) -m pytest $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadscope) $(PYTEST_ARGS)

# ruff over everything; mypy over src/kandev (its settings, strict at the seams, are in
# pyproject.toml). CI runs this before the tests.
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format src tests bench
	$(VENV)/bin/ruff check --fix src tests bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache node_modules
