#!/usr/bin/env bash
# logrule: log rules (monitor.log_rules) matched against 1 MiB lines built to
# make a matcher work, CPU ms per match beside a strlen of the same line and
# glibc's regexec on a 4 KiB prefix (bench/logrule.c). Needs `make` first.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$ROOT/build}
W=$(mktemp -d /tmp/mtc-bench-logrule.XXXXXX)
trap 'rm -rf "$W"' EXIT
cc -O2 -std=c11 -D_GNU_SOURCE -I"$ROOT/src" -o "$W/logrule" "$ROOT/bench/logrule.c" \
    "$B/libmtc.a" -ljansson -ltre -lcrypto -lm
"$W/logrule"
