/* goodput: a run's effective training time ratio — the time of the steps that
 * were kept (Σ tokens per step ÷ tokens/s over metrics.jsonl) ÷ the wall time
 * from the job's first start (its log's first "mtc: job N start") to its end
 * or now — with restarts and steps lost and repeated; and early problem
 * detection over the same rows (NaN/Inf loss, loss spike by robust z-score,
 * throughput drop against the run's median, a stall). bench/chaos.sh, `mtc
 * experiment status` and mtcd's /metrics all use exp_track. metrics.jsonl is
 * read from the last offset on (a resume rewrites it: new inode → reread). */
#include "recipes/recipes.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *sget(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of n values (copied: v is left as it is); 0 for none. */
static double cmp_median(const double *v, size_t n)
{
    double c[EXP_TRACK_RING];
    if (n == 0 || n > EXP_TRACK_RING)
        return 0;
    memcpy(c, v, n * sizeof(*c));
    qsort(c, n, sizeof(*c), dcmp);
    return n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
}

void exp_track_init(struct exp_track *t, const json_t *cfg)
{
    memset(t, 0, sizeof(*t));
    const json_t *tr = json_object_get(cfg, "train");
    double b = (double)json_integer_value(json_object_get(tr, "global_batch"));
    double s = (double)json_integer_value(json_object_get(tr, "seq_length"));
    t->tok_per_step = b * s;
    if (sget(cfg, "logDir"))
        snprintf(t->metrics_path, sizeof(t->metrics_path), "%s/metrics.jsonl", sget(cfg, "logDir"));
    exp_log_path(cfg, t->log_path, sizeof(t->log_path));
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

/* The rows of metrics.jsonl past the offset read before (all of it when the
 * file was replaced or shrank). */
static void read_metrics(struct exp_track *t)
{
    struct stat sb;
    if (!t->metrics_path[0] || stat(t->metrics_path, &sb) < 0)
        return;
    if (sb.st_ino != t->ino || sb.st_size < t->off) {
        t->ino = sb.st_ino;
        t->off = 0;
        t->rows = t->step = t->nonfinite = 0;
        t->kept_s = 0;
        t->ring_n = t->ring_pos = 0;
    }
    FILE *f = fopen(t->metrics_path, "r");
    if (!f || fseeko(f, t->off, SEEK_SET) < 0) {
        if (f)
            fclose(f);
        return;
    }
    char line[8192];
    while (fgets(line, sizeof(line), f)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n')
            break; /* a line still being written: next time */
        t->off += (off_t)n;
        json_t *o = json_loads(line, 0, NULL);
        if (!o)
            continue;
        json_t *l = json_object_get(o, "loss");
        double loss = json_is_number(l) ? json_number_value(l) : NAN;
        exp_track_row(t, json_integer_value(json_object_get(o, "step")), loss,
                      json_number_value(json_object_get(o, "tokens_per_s")),
                      json_number_value(json_object_get(o, "mfu")));
        json_decref(o);
    }
    fclose(f);
}

static double parse_utc(const char *s)
{
    struct tm tm = {0};
    if (!strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm))
        return 0;
    return (double)timegm(&tm);
}

/* The log's lines past the offset read before (it is only appended to): first
 * start, last end (0 again when a start follows it), starts, and steps
 * repeated: per resume, the highest step seen before it (progress lines,
 * sampled every log_every steps) less the step resumed from. */
static void read_log(struct exp_track *t)
{
    struct stat sb;
    if (!t->log_path[0] || stat(t->log_path, &sb) < 0)
        return;
    if (sb.st_ino != t->log_ino || sb.st_size < t->log_off) {
        t->log_ino = sb.st_ino;
        t->log_off = 0;
        t->first_start = t->end = 0;
        t->starts = 0;
        t->repeated = t->seg_max = 0;
    }
    FILE *f = fopen(t->log_path, "r");
    if (!f || fseeko(f, t->log_off, SEEK_SET) < 0) {
        if (f)
            fclose(f);
        return;
    }
    char line[4096];
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
            t->starts++;
            t->end = 0;
        } else if (sscanf(line, "mtc: job %*s end %31[^,]", ts) == 1) {
            t->end = parse_utc(ts);
        } else if (sscanf(line, "step %lld/%lld", &v, &w) == 2 ||
                   sscanf(line, "mtc-train: signal received, checkpointing at step %lld", &v) == 1) {
            if (v > t->seg_max)
                t->seg_max = v;
        } else {
            char *r = strstr(line, "mtc-train: resuming from ");
            char *p = r ? strstr(r, "(step ") : NULL;
            if (p && sscanf(p, "(step %lld)", &v) == 1) {
                if (t->seg_max > v)
                    t->repeated += t->seg_max - v;
                t->seg_max = v;
            }
        }
    }
    fclose(f);
}

void exp_track_update(struct exp_track *t, double now)
{
    read_metrics(t);
    read_log(t);
    double stop = t->end > 0 ? t->end : now;
    t->wall_s = t->first_start > 0 && stop > t->first_start ? stop - t->first_start : 0;
    t->goodput = t->wall_s > 0 ? t->kept_s / t->wall_s : 0;
    if (t->goodput > 1)
        t->goodput = 1; /* whole-second start times against sub-second steps */
    t->restarts = t->starts > 0 ? t->starts - 1 : 0;
    t->lost = t->step > (int64_t)t->rows ? t->step - (int64_t)t->rows : 0;
    struct stat sb;
    t->last_row = t->metrics_path[0] && stat(t->metrics_path, &sb) == 0 ? (double)sb.st_mtime : 0;
}

const struct exp_monitor exp_monitor_default = {
    .window = 50, .spike_z = 6.0, .drop_fraction = 0.5, .stall_factor = 10.0, .min_rows = 10};

int exp_monitor_check(const struct exp_track *t, const struct exp_monitor *m, double now,
                      char *msg, size_t len)
{
    int found = 0;
    msg[0] = '\0';
#define SAY(bit, ...)                                                                              \
    do {                                                                                           \
        if (!found)                                                                                \
            snprintf(msg, len, __VA_ARGS__);                                                       \
        found |= (bit);                                                                            \
    } while (0)
    if (t->rows > 0 && !isfinite(t->loss))
        SAY(EXP_ALERT_NONFINITE, "loss is %s at step %lld", isnan(t->loss) ? "NaN" : "Inf",
            (long long)t->step);
    size_t n = t->ring_n;
    if (n < (size_t)m->min_rows + 1)
        return found;
    size_t w = n - 1 < (size_t)m->window ? n - 1 : (size_t)m->window;
    double win[EXP_TRACK_RING], dev[EXP_TRACK_RING];
    /* the newest row is at (pos + n - 1) % RING; the window is the w before it */
    size_t newest = (t->ring_pos + n - 1) % EXP_TRACK_RING;
    size_t k = 0;
    for (size_t j = 1; j <= w; j++) {
        double v = t->ring_loss[(newest + EXP_TRACK_RING - j) % EXP_TRACK_RING];
        if (isfinite(v))
            win[k++] = v;
    }
    double cur = t->ring_loss[newest];
    if (k >= (size_t)m->min_rows && isfinite(cur)) {
        double med = cmp_median(win, k);
        for (size_t j = 0; j < k; j++)
            dev[j] = fabs(win[j] - med);
        double mad = cmp_median(dev, k) * 1.4826;
        double z = mad > 1e-12 ? (cur - med) / mad : 0;
        if (z > m->spike_z)
            SAY(EXP_ALERT_SPIKE,
                "loss spike at step %lld: %.4g against a median of %.4g over %zu steps "
                "(robust z %.1f > %.1f)",
                (long long)t->step, cur, med, k, z, m->spike_z);
    }
    double tps_med = cmp_median(t->ring_tps, n), dt_med = cmp_median(t->ring_dt, n);
    double tps_cur = t->ring_tps[newest];
    if (tps_med > 0 && tps_cur < m->drop_fraction * tps_med)
        SAY(EXP_ALERT_DROP, "throughput drop at step %lld: %.0f tokens/s, %.0f%% of the run's median %.0f",
            (long long)t->step, tps_cur, 100 * tps_cur / tps_med, tps_med);
    if (t->end == 0 && dt_med > 0 && t->last_row > 0 &&
        now - t->last_row > m->stall_factor * dt_med && now - t->last_row > 1)
        SAY(EXP_ALERT_STALL, "stalled: no step for %.0f s after step %lld (%.0fx the median step time %.2f s)",
            now - t->last_row, (long long)t->step, (now - t->last_row) / dt_med, dt_med);
#undef SAY
    return found;
}

void exp_monitor_from(const json_t *cfg, struct exp_monitor *m)
{
    *m = exp_monitor_default;
    const json_t *o = json_object_get(cfg, "monitor");
    const json_t *v;
    if ((v = json_object_get(o, "spike_z")) && json_is_number(v))
        m->spike_z = json_number_value(v);
    if ((v = json_object_get(o, "spike_window")) && json_is_integer(v))
        m->window = (int)json_integer_value(v);
    if ((v = json_object_get(o, "throughput_drop")) && json_is_number(v))
        m->drop_fraction = json_number_value(v);
    if ((v = json_object_get(o, "stall_factor")) && json_is_number(v))
        m->stall_factor = json_number_value(v);
    if ((v = json_object_get(o, "min_rows")) && json_is_integer(v))
        m->min_rows = (int)json_integer_value(v);
}

static const char *const alert_names[] = {"NONFINITE", "LOSS_SPIKE", "THROUGHPUT_DROP", "STALL"};

const char *exp_alert_name(int kind)
{
    for (int i = 0; i < 4; i++)
        if (kind == (1 << i))
            return alert_names[i];
    return "UNKNOWN";
}

/* The alerts in mask that t raises; those not yet in *raised go to fn, each
 * with its own message (the other detectors switched off). */
static void judge(const struct exp_track *t, const struct exp_monitor *m, double now, int mask,
                  int *raised, void (*fn)(void *, int, const char *), void *arg)
{
    char msg[256];
    int a = exp_monitor_check(t, m, now, msg, sizeof(msg)) & mask;
    for (int bit = 1; bit <= EXP_ALERT_STALL; bit <<= 1) {
        if (!(a & bit) || (*raised & bit))
            continue;
        struct exp_monitor one = *m;
        if (bit != EXP_ALERT_SPIKE)
            one.spike_z = INFINITY;
        if (bit != EXP_ALERT_DROP)
            one.drop_fraction = 0;
        if (bit != EXP_ALERT_STALL)
            one.stall_factor = INFINITY;
        exp_monitor_check(t, &one, now, msg, sizeof(msg));
        fn(arg, bit, msg);
    }
    *raised = (*raised & ~mask) | a;
}

void exp_monitor_scan(const struct exp_track *t, const struct exp_monitor *m, double now,
                      int64_t *seen_rows, int *raised,
                      void (*fn)(void *arg, int kind, const char *msg), void *arg)
{
    if (t->rows < *seen_rows) /* metrics.jsonl was replaced: read again from its start */
        *seen_rows = 0;
    int64_t from = *seen_rows;
    if (t->rows - from > (int64_t)t->ring_n)
        from = t->rows - (int64_t)t->ring_n;
    struct exp_track *c = from < t->rows ? malloc(sizeof(*c)) : NULL;
    struct exp_monitor rows_only = *m;
    rows_only.stall_factor = INFINITY;
    for (int64_t r = from + 1; c && r <= t->rows; r++) {
        /* the track as it was when row r was the newest (its window included) */
        *c = *t;
        c->ring_n = t->ring_n - (size_t)(t->rows - r);
        size_t newest = (c->ring_pos + c->ring_n - 1) % EXP_TRACK_RING;
        c->loss = c->ring_loss[newest];
        c->tokens_per_s = c->ring_tps[newest];
        c->step = c->ring_step[newest];
        c->rows = r;
        judge(c, &rows_only, now, ~EXP_ALERT_STALL, raised, fn, arg);
    }
    free(c);
    *seen_rows = t->rows;
    judge(t, m, now, EXP_ALERT_STALL, raised, fn, arg);
}

json_t *exp_track_json(const struct exp_track *t, int alerts, const char *msg)
{
    json_t *o = json_pack("{s:f, s:f, s:f, s:I, s:i, s:I, s:I}", "goodput", t->goodput,
                          "productiveSeconds", t->kept_s, "wallSeconds", t->wall_s, "step",
                          (json_int_t)t->step, "restarts", t->restarts, "stepsRepeated",
                          (json_int_t)t->repeated, "stepsLost", (json_int_t)t->lost);
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
                json_array_append_new(a, json_string(alert_names[i]));
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
    if (alerts)
        fprintf(f, "- Problem: %s\n", msg);
}
