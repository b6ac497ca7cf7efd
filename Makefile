PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Bytecode for the project's own modules, written once: where PYTHONDONTWRITEBYTECODE is set (as on the
# 2-core machines here) every `ledger` process would otherwise compile them from source again (~0.15 s each).
BYTECODE := cli ledger scheduler backfill migrations benchmarks

.PHONY: install demo test test-quick lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: install
	$(BIN)/python -m compileall -q $(BYTECODE)
	$(BIN)/python examples/demo.py

test: install
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m compileall -q $(BYTECODE)
	$(BIN)/python -m pytest -n 2 --maxschedchunk 1

test-quick: install
	$(BIN)/python -m pytest -m 'not slow and not postgres and not spark' -x -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: install
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .demo-home
