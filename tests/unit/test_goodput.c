/* Unit tests for goodput and early problem detection (src/recipes/goodput.c):
 * kept time, wall time, restarts and steps repeated read from a run's log and
 * metrics.jsonl (and read on incrementally, and again after a resume rewrote
 * the file); NaN/Inf, loss spike, throughput drop and stall alerts; the
 * recipe's monitor thresholds; exp_monitor_scan raising each alert once per
 * occurrence, judging every row read (a spike between two scans included). */
#include "check.h"
#include "recipes/recipes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void append(const char *path, const char *text)
{
    FILE *f = fopen(path, "a");
    fputs(text, f);
    fclose(f);
}

static void rows(struct exp_track *t, int n, double loss, double tps)
{
    for (int i = 0; i < n; i++)
        exp_track_row(t, t->step + 1, loss + 0.01 * (i % 5), tps + (i % 3), 0.1);
}

struct events {
    int n, kinds;
    char last[256];
};

void on(void *arg, int kind, const char *text);
void on(void *arg, int kind, const char *text)
{
    struct events *e = arg;
    e->n++;
    e->kinds |= kind;
    snprintf(e->last, sizeof(e->last), "%s", text);
}

int main(void)
{
    char msg[256];
    struct exp_track t;
    json_t *cfg = json_pack("{s:{s:i, s:i}}", "train", "global_batch", 8, "seq_length", 64);

    /* NaN / Inf */
    exp_track_init(&t, cfg);
    rows(&t, 3, 2.0, 1000);
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 0, msg, sizeof msg) == 0, "3 healthy rows: no alert (%s)", msg);
    exp_track_row(&t, 4, NAN, 1000, 0.1);
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 0, msg, sizeof msg) & EXP_ALERT_NONFINITE, "NaN loss alerts");
    CHECK(strstr(msg, "loss is NaN at step 4"), "message: %s", msg);
    exp_track_row(&t, 5, INFINITY, 1000, 0.1);
    exp_monitor_check(&t, &exp_monitor_default, 0, msg, sizeof msg);
    CHECK(strstr(msg, "loss is Inf at step 5") && t.nonfinite == 2, "Inf loss: %s", msg);

    /* loss spike: robust z over the window */
    exp_track_init(&t, cfg);
    rows(&t, 40, 2.0, 1000);
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 0, msg, sizeof msg) == 0, "steady loss: no alert (%s)", msg);
    exp_track_row(&t, 41, 2.3, 1000, 0.1);
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 0, msg, sizeof msg) & EXP_ALERT_SPIKE, "loss 2.3 against ~2.02: spike");
    CHECK(strstr(msg, "loss spike at step 41"), "message: %s", msg);
    struct exp_monitor lax = exp_monitor_default;
    lax.spike_z = 1000;
    CHECK(!(exp_monitor_check(&t, &lax, 0, msg, sizeof msg) & EXP_ALERT_SPIKE), "threshold z 1000: no spike");
    exp_track_row(&t, 42, 2.01, 1000, 0.1);
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 0, msg, sizeof msg) == 0, "back to normal: no alert (%s)", msg);

    /* throughput drop against the run's median */
    exp_track_row(&t, 43, 2.01, 300, 0.1);
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 0, msg, sizeof msg) == EXP_ALERT_DROP, "300 tok/s against 1000: drop");
    CHECK(strstr(msg, "throughput drop at step 43: 300 tokens/s"), "message: %s", msg);

    /* stall: no row for stall_factor x the median step time (512/1000 s) */
    exp_track_row(&t, 44, 2.01, 1000, 0.1);
    t.last_row = 1000;
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 1002, msg, sizeof msg) == 0, "2 s without a step: fine");
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 1010, msg, sizeof msg) == EXP_ALERT_STALL, "10 s: stalled");
    CHECK(strstr(msg, "stalled: no step for 10 s after step 44"), "message: %s", msg);
    t.end = 1005;
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 1010, msg, sizeof msg) == 0, "an ended run never stalls");

    /* a run's files: kept time, wall, restarts, repeated; read incrementally */
    char dir[] = "/tmp/mtc-goodput-XXXXXX", path[256], log[256];
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    json_t *run = json_pack("{s:s, s:s, s:s, s:{s:i, s:i}}", "taskDir", dir, "logDir", dir, "jobId",
                            "7", "train", "global_batch", 8, "seq_length", 64);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    snprintf(log, sizeof log, "%s/7.log", dir);
    append(log, "mtc: job 7 start 2026-12-01T10:00:00Z on n1, restart 0\nstep 1/10 | loss 2\n"
                "step 5/10 | loss 2\n");
    append(path, "{\"step\":1,\"loss\":2.0,\"tokens_per_s\":512,\"mfu\":0.1}\n"
                 "{\"step\":2,\"loss\":2.0,\"tokens_per_s\":256,\"mfu\":0.1}\n");
    exp_track_init(&t, run);
    exp_track_update(&t, 1796119210.0); /* 10:00:10 */
    CHECK(t.rows == 2 && t.step == 2 && fabs(t.kept_s - 3.0) < 1e-9, "2 rows, kept 1+2 s: %lld %g",
          (long long)t.rows, t.kept_s);
    CHECK(fabs(t.wall_s - 10) < 1e-9 && fabs(t.goodput - 0.3) < 1e-9, "wall 10 s, goodput 0.3: %g %g",
          t.wall_s, t.goodput);
    append(path, "{\"step\":3,\"loss\":2.0,\"tokens_per_s\":512,\"mfu\":0.1}\n{\"step\":4,\"lo");
    exp_track_update(&t, 1796119210.0);
    CHECK(t.rows == 3 && fabs(t.kept_s - 4.0) < 1e-9, "a half-written line waits: %lld rows", (long long)t.rows);
    /* the job dies after step 5; the resume from step 3 rewrites metrics.jsonl */
    append(log, "mtc: job 7 start 2026-12-01T10:00:20Z on n2, restart 1\n"
                "mtc-train: resuming from /ck/step_3 (step 3)\nstep 4/10 | loss 2\n"
                "mtc: job 7 end 2026-12-01T10:00:40Z, exit status 0\n");
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    append(tmp, "{\"step\":1,\"loss\":2.0,\"tokens_per_s\":512,\"mfu\":0.1}\n"
                "{\"step\":2,\"loss\":2.0,\"tokens_per_s\":256,\"mfu\":0.1}\n"
                "{\"step\":3,\"loss\":2.0,\"tokens_per_s\":512,\"mfu\":0.1}\n"
                "{\"step\":4,\"loss\":2.0,\"tokens_per_s\":128,\"mfu\":0.1}\n");
    CHECK(rename(tmp, path) == 0, "replace metrics.jsonl");
    exp_track_update(&t, 1796119300.0);
    CHECK(t.rows == 4 && fabs(t.kept_s - 8.0) < 1e-9, "reread after the rewrite: %lld rows, kept %g",
          (long long)t.rows, t.kept_s);
    CHECK(t.restarts == 1 && t.repeated == 2 && t.lost == 0, "1 restart, steps 4-5 repeated: %d %lld %lld",
          t.restarts, (long long)t.repeated, (long long)t.lost);
    CHECK(fabs(t.wall_s - 40) < 1e-9 && fabs(t.goodput - 0.2) < 1e-9, "wall to the end, 40 s: %g %g",
          t.wall_s, t.goodput);
    unlink(path);
    unlink(log);
    rmdir(dir);
    json_decref(run);

    /* the recipe's "monitor" section over the defaults */
    struct exp_monitor m;
    json_t *mc = json_pack("{s:{s:f, s:i, s:f}}", "monitor", "spike_z", 3.5, "spike_window", 20,
                           "stall_factor", 4.0);
    exp_monitor_from(mc, &m);
    CHECK(m.spike_z == 3.5 && m.window == 20 && m.stall_factor == 4.0 && m.drop_fraction == 0.5 &&
              m.min_rows == 10,
          "monitor: %g %d %g %g %d", m.spike_z, m.window, m.stall_factor, m.drop_fraction, m.min_rows);
    json_decref(mc);

    /* scans: a spike that is not the newest row by the time of the scan is raised once */
    struct events ev = {0, 0, ""};
    int64_t seen = 0;
    int raised = 0;
    exp_track_init(&t, cfg);
    rows(&t, 30, 2.0, 1000);
    exp_monitor_scan(&t, &exp_monitor_default, 0, &seen, &raised, on, &ev);
    CHECK(ev.n == 0 && seen == 30, "30 healthy rows: no event (%d: %s)", ev.n, ev.last);
    exp_track_row(&t, 31, 9.0, 1000, 0.1);
    exp_track_row(&t, 32, 9.5, 1000, 0.1);
    rows(&t, 3, 2.0, 1000);
    CHECK(exp_monitor_check(&t, &exp_monitor_default, 0, msg, sizeof msg) == 0, "newest row fine");
    exp_monitor_scan(&t, &exp_monitor_default, 0, &seen, &raised, on, &ev);
    CHECK(ev.n == 1 && ev.kinds == EXP_ALERT_SPIKE && strstr(ev.last, "loss spike at step 31: 9 "),
          "steps 31-32 spiked: one event (%d: %s)", ev.n, ev.last);
    exp_monitor_scan(&t, &exp_monitor_default, 0, &seen, &raised, on, &ev);
    CHECK(ev.n == 1, "scanning again adds none (%d)", ev.n);
    exp_track_row(&t, 36, 9.0, 1000, 0.1);
    exp_monitor_scan(&t, &exp_monitor_default, 0, &seen, &raised, on, &ev);
    CHECK(ev.n == 2 && strstr(ev.last, "step 36"), "a new occurrence: a new event (%s)", ev.last);
    CHECK(strcmp(exp_alert_name(EXP_ALERT_SPIKE), "LOSS_SPIKE") == 0, "alert names");
    json_decref(cfg);
    return check_done();
}
