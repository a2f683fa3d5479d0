#!/usr/bin/env bash
# `make autograder-chroot`: setup.sh's real install path, run once end to end, in a root with no Python.
#
# Gradescope builds the autograder's image by running setup.sh as root on a bare base image. `make check`
# simulates that with AUTOGRADER_EXISTING_VENV (no install); this check runs the real branch instead:
#   1. a Debian 12 minimal root (debootstrap --variant=minbase: no Python at all), kept in CHROOT_CACHE
#      and copied afresh for every run, so each run starts from the same bare root;
#   2. `make autograder LABS=03`'s zip unpacked into its /autograder/source, run_autograder beside it;
#   3. setup.sh run in the root as Gradescope runs it: apt installs Python 3.11, pip the locked packages
#      (checked by hash), the grader's private files are made root's only;
#   4. a submission (lab-03's reference uploaded as a lone starter.py) graded by run_autograder in the
#      root, and its results.json checked: valid, graded, 100 / 100, isolation official.
#
# Needs root (chroot, mount) and the package registries. Cost on the 2-core machine, measured at load average
# 15-20: the base root (debootstrap) 2 min 23 s, once; then 20-28 min a run, setup.sh 16-26 of them (apt, pip
# fetching and installing the lock; under 2 min of CPU) and grading 30-68 s. Not part of `make check` for that.
set -euo pipefail
cd "$(dirname "$0")/../.."
COURSE_DIR=$PWD
PY=${PY:-$COURSE_DIR/.venv/bin/python}
CACHE=${CHROOT_CACHE:-/var/tmp/course-chroot}
BASE=$CACHE/bookworm-minbase
ROOT=$CACHE/run
PIP_CACHE=$CACHE/pip-cache  # wheels pip downloaded in an earlier run (each still checked against the lock's hash)

if [ "$(id -u)" != 0 ]; then
    echo "autograder-chroot: run as root (it uses chroot and mount)"
    exit 2
fi
step() { echo "== $(date +%T) $*"; }

unmount_all() {
    for mounted in root/.cache/pip dev/pts dev proc; do
        if mountpoint -q "$ROOT/$mounted" 2>/dev/null; then umount -l "$ROOT/$mounted"; fi
    done
}
trap unmount_all EXIT

if [ ! -x "$BASE/bin/bash" ]; then
    step "building the bare Debian 12 root (debootstrap, once)"
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
    rm -rf "$BASE.new"
    debootstrap --variant=minbase bookworm "$BASE.new" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -n 20 "$CACHE/debootstrap.log"; exit 1; }
    mv "$BASE.new" "$BASE"
fi

step "a fresh copy of the bare root"
unmount_all
rm -rf "$ROOT"
cp -a "$BASE" "$ROOT"
if chroot "$ROOT" /bin/sh -c 'command -v python3.11 || command -v python3' >/dev/null; then
    echo "autograder-chroot: the bare root already has a Python; setup.sh's install path would not run"
    exit 1
fi

step "make autograder LABS=03, unpacked as Gradescope does"
"$PY" -m instructor.autograder.build --labs 03 --out "$CACHE/autograder-lab-03.zip"
"$PY" - "$CACHE/autograder-lab-03.zip" "$ROOT/autograder/source" <<'UNZIP'
import sys, zipfile
from pathlib import Path
archive, dest = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(archive) as zipped:
    for member in zipped.infolist():
        zipped.extract(member, dest)
        (dest / member.filename).chmod((member.external_attr >> 16) & 0o777 or 0o644)
UNZIP
cp "$ROOT/autograder/source/run_autograder" "$ROOT/autograder/run_autograder"
mkdir -p "$ROOT/autograder/submission"
cp "$COURSE_DIR"/phase-16-serving-apis-and-parsers/labs/lab-03-*/solution.py "$ROOT/autograder/submission/starter.py"

cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
mount -t proc proc "$ROOT/proc"
mount --bind /dev "$ROOT/dev"
mount --bind /dev/pts "$ROOT/dev/pts"
mkdir -p "$PIP_CACHE" "$ROOT/root/.cache/pip"
mount --bind "$PIP_CACHE" "$ROOT/root/.cache/pip"
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 "$@"; }

# A machine that reaches the package index through a proxy with its own certificate authority names its
# bundle in PIP_CERT (or SSL_CERT_FILE); the bare root has no such bundle, so it is passed in. Nothing else is.
CERT=${PIP_CERT:-${SSL_CERT_FILE:-}}
CERT_ENV=()
if [ -n "$CERT" ] && [ -f "$CERT" ]; then
    cp "$CERT" "$ROOT/etc/host-ca-bundle.crt"
    CERT_ENV=(PIP_CERT=/etc/host-ca-bundle.crt)
fi

step "setup.sh, as Gradescope runs it (apt: Python 3.11; pip: the lock)"
started=$(date +%s)
in_root "${CERT_ENV[@]}" bash -c 'cd /autograder/source && bash ./setup.sh' > "$CACHE/setup.log" 2>&1 \
    || { tail -n 30 "$CACHE/setup.log"; echo "autograder-chroot: setup.sh failed (whole log: $CACHE/setup.log)"; exit 1; }
tail -n 3 "$CACHE/setup.log"
echo "setup.sh took $(( $(date +%s) - started )) s"

step "run_autograder on lab-03's reference, uploaded as a lone starter.py"
started=$(date +%s)
in_root /autograder/run_autograder > "$CACHE/run_autograder.log" 2>&1 || { tail -n 30 "$CACHE/run_autograder.log"; exit 1; }
tail -n 1 "$CACHE/run_autograder.log"
echo "run_autograder took $(( $(date +%s) - started )) s"

"$PY" - "$ROOT/autograder/results/results.json" <<'CHECK'
import json, sys
from mini_vllm.testing.gradescope import validate
results = json.loads(open(sys.argv[1], encoding="utf-8").read())
validate(results)
extra = results["extra_data"]
problems = []
if extra["autograder"]["status"] != "graded":
    problems.append(f"status {extra['autograder']['status']}: {extra['autograder'].get('reason')}")
if not results["score"] == extra["max_score"] == 100:
    problems.append(f"{results['score']} / {extra['max_score']} points, not 100 / 100")
if extra.get("official") is not True:
    problems.append(f"not an official grade: {extra['isolation']}")
print(f"results.json: {results['score']} / {extra['max_score']}, python {extra['python']}, "
      f"isolation {extra['isolation']}")
if problems:
    print("autograder-chroot FAILED: " + "; ".join(problems) + "\n" + results["output"][:3000])
    sys.exit(1)
print("autograder-chroot: setup.sh installed Python 3.11 and the lock in a bare root, and the submission was graded")
CHECK
