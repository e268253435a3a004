#!/usr/bin/env bash
# backup: `mtc daemon backup` of a store holding N finished training jobs
# (default 100000, each with a 2 KiB config as mtc run writes it) while mtcd
# serves: time and size, beside SQLite's own online backup of the same
# database (sqlite3 .backup) and a plain cp of the file (not consistent:
# the floor); then `mtc daemon restore` and restore → mtcd ready on the
# restored home; the API's latency (GET /healthz) during a backup vs at rest.
# Usage: bench/backup.sh [N]
. "$(dirname "$0")/lib.inc"
N=${1:-100000}
trap 'bench_stop_pids; rm -rf "$W"' EXIT
ms() { date +%s%3N; }
bench_start_mtcd || exit 1
kill "$MTCD" && while kill -0 "$MTCD" 2>/dev/null; do sleep 0.1; done
DB=$MTC_HOME/mtcd.db
t0=$(ms)
sqlite3 "$DB" <<SQL
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $N)
INSERT INTO training_jobs (id, project, location, cluster_id, slurm_job, state, request, config,
                           create_ms, update_ms)
SELECT 'job-' || printf('%08x', i), 'p', 'l', 'c1', CAST(i AS TEXT), 'COMPLETED',
       '{"recipe":"pretrain/tiny_gpt2_pt","nodeCount":1}',
       '{"task":"pretrain","taskDir":"/srv/mtc/experiments/e/e_' || i || '/pretrain","pad":"'
           || hex(randomblob(1000)) || '"}',
       1764000000000 + i, 1764000000000 + i
FROM n;
COMMIT;
SQL
echo "store filled with $N finished jobs in $(( $(ms) - t0 )) ms: $(du -m "$DB" | cut -f1) MiB"
bench_start_mtcd || exit 1
lat() { # mean ms of 20 GET /healthz
    local s e
    s=$(ms)
    for _ in $(seq 20); do curl -sf --unix-socket "$MTC_HOME/mtcd.sock" http://localhost/healthz >/dev/null; done
    e=$(ms)
    echo $(((e - s) / 20))
}
rest=$(lat)
best=""
for k in 1 2 3; do
    t0=$(ms)
    mtc daemon backup "$W/b$k.mtcbak" >/dev/null || { echo "backup failed"; exit 1; }
    t=$(( $(ms) - t0 ))
    [ -z "$best" ] || [ "$t" -lt "$best" ] && best=$t
done
mtc daemon backup "$W/during.mtcbak" >/dev/null &
bp=$!
during=$(lat)
wait "$bp"
t0=$(ms); sqlite3 "$DB" ".backup '$W/sqlite.db'"; sq=$(( $(ms) - t0 ))
t0=$(ms); cp "$DB" "$W/cp.db"; cpt=$(( $(ms) - t0 ))
size=$(stat -c %s "$W/b1.mtcbak") dbsize=$(stat -c %s "$DB")
echo "mtc daemon backup: ${best} ms (best of 3), $((size / 1048576)) MiB (store $((dbsize / 1048576)) MiB)"
echo "  sqlite3 .backup of the same store: ${sq} ms → backup/sqlite = $(python3 -c "print(round($best/max($sq,1),2))")"
echo "  cp of the file (inconsistent floor): ${cpt} ms → backup/cp = $(python3 -c "print(round($best/max($cpt,1),2))")"
echo "  GET /healthz: ${rest} ms at rest, ${during} ms during a backup"
t0=$(ms)
mtc daemon restore "$W/b1.mtcbak" --home "$W/restored" >/dev/null || { echo "restore failed"; exit 1; }
rt=$(( $(ms) - t0 ))
t0=$(ms)
mtcd --home "$W/restored" --daemon || exit 1
PIDS+=("$(cat "$W/restored/mtcd.pid")")
up=$(( $(ms) - t0 ))
n=$(sqlite3 "$W/restored/mtcd.db" 'SELECT count(*) FROM training_jobs')
echo "mtc daemon restore: ${rt} ms; restore → mtcd ready: ${up} ms more; jobs restored: $n of $N (lost: $((N - n)))"
