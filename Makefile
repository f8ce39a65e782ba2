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
# Two pytest workers (the machine's two cores); a module's tests, and the modules sharing a session's server
# or JVM, stay on one worker (tests/tiers.py), so that each set-up is made once.
PYTEST_PARALLEL := -n 2 --dist loadgroup
LINTED := layout tests dags jobs testbed scripts
, := ,
# The test bed (testbed/README.md): other Sparks, Iceberg's own Spark runtime and the SQLite JDBC driver.
TESTBED := .testbed
BED_SPARKS := 3.5 4.0 4.1
ICEBERG_VERSION := 1.12.0
BED_JARS := org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:$(ICEBERG_VERSION) org.xerial:sqlite-jdbc:3.54.1.0
# Docker Compose v2, to validate docker/compose.yaml with Compose itself (tests/test_docker.py): no Debian package
# has v2, so it is built from its Go module (the Go module proxy; Go's caches keep it: about 95 s once, 4 s after).
COMPOSE_MODULE := github.com/docker/compose/v2@v2.40.3

# uv uses the machine's Python 3.11 and never downloads one.
export UV_PYTHON_DOWNLOADS := never
# Bytecode compiled at install: environments with PYTHONDONTWRITEBYTECODE would recompile on every start.
export UV_COMPILE_BYTECODE := 1
export UV_PROJECT_ENVIRONMENT := $(VENV)

# uv revalidates each cached download with the registry, and the registry this project's machines reach answers
# without cache validators: every online install downloaded and built each pyspark source distribution again and
# kept the old copy, about 1.3 GiB per Spark per set-up, 69 GiB of uv's cache in one day of CI runs, until the
# disk filled. So installs run offline from the cache first and reach the registry only when the cache lacks
# something; after such a fetch `uv cache prune` drops the copies it replaced (a failed prune only warns).
uv_cached = $(UV) $(1) --offline 2>/dev/null || { echo "uv: fetching what its cache lacks from the registry"; \
	$(UV) $(1) && { $(UV) cache prune --quiet || echo "warning: uv cache prune failed" >&2; }; }

.PHONY: help setup check-java testbed testbed-lock demo check static test lint bench docs docs-serve clean

help:
	@echo "make demo   build the demo warehouse, compact it with the lakesort_nightly DAG (Airflow, Spark local)"
	@echo "make test   every test, every tier (CI runs it; sets up if needed), within the suite's time budget"
	@echo "make check  the inner loop (about 2 min): ruff, mypy, import contracts, unit and property tests, no JVM"
	@echo "make lint   ruff over the code;  make bench  run the benchmarks in tests/benchmarks/"
	@echo "make docs   build the documentation site into site/ (strict);  make docs-serve  serve it on 127.0.0.1:8000"
	@echo "make clean  remove $(VENV), $(TOOLS), $(TESTBED), the demo home $(DEMO_HOME), .pyiceberg.yaml and site/"

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet uv==$(UV_VERSION)

# Every dependency comes pinned from uv.lock; a changed lock or pyproject re-syncs.
$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	$(call uv_cached,sync --frozen --all-extras --python $(PYTHON))
	@touch $@

# The class archive every Spark job's driver JVM starts from (about 40 s once; each job then starts about 2-3 s
# sooner: layout/compaction/pipeline/class_archive.py). A failure only warns: the jobs run without it.
$(VENV)/.spark-archive: $(VENV)/.synced
	$(VENV)/bin/lakesort --quiet spark-archive \
		|| echo "warning: no Spark class archive (jobs start without it); retry with: $(VENV)/bin/lakesort spark-archive" >&2
	@touch $@

setup: check-java $(VENV)/.synced $(VENV)/.spark-archive testbed

# One virtualenv per other Spark version, each from its hashed lock (testbed/requirements/spark-X.txt); uv's
# cache keeps the wheels between set-ups (uv_cached above). Spark 4.2 is lakesort's own (.venv).
$(TESTBED)/spark-%/.installed: testbed/requirements/spark-%.txt | $(UV)
	rm -rf $(TESTBED)/spark-$*
	$(UV) venv --quiet --python $(PYTHON) $(TESTBED)/spark-$*
	$(call uv_cached,pip install --quiet --python $(TESTBED)/spark-$*/bin/python --require-hashes -r $<)
	@touch $@

# Iceberg's Spark runtime and the SQLite JDBC driver, pinned above, from Maven Central through Maven's own
# cache (~/.m2): fetched once per machine, copied here at set-up.
$(TESTBED)/jars/.copied: Makefile
	rm -rf $(TESTBED)/jars
	for jar in $(BED_JARS); do mvn --batch-mode --quiet dependency:copy -Dartifact=$$jar -DoutputDirectory=$(TESTBED)/jars || exit 1; done
	@touch $@

# The object-store test bed (tests/object_store.py): Iceberg's REST catalog server, and the S3A connector for
# lakesort's own Spark (hadoop-aws and the AWS SDK modules it needs; Spark already ships netty, slf4j, commons
# and httpcomponents, so those are left out). Versions are pinned in the poms; Maven's cache keeps the jars.
# Delta Lake for the bed's Spark 4.1 (maven/delta.pom.xml), the peer in tests/benchmarks/bench_peers.py, comes the
# same way, into a directory of its own so that the Iceberg bed's classpath (.testbed/jars) stays as it is; so does
# openlineage-spark (maven/openlineage.pom.xml), the Spark job's own lineage events in tests/lineage/.
$(TESTBED)/%/.copied: testbed/maven/%.pom.xml
	rm -rf $(TESTBED)/$*
	mvn --batch-mode --quiet -f $< dependency:copy-dependencies -DoutputDirectory=$(abspath $(TESTBED))/$* \
		-DincludeScope=runtime -DexcludeGroupIds=$(if $(filter s3a,$*),io.netty$(,)org.slf4j$(,)commons-codec$(,)commons-logging$(,)org.apache.httpcomponents,none)
	@touch $@

# Compose's go.mod has exclude directives, which `go install pkg@version` refuses, so the module's source (as the
# proxy serves it, checked against Go's checksum database) is built as the main module in a copy of its own.
$(TESTBED)/compose/docker-compose: Makefile
	rm -rf $(TESTBED)/compose
	mkdir -p $(TESTBED)/compose
	src=$$(go mod download -json $(COMPOSE_MODULE) | $(PYTHON) -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') \
		&& cp -r "$$src" $(TESTBED)/compose/src && chmod -R u+w $(TESTBED)/compose/src
	cd $(TESTBED)/compose/src && go build -trimpath -buildvcs=false -o ../docker-compose ./cmd
	rm -rf $(TESTBED)/compose/src

testbed: $(foreach v,$(BED_SPARKS),$(TESTBED)/spark-$(v)/.installed) $(TESTBED)/jars/.copied \
	$(TESTBED)/rest-catalog/.copied $(TESTBED)/s3a/.copied $(TESTBED)/delta/.copied $(TESTBED)/openlineage/.copied \
	$(TESTBED)/compose/docker-compose

# Re-pin the test bed's environments after editing testbed/requirements/*.in.
testbed-lock: | $(UV)
	for v in $(BED_SPARKS); do $(UV) pip compile --quiet --python-version 3.11 --generate-hashes \
		--custom-compile-command "make testbed-lock" testbed/requirements/spark-$$v.in -o testbed/requirements/spark-$$v.txt; done

check-java:
	@scripts/check-java

# The demo warehouse, then lakesort_nightly end to end with `airflow dags test` (Airflow home with SQLite in
# $(DEMO_HOME)/airflow, Spark local, the embedded Iceberg catalog) and a summary; see dags/README.md.
demo: setup
	$(VENV)/bin/lakesort demo --home $(DEMO_HOME) --scale $(DEMO_SCALE) --batches $(DEMO_BATCHES)
	$(VENV)/bin/python scripts/airflow_demo.py --home $(DEMO_HOME)

# Ruff (line length included) and mypy over layout/ and jobs/ (pyproject [tool.mypy]); the import contracts
# are a test (tests/test_architecture.py).
static: $(VENV)/.synced
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/mypy

# The fast tier: tests not marked `integration`, with every `java` a stub that fails (--no-jvm): a test that
# starts a JVM without saying so fails here. Needs neither the test bed nor the Spark class archive.
check: static
	$(VENV)/bin/pytest $(PYTEST_PARALLEL) -m "not integration" --no-jvm --durations=10 $(PYTEST_ARGS)

# Every tier; --budget lists the 15 slowest tests and fails past pyproject's [tool.lakesort.test-budget].
test: setup static
	$(VENV)/bin/pytest $(PYTEST_PARALLEL) --budget $(PYTEST_ARGS)

lint: $(VENV)/.synced
	$(VENV)/bin/ruff check $(LINTED)

bench: setup
	@for b in tests/benchmarks/bench_*.py; do echo "== $$b"; $(VENV)/bin/python $$b || exit 1; done

# The documentation site (mkdocs.yml, docs/): the Reference pages are generated from the code at build time
# (docs/hooks/reference.py); --strict fails on any broken link or anchor, as tests/test_docs.py does in make test.
docs: $(VENV)/.synced
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(VENV)/.synced
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

clean:
	rm -rf $(VENV) $(TOOLS) $(TESTBED) $(DEMO_HOME) .pyiceberg.yaml site
