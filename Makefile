# Two entry points for a fresh machine; each creates .venv on first use.
#   make run   - run the operator on its embedded default (data in ./saihm-data)
#   make test  - lint (ruff, mypy) and run the whole test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA ?= ./saihm-data

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,integrations-test]'
	touch $(STAMP)

.PHONY: run test lint bench
run: $(STAMP)
	$(BIN)/saihm serve --data $(DATA)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/saihm bench
