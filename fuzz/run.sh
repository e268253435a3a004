#!/usr/bin/env bash
# Runs each libFuzzer harness in build-fuzz/fuzz/ for FUZZ_S seconds (default
# 60) under ASan+UBSan, starting from the committed seeds in fuzz/corpus/NAME
# (new inputs go to build-fuzz/corpus/NAME, crashes to fuzz/findings/NAME/).
# Prints one line per harness: executions, exec/s, coverage (edges), features,
# corpus size and crashes. Usage: fuzz/run.sh [NAME...]; exit 1 on any crash.
set -u
cd "$(dirname "$0")/.."
B=${B:-build-fuzz}
S=${FUZZ_S:-60}
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in fuzz/*.c; do names+=("$(basename "$f" .c)"); done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
crashed=0
printf '%-22s %6s %12s %9s %7s %8s %6s %s\n' harness secs execs exec/s edges features corpus crashes
for n in "${names[@]}"; do
    bin=$B/fuzz/$n
    [ -x "$bin" ] || { echo "$n: not built ($bin)"; crashed=1; continue; }
    mkdir -p "$B/corpus/$n" "fuzz/corpus/$n" "fuzz/findings/$n"
    log=$B/fuzz/$n.log
    dict=(); [ -f "fuzz/$n.dict" ] && dict=(-dict="fuzz/$n.dict")
    "$bin" -max_total_time="$S" -print_final_stats=1 -timeout=20 -rss_limit_mb=4096 \
        -artifact_prefix="fuzz/findings/$n/" "${dict[@]}" \
        "$B/corpus/$n" "fuzz/corpus/$n" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    line=$(grep -a -E '^#[0-9]+' "$log" | tail -1)
    edges=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$line")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$line")
    found=$(find "fuzz/findings/$n" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
    printf '%-22s %6s %12s %9s %7s %8s %6s %s\n' "$n" "$S" "${execs:-?}" "${rate:-?}" "${edges:-?}" "${ft:-?}" "${corp:-?}" "$found"
    if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
        crashed=1
        grep -a -E 'ERROR|SUMMARY|runtime error' "$log" | head -5 | sed 's/^/    /'
    fi
done
exit $crashed
