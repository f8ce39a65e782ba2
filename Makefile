# lakesort: `make demo` and `make test` work from a clean clone; everything else they need is set up here.
SHELL := bash
PYTHON ?= python3
UV_VERSION := 0.13.8
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
DEMO_HOME ?= .lakesort
DEMO_SCALE ?= 0.05
DEMO_BATCHES ?= 12
PYTEST_ARGS ?=

# uv uses the machine's Python 3.11 and never downloads one.
export UV_PYTHON_DOWNLOADS := never
# Bytecode compiled at install: environments with PYTHONDONTWRITEBYTECODE would recompile on every start.
export UV_COMPILE_BYTECODE := 1
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: help setup check-java demo test lint bench clean

help:
	@echo "make demo   build the demo warehouse, compact it with the lakesort_nightly DAG (Airflow, Spark local)"
	@echo "make test   run the tests (sets up if needed)"
	@echo "make lint   ruff over the code;  make bench  run the benchmarks in tests/benchmarks/"
	@echo "make clean  remove $(VENV), $(TOOLS), the demo home $(DEMO_HOME) and .pyiceberg.yaml"

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet uv==$(UV_VERSION)

# Every dependency comes pinned from uv.lock; a changed lock or pyproject re-syncs.
$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --all-extras --python $(PYTHON)
	@touch $@

# The class archive every Spark job's driver JVM starts from (about 40 s once; each job then starts about 2-3 s
# sooner: layout/compaction/pipeline/class_archive.py). A failure only warns: the jobs run without it.
$(VENV)/.spark-archive: $(VENV)/.synced
	$(VENV)/bin/lakesort --quiet spark-archive \
		|| echo "warning: no Spark class archive (jobs start without it); retry with: $(VENV)/bin/lakesort spark-archive" >&2
	@touch $@

setup: check-java $(VENV)/.synced $(VENV)/.spark-archive

check-java:
	@scripts/check-java

# The demo warehouse, then lakesort_nightly end to end with `airflow dags test` (Airflow home with SQLite in
# $(DEMO_HOME)/airflow, Spark local, the embedded Iceberg catalog) and a summary; see dags/README.md.
demo: setup
	$(VENV)/bin/lakesort demo --home $(DEMO_HOME) --scale $(DEMO_SCALE) --batches $(DEMO_BATCHES)
	$(VENV)/bin/python scripts/airflow_demo.py --home $(DEMO_HOME)

test: setup
	$(VENV)/bin/pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check layout tests dags jobs

bench: setup
	@for b in tests/benchmarks/bench_*.py; do echo "== $$b"; $(VENV)/bin/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(TOOLS) $(DEMO_HOME) .pyiceberg.yaml
