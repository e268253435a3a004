/* gen: continuous batching over a KV cache — a FIFO queue of requests, nslots running
 * sequences, one model_decode per step over the next token of each running sequence plus
 * prompt chunks of the ones still reading their prompt; and the sampler. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/gen.h"
#include "train/rng.h"

struct gen_engine {
    struct model *m;
    struct model_kv *kv;
    int nslots, ctx, V, Vp;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct gen_seq *qhead, *qtail; // queue (under mu)
    int nqueued;
    struct gen_seq **run; // (nslots) running sequence of each slot, NULL when free
    int nrunning;         // under mu (run[] itself belongs to the stepping thread)
    int woken;
    double prompt_tokens, generated_tokens, steps;
    long positions;
    // step buffers
    int32_t *tok, *slot, *pos;
    uint8_t *want;
    float *logits;  // (nslots, Vp)
    float *scratch; // (2 V)
};

double gen_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void gen_seq_release(struct gen_seq *q)
{
    if (!q)
        return;
    free(q->out);
    free(q->logprob);
    q->out = NULL;
    q->logprob = NULL;
    q->nout = q->cap = 0;
}

struct gen_engine *gen_create(struct model *m, int nslots, int ctx, mtc_error_t *err)
{
    struct gen_engine *e = calloc(1, sizeof *e);
    if (!e) {
        errprintf(err, "out of memory");
        return NULL;
    }
    const struct model_config *c = model_cfg(m);
    e->m = m;
    e->nslots = nslots;
    e->ctx = ctx;
    e->V = c->vocab_size;
    e->Vp = c->padded_vocab;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->kv = model_kv_create(m, nslots, ctx, err);
    if (!e->kv)
        goto error;
    int rows = GEN_STEP_TOKENS > nslots ? GEN_STEP_TOKENS : nslots;
    e->run = calloc(nslots, sizeof *e->run);
    e->tok = malloc(rows * sizeof(int32_t));
    e->slot = malloc(rows * sizeof(int32_t));
    e->pos = malloc(rows * sizeof(int32_t));
    e->want = malloc(rows);
    e->logits = malloc((size_t)nslots * e->Vp * sizeof(float));
    e->scratch = malloc(2 * (size_t)e->V * sizeof(float));
    if (!e->run || !e->tok || !e->slot || !e->pos || !e->want || !e->logits || !e->scratch) {
        errno = ENOMEM;
        errprintf(err, "out of memory for the generation engine");
        goto error;
    }
    return e;
error:
    gen_destroy(e);
    return NULL;
}

void gen_destroy(struct gen_engine *e)
{
    if (!e)
        return;
    int en = errno;
    model_kv_destroy(e->kv);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->run);
    free(e->tok);
    free(e->slot);
    free(e->pos);
    free(e->want);
    free(e->logits);
    free(e->scratch);
    free(e);
    errno = en;
}

int gen_submit(struct gen_engine *e, struct gen_seq *q, mtc_error_t *err)
{
    const struct gen_sampling *s = &q->s;
    errno = EINVAL;
    if (q->nprompt < 1)
        return errprintf(err, "the prompt is empty");
    if (q->nprompt >= e->ctx)
        return errprintf(err, "the prompt has %d tokens; the context holds %d (with at least "
                              "one to generate)", q->nprompt, e->ctx);
    if (s->max_tokens < 1)
        return errprintf(err, "max_tokens must be at least 1");
    if ((long)q->nprompt + s->max_tokens > e->ctx)
        return errprintf(err, "the prompt (%d tokens) plus max_tokens (%d) is longer than the "
                              "context (%d)", q->nprompt, s->max_tokens, e->ctx);
    if (!(s->temperature >= 0 && s->temperature <= 100))
        return errprintf(err, "temperature must be in [0, 100]");
    if (!(s->top_p > 0 && s->top_p <= 1))
        return errprintf(err, "top_p must be in (0, 1]");
    if (s->top_k < 0)
        return errprintf(err, "top_k must be >= 0");
    for (int i = 0; i < q->nprompt; i++)
        if (q->prompt[i] < 0 || q->prompt[i] >= e->V)
            return errprintf(err, "prompt token %d is %d, outside the vocabulary (%d)", i,
                             q->prompt[i], e->V);
    q->out = malloc(sizeof(int32_t) * s->max_tokens);
    q->logprob = malloc(sizeof(float) * s->max_tokens);
    if (!q->out || !q->logprob) {
        gen_seq_release(q);
        errno = ENOMEM;
        return errprintf(err, "out of memory");
    }
    q->cap = s->max_tokens;
    q->nout = 0;
    q->finish = GEN_RUNNING;
    q->slot = -1;
    q->ncached = 0;
    q->rng = s->seed;
    q->cancel = 0;
    q->next = NULL;
    q->t_submit = gen_now();
    q->t_first = q->t_done = 0;
    pthread_mutex_lock(&e->mu);
    if (e->qtail)
        e->qtail->next = q;
    else
        e->qhead = q;
    e->qtail = q;
    e->nqueued++;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

void gen_cancel(struct gen_engine *e, struct gen_seq *q)
{
    pthread_mutex_lock(&e->mu);
    q->cancel = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

int gen_wait(struct gen_engine *e)
{
    pthread_mutex_lock(&e->mu);
    while (!e->nqueued && !e->nrunning && !e->woken)
        pthread_cond_wait(&e->cv, &e->mu);
    int work = e->nqueued || e->nrunning;
    e->woken = 0;
    pthread_mutex_unlock(&e->mu);
    return work;
}

void gen_wake(struct gen_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->woken = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static int32_t token_at(const struct gen_seq *q, int i)
{
    return i < q->nprompt ? q->prompt[i] : q->out[i - q->nprompt];
}

/* Take q out of its slot (or the queue has already dropped it) and tell its owner. */
static void retire(struct gen_engine *e, struct gen_seq *q, enum gen_finish why)
{
    q->finish = why;
    q->t_done = gen_now();
    pthread_mutex_lock(&e->mu);
    if (q->slot >= 0) {
        e->run[q->slot] = NULL;
        e->nrunning--;
        e->positions -= q->ncached;
    }
    pthread_mutex_unlock(&e->mu);
    q->slot = -1;
    if (q->on_done)
        q->on_done(q);
}

/* Queue → free slots, first come first served; cancelled queued requests leave. */
static void admit(struct gen_engine *e)
{
    struct gen_seq *dropped = NULL;
    pthread_mutex_lock(&e->mu);
    for (int s = 0; s < e->nslots;) {
        struct gen_seq *q = e->qhead;
        if (!q)
            break;
        if (e->run[s]) {
            s++;
            continue;
        }
        e->qhead = q->next;
        if (!e->qhead)
            e->qtail = NULL;
        e->nqueued--;
        if (q->cancel) {
            q->next = dropped;
            dropped = q;
            continue;
        }
        q->slot = s;
        e->run[s] = q;
        e->nrunning++;
        e->prompt_tokens += q->nprompt;
    }
    // a cancelled request still in the queue leaves it now, slot or not
    for (struct gen_seq **p = &e->qhead; *p;) {
        struct gen_seq *q = *p;
        if (q->cancel) {
            *p = q->next;
            if (e->qtail == q)
                e->qtail = NULL;
            e->nqueued--;
            q->next = dropped;
            dropped = q;
        } else {
            e->qtail = q;
            p = &q->next;
        }
    }
    pthread_mutex_unlock(&e->mu);
    while (dropped) {
        struct gen_seq *q = dropped;
        dropped = q->next;
        retire(e, q, GEN_CANCELLED);
    }
}

int gen_step(struct gen_engine *e, mtc_error_t *err)
{
    admit(e);
    for (int s = 0; s < e->nslots; s++)
        if (e->run[s] && e->run[s]->cancel)
            retire(e, e->run[s], GEN_CANCELLED);
    // rows: the next token of every sequence past its prompt, then prompt chunks
    int n = 0, budget = GEN_STEP_TOKENS > e->nslots ? GEN_STEP_TOKENS : e->nslots;
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < e->nslots; s++) {
            struct gen_seq *q = e->run[s];
            if (!q)
                continue;
            int total = q->nprompt + q->nout, reading = q->ncached < q->nprompt;
            if (reading != pass || q->ncached >= total)
                continue;
            int take = total - q->ncached;
            if (take > budget - n)
                take = budget - n;
            for (int i = 0; i < take; i++) {
                e->tok[n] = token_at(q, q->ncached + i);
                e->slot[n] = s;
                e->pos[n] = q->ncached + i;
                e->want[n] = q->ncached + i == total - 1;
                n++;
            }
        }
    if (n == 0) {
        pthread_mutex_lock(&e->mu);
        int left = e->nqueued + e->nrunning;
        pthread_mutex_unlock(&e->mu);
        return left;
    }
    if (model_decode(e->m, e->kv, e->tok, e->slot, e->pos, e->want, n, e->logits, err) < 0) {
        for (int s = 0; s < e->nslots; s++)
            if (e->run[s])
                retire(e, e->run[s], GEN_CANCELLED);
        return -1;
    }
    double gen = 0;
    long cached = 0;
    for (int i = 0, w = 0; i < n; i++) {
        struct gen_seq *q = e->run[e->slot[i]];
        q->ncached++;
        cached++;
        if (!e->want[i])
            continue;
        const float *lg = e->logits + (size_t)w++ * e->Vp;
        float lp;
        int32_t t = gen_sample(lg, e->V, &q->s, &q->rng, e->scratch, &lp);
        q->out[q->nout] = t;
        q->logprob[q->nout] = lp;
        q->nout++;
        gen++;
        if (q->nout == 1)
            q->t_first = gen_now();
        int stop = q->on_token ? q->on_token(q, t, lp) : 0;
        if (stop || t == q->eot) {
            pthread_mutex_lock(&e->mu);
            e->positions += cached, cached = 0;
            pthread_mutex_unlock(&e->mu);
            retire(e, q, GEN_STOP);
        } else if (q->nout >= q->s.max_tokens || q->nprompt + q->nout >= e->ctx) {
            pthread_mutex_lock(&e->mu);
            e->positions += cached, cached = 0;
            pthread_mutex_unlock(&e->mu);
            retire(e, q, GEN_LENGTH);
        }
    }
    pthread_mutex_lock(&e->mu);
    e->positions += cached;
    e->generated_tokens += gen;
    e->steps++;
    int left = e->nqueued + e->nrunning;
    pthread_mutex_unlock(&e->mu);
    return left;
}

int gen_run(struct gen_engine *e, struct gen_seq *const *seqs, int n, mtc_error_t *err)
{
    for (int i = 0; i < n; i++)
        if (gen_submit(e, seqs[i], err) < 0) {
            for (int j = 0; j < i; j++)
                gen_cancel(e, seqs[j]);
            while (gen_step(e, NULL) > 0)
                ;
            return -1;
        }
    int left;
    while ((left = gen_step(e, err)) > 0)
        ;
    return left < 0 ? -1 : 0;
}

void gen_get_stats(struct gen_engine *e, struct gen_stats *st)
{
    pthread_mutex_lock(&e->mu);
    st->running = e->nrunning;
    st->queued = e->nqueued;
    st->slots = e->nslots;
    st->ctx = e->ctx;
    st->positions_used = e->positions;
    st->prompt_tokens = e->prompt_tokens;
    st->generated_tokens = e->generated_tokens;
    st->steps = e->steps;
    st->kv_bytes = model_kv_bytes(e->kv);
    pthread_mutex_unlock(&e->mu);
}

static int desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int gen_sample(const float *lg, int V, const struct gen_sampling *s, uint64_t *rng,
               float *scratch, float *logprob)
{
    float mx = lg[0];
    int arg = 0;
    for (int v = 1; v < V; v++)
        if (lg[v] > mx) {
            mx = lg[v];
            arg = v;
        }
    double z = 0;
    for (int v = 0; v < V; v++)
        z += exp((double)lg[v] - mx);
    double lz = mx + log(z);
    int next = arg;
    if (s->temperature > 0) {
        // the same draw as mtc-train sample: u uniform in [0, sum), first cumulative > u
        float *prob = scratch, *sorted = scratch + V;
        double sum = 0;
        for (int v = 0; v < V; v++)
            sum += prob[v] = expf((lg[v] - mx) / s->temperature);
        if ((s->top_k > 0 && s->top_k < V) || s->top_p < 1) {
            memcpy(sorted, prob, sizeof(float) * V);
            qsort(sorted, V, sizeof(float), desc);
            float thr = 0;
            if (s->top_k > 0 && s->top_k < V)
                thr = sorted[s->top_k - 1];
            if (s->top_p < 1) {
                double acc = 0;
                for (int i = 0; i < V; i++)
                    if ((acc += sorted[i]) >= s->top_p * sum) {
                        thr = sorted[i] > thr ? sorted[i] : thr;
                        break;
                    }
            }
            sum = 0;
            for (int v = 0; v < V; v++) // ties with the threshold stay in
                sum += prob[v] = prob[v] >= thr ? prob[v] : 0.0f;
        }
        double u = (double)(train_splitmix64(rng) >> 11) * 0x1.0p-53 * sum, acc = 0;
        next = V - 1;
        for (int v = 0; v < V; v++)
            if ((acc += prob[v]) > u) {
                next = v;
                break;
            }
    }
    *logprob = (float)(lg[next] - lz);
    return next;
}
