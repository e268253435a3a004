#!/usr/bin/env bash
# Runs every benchmark script in bench/ (bench/NAME.sh), each printing its
# figures. Usage: bench/run.sh [NAME...]. Benchmarks read ../shared/data when
# present (never tests). hosts_create, hosts_faults, mpi_hosts and
# healthscan_hosts (on test hosts: network namespaces) and containers (the container
# plugin mounts images on loop devices) need root; they say "skipped" without
# it.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
export MTC_BUILD=$PWD/$B
export PATH=$PWD/$B/bin:$PATH
rc=0
for b in bench/*.sh; do
    name=$(basename "$b" .sh)
    [ "$name" = run ] && continue
    if [ $# -gt 0 ]; then
        hit=0
        for s in "$@"; do [ "$s" = "$name" ] && hit=1; done
        [ $hit -eq 1 ] || continue
    fi
    echo "== $name"
    if [ "$name" = serve_vs_ggml ] && [ -z "${GGML_SRC:-}" ]; then
        echo "skipped: GGML_SRC (a ggml source tree, bench/README.md) not set"; continue
    fi
    bash "$b" || { echo "bench $name failed"; rc=1; }
done
exit $rc
