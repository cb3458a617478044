# Every target sets up .venv itself: `make run` needs only Python 3.11+ and make; `make test` also needs
# Node.js 20+ with npm and a reachable PostgreSQL (NERVE_TEST_DATABASE_URL).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What `nerve` itself needs (make run); the test, lint and bench tools come on top (make test …).
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# uv installs the locked versions several times faster than pip; it is a PyPI package itself,
# installed into the venv by pip, so a fresh clone still needs only Python and make.
UV_VERSION := 0.13.8
UV := $(BIN)/uv
# Bytecode is compiled at install: a machine that sets PYTHONDONTWRITEBYTECODE would otherwise compile
# every library again in each process nerve and its tests start.
UV_INSTALL := $(UV) pip install --compile-bytecode --python $(BIN)/python -c requirements.lock
# The reference MCP servers the tests run against are Node packages, pinned by a committed lock.
NODE_DIR := .node
NODE_STAMP := $(NODE_DIR)/.installed
# The official MCP conformance suite and the Node 22 it runs on, pinned by a committed lock.
CONFORMANCE_DIR := .conformance
CONFORMANCE_STAMP := $(CONFORMANCE_DIR)/.installed

.PHONY: run test test-postgres lint bench fmt clean conformance docs

$(UV):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "nerve needs Python 3.11 or newer"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing uv $(UV_VERSION), the installer the next steps use, into $(VENV)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check 'uv==$(UV_VERSION)'

$(STAMP): pyproject.toml requirements.lock | $(UV)
	@echo "Installing what nerve needs to run into $(VENV) (about 10 s the first time)"
	$(UV_INSTALL) -e .
	@touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	@echo "Adding the test, lint and bench tools to $(VENV) (about 10 s the first time)"
	$(UV_INSTALL) -e '.[dev]'
	@touch $(DEV_STAMP)

# Installed at setup, never at run time: tests start the server from $(NODE_DIR)/node_modules.
$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	@command -v npm >/dev/null || { echo "the tests need Node.js 20 or newer with npm (the reference MCP servers run on it)"; exit 1; }
	mkdir -p $(NODE_DIR)
	cp tests/node/package.json tests/node/package-lock.json $(NODE_DIR)/
	npm ci --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error
	@touch $(NODE_STAMP)

# Installed at setup, never at run time: the runner starts Node and the suite from $(CONFORMANCE_DIR).
$(CONFORMANCE_STAMP): conformance/package.json conformance/package-lock.json
	@command -v npm >/dev/null || { echo "make conformance needs npm (it installs the suite and Node 22 into $(CONFORMANCE_DIR))"; exit 1; }
	mkdir -p $(CONFORMANCE_DIR)
	cp conformance/package.json conformance/package-lock.json $(CONFORMANCE_DIR)/
	npm ci --prefix $(CONFORMANCE_DIR) --no-audit --no-fund --loglevel=error
	@touch $(CONFORMANCE_STAMP)

# No shell around nerve: Ctrl-C reaches the whole foreground group, and a shell killed by it makes
# make report "Interrupt". nerve leaves the chat on Ctrl-C with exit code 0, so make ends quietly.
run: $(STAMP)
	$(BIN)/nerve chat

# Test files run in parallel; a file's tests stay together, sharing the servers its fixtures start.
# Four workers keep two cores busy: a test waiting on its subprocesses leaves room for another
# (7.4 min against 8.2 min with three, idle 2-core machine). TEST_WORKERS=0 runs them one by one.
TEST_WORKERS ?= 4
# The store tests run on SQLite and on this PostgreSQL too, each test in a schema of its own; when it
# cannot be reached they fail. Point it at another server with `make test NERVE_TEST_DATABASE_URL=…`.
NERVE_TEST_DATABASE_URL ?= postgresql://postgres@127.0.0.1:5432/test
# The tests' processes keep their bytecode (nerve's modules, the test files pytest rewrites) even where
# the machine sets PYTHONDONTWRITEBYTECODE: each of the hundreds of processes a run starts would
# otherwise compile them again.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest
test: $(DEV_STAMP) $(NODE_STAMP)
	NERVE_TEST_DATABASE_URL='$(NERVE_TEST_DATABASE_URL)' $(PYTEST) -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The same suite again with PostgreSQL as the database of every test that does not name one
# (NERVE_TEST_STORE): each test in a schema of its own. .ci/run runs both.
test-postgres: $(DEV_STAMP) $(NODE_STAMP)
	NERVE_TEST_STORE=postgres NERVE_TEST_DATABASE_URL='$(NERVE_TEST_DATABASE_URL)' $(PYTEST) -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy bot adapters servers conformance
	$(BIN)/lint-imports

fmt: $(DEV_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Every client scenario of the suite nerve supports, through nerve's own MCP client; fails on any failed check.
conformance: $(DEV_STAMP) $(CONFORMANCE_STAMP)
	$(BIN)/python -m conformance.run

# The replicas suite runs its processes on this PostgreSQL (a schema of its own, dropped afterwards).
bench: $(DEV_STAMP)
	NERVE_TEST_DATABASE_URL='$(NERVE_TEST_DATABASE_URL)' $(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(NODE_DIR) $(CONFORMANCE_DIR) *.egg-info

# The docs/ pages as a site in site/ (mkdocs.yml); a broken link or anchor fails the build.
DOCS_STAMP := $(VENV)/.installed-docs
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[docs]'
	@touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/mkdocs build --strict
