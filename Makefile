# Every target bootstraps .venv on first use, so a fresh clone needs only `make`.
# The lock file is for Python 3.11: use python3.11 where it has that name.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || echo python3)
VENV := .venv
PY := $(VENV)/bin/python
LABS := phase-16-serving-apis-and-parsers/labs
NOTEBOOKS := phase-16-serving-apis-and-parsers/notebooks
# `make grade` and `make lab-NN` grade your starters unless you say otherwise (LAB_IMPL=solution make grade).
GRADE_IMPL := $(or $(LAB_IMPL),starter)
# What a failing grade says last, instead of make's own "Error 1" banner (see `verdict` below). The file is
# this make's own (its process id): two `make lab-05` at once (two terminals, or the course's tests) must
# not read each other's pytest status.
STATUS := build/.status-$(shell echo $$PPID)
# Graded runs: every assertion in a lab's tests carries its own message in the lesson's terms
# (tests/test_failure_messages.py checks), so pytest's assertion introspection would only add
# noise under it ("+ where False = <built-in method startswith ...>").
# No lab's test uses schemathesis's pytest plugin (tests/test_server_schemathesis.py does), and loading it costs
# each graded process 0.7 s.
GRADED_OPTIONS := -q -rN -p no:warnings -p no:unraisableexception -p no:schemathesis -m "not control" --assert=plain
GRADED_PYTEST := $(GRADED_OPTIONS) -p no:xdist
# `make grade` grades two labs at once where there are two cores (pytest-xdist, each lab's tests in one
# worker, in order): the grader and a lab's sandboxed child take turns, so one lab at a time leaves a core
# idle, and each worker keeps itself and its child to a CPU of their own (conftest.py,
# mini_vllm/sandbox/affinity.py). Budgets are CPU time, so the grade is the same either way;
# `make grade GRADE_WORKERS=1` grades one lab at a time.
GRADE_WORKERS ?= $(if $(filter 1,$(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)),1,2)
GRADE_PARALLEL := $(if $(filter 1,$(GRADE_WORKERS)),-p no:xdist,-n $(GRADE_WORKERS) --dist loadfile)
# Let Python cache compiled bytecode, its default, even where the environment turns that off:
# without the cache every run recompiles the course and pytest re-rewrites its assertions,
# which more than doubles the time a small lab takes.
unexport PYTHONDONTWRITEBYTECODE
# The exact versions `make install` installs (see `make lock`), and the tool that writes them.
LOCK := requirements/lock.txt
UV_VERSION := 0.13.8
LOCK_TOOL := build/lock-tool
LOCK_COMMAND := uv pip compile pyproject.toml requirements/build.in --extra dev --generate-hashes \
	--python-version 3.11 --python-platform x86_64-unknown-linux-gnu -o $(LOCK)

.PHONY: install lock test check contract-sandboxed fixtures release autograder autograder-chroot grade-batch grade notebooks jupyter serve demo browser bench timings mutants lint clean

# Every package at the version LOCK names, checked against its hashes; then the course itself,
# without letting pip pick anything more (its build backend, setuptools, is in the lock too).
# pip goes first: the one a new venv brings (23.2 with Python 3.11.7) spends about 20 s more CPU
# than the locked one on the same install. conftest.py checks at start-up that what is installed
# is still what LOCK says.
$(VENV)/.installed: $(LOCK) pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { \
		echo "$(LOCK) is for Python 3.11, and $(PYTHON) is $$($(PYTHON) --version 2>&1)."; \
		echo "Install Python 3.11 and run: PYTHON=python3.11 make $(or $(MAKECMDGOALS),install)"; exit 1; }
	@echo "Installing the course's locked packages into $(VENV) (first run only; 1-3 minutes)..."
	@$(PYTHON) -m venv $(VENV)
	@sed -n '/^pip==/,/[^\\]$$/p' $(LOCK) > $(VENV)/pip-lock.txt
	@{ $(PY) -m pip install --require-hashes --no-deps -r $(VENV)/pip-lock.txt \
		&& $(PY) -m pip install --require-hashes -r $(LOCK) \
		&& $(PY) -m pip install --no-deps --no-build-isolation -e .; } > $(VENV)/install.log 2>&1 \
		|| { tail -n 30 $(VENV)/install.log; echo "install failed: the whole log is in $(VENV)/install.log"; exit 1; }
	@touch $@

install: $(VENV)/.installed
	@command -v bwrap >/dev/null || [ "$$(uname)" != Linux ] || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "Installing bubblewrap (the grading sandbox's walls)..."; \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; } >/dev/null \
				|| echo "could not install bubblewrap: grades made here are marked not official"; \
		else echo "The grading sandbox needs bubblewrap: sudo apt-get install bubblewrap (or your system's package)." \
			"Until then make grade runs, but its results are marked not official."; fi; }

# >>> instructor  (make release leaves these lines out of the student's Makefile)
## After changing pyproject.toml's dependencies: resolve them again into the lock file (other pins stay;
## UPGRADE=1 moves every package to its newest version). Then `make install` installs the new lock.
lock:
	@$(PYTHON) -m venv $(LOCK_TOOL) && $(LOCK_TOOL)/bin/pip install -q uv==$(UV_VERSION) > $(LOCK_TOOL)/install.log 2>&1 \
		|| { cat $(LOCK_TOOL)/install.log; exit 1; }
	@$(LOCK_TOOL)/bin/$(LOCK_COMMAND) --no-header --quiet $(if $(UPGRADE),--upgrade)
	@{ printf '%s\n' \
		"# The course's lock file: every package \`make install\` puts in .venv, at one version, with the" \
		"# sha256 of each of its files, for CPython 3.11 on Linux x86_64 (the course's machines and CI)." \
		"# make install runs: pip install --require-hashes -r $(LOCK) && pip install --no-deps --no-build-isolation -e ." \
		"# Do not edit it by hand. After changing the dependencies in pyproject.toml (or requirements/build.in)," \
		"# regenerate it with \`make lock\` (\`make lock UPGRADE=1\`: the newest version of everything), which runs" \
		"# uv $(UV_VERSION) (existing pins are kept unless UPGRADE=1 adds --upgrade):" \
		"#   $(LOCK_COMMAND)" ""; cat $(LOCK); } > $(LOCK).new
	@mv $(LOCK).new $(LOCK)
	@echo "$(LOCK): $$(grep -c '==' $(LOCK)) packages. Now run make install, and commit $(LOCK)."

# The course's own tests run one worker more than there are CPUs: many of them wait (a grader for its
# sandboxed child, a client for a server, a test for its CPU burners), and a worker that waits leaves its
# CPU idle. No test's verdict depends on the load: budgets are CPU time, and a test that compares wall
# times compares them in one run, alone and beside (TEST_WORKERS=2 to run two).
TEST_WORKERS ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2) + 1 )))

## The developer's loop: every lab against the solutions, the contract checks on the starters, the fast
## grader tests, every notebook. The slow checks are in `make check`.
test: install
	LAB_IMPL=solution $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not slow"

## The linters first (`make lint`), then everything `make test` runs plus the slow checks (marked slow):
## the README's full test command, run by CI.
check: lint
	LAB_IMPL=solution $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

## The student's repository in DEST (a new folder): one commit, no solutions, no instructor/ folder.
release: install
	@if [ -z "$(DEST)" ]; then echo "usage: make release DEST=../course-release  (a new folder)"; exit 2; fi
	$(PY) -m instructor.release $(DEST)
# <<< instructor

## Grade LAB_IMPL (default: your starters): scorecard + results.json. Non-zero exit unless all pass.
grade: run-grade
	@$(call verdict,grade)
	@rm -f $(STATUS)-grade

run-grade: install
	@mkdir -p build
	@LAB_SANDBOX=1 LAB_IMPL=$(GRADE_IMPL) $(PY) -m pytest $(LABS) $(GRADED_OPTIONS) $(GRADE_PARALLEL) --no-header --tb=no --grade results.json; echo $$? > $(STATUS)-grade

## One lab's tests, with the failures spelled out: `make lab-03` (your starter), `LAB_IMPL=solution make lab-03`.
## One task only: `make lab-07 TASK=1`. Extra pytest options go in ARGS, e.g. `make lab-05 ARGS="-k flush"`.
lab-%: run-lab-%
	@$(call verdict,lab-$*)
	@rm -f $(STATUS)-lab-$*

run-lab-%: install
	@mkdir -p build
	@lab=$$(ls -d $(LABS)/lab-$*-* 2>/dev/null); \
	if [ -z "$$lab" ]; then echo "no lab-$* here: the labs are $$(ls $(LABS) | grep -o '^lab-[0-9]*' | tr '\n' ' ')"; \
		echo 2 > $(STATUS)-lab-$*; exit 0; fi; \
	LAB_SANDBOX=1 LAB_IMPL=$(GRADE_IMPL) $(PY) -m pytest $$lab $(GRADED_PYTEST) --tb=short \
		--grade build/results-lab-$*.json $(if $(TASK),--task $(TASK)) $(ARGS); echo $$? > $(STATUS)-lab-$*

# A failing grade must exit non-zero, but make would then print its own "*** [grade] Error 1"
# banner under the scorecard. Instead the last recipe reads the saved pytest status and stops
# make with one sentence of ours ($(error) exits with status 2).
# pytest's exit 5 means it selected no test at all (ARGS="-k ..." matched nothing), and exit 4 that it
# refused the command line (a usage error), and exit 6 that conftest.py found packages other than the
# locked ones (mini_vllm/reproducible.py): none of them is a grade.
verdict = $(if $(filter 5,$(shell cat $(STATUS)-$(1) 2>/dev/null)),$(error \
	$(1): no test was selected (pytest exit 5), so nothing was graded; check the -k or -m in ARGS, or TASK),$(if \
	$(filter 4,$(shell cat $(STATUS)-$(1) 2>/dev/null)),$(error \
	$(1): pytest refused the command line (usage error, exit 4; its reason is printed above), so nothing was \
	graded; check ARGS. One task only: make $(1) TASK=1),$(if \
	$(filter 6,$(shell cat $(STATUS)-$(1) 2>/dev/null)),$(error \
	$(1): the installed packages are not the locked ones (listed above), so nothing was graded; \
	run make install (or rm -rf .venv && make install)),$(if \
	$(filter-out 0,$(shell cat $(STATUS)-$(1) 2>/dev/null || echo 1)),$(error \
	$(1): not everything passes yet (pytest exit $(shell cat $(STATUS)-$(1) 2>/dev/null)); the scorecard above says where to start)))))

## Execute every lesson notebook and render it to HTML in build/notebooks.
notebooks: install
	$(PY) -m jupyter nbconvert --to html --execute --output-dir build/notebooks $(NOTEBOOKS)/*.ipynb

## The lesson notebooks in Jupyter, running the LAB_IMPL you choose (default: solution.py where the
## reference ships, as in the instructor's copy; your starter.py in the student's copy, which has none).
jupyter: install
	$(VENV)/bin/jupyter lab $(NOTEBOOKS)

## The OpenAI-compatible server on 127.0.0.1:8000, serving the LAB_IMPL you choose (the default as for jupyter).
serve: install
	$(PY) -m mini_vllm serve --port $(or $(PORT),8000) --tokenizer $(or $(TOKENIZER),bpe) \
		--reasoning-field $(or $(REASONING_FIELD),reasoning)

## The same server; open its demo page to watch naive decoding and your pipeline side by side.
demo: install
	@echo "Demo page: http://127.0.0.1:$(or $(PORT),8000)/demo  (Ctrl-C stops)"
	$(PY) -m mini_vllm serve --port $(or $(PORT),8000) --tokenizer $(or $(TOKENIZER),bpe)

## Headless Chromium, its driver, CJK and emoji fonts for the demo's browser test, installed with apt when missing.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null \
		&& fc-list :lang=ja 2>/dev/null | grep -q . && fc-list 2>/dev/null | grep -qi emoji; then \
		echo "browser: $$(chromium --version 2>/dev/null), $$(chromedriver --version 2>/dev/null | cut -d' ' -f1-2)"; \
	elif command -v apt-get >/dev/null; then \
		as_root=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$as_root apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$as_root apt-get install -y -qq --no-install-recommends \
			chromium chromium-driver fonts-noto-cjk fonts-noto-color-emoji; \
	else \
		echo "browser: no apt-get here. Install Chromium, its matching chromedriver, a CJK and an emoji font yourself,"; \
		echo "         or the demo's browser test (tests/test_demo_browser.py) is skipped."; \
	fi

# >>> instructor
## Benchmarks: per-token cost as ratios against naive versions and real peers (ARGS="lab09": only some, by name).
bench: install
	$(PY) -m bench.run $(ARGS)


## Time the README's table here (warm): make grade, each lab on the reference, make test. ARGS=--no-test skips the last.
timings: install
	$(PY) -m bench.timings $(ARGS)

## The course contract with every named wrong variant graded through the grading sandbox (make test sends one per lab).
contract-sandboxed: install
	COURSE_CONTRACT_SANDBOX=all $(PY) -m pytest tests/test_course_contract.py -q -n auto --dist loadgroup

## Mutation testing of a lab's solution against its own tests: `make mutants LAB=03`.
## ARGS="--survivors" re-runs only what survived last time; ARGS="--only TEXT" picks mutants by id.
mutants: install
	@if [ -z "$(LAB)" ]; then echo "usage: make mutants LAB=03  (the labs: $$(ls $(LABS) | grep -o '^lab-[0-9]*' | tr '\n' ' '))"; exit 2; fi
	$(PY) -m instructor.mutants $(LAB) $(ARGS)

## The Gradescope autograder: build/autograder.zip (setup.sh, run_autograder, the course). See TEACHING.md.
## One assignment per lab: `make autograder LABS=08` (or LABS=03,05) writes build/autograder-lab-08.zip.
## (LABS given on the command line replaces the folder of the same name above; no prerequisite reads it.)
autograder: install
	@$(PY) -m instructor.autograder.build $(if $(filter command line,$(origin LABS)),--labs "$(LABS)")

## setup.sh's real install path, once, as root: a bare Debian 12 root (debootstrap, no Python), setup.sh installing
## Python 3.11 and the lock in it, then a graded submission (20 to 28 min measured; not in `make check`). See TEACHING.md.
autograder-chroot: install
	bash instructor/autograder/chroot_check.sh

## Grade a class as the autograder would: SUBMISSIONS=dir holds one folder or .zip per student (a Gradescope export).
## LABS=03: as `make autograder LABS=03`'s assignment grades (a per-lab export); without it, the whole course.
## Writes build/batch/scores.csv and build/batch/<student>/results.json. ARGS="--jobs 4" and more: --help.
grade-batch: install
	@if [ -z "$(SUBMISSIONS)" ]; then echo "usage: make grade-batch SUBMISSIONS=dir [LABS=NN]  (one folder or .zip per student)"; exit 2; fi
	$(PY) -m instructor.autograder.batch $(SUBMISSIONS) $(if $(filter command line,$(origin LABS)),--labs "$(LABS)") $(ARGS)

## Record what the tests need from the reference solutions (mini_vllm/testing/fixtures/); commit the result.
## `make test` fails while a recording is stale. ARGS=--check only reports; ARGS=--redraw draws lab-07's texts again.
fixtures: install
	$(PY) -m instructor.fixtures $(ARGS)
# <<< instructor
# The student's copy has no bench/: it races each lab against correct-but-slow versions (working answers).
#> ## The benchmarks race each lab against correct (slow) versions of it, so they ship in the instructor's copy only.
#> bench:
#> 	@echo "make bench: the benchmarks compare your code with correct but slow versions of each lab, so they"
#> 	@echo "ship in your instructor's copy of the course only; the README of each lab quotes their figures."

## ruff on everything; mypy (strict) on mini_vllm, then on each lab's solution and tests, a lab at a time:
## every lab folder has a solution.py and a test_lab.py, and one mypy run takes two files of one name for one module.
lint: install
	$(PY) -m ruff check .
	$(PY) -m mypy
	@for lab in $(LABS)/lab-*/; do \
		$(PY) -m mypy --no-error-summary $$(ls $$lab/solution.py $$lab/test_lab.py 2>/dev/null) \
			|| { echo "mypy: type errors in $$lab"; exit 1; }; done
	@echo "mypy: every lab's tests (and its solution, where there is one) type-check"

clean:
	rm -rf $(VENV) build results.json .pytest_cache .hypothesis
