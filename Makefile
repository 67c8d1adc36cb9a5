# Tributary: the two commands that matter are `make demo` and `make test`.
VENV ?= .venv
BIN := $(VENV)/bin
export TRIBUTARY_HOME ?= $(CURDIR)/.tributary
export DAGSTER_HOME ?= $(TRIBUTARY_HOME)/dagster
UI_PORT ?= 3000

.PHONY: setup setup-full demo demo-kafka demo-s3 test test-crash lint ui sql sql-server sql-server-stop cluster-up cluster-down cluster-test bench clean distclean

# What `make demo` needs (venv, Java 17, Maven, the jars of the embedded default).
setup:
	@bash infra/setup.sh

# Also what the tests and the serving and cluster profiles need (Chromium, PostgreSQL, every pinned jar).
setup-full:
	@bash infra/setup.sh --full

demo: setup
	$(BIN)/tributary demo

# The same pipeline with bronze.events fed from a Kafka topic (a test broker started and stopped by the demo), in its
# own home so it never mixes with the file demo's tables.
demo-kafka: setup
	TRIBUTARY_HOME=$(TRIBUTARY_HOME)/kafka-demo DAGSTER_HOME=$(TRIBUTARY_HOME)/kafka-demo/dagster \
		$(BIN)/tributary demo --source kafka

# The same pipeline with every table in a bucket (an S3 test server started and stopped by the demo, docs/storage.md),
# in its own home.
demo-s3: setup
	TRIBUTARY_HOME=$(TRIBUTARY_HOME)/s3-demo DAGSTER_HOME=$(TRIBUTARY_HOME)/s3-demo/dagster \
		$(BIN)/tributary demo --storage s3

test: setup-full
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/pytest

test-crash: setup-full
	TRIBUTARY_CRASH_MATRIX=full $(BIN)/pytest tests/e2e/test_crash_matrix.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

ui: setup
	$(BIN)/tributary ui --port $(UI_PORT)

sql: setup
	$(BIN)/tributary sql

sql-server: setup
	$(BIN)/tributary sql-server start

sql-server-stop:
	$(BIN)/tributary sql-server stop

# A Spark master, two workers and PostgreSQL on 127.0.0.1 (docs/deploy.md); `source $(TRIBUTARY_HOME)/cluster/env`
# then points `make demo`, `make ui` and `tributary run` at them (the cluster profile).
cluster-up: setup-full
	$(BIN)/tributary cluster up

cluster-down:
	$(BIN)/tributary cluster down

# Only the tests that start their own cluster (also part of `make test`).
cluster-test: setup-full
	$(BIN)/pytest -m cluster

bench: setup
	$(BIN)/python -m bench.run

clean:
	@[ ! -x $(BIN)/tributary ] || $(BIN)/tributary serve stop >/dev/null  # a serving server keeps its data in the home
	rm -rf $(TRIBUTARY_HOME) bench/results.json test-artifacts

distclean: clean
	rm -rf $(VENV) *.egg-info
