/* Unit tests for goodput and early problem detection (src/experiment/goodput.c):
 * kept time, wall time, restarts and steps repeated read from a run's log and
 * metrics.jsonl (and read on incrementally, and again after a resume rewrote
 * the file; rows that say only step and loss timed by when the file was
 * written); NaN/Inf, loss spike, throughput drop and stall alerts; the
 * recipe's monitor thresholds; exp_monitor_scan raising each alert once per
 * occurrence, judging every row read (a spike between two scans included). */
#include "check.h"
#include "experiment/experiment.h"
#include "recipes/recipes.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

    /* the breakdown: queue, startup, productive, checkpoint, lost, restart and
     * hang sum to the time since submission (breakdown.c's picture) */
    CHECK(mkdtemp(strcpy(dir, "/tmp/mtc-goodput-XXXXXX")) != NULL, "temp dir");
    run = json_pack("{s:s, s:s, s:s, s:s}", "taskDir", dir, "logDir", dir, "jobId", "8",
                    "submitTime", "2026-12-01T10:00:00.000Z");
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    snprintf(log, sizeof log, "%s/8.log", dir);
    const double T0 = 1796119200.0; /* 10:00:00 */
    append(log, "mtc: job 8 start 2026-12-01T10:00:10Z on n1, restart 0\n");
    FILE *mf = fopen(path, "w");
    for (int k = 1; k <= 6; k++) /* steps 1-6 at 10:00:13..18, a 0.5 s save before step 5's row */
        fprintf(mf, "{\"step\":%d,\"loss\":2.0,\"step_time_s\":1.0,\"time\":%.1f%s}\n", k,
                T0 + 12 + k, k == 5 ? ",\"checkpoint_s\":0.5" : "");
    fclose(mf);
    exp_track_init(&t, run);
    exp_track_update(&t, T0 + 30);
    CHECK(fabs(t.bd.queue_s - 10) < 1e-9 && fabs(t.bd.startup_s - 2) < 1e-9 &&
              fabs(t.bd.hang_s - 11) < 1e-9 && fabs(t.bd.total_s - 30) < 1e-9,
          "running, no step for 12 s: queue 10, startup 2, hang 11 (beyond a step), total 30: "
          "%g %g %g %g", t.bd.queue_s, t.bd.startup_s, t.bd.hang_s, t.bd.total_s);
    /* it hangs; requeued at 10:00:40, started again at :50 from step 4, done at 10:01:00 */
    append(log, "mtc: job 8 end 2026-12-01T10:00:40Z, signal TERM\n"
                "mtc: job 8 start 2026-12-01T10:00:50Z on n2, restart 1\n"
                "mtc-train: resuming from /ck/step_4 (step 4)\n");
    mf = fopen(path, "a");
    for (int k = 5; k <= 10; k++) /* steps 5-10 again at 10:00:53..58 */
        fprintf(mf, "{\"step\":%d,\"loss\":2.0,\"step_time_s\":1.0,\"time\":%.1f}\n", k,
                T0 + 48 + k);
    fclose(mf);
    append(log, "mtc: job 8 end 2026-12-01T10:01:00Z, exit status 0\n");
    exp_track_update(&t, T0 + 100);
    const struct exp_breakdown *b = &t.bd;
    double sum = b->queue_s + b->startup_s + b->productive_s + b->checkpoint_s + b->lost_s +
                 b->restart_s + b->hang_s;
    CHECK(fabs(b->total_s - 60) < 1e-9 && fabs(sum - b->total_s) < 1e-9,
          "the parts sum to the 60 s since submission: %g of %g", sum, b->total_s);
    CHECK(fabs(b->queue_s - 10) < 1e-9 && fabs(b->startup_s - 4) < 1e-9 &&
              fabs(b->restart_s - 10) < 1e-9,
          "queue 10, startup 2+2, restart gap 10: %g %g %g", b->queue_s, b->startup_s,
          b->restart_s);
    CHECK(fabs(b->lost_s - 3) < 1e-9 && fabs(b->hang_s - 21) < 1e-9,
          "lost: steps 5-6 and the one in flight (3 s); hang: the idle tail beyond a step (21 s): "
          "%g %g", b->lost_s, b->hang_s);
    CHECK(fabs(b->checkpoint_s - 2.5) < 1e-9 && fabs(b->productive_s - 9.5) < 1e-9,
          "checkpoint: 0.5 s + the final save and exit 2 s; productive 9.5 s: %g %g",
          b->checkpoint_s, b->productive_s);
    CHECK(t.repeated == 2 && t.restarts == 1, "steps 5-6 repeated, 1 restart: %lld %d",
          (long long)t.repeated, t.restarts);
    /* goodput's wall: from the first start (10:00:10), not the submission
     * the breakdown counts from (10:00:00), to the end (10:01:00) */
    CHECK(fabs(t.wall_s - 50) < 1e-9 && fabs(t.goodput - t.kept_s / 50) < 1e-9,
          "wall 50 s from the first start, not 60 from the submission: %g, goodput %g",
          t.wall_s, t.goodput);
    /* read again from the files alone (mtc experiment status): the same parts */
    struct exp_track t2;
    exp_track_init(&t2, run);
    exp_track_update(&t2, T0 + 100);
    CHECK(memcmp(&t2.bd, &t.bd, sizeof(t.bd)) == 0, "a fresh reader gets the same breakdown");
    json_t *pj = exp_track_json(&t2, 0, "");
    CHECK(json_real_value(json_object_get(json_object_get(pj, "breakdown"), "hangSeconds")) == 21,
          "progress.breakdown.hangSeconds in the API object");
    json_decref(pj);
    CHECK(t2.bd.preemptions == 0 && t2.bd.preempted_s == 0, "a hang's requeue: no preemption");
    /* the same restart was a preemption (Slurm's log: by job 9 of QoS high, at
     * 10:00:39.5): still restart time, the sum kept, and counted apart */
    t2.preempt[0] = (struct exp_preempt){T0 + 39.5, "9", "high"};
    t2.preempt[1] = (struct exp_preempt){T0 + 5, "3", ""}; /* before any start: not the run's */
    t2.npreempt = 2;
    CHECK(exp_track_attempt(&t2, T0 + 39.5) == 1 && exp_track_attempt(&t2, T0 + 55) == 2 &&
              exp_track_attempt(&t2, T0 + 5) == 0,
          "a preemption ends the start before it: 1, 2, none before the first");
    exp_breakdown_update(&t2, T0 + 100);
    b = &t2.bd;
    sum = b->queue_s + b->startup_s + b->productive_s + b->checkpoint_s + b->lost_s +
          b->restart_s + b->hang_s;
    CHECK(b->preemptions == 1 && fabs(b->preempted_s - 10) < 1e-9 &&
              fabs(b->restart_s - 10) < 1e-9 && fabs(sum - b->total_s) < 1e-9 &&
              fabs(b->total_s - 60) < 1e-9,
          "1 preemption, its 10 s gap within restart's 10 s; the parts still sum to 60: %d %g %g "
          "%g",
          b->preemptions, b->preempted_s, b->restart_s, sum);
    pj = exp_track_json(&t2, 0, "");
    const json_t *pb = json_array_get(json_object_get(pj, "preemptedBy"), 0);
    CHECK(json_integer_value(json_object_get(pj, "preemptions")) == 1 &&
              json_real_value(json_object_get(pj, "preemptedSeconds")) == 10 &&
              strcmp(json_string_value(json_object_get(pb, "slurmJobId")), "9") == 0 &&
              strcmp(json_string_value(json_object_get(pb, "qos")), "high") == 0 &&
              json_object_get(json_object_get(pj, "breakdown"), "preemptions") == NULL,
          "progress: preemptions, preemptedSeconds, preemptedBy [{slurmJobId 9, qos high}]; "
          "the breakdown holds only parts");
    json_decref(pj);
    char *txt = NULL;
    size_t txtn = 0;
    FILE *mem = open_memstream(&txt, &txtn);
    exp_track_print(mem, &t2, 0, "");
    fclose(mem);
    CHECK(strstr(txt, "- Preempted by 9 (qos high) at 2026-12-01T10:00:39") &&
              strstr(txt, "- Preempted by 3 at") &&
              strstr(txt, "- Preemptions: 1, 10.0 s of the restart time"),
          "the status block names the preemptor and its QoS");
    if (!strstr(txt, "- Preempted by 9 (qos high)"))
        printf("# %s\n", txt);
    free(txt);
    /* slurmctld's log not readable: sacct's PREEMPTED attempt, by whom not known */
    t2.preempt[1] = (struct exp_preempt){T0 + 39.5, "", ""};
    char ptext[160];
    CHECK_STR(exp_preempt_text(&t2.preempt[1], ptext, sizeof(ptext)),
              "preempted (by a job only slurmctld's log names)", "no preemptor known: said so");
    pj = exp_track_json(&t2, 0, "");
    pb = json_array_get(json_object_get(pj, "preemptedBy"), 1);
    CHECK(pb && !json_object_get(pb, "slurmJobId") && json_object_get(pb, "time"),
          "  preemptedBy: its time, no slurmJobId");
    json_decref(pj);
    unlink(path);
    unlink(log);
    rmdir(dir);
    json_decref(run);

    /* log rules: named groups taken out, the rest POSIX; bad patterns named */
    struct exp_logrule lr;
    mtc_error_t lerr = {""};
    static const struct {
        const char *pattern, *error;
    } bad[] = {
        {"loss (?<lossy>[0-9.]+)", "unknown name \"lossy\""},
        {"(?:x) (?<step>[0-9]+)", "only named groups"},
        {"step [0-9]+", "no named group"},
        {"(?<step>[0-9]+) [abc", "unclosed ["},
        {"(?<step>[0-9]+) (?<step>[0-9]+)", "given twice"},
        {"(?<loss>[0-9.]+) (", "not a POSIX extended regular expression"},
        /* what makes regcomp take memory without bound (fuzz/logrule.c found "++…+") */
        {"(?<step>[0-9]++++++++)", "a repetition of a repetition at character 15"},
        {"(?<step>[0-9]*{2})", "a repetition of a repetition"},
        {"(?<step>[0-9]{1,100})", "an interval of 100: at most 32"},
        {"(?<step>[0-9]{~1})", "character 14: an interval is {m}, {m,} or {m,n}"},
        /* what a linear-time matcher cannot do: back-references, nested quantifiers */
        {"(?<step>[0-9]+)|((a*)(a*))*\\2\\3\\4b",
         "a nested quantifier at character 27: group 2, which holds a repetition, is repeated"},
        {"(?<step>[0-9]+) (x)\\2", "a back-reference \\2 at character 20"},
        {"(?<step>([0-9]{8}x){5})", "group 2, which holds a repetition"},
        {"(?<step>(([0-9])+x)y{2})*", "group 1, which holds a repetition"},
        {"(?<loss>(a?)+)", "group 2, which holds a repetition"},
        {"(?<loss>((x)|y+)z)+", "group 1, which holds a repetition"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        lerr.text[0] = '\0';
        CHECK(exp_logrule_compile(&lr, bad[i].pattern, &lerr) < 0 && strstr(lerr.text, bad[i].error) &&
                  !strchr(lerr.text, '\n'),
              "%s: refused in one line (%s)", bad[i].pattern, lerr.text);
    }
    /* the rules of docs and tests, and repetitions that are not nested */
    static const char *const good[] = {
        "^step (?<step>[0-9]+) loss (?<loss>[0-9.]+)",
        "^iteration +(?<step>[0-9]+)/.*lm loss: (?<loss>[0-9.E+-]+)",
        "saved checkpoint .* in (?<checkpoint_s>[0-9.]+) s",
        "it (?<step>[0-9]+) loss (?<loss>[0-9.]+)",
        "^iter (?<step>[0-9]+) .*loss (?<loss>[0-9.]+) .*\\((?<step_time_s>[0-9.]+) s\\)",
        "(?<step>[0-9]{1,3}),[0-9]{3} x{2,}",
        "(?<step>(ab|cd)+[0-9]+) \\{ (a|b)*",
        "(?<step>[0-9]+)",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        lerr.text[0] = '\0';
        CHECK(exp_logrule_compile(&lr, good[i], &lerr) == 0, "%s: accepted (%s)", good[i], lerr.text);
        exp_logrule_release(&lr);
    }
    CHECK(exp_logrule_compile(&lr, "(?<step>([0-9]{1,3},){0,5}[0-9]+)+ x{2,}", &lerr) < 0,
          "a repeated group of repeated groups: refused (%s)", lerr.text);
    CHECK(exp_logrule_compile(&lr, "^[(]it (?P<step>[0-9]+)[)] \\((x|y)\\) loss=(?<loss>[-+.e0-9naif]+)",
                              &lerr) == 0,
          "brackets, escaped parentheses, a plain group and both spellings compile (%s)", lerr.text);
    double v[EXP_CAP_N];
    int have = exp_logrule_match(&lr, "(it 12) (y) loss=2.5e-1 tail", v);
    CHECK(have == ((1 << EXP_CAP_STEP) | (1 << EXP_CAP_LOSS)) && v[EXP_CAP_STEP] == 12 &&
              v[EXP_CAP_LOSS] == 0.25,
          "groups counted past the unnamed one: step %g loss %g", v[EXP_CAP_STEP], v[EXP_CAP_LOSS]);
    CHECK(exp_logrule_match(&lr, "(it 12) (y) loss=nan", v) == ((1 << EXP_CAP_STEP) | (1 << EXP_CAP_LOSS)) &&
              isnan(v[EXP_CAP_LOSS]),
          "a NaN loss is a loss (NONFINITE)");
    CHECK(exp_logrule_match(&lr, "(it 12) (y) loss=--", v) == (1 << EXP_CAP_STEP),
          "a capture that is no number is left out");
    CHECK(exp_logrule_match(&lr, "it 12 loss=2", v) == 0, "no match: nothing");
    exp_logrule_release(&lr);

    /* a long line: a rule sees its first EXP_LOGRULE_LINE_MAX - 1 bytes (the
     * longest line goodput.c reads), matched there in one pass. glibc's
     * regexec, which tried the pattern from each digit on to the end, took
     * seconds for 16 KiB of digits with this rule (bench/logrule.sh) */
    size_t big = 1 << 20, cap = EXP_LOGRULE_LINE_MAX - 1;
    char *huge = malloc(big + 16);
    CHECK(huge != NULL, "a 1 MiB line");
    if (huge) {
        memset(huge, '1', big);
        huge[big] = '\0';
        CHECK(exp_logrule_compile(&lr, "(?<loss>[0-9]+)/(?<step>[0-9]+)", &lerr) == 0,
              "a rule with two repeated classes compiles (%s)", lerr.text);
        CHECK(exp_logrule_match(&lr, huge, v) == 0, "1 MiB of digits without '/': no match");
        strcpy(huge + big, "/42");
        CHECK(exp_logrule_match(&lr, huge, v) == 0, "  with /42 at its end, past what a rule sees: none");
        memset(huge, '1', big);
        memcpy(huge + cap - 3, "/42", 3);
        CHECK(exp_logrule_match(&lr, huge, v) == (1 << EXP_CAP_STEP) && v[EXP_CAP_STEP] == 42,
              "  /42 ending just where a rule's view ends: step 42 (the long loss is no number)");
        memset(huge, '1', big);
        memcpy(huge + cap - 2, "/42", 3);
        CHECK(exp_logrule_match(&lr, huge, v) == (1 << EXP_CAP_STEP) && v[EXP_CAP_STEP] == 4,
              "  one byte later: the 2 is cut off (step 4)");
        exp_logrule_release(&lr);
        CHECK(exp_logrule_compile(&lr, "/(?<step>[0-9]+)$", &lerr) == 0, "a rule anchored at the end");
        CHECK(exp_logrule_match(&lr, huge, v) == 0, "  `$` does not match where a long line is cut");
        huge[cap + 1] = '\0';
        CHECK(exp_logrule_match(&lr, huge, v) == 0, "  nor where a line one byte too long is");
        huge[cap] = '\0';
        CHECK(exp_logrule_match(&lr, huge, v) == (1 << EXP_CAP_STEP) && v[EXP_CAP_STEP] == 4,
              "  it does at the end of a line that fits");
        exp_logrule_release(&lr);
        free(huge);
    }

    /* the prefilter: literals every match holds, and never a wrong one (a
     * line it turns away is one TRE would not match either) */
    static const struct {
        const char *pattern, *needs; /* needs: the literals kept, '|'-separated, longest first */
    } pre[] = {
        {"saved checkpoint .* in (?<checkpoint_s>[0-9.]+) s", "saved checkpoint | in | s"},
        {"^iteration +(?<step>[0-9]+)/.*lm loss: (?<loss>[0-9.E+-]+)", "iteration |lm loss: |/"},
        {"(?<step>(a|aa)+)b", "b"},
        {"ab?c+d{2}e{0,3}f\\.g (?<step>[0-9]+)", "f.g |a|c|d"},
        {"(?<step>[0-9]+)|x y", ""},
        {"\\<word\\> (?<step>[0-9]+)", "word| "},
        {"\\Qa.b\\E(?<step>[0-9]+)", ""},
        {"x\\w+y (?<loss>[0-9.]+)", "y |x"},
    };
    static const char *const probe[] = {"saved checkpoint 3 in 2.5 s", "iteration  12/ 9 lm loss: 2.5",
                                        "aab", "abccddf.g 7", "acddeeef.g 12", "x y", "7",
                                        "a word 9", "a.b9", "xzzy 1.5", "saved checkpoint in 2 s",
                                        "iteration 1/ lm loss 2"};
    for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++) {
        char got[256] = "";
        CHECK(exp_logrule_compile(&lr, pre[i].pattern, &lerr) == 0, "%s compiles (%s)", pre[i].pattern,
              lerr.text);
        for (int k = 0; k < lr.nneed; k++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", k ? "|" : "", lr.need[k]);
        CHECK(strcmp(got, pre[i].needs) == 0, "%s: needs \"%s\" (\"%s\")", pre[i].pattern, got,
              pre[i].needs);
        struct exp_logrule bare = lr;
        bare.nneed = 0; /* the same rule without the prefilter */
        for (size_t k = 0; k < sizeof(probe) / sizeof(probe[0]); k++) {
            double v1[EXP_CAP_N], v2[EXP_CAP_N];
            CHECK(exp_logrule_match(&lr, probe[k], v1) == exp_logrule_match(&bare, probe[k], v2),
                  "  \"%s\": the same answer with and without the prefilter", probe[k]);
        }
        exp_logrule_release(&lr);
    }

    /* a run whose only progress is its log lines */
    CHECK(mkdtemp(strcpy(dir, "/tmp/mtc-goodput-XXXXXX")) != NULL, "temp dir");
    run = json_pack("{s:s, s:s, s:s, s:s, s:{s:[{s:s},{s:s}]}}", "taskDir", dir, "logDir", dir,
                    "jobId", "9", "task", "custom", "monitor", "log_rules", "pattern",
                    "^iter (?<step>[0-9]+) .*loss (?<loss>[0-9.]+) .*\\((?<step_time_s>[0-9.]+) s\\)",
                    "pattern", "saved in (?<checkpoint_s>[0-9.]+) s");
    snprintf(log, sizeof log, "%s/9.log", dir);
    append(log, "mtc: job 9 start 2026-12-01T10:00:00Z on n1, restart 0\n"
                "iter 1 | loss 3.5 | (2.0 s)\niter 2 | loss 3.0 | (2.0 s)\nsaved in 1.5 s\n"
                "iter 3 | loss 2.5 | (2.0 s)\n");
    exp_track_init(&t, run);
    exp_track_update(&t, T0 + 10);
    CHECK(t.rows == 3 && t.step == 3 && t.loss == 2.5 && fabs(t.kept_s - 6) < 1e-9,
          "3 rows from the log, kept 3 x 2 s: %lld %lld %g %g", (long long)t.rows,
          (long long)t.step, t.loss, t.kept_s);
    CHECK(t.segs[0].ckpt_s == 1.5 && t.last_row == T0 + 10, "the save's 1.5 s; progress now");
    unlink(log);
    rmdir(dir);
    json_decref(run);

    /* a program whose rows say only step and loss (issue 41): the rows of a
     * read share the time since the row before them (the file's birth on the
     * first read) up to the file's modification time */
    CHECK(mkdtemp(strcpy(dir, "/tmp/mtc-goodput-XXXXXX")) != NULL, "temp dir");
    run = json_pack("{s:s, s:s, s:s, s:s}", "taskDir", dir, "logDir", dir, "jobId", "9", "task",
                    "custom");
    double B = (double)time(NULL); /* the file is born at B or a little after */
    char iso[40], mpath[300], line[512];
    snprintf(log, sizeof log, "%s/9.log", dir);
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", dir);
    snprintf(line, sizeof line, "mtc: job 9 start %s on n1, restart 0\n",
             mtc_time_rfc3339((int64_t)(B - 5) * 1000, iso, sizeof iso));
    append(log, line);
    for (int k = 1; k <= 10; k++) {
        snprintf(line, sizeof line, "{\"step\": %d, \"loss\": %g}\n", k, 3.0 - 0.1 * k);
        append(mpath, line);
    }
    /* the birth as the file system keeps it: a second may have turned since B */
    struct statx sx;
    CHECK(statx(AT_FDCWD, mpath, 0, STATX_BTIME, &sx) == 0 && (sx.stx_mask & STATX_BTIME),
          "the file system keeps a birth time");
    double born = (double)sx.stx_btime.tv_sec + sx.stx_btime.tv_nsec / 1e9;
    struct timespec ts[2] = {{(time_t)B + 10, 0}, {(time_t)B + 10, 0}};
    utimensat(AT_FDCWD, mpath, ts, 0);
    exp_track_init(&t, run);
    exp_track_update(&t, B + 12);
    CHECK(t.rows == 10 && fabs(t.kept_s - (B + 10 - born)) < 1e-6,
          "10 plain rows read at once: the %g s from the file's birth to its last write (%g)",
          B + 10 - born, t.kept_s);
    CHECK(fabs(t.goodput - t.kept_s / 17) < 1e-6,
          "  goodput: that over the 17 s since the start (%.3f), not 0", t.goodput);
    CHECK(t.segs[0].nrows == 10 && t.segs[0].first > B && fabs(t.segs[0].last - (B + 10)) < 1e-6,
          "  the rows placed in the start, the last at the file's last write");
    for (int k = 11; k <= 15; k++) {
        snprintf(line, sizeof line, "{\"step\": %d, \"loss\": 1.5}\n", k);
        append(mpath, line);
    }
    ts[0].tv_sec = ts[1].tv_sec = (time_t)B + 20;
    utimensat(AT_FDCWD, mpath, ts, 0);
    double k0 = t.kept_s;
    exp_track_update(&t, B + 21);
    CHECK(t.rows == 15 && fabs(t.kept_s - k0 - 10) < 1e-6 && fabs(t.segs[0].last - (B + 20)) < 1e-6,
          "  5 more, read on: they share the 10 s since the last read's (%g)", t.kept_s - k0);
    k0 = t.kept_s;
    snprintf(line, sizeof line,
             "{\"step\": 16, \"loss\": 1.4, \"time\": %.1f}\n"
             "{\"step\": 17, \"loss\": 1.3, \"time\": %.1f}\n",
             B + 22, B + 23.5);
    append(mpath, line);
    exp_track_update(&t, B + 24);
    CHECK(fabs(t.kept_s - k0 - 3.5) < 1e-6,
          "  rows with a time and no step time: the time since the row before (%g)", t.kept_s - k0);
    snprintf(line, sizeof line, "mtc: job 9 start %s on n1, restart 1\n",
             mtc_time_rfc3339((int64_t)(B + 30) * 1000, iso, sizeof iso));
    append(log, line);
    append(mpath, "{\"step\": 16, \"loss\": 1.4}\n{\"step\": 17, \"loss\": 1.3}\n");
    ts[0].tv_sec = ts[1].tv_sec = (time_t)B + 36;
    utimensat(AT_FDCWD, mpath, ts, 0);
    k0 = t.kept_s;
    exp_track_update(&t, B + 37);
    CHECK(fabs(t.kept_s - k0 - 6) < 1e-6 && t.nsegs == 2 && t.segs[1].nrows == 2,
          "  after a restart: the time from the new start, not the gap before it (%g)",
          t.kept_s - k0);
    CHECK(t.goodput > 0 && t.goodput <= 1, "  goodput within (0, 1]: %.3f", t.goodput);
    unlink(mpath);
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
