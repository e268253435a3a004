#!/usr/bin/env bash
# load: the whole suite as `make test` runs it, beside stress-ng keeping the
# CPUs busy (--cpu 2 --cpu-load 60: a compile and a few other processes) — a
# test that passes only on an idle machine is a defect (tests/README.md,
# "Writing a test that holds under load"). Not part of `make test`.
# Usage: tests/load.sh [PATTERN...]   (PATTERN as tests/run.sh takes them)
# Environment: LOAD_CPUS (default 2), LOAD_PCT (default 60), and what
# `make test` and tests/run.sh take (T_JOBS, T_TIMEOUT, ...).
set -u
cd "$(dirname "$0")/.."
command -v stress-ng >/dev/null ||
    { echo "tests/load.sh: stress-ng is not installed (scripts/setup installs it)" >&2; exit 2; }
stress-ng --cpu "${LOAD_CPUS:-2}" --cpu-load "${LOAD_PCT:-60}" --quiet &
SPID=$!
trap 'kill -TERM "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null' EXIT
trap 'exit 143' TERM INT HUP
echo "load: stress-ng --cpu ${LOAD_CPUS:-2} --cpu-load ${LOAD_PCT:-60} (pid $SPID) beside the suite"
make --no-print-directory test TESTS="$*" # its last line: N passed, N failed
