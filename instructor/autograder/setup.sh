#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 22.04 base image).
# It installs Python 3.11 and the course's locked packages, and makes the grader's private files
# (reference solutions, tests, recorded data, the policy) readable by root only: the student's code
# runs as a user id of its own in the grading sandbox, inside bubblewrap's walls where the container allows them.
#
# AUTOGRADER_ROOT (default /autograder) lets `make test` and `make grade-batch` build the same layout anywhere.
# AUTOGRADER_EXISTING_VENV=/path/.venv is for those two ONLY (never on Gradescope): instead of installing
# anything, use that existing virtual environment, after checking that it holds exactly the locked versions.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
COURSE="$ROOT/source/course"
VENV="$ROOT/venv"
LOCK="$COURSE/requirements/lock.txt"
cd "$COURSE"  # so `python -` below imports this autograder's course, not one in the caller's folder

if [ -n "${AUTOGRADER_EXISTING_VENV:-}" ]; then
    echo "AUTOGRADER_EXISTING_VENV: installing nothing; using $AUTOGRADER_EXISTING_VENV if it satisfies the lock"
    # The course's own installed-version check (mini_vllm.reproducible), against this autograder's lock file.
    PYTHONPATH="$COURSE" "$AUTOGRADER_EXISTING_VENV/bin/python" - <<'CHECK' || exit 1
import sys
from mini_vllm.reproducible import check_installed
check = check_installed()
print("AUTOGRADER_EXISTING_VENV: it holds the locked versions" if check.ok else check.message(graded=True))
sys.exit(0 if check.ok else 1)
CHECK
    ln -sfn "$AUTOGRADER_EXISTING_VENV" "$VENV"
else
    export DEBIAN_FRONTEND=noninteractive
    if ! command -v python3.11 >/dev/null; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends python3.11 python3.11-venv util-linux || {
            # Images without python3.11 in their archive (Ubuntu 24.04) get it from the deadsnakes PPA.
            apt-get install -y -qq --no-install-recommends software-properties-common
            add-apt-repository -y ppa:deadsnakes/ppa
            apt-get update -qq
            apt-get install -y -qq --no-install-recommends python3.11 python3.11-venv util-linux
        }
    fi
    # bubblewrap: the walls around the student's code (mini_vllm/sandbox/isolation.py). Where the container
    # forbids namespaces the grader falls back to a user of the child's own, for which the chmods below matter.
    if ! command -v bwrap >/dev/null && command -v apt-get >/dev/null; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends bubblewrap
    fi
    python3.11 -m venv "$VENV"
    if [ -f "$LOCK" ]; then
        "$VENV/bin/pip" install --quiet --require-hashes -r "$LOCK"
        "$VENV/bin/pip" install --quiet --no-deps --no-build-isolation -e "$COURSE"
    else
        "$VENV/bin/pip" install --quiet -e "$COURSE[dev]"
    fi
fi

# Compile the course once here, so every grading run starts from the image's bytecode.
"$VENV/bin/python" -m compileall -q "$COURSE/mini_vllm" "$COURSE/phase-16-serving-apis-and-parsers" >/dev/null || true

# Private to the grader (root): the lab folders (solutions, tests), the testing kit and its recorded
# data, the instructor's code, the policy and the pytest configuration. The engine the student's code
# imports (the rest of mini_vllm) and the virtual environment stay readable.
# The course folder itself stays listable: Python finds a package by listing the folder it sits in.
chmod 755 "$ROOT/source" "$COURSE"
for private in phase-16-serving-apis-and-parsers mini_vllm/testing instructor conftest.py grading.toml assignment.json \
        pyproject.toml build-info.json requirements; do
    if [ -e "$COURSE/$private" ]; then
        chmod -R go-rwx "$COURSE/$private"
    fi
done
mkdir -p "$ROOT/results"
chmod 700 "$ROOT/results"
echo "setup.sh: the autograder is ready ($("$VENV/bin/python" --version))"
