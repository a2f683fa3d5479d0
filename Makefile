# Every target bootstraps .venv on first use, so a fresh clone needs only `make`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LABS := phase-16-serving-apis-and-parsers/labs
NOTEBOOKS := phase-16-serving-apis-and-parsers/notebooks
# `make grade` grades your starters unless you say otherwise (LAB_IMPL=solution make grade).
GRADE_IMPL := $(or $(LAB_IMPL),starter)

.PHONY: install test grade notebooks serve bench lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

## All tests against the solutions, the contract checks on the starters, every notebook.
test: install
	LAB_IMPL=solution $(PY) -m pytest -q

## Grade LAB_IMPL (default: your starters): scorecard + results.json. Non-zero exit unless all pass.
grade: install
	@LAB_IMPL=$(GRADE_IMPL) $(PY) -m pytest $(LABS) -q --no-header --tb=no -rN -p no:warnings \
		-m "not control" --grade results.json

## Execute every lesson notebook and render it to HTML in build/notebooks.
notebooks: install
	$(PY) -m jupyter nbconvert --to html --execute --output-dir build/notebooks $(NOTEBOOKS)/*.ipynb

## The OpenAI-compatible server on 127.0.0.1:8000, serving the LAB_IMPL you choose (default: the solution).
serve: install
	$(PY) -m mini_vllm serve --port $(or $(PORT),8000) --tokenizer $(or $(TOKENIZER),bpe) \
		--reasoning-field $(or $(REASONING_FIELD),reasoning)

## Benchmarks: per-token cost as ratios against naive versions and real peers.
bench: install
	$(PY) -m bench.run

lint: install
	$(PY) -m ruff check .
	$(PY) -m mypy

clean:
	rm -rf $(VENV) build results.json .pytest_cache .hypothesis
