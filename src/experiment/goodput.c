/* goodput: a run's effective training time ratio — the time of the steps that
 * were kept (Σ tokens per step ÷ tokens/s over metrics.jsonl) ÷ the wall time
 * from the job's first start (its log's first "mtc: job N start") to its end
 * or now — with restarts and steps lost and repeated. The early problem
 * detector judges the same rows (detect.c). bench/chaos.sh, `mtc experiment
 * status` and mtcd's /metrics all use exp_track. metrics.jsonl is read from
 * the last offset on (a resume rewrites it: new inode → reread); rows that
 * say no step time are timed by when they were written, as log-rule rows by
 * when they were read; a custom task that writes none has its log rules' rows
 * (monitor.log_rules), else its TensorBoard loss scalars read instead. Every row, start and end also goes
 * to the breakdown of the run's time (breakdown.c). */
#include "experiment/experiment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The tags a custom task's loss is logged under, by default: what NeMo,
 * Megatron, HF Trainer, torchtitan and Lightning write. monitor.loss_tags
 * replaces the list. */
static const char *const loss_tags[] = {"loss",       "train_loss",     "reduced_train_loss",
                                        "lm loss",    "train/loss",     "train/lm_loss",
                                        "loss/train", "train/loss_step"};

static void tb_init(struct exp_track *t, const json_t *cfg)
{
    snprintf(t->tb_dir, sizeof(t->tb_dir), "%s/tensorboard", exp_log_dir(cfg));
    const json_t *given = json_object_get(json_object_get(cfg, "monitor"), "loss_tags");
    size_t n = given ? json_array_size(given) : sizeof(loss_tags) / sizeof(loss_tags[0]);
    for (size_t i = 0; i < n && t->tb_ntags < 8; i++)
        snprintf(t->tb_tags[t->tb_ntags++], sizeof(t->tb_tags[0]), "%s",
                 given ? json_string_value(json_array_get(given, i)) : loss_tags[i]);
}

static double parse_utc(const char *s);

/* monitor.log_rules' patterns (validated by recipe_normalize); rows come from
 * them when one names a step or a loss. */
static void rules_init(struct exp_track *t, const json_t *cfg)
{
    const json_t *rules = json_object_get(json_object_get(cfg, "monitor"), "log_rules");
    size_t i;
    const json_t *r;
    json_array_foreach(rules, i, r)
    {
        const char *p = json_string_value(json_object_get(r, "pattern"));
        struct exp_logrule lr;
        if (!p || t->nlog_rules == EXP_LOG_RULES || strlen(p) >= sizeof(t->log_rules[0]) ||
            exp_logrule_compile(&lr, p, NULL) < 0)
            continue;
        if (lr.group[EXP_CAP_STEP] || lr.group[EXP_CAP_LOSS])
            t->log_rows = 1;
        exp_logrule_release(&lr);
        snprintf(t->log_rules[t->nlog_rules++], sizeof(t->log_rules[0]), "%s", p);
    }
}

void exp_track_init(struct exp_track *t, const json_t *cfg)
{
    memset(t, 0, sizeof(*t));
    if (mtc_json_str(cfg, "submitTime"))
        t->submit = parse_utc(mtc_json_str(cfg, "submitTime"));
    rules_init(t, cfg);
    const json_t *tr = json_object_get(cfg, "train");
    double b = (double)json_integer_value(json_object_get(tr, "global_batch"));
    double s = (double)json_integer_value(json_object_get(tr, "seq_length"));
    t->tok_per_step = b * s;
    exp_metrics_path(cfg, t->metrics_path, sizeof(t->metrics_path));
    exp_log_path(cfg, t->log_path, sizeof(t->log_path));
    if (exp_is_custom(cfg) && exp_log_dir(cfg))
        tb_init(t, cfg);
}

void exp_track_row(struct exp_track *t, int64_t step, double loss, double tps, double mfu)
{
    t->rows++;
    if (step > t->step)
        t->step = step;
    t->loss = loss;
    t->tokens_per_s = tps;
    t->mfu = mfu;
    if (!isfinite(loss))
        t->nonfinite++;
    double dt = tps > 0 && t->tok_per_step > 0 ? t->tok_per_step / tps : 0;
    t->kept_s += dt;
    size_t i = t->ring_pos; /* the oldest row's slot once the ring is full */
    if (t->ring_n < EXP_TRACK_RING)
        i = t->ring_n++;
    else
        t->ring_pos = (t->ring_pos + 1) % EXP_TRACK_RING;
    t->ring_loss[i] = loss;
    t->ring_tps[i] = tps;
    t->ring_dt[i] = dt;
    t->ring_step[i] = step;
}

/* A step's time from the time between two logged steps (a row's kept time). */
static void row_time(struct exp_track *t, double dt)
{
    if (t->tok_per_step > 0 || !(dt > 0))
        return;
    size_t last = t->ring_n < EXP_TRACK_RING ? t->ring_n - 1
                                             : (t->ring_pos + EXP_TRACK_RING - 1) % EXP_TRACK_RING;
    t->kept_s += dt;
    t->ring_dt[last] = dt;
}

/* Whether a start of the run lies in (a, b]: the time between two rows
 * across it is a restart's, not a step's. The latest such start, or 0. */
static double start_between(const struct exp_track *t, double a, double b)
{
    double s = 0;
    for (int i = 0; i < t->nsegs; i++)
        if (t->segs[i].start > a && t->segs[i].start <= b && t->segs[i].start > s)
            s = t->segs[i].start;
    return s;
}

/* A row's own step time: step_time_s, or tokens ÷ tokens per second. */
static double own_dt(const struct exp_track *t, const json_t *o)
{
    double tps = json_number_value(json_object_get(o, "tokens_per_s"));
    if (tps > 0 && t->tok_per_step > 0)
        return t->tok_per_step / tps;
    return json_number_value(json_object_get(o, "step_time_s"));
}

/* One row of metrics.jsonl; dt: its step time when it says none, when: its
 * time when it says none (0: unknown). */
static void metrics_row(struct exp_track *t, const json_t *o, double dt, double when)
{
    json_t *l = json_object_get(o, "loss");
    double loss = json_is_number(l) ? json_number_value(l) : NAN;
    int64_t step = json_integer_value(json_object_get(o, "step"));
    double tps = json_number_value(json_object_get(o, "tokens_per_s"));
    exp_track_row(t, step, loss, tps, json_number_value(json_object_get(o, "mfu")));
    double own = own_dt(t, o);
    /* a custom task's program (no tokens per step known) may say its step time */
    row_time(t, tps > 0 && t->tok_per_step > 0 ? 0 : own > 0 ? own : dt);
    if (own > 0)
        dt = own;
    double at = json_number_value(json_object_get(o, "time"));
    if (at > 0)
        when = at;
    if (!(at > 0) || at > t->seg_time) /* a reread file's old rows were counted */
        exp_seg_checkpoint(t, json_number_value(json_object_get(o, "checkpoint_s")));
    exp_seg_row(t, step, when, dt);
    if (when > 0)
        t->m_wall = when;
}

/* The rows of metrics.jsonl past the offset read before (all of it when the
 * file was replaced or shrank). A row that says neither its step time
 * (step_time_s, tokens_per_s) nor its time — a plain {"step", "loss"} — is
 * timed as log-rule rows are, by when it was written: the rows of one read
 * share the time from the row before them (given or placed; on the first
 * read the file's birth, when it has one) to the file's modification time,
 * a start between the two cutting that span at the start. A row with a time
 * but no step time takes the time since the row before it in the same
 * start. */
/* A run's file, opened with the thread's ids (the job's user: jobs/watch.c)
 * and never from a kernel filesystem (mtc_open_as_user), or NULL. */
static FILE *open_file(const char *path)
{
    int fd = mtc_open_as_user(path, 0);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (fd >= 0 && !f)
        close(fd);
    return f;
}

static void read_metrics(struct exp_track *t)
{
    struct statx sx;
    if (!t->metrics_path[0] || statx(AT_FDCWD, t->metrics_path, 0,
                                     STATX_INO | STATX_SIZE | STATX_MTIME | STATX_BTIME, &sx) < 0)
        return;
    if (sx.stx_ino != t->ino || (long long)sx.stx_size < t->off) {
        t->ino = sx.stx_ino;
        t->off = 0;
        t->rows = t->step = t->nonfinite = 0;
        t->kept_s = t->m_wall = 0;
        t->ring_n = t->ring_pos = 0;
    }
    FILE *f = open_file(t->metrics_path);
    json_t *batch = json_array();
    if (!f || !batch || fseeko(f, t->off, SEEK_SET) < 0) {
        if (f)
            fclose(f);
        json_decref(batch);
        return;
    }
    char line[8192];
    size_t untimed = 0;
    while (fgets(line, sizeof(line), f)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n')
            break; /* a line still being written: next time */
        t->off += (off_t)n;
        json_t *o = json_loads(line, 0, NULL);
        if (!o)
            continue;
        untimed += !(own_dt(t, o) > 0) && !(json_number_value(json_object_get(o, "time")) > 0);
        json_array_append_new(batch, o);
    }
    fclose(f);
    double mtime = (double)sx.stx_mtime.tv_sec + sx.stx_mtime.tv_nsec / 1e9;
    double ref = t->m_wall;
    if (!(ref > 0) && (sx.stx_mask & STATX_BTIME))
        ref = (double)sx.stx_btime.tv_sec + sx.stx_btime.tv_nsec / 1e9;
    double cut = ref > 0 ? start_between(t, ref, mtime) : 0;
    if (cut > 0)
        ref = cut;
    double share = untimed && ref > 0 && mtime > ref ? (mtime - ref) / (double)untimed : 0;
    double placed = ref;
    size_t i;
    json_t *o;
    json_array_foreach(batch, i, o)
    {
        double at = json_number_value(json_object_get(o, "time"));
        if (!(own_dt(t, o) > 0) && !(at > 0)) {
            placed += share;
            metrics_row(t, o, share, share > 0 ? placed : 0);
        } else if (!(own_dt(t, o) > 0)) { /* a time, no step time */
            double prev = t->m_wall;
            int same = prev > 0 && at > prev && !start_between(t, prev, at);
            metrics_row(t, o, same ? at - prev : 0, 0);
            placed = at;
        } else {
            metrics_row(t, o, 0, 0);
            if (at > 0)
                placed = at;
        }
    }
    json_decref(batch);
    if (untimed && !(share > 0) && mtime > t->m_wall)
        t->m_wall = mtime; /* no birth time: the next read's rows are timed from here */
}

/* 2026-12-01T10:00:00Z, or with fractional seconds (…:00.250Z). */
static double parse_utc(const char *s)
{
    struct tm tm = {0};
    const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest)
        return 0;
    double frac = 0;
    if (*rest == '.') {
        char *end;
        frac = strtod(rest, &end);
        rest = end;
    }
    return *rest == 'Z' ? (double)timegm(&tm) + frac : 0;
}

/* A line the log rules match: a row (when they give a step or a loss and the
 * run writes no metrics.jsonl), a checkpoint save. A row's time is when it
 * was read (now) when the log is read as it grows, else unknown (placed by
 * its step time: a log read whole after the fact). */
static void rules_line(struct exp_track *t, struct exp_logrule *r, int n, const char *line,
                       int rows, double now, int live)
{
    for (int i = 0; i < n; i++) {
        double v[EXP_CAP_N];
        int have = exp_logrule_match(&r[i], line, v);
        if (have & (1 << EXP_CAP_CHECKPOINT))
            exp_seg_checkpoint(t, v[EXP_CAP_CHECKPOINT]);
        if (!rows || !(have & ((1 << EXP_CAP_STEP) | (1 << EXP_CAP_LOSS))))
            continue;
        int64_t step = have & (1 << EXP_CAP_STEP) ? (int64_t)v[EXP_CAP_STEP] : t->step + 1;
        double dt = have & (1 << EXP_CAP_STEP_TIME) ? v[EXP_CAP_STEP_TIME]
                    : t->tb_step > 0 && step > t->tb_step && now > t->tb_wall
                        ? (now - t->tb_wall) / (double)(step - t->tb_step)
                        : 0;
        exp_track_row(t, step, have & (1 << EXP_CAP_LOSS) ? v[EXP_CAP_LOSS] : NAN, 0, 0);
        row_time(t, dt);
        exp_seg_row(t, step, live ? now : 0, dt);
        t->tb_step = step, t->tb_wall = now, t->last_row = now;
        return; /* one row a line */
    }
}

/* The log's lines past the offset read before (it is only appended to): first
 * start, last end (0 again when a start follows it), starts, the steps reached
 * (progress lines, sampled every log_every steps) and resumed from, and what
 * the log rules take from the program's lines. */
static void read_log(struct exp_track *t, double now)
{
    struct stat sb;
    if (!t->log_path[0] || stat(t->log_path, &sb) < 0)
        return;
    if (sb.st_ino != t->log_ino || sb.st_size < t->log_off) {
        t->log_ino = sb.st_ino;
        t->log_off = 0;
        t->first_start = t->end = t->last_start = 0;
        t->starts = t->nsegs = t->stopped = 0;
        t->seg_time = 0;
    }
    if (sb.st_size == t->log_off)
        return;
    int live = t->log_off > 0; /* read as it grows: a line's time is now */
    FILE *f = open_file(t->log_path);
    if (!f || fseeko(f, t->log_off, SEEK_SET) < 0) {
        if (f)
            fclose(f);
        return;
    }
    struct exp_logrule rules[EXP_LOG_RULES];
    int nrules = 0;
    for (int i = 0; i < t->nlog_rules; i++)
        if (exp_logrule_compile(&rules[nrules], t->log_rules[i], NULL) == 0)
            nrules++;
    struct stat ms;
    int rows = t->log_rows && !(t->metrics_path[0] && stat(t->metrics_path, &ms) == 0);
    char line[EXP_LOGRULE_LINE_MAX]; /* a rule sees no longer line */
    while (fgets(line, sizeof(line), f)) {
        size_t n = strlen(line);
        if (line[n - 1] != '\n' && n == sizeof(line) - 1) {
            t->log_off += (off_t)n; /* a very long line: skip its pieces */
            continue;
        }
        if (line[n - 1] != '\n')
            break; /* being written: next time */
        t->log_off += (off_t)n;
        char ts[32];
        long long v, w;
        if (sscanf(line, "mtc: job %*s start %31s", ts) == 1) {
            if (!t->first_start)
                t->first_start = parse_utc(ts);
            t->last_start = parse_utc(ts);
            t->starts++;
            t->end = 0;
            t->rank_hung = 0;
            exp_seg_start(t, t->last_start);
        } else if (sscanf(line, "mtc: job %*s end %31[^,]", ts) == 1) {
            t->end = parse_utc(ts);
            exp_seg_end(t, t->end);
            if (!strstr(line, ", exit status")) /* a signal, a requeue: maybe a preemption */
                t->stopped++;
        } else if (strncmp(line, "mtc: ", 5) == 0 && strstr(line, ": hung\n")) {
            t->rank_hung = now; /* mtc-agent ranks: a process stopped or a zombie */
            snprintf(t->rank_msg, sizeof(t->rank_msg), "%.*s",
                     (int)(strstr(line, ": hung\n") - (line + 5)), line + 5);
        } else if (sscanf(line, "step %lld/%lld", &v, &w) == 2 ||
                   sscanf(line, "mtc-train: signal received, checkpointing at step %lld", &v) == 1) {
            exp_seg_step(t, v);
        } else {
            char *r = strstr(line, "mtc-train: resuming from ");
            char *p = r ? strstr(r, "(step ") : NULL;
            if (p && sscanf(p, "(step %lld)", &v) == 1)
                exp_seg_resume(t, v);
            else if (nrules && strncmp(line, "mtc: ", 5) != 0)
                rules_line(t, rules, nrules, line, rows, now, live);
        }
    }
    for (int i = 0; i < nrules; i++)
        exp_logrule_release(&rules[i]);
    fclose(f);
}

static void tb_scalar(void *arg, const struct mtc_scalar *s)
{
    struct exp_track *t = arg;
    int loss = 0;
    for (int i = 0; i < t->tb_ntags && !loss; i++)
        loss = strcmp(s->tag, t->tb_tags[i]) == 0;
    if (!loss)
        return;
    double dt = t->tb_step > 0 && s->step > t->tb_step && s->wall_time > t->tb_wall
                    ? (s->wall_time - t->tb_wall) / (double)(s->step - t->tb_step)
                    : 0;
    exp_track_row(t, s->step, s->value, 0, 0);
    row_time(t, dt);
    exp_seg_row(t, s->step, s->wall_time, dt);
    t->tb_step = s->step, t->tb_wall = s->wall_time;
}

/* The newest event file under dir (and one level below: writers put runs in
 * subdirectories) into best, its mtime into *when. */
static void newest_events(const char *dir, int depth, char *best, size_t len, double *when)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[PATH_MAX + 300];
        struct stat sb;
        int n = snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || n < 0 || (size_t)n >= len || stat(p, &sb) < 0)
            continue;
        if (S_ISDIR(sb.st_mode) && depth > 0)
            newest_events(p, depth - 1, best, len, when);
        else if (S_ISREG(sb.st_mode) && strstr(e->d_name, "tfevents") && sb.st_mtime >= *when)
            *when = (double)sb.st_mtime, memcpy(best, p, (size_t)n + 1);
    }
    if (d)
        closedir(d);
}

/* A custom task without metrics rows: its TensorBoard loss scalars are its
 * rows; the newest event file is read on from where the last read stopped
 * (a corrupt record ends what is read of that file). */
static void read_tensorboard(struct exp_track *t)
{
    struct stat sb;
    if (!t->tb_dir[0] || t->log_rows || stat(t->metrics_path, &sb) == 0) /* rows of its own */
        return;
    char file[sizeof(t->tb_file)] = "";
    double when = 0;
    newest_events(t->tb_dir, 1, file, sizeof(file), &when);
    if (!*file)
        return;
    if (strcmp(file, t->tb_file) != 0) /* a new file: a restart's writer */
        snprintf(t->tb_file, sizeof(t->tb_file), "%s", file), t->tb_off = 0;
    int corrupt;
    mtc_tfevents_read(t->tb_file, &t->tb_off, &corrupt, tb_scalar, t);
    t->tb_mtime = when;
}

void exp_track_update(struct exp_track *t, double now)
{
    read_log(t, now); /* first: a row falls into the start it came in */
    read_metrics(t);
    read_tensorboard(t);
    double stop = t->end > 0 ? t->end : now;
    t->wall_s = t->first_start > 0 && stop > t->first_start ? stop - t->first_start : 0;
    t->goodput = t->wall_s > 0 ? t->kept_s / t->wall_s : 0;
    if (t->goodput > 1)
        t->goodput = 1; /* whole-second start times against sub-second steps */
    t->restarts = t->starts > 0 ? t->starts - 1 : 0;
    t->lost = t->step > (int64_t)t->rows ? t->step - (int64_t)t->rows : 0;
    t->repeated = exp_seg_repeated(t);
    struct stat sb;
    if (t->metrics_path[0] && stat(t->metrics_path, &sb) == 0)
        t->last_row = (double)sb.st_mtime;
    else if (!t->log_rows)
        t->last_row = t->tb_mtime;
    exp_breakdown_update(t, now);
}

json_t *exp_track_json(const struct exp_track *t, int alerts, const char *msg)
{
    json_t *o = json_pack("{s:f, s:f, s:f, s:I, s:i, s:I, s:I}", "goodput", t->goodput,
                          "productiveSeconds", t->kept_s, "wallSeconds", t->wall_s, "step",
                          (json_int_t)t->step, "restarts", t->restarts, "stepsRepeated",
                          (json_int_t)t->repeated, "stepsLost", (json_int_t)t->lost);
    if (t->first_start > 0 || t->submit > 0)
        json_object_set_new(o, "breakdown", exp_breakdown_json(&t->bd));
    if (t->npreempt > 0) {
        json_t *a = json_array();
        char when[40];
        for (int i = 0; i < t->npreempt; i++) {
            json_t *p = json_pack(
                "{s:s}", "time",
                mtc_time_rfc3339((int64_t)(t->preempt[i].time * 1000), when, sizeof(when)));
            if (*t->preempt[i].by) /* not known without slurmctld's log */
                json_object_set_new(p, "slurmJobId", json_string(t->preempt[i].by));
            if (*t->preempt[i].qos)
                json_object_set_new(p, "qos", json_string(t->preempt[i].qos));
            json_array_append_new(a, p);
        }
        json_object_set_new(o, "preemptedBy", a);
        json_object_set_new(o, "preemptions", json_integer(t->bd.preemptions));
        json_object_set_new(o, "preemptedSeconds", json_real(t->bd.preempted_s));
    }
    if (t->rows > 0 && isfinite(t->loss))
        json_object_set_new(o, "loss", json_real(t->loss));
    if (t->rows > 0) {
        json_object_set_new(o, "tokensPerSecond", json_real(t->tokens_per_s));
        json_object_set_new(o, "mfu", json_real(t->mfu));
    }
    if (alerts) {
        json_t *a = json_array();
        for (int i = 0; i < 4; i++)
            if (alerts & (1 << i))
                json_array_append_new(a, json_string(exp_alert_name(1 << i)));
        json_object_set_new(o, "alerts", a);
        json_object_set_new(o, "alertMessage", json_string(msg));
    }
    return o;
}

void exp_track_print(FILE *f, const struct exp_track *t, int alerts, const char *msg)
{
    if (t->first_start == 0)
        return;
    fprintf(f, "- Goodput: %.1f%% (productive %.1f s of %.1f s since the first start)\n",
            100 * t->goodput, t->kept_s, t->wall_s);
    fprintf(f, "- Step: %lld, restarts %d, steps repeated %lld, steps lost %lld\n",
            (long long)t->step, t->restarts, (long long)t->repeated, (long long)t->lost);
    const struct exp_breakdown *b = &t->bd;
    fprintf(f,
            "- Time: %.1f s = queue %.1f + startup %.1f + productive %.1f + checkpoint %.1f + "
            "lost %.1f + restart %.1f + hang %.1f\n",
            b->total_s, b->queue_s, b->startup_s, b->productive_s, b->checkpoint_s, b->lost_s,
            b->restart_s, b->hang_s);
    for (int i = 0; i < t->npreempt; i++) {
        char what[160], when[40];
        exp_preempt_text(&t->preempt[i], what, sizeof(what));
        mtc_time_rfc3339((int64_t)(t->preempt[i].time * 1000), when, sizeof(when));
        fprintf(f, "- P%s at %s\n", what + 1, when); /* "- Preempted by 7 (qos high) at" */
    }
    if (t->npreempt > 0)
        fprintf(f, "- Preemptions: %d, %.1f s of the restart time waiting to run again\n",
                b->preemptions, b->preempted_s);
    if (alerts)
        fprintf(f, "- Problem: %s\n", msg);
}
