/* breakdown: where a run's time went (issue 30, point 5) — queue, startup,
 * productive steps, checkpoint saves, lost work, restart gaps and hangs,
 * parts that sum to the time since the job was submitted. The run's log
 * gives its starts (segments) and ends, its progress rows (metrics.jsonl,
 * TensorBoard events or log rules, each with its time) fall into the start
 * they came in, and each segment [start, end] is cut at its first step's
 * beginning and its last row:
 *
 *   start ── startup ── first step ── steps, saves ── last row ── tail ── end ── gap ── next start
 *
 * A segment that was followed by another start lost the steps past the one
 * the next resumed from, plus the step in flight; its tail beyond one step
 * time is a hang (no progress while it held the nodes). The last segment's
 * tail is the final save and exit once it ended, a hang (beyond a step
 * time) while it runs. A start that ended in a preemption (the run's
 * preempt[], from Slurm) is a restart like the others — its work past the
 * checkpoint is lost, its gap restart time — and is also counted apart:
 * preemptions, and preempted_s, the part of restart_s its gaps took. */
#include "experiment/experiment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static struct exp_seg *cur(struct exp_track *t)
{
    return t->nsegs > 0 ? &t->segs[t->nsegs - 1] : NULL;
}

void exp_seg_start(struct exp_track *t, double when)
{
    if (t->nsegs == EXP_SEGS) { /* very many restarts: the last start absorbs the newest */
        t->segs[EXP_SEGS - 1].end = 0;
        return;
    }
    struct exp_seg *s = &t->segs[t->nsegs++];
    memset(s, 0, sizeof(*s));
    s->start = when;
    s->resume = -1;
}

void exp_seg_end(struct exp_track *t, double when)
{
    struct exp_seg *s = cur(t);
    if (s && when >= s->start)
        s->end = when;
}

void exp_seg_row(struct exp_track *t, int64_t step, double time, double dt)
{
    if (t->nsegs == 0 || (time > 0 && time <= t->seg_time))
        return; /* before any start, or counted already (a rewritten file reread) */
    int i = t->nsegs - 1;
    if (time > 0) /* the start it came in (start lines have whole seconds) */
        while (i > 0 && time + 1 < t->segs[i].start)
            i--;
    struct exp_seg *s = &t->segs[i];
    if (!(dt > 0))
        dt = 0;
    if (!(time > 0)) /* no time of its own: its step time after the last row */
        time = (s->nrows ? s->last : s->start) + dt;
    else
        t->seg_time = time;
    if (s->nrows++ == 0) {
        s->first = time, s->first_dt = dt, s->first_step = step;
    }
    if (time > s->last)
        s->last = time;
    if (step > s->max_step)
        s->max_step = step;
}

void exp_seg_step(struct exp_track *t, int64_t step)
{
    struct exp_seg *s = cur(t);
    if (s && step > s->max_step)
        s->max_step = step;
}

void exp_seg_resume(struct exp_track *t, int64_t step)
{
    struct exp_seg *s = cur(t);
    if (s)
        s->resume = step;
}

void exp_seg_checkpoint(struct exp_track *t, double seconds)
{
    struct exp_seg *s = cur(t);
    if (s && seconds > 0 && isfinite(seconds))
        s->ckpt_s += seconds;
}

/* The step segment i resumed from: said in its log, else the step before its
 * first row (-1: not known yet). */
static int64_t resumed_from(const struct exp_seg *s)
{
    return s->resume >= 0 ? s->resume : s->nrows ? s->first_step - 1 : -1;
}

/* Steps segment i did that the next one did again. */
static int64_t lost_steps(const struct exp_track *t, int i)
{
    int64_t r = i + 1 < t->nsegs ? resumed_from(&t->segs[i + 1]) : -1;
    return r >= 0 && t->segs[i].max_step > r ? t->segs[i].max_step - r : 0;
}

int64_t exp_seg_repeated(const struct exp_track *t)
{
    int64_t n = 0;
    for (int i = 0; i + 1 < t->nsegs; i++)
        n += lost_steps(t, i);
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double exp_track_step_time(const struct exp_track *t)
{
    double v[EXP_TRACK_RING];
    size_t n = 0;
    for (size_t i = 0; i < t->ring_n; i++)
        if (t->ring_dt[i] > 0)
            v[n++] = t->ring_dt[i];
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(v[0]), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* 1 when segment i ended in one of the run's preemptions (one that came
 * after its start and before the next). */
static int preempted(const struct exp_track *t, int i)
{
    for (int k = 0; k < t->npreempt; k++)
        if (exp_track_attempt(t, t->preempt[k].time) == i + 1)
            return 1;
    return 0;
}

static double clamp(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

int exp_track_attempt(const struct exp_track *t, double when)
{
    int a = 0;
    /* start lines have whole seconds, slurmctld's milliseconds */
    for (int i = 0; i < t->nsegs; i++)
        if (t->segs[i].start <= when + 1)
            a = i + 1;
    return a;
}

void exp_breakdown_update(struct exp_track *t, double now)
{
    struct exp_breakdown *b = &t->bd;
    memset(b, 0, sizeof(*b));
    if (t->nsegs == 0) { /* not started: queued since it was submitted */
        if (t->submit > 0 && now > t->submit)
            b->queue_s = b->total_s = now - t->submit;
        return;
    }
    double med = exp_track_step_time(t);
    for (int i = 0; i < t->nsegs; i++) {
        const struct exp_seg *s = &t->segs[i];
        int last = i + 1 == t->nsegs;
        double next = last ? 0 : t->segs[i + 1].start;
        double e = s->end > 0 ? s->end : last ? now : next;
        e = last ? (e > s->start ? e : s->start) : clamp(e, s->start, next);
        if (!last)
            b->restart_s += next - e;
        if (preempted(t, i)) { /* its restart gap: waiting while another job had the nodes */
            b->preemptions++;
            b->preempted_s += last ? 0 : next - e;
        }
        if (s->nrows == 0) { /* it made no step: all of it was starting */
            b->startup_s += e - s->start;
            continue;
        }
        double a = clamp(s->first - s->first_dt, s->start, e), z = clamp(s->last, a, e);
        double step = med > 0 ? med : (z - a) / (double)s->nrows;
        double w = e - a, tail = e - z, lost = 0, hang = 0, ckpt = s->ckpt_s;
        b->startup_s += a - s->start;
        if (!last) { /* interrupted: its work past the resumed step, and the idle tail */
            lost = fmin(w, (double)(lost_steps(t, i) + 1) * step);
            hang = fmin(w - lost, fmax(0, tail - step));
        } else if (s->end > 0) { /* ended: the final save and exit */
            ckpt += tail;
        } else { /* running: a step overdue is hanging */
            hang = fmin(w, fmax(0, tail - step));
        }
        ckpt = fmin(ckpt, w - lost - hang);
        b->lost_s += lost;
        b->hang_s += hang;
        b->checkpoint_s += ckpt;
        b->productive_s += w - lost - hang - ckpt;
    }
    const struct exp_seg *l = &t->segs[t->nsegs - 1];
    double end = l->end > 0 ? l->end : now;
    if (end < l->start)
        end = l->start;
    double first = t->segs[0].start;
    if (t->submit > 0 && first > t->submit)
        b->queue_s = first - t->submit;
    b->total_s = b->queue_s + (end - first);
}

json_t *exp_breakdown_json(const struct exp_breakdown *b)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "queueSeconds", b->queue_s,
                     "startupSeconds", b->startup_s, "productiveSeconds", b->productive_s,
                     "checkpointSeconds", b->checkpoint_s, "lostSeconds", b->lost_s,
                     "restartSeconds", b->restart_s, "hangSeconds", b->hang_s, "totalSeconds",
                     b->total_s);
}
