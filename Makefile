PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Bytecode for the project's own modules, written once: where PYTHONDONTWRITEBYTECODE is set (as on the
# 2-core machines here) every `ledger` process would otherwise compile them from source again (~0.15 s each).
BYTECODE := cli ledger scheduler backfill migrations benchmarks

.PHONY: install demo test test-quick lint bench bench-ab clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: install
	$(BIN)/python -m compileall -q $(BYTECODE)
	$(BIN)/python examples/demo.py

# mypy (about 25 s of one core) runs beside the suite, whose two workers leave about a fifth of two cores idle
# while their tests wait for processes; its report follows the suite's, and either failing fails the target. The
# launcher's tests run both ways within the suite (tests/cli/conftest.py). Decision 0343.
test: install
	$(BIN)/ruff check .
	$(BIN)/python -m compileall -q $(BYTECODE)
	@report=$$(mktemp); $(BIN)/mypy > $$report 2>&1 & checker=$$!; \
	echo "$(BIN)/python -m pytest -n 2 --dist loadscope --no-loadscope-reorder --durations=40  (and $(BIN)/mypy beside it)"; \
	$(BIN)/python -m pytest -n 2 --dist loadscope --no-loadscope-reorder --durations=40; suite=$$?; \
	wait $$checker; types=$$?; echo "$(BIN)/mypy"; cat $$report; rm -f $$report; \
	test $$suite -eq 0 && test $$types -eq 0

test-quick: install
	$(BIN)/python -m pytest -n 2 -m 'not slow and not postgres and not spark and not browser and not scenario' \
		--hypothesis-profile=quick -x -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: install
	$(BIN)/python -m benchmarks

# The default-path benchmarks of BASE against this working tree, interleaved (benchmarks/bench_ab.py):
#   make bench-ab BASE=5484ae4 [BENCH_AB_ARGS='--pairs 5']
bench-ab: install
	@test -n "$(BASE)" || { echo "usage: make bench-ab BASE=<commit> [BENCH_AB_ARGS='--pairs 5 --dates 300']"; exit 2; }
	$(BIN)/python -m benchmarks.bench_ab --base $(BASE) $(BENCH_AB_ARGS)

clean:
	rm -rf $(VENV) .demo-home
