/* detect: early problem detection over a run's metrics rows (exp_track,
 * goodput.c) — a NaN/Inf loss, a loss spike by robust z-score against the
 * window's median, a throughput drop against the run's median, a stall (no
 * row for stall_factor times the median step time). mtcd's job monitor and
 * every refresh judge each row once (exp_monitor_scan); `mtc experiment
 * status` and /metrics show what holds now (exp_monitor_check). */
#include "experiment/experiment.h"
#include "health/health.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Median of n values (copied: v is left as it is); 0 for none. */
static double cmp_median(const double *v, size_t n)
{
    double c[EXP_TRACK_RING];
    if (n == 0 || n > EXP_TRACK_RING)
        return 0;
    memcpy(c, v, n * sizeof(*c));
    return health_median(c, (int)n);
}

const struct exp_monitor exp_monitor_default = {.window = 50,
                                                .spike_z = 6.0,
                                                .drop_fraction = 0.5,
                                                .stall_factor = 10.0,
                                                .min_rows = 10,
                                                .hang_timeout_s = 0,
                                                .max_restarts = 3};

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
        m->stall_factor = json_number_value(v), m->stall_hangs = 1;
    if ((v = json_object_get(o, "min_rows")) && json_is_integer(v))
        m->min_rows = (int)json_integer_value(v);
    if ((v = json_object_get(o, "hang_timeout_s")) && json_is_number(v))
        m->hang_timeout_s = json_number_value(v);
    if ((v = json_object_get(o, "max_restarts")) && json_is_integer(v))
        m->max_restarts = (int)json_integer_value(v);
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
    /* rows since the last pass: a stall raised before has ended, and one seen
     * now is a new stall, with its own event naming its step */
    if (t->rows > *seen_rows)
        *raised &= ~EXP_ALERT_STALL;
    *seen_rows = t->rows;
    judge(t, m, now, EXP_ALERT_STALL, raised, fn, arg);
}
