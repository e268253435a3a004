/* preempt: a run's preemptions — which job took its nodes, of which QoS,
 * and when (slurm_job_preemptions: slurmctld's log names the preemptor) —
 * for `mtc experiment status`, the trainingJob's progress and mtcd's
 * TRAINING_PREEMPTED events; the breakdown (breakdown.c) tells their
 * restart gaps apart from other restarts' by these times. */
#include "experiment/experiment.h"
#include "slurm/slurm.h"

#include <stdio.h>
#include <string.h>

int exp_track_preemptions(struct exp_track *t, const json_t *cfg, double now)
{
    const char *job = exp_job_id(cfg), *conf = NULL;
    if (!job || exp_is_local(cfg) || exp_slurm_conf(cfg, &conf) < 0)
        return -1;
    struct slurm_preemption p[EXP_PREEMPTS];
    int n = slurm_job_preemptions(conf, job, p, EXP_PREEMPTS, NULL);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        t->preempt[i].time = p[i].time;
        snprintf(t->preempt[i].by, sizeof(t->preempt[i].by), "%s", p[i].by);
        snprintf(t->preempt[i].qos, sizeof(t->preempt[i].qos), "%s", p[i].qos);
    }
    t->npreempt = n;
    exp_breakdown_update(t, now);
    return n;
}

const char *exp_preempt_text(const struct exp_preempt *p, char *buf, size_t len)
{
    if (!*p->by) /* sacct's PREEMPTED attempt: slurmctld's log was not readable */
        snprintf(buf, len, "preempted (by a job only slurmctld's log names)");
    else if (*p->qos)
        snprintf(buf, len, "preempted by %s (qos %s)", p->by, p->qos);
    else
        snprintf(buf, len, "preempted by %s", p->by);
    return buf;
}
