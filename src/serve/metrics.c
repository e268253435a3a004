/* serve metrics: request latency and time-to-first-token histograms, replies by status,
 * and the engine's counters and gauges, rendered in the Prometheus text format. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/internal.h"

#define NBUCKETS 12
static const double lat_le[NBUCKETS] = {0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120};
static const double ttft_le[NBUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                         0.5,   1,    2.5,   5,    10,  30};
static const int statuses[] = {200, 400, 404, 405, 408, 413, 500, 503};
#define NSTATUS (int)(sizeof statuses / sizeof statuses[0])

struct hist {
    double sum;
    unsigned long count, b[NBUCKETS];
};

struct serve_metrics {
    pthread_mutex_t mu;
    struct hist lat, ttft;
    unsigned long replies[NSTATUS + 1]; // last: any other status
};

struct serve_metrics *serve_metrics_create(void)
{
    struct serve_metrics *mt = calloc(1, sizeof *mt);
    if (mt)
        pthread_mutex_init(&mt->mu, NULL);
    return mt;
}

void serve_metrics_destroy(struct serve_metrics *mt)
{
    if (!mt)
        return;
    pthread_mutex_destroy(&mt->mu);
    free(mt);
}

static void observe(struct hist *h, const double *le, double v)
{
    h->sum += v;
    h->count++;
    for (int i = 0; i < NBUCKETS; i++)
        if (v <= le[i])
            h->b[i]++;
}

void serve_metrics_request(struct serve_metrics *mt, double latency, double ttft)
{
    pthread_mutex_lock(&mt->mu);
    observe(&mt->lat, lat_le, latency);
    if (ttft >= 0)
        observe(&mt->ttft, ttft_le, ttft);
    pthread_mutex_unlock(&mt->mu);
}

void serve_metrics_status(struct serve_metrics *mt, int status)
{
    int i = 0;
    while (i < NSTATUS && statuses[i] != status)
        i++;
    pthread_mutex_lock(&mt->mu);
    mt->replies[i]++;
    pthread_mutex_unlock(&mt->mu);
}

static void put_hist(FILE *f, const char *name, const char *help, const struct hist *h,
                     const double *le)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (int i = 0; i < NBUCKETS; i++)
        fprintf(f, "%s_bucket{le=\"%g\"} %lu\n", name, le[i], h->b[i]);
    fprintf(f, "%s_bucket{le=\"+Inf\"} %lu\n%s_sum %.6f\n%s_count %lu\n", name, h->count, name,
            h->sum, name, h->count);
}

char *serve_metrics_render(struct serve_metrics *mt, struct gen_engine *e)
{
    struct gen_stats st = {0};
    if (e)
        gen_get_stats(e, &st);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    pthread_mutex_lock(&mt->mu);
    struct serve_metrics c = *mt;
    pthread_mutex_unlock(&mt->mu);
    fprintf(f,
            "# HELP mtc_serve_prompt_tokens_total Prompt tokens read.\n"
            "# TYPE mtc_serve_prompt_tokens_total counter\nmtc_serve_prompt_tokens_total %.0f\n"
            "# HELP mtc_serve_generation_tokens_total Tokens generated.\n"
            "# TYPE mtc_serve_generation_tokens_total counter\n"
            "mtc_serve_generation_tokens_total %.0f\n"
            "# HELP mtc_serve_decode_steps_total Batched decode steps.\n"
            "# TYPE mtc_serve_decode_steps_total counter\nmtc_serve_decode_steps_total %.0f\n"
            "# HELP mtc_serve_requests_running Requests holding a KV slot.\n"
            "# TYPE mtc_serve_requests_running gauge\nmtc_serve_requests_running %d\n"
            "# HELP mtc_serve_requests_waiting Requests queued for a KV slot.\n"
            "# TYPE mtc_serve_requests_waiting gauge\nmtc_serve_requests_waiting %d\n"
            "# HELP mtc_serve_kv_cache_slots KV slots (--max-batch).\n"
            "# TYPE mtc_serve_kv_cache_slots gauge\nmtc_serve_kv_cache_slots %d\n"
            "# HELP mtc_serve_kv_cache_usage_ratio KV positions held / all positions.\n"
            "# TYPE mtc_serve_kv_cache_usage_ratio gauge\nmtc_serve_kv_cache_usage_ratio %.6f\n"
            "# HELP mtc_serve_kv_cache_bytes Memory of the KV cache.\n"
            "# TYPE mtc_serve_kv_cache_bytes gauge\nmtc_serve_kv_cache_bytes %zu\n",
            st.prompt_tokens, st.generated_tokens, st.steps, st.running, st.queued, st.slots,
            st.slots ? (double)st.positions_used / ((double)st.slots * st.ctx) : 0.0,
            st.kv_bytes);
    put_hist(f, "mtc_serve_request_duration_seconds", "Arrival to last token.", &c.lat, lat_le);
    put_hist(f, "mtc_serve_time_to_first_token_seconds", "Arrival to first token.", &c.ttft,
             ttft_le);
    fprintf(f, "# HELP mtc_serve_http_replies_total HTTP replies by status.\n"
               "# TYPE mtc_serve_http_replies_total counter\n");
    for (int i = 0; i <= NSTATUS; i++)
        if (i < NSTATUS)
            fprintf(f, "mtc_serve_http_replies_total{code=\"%d\"} %lu\n", statuses[i],
                    c.replies[i]);
        else
            fprintf(f, "mtc_serve_http_replies_total{code=\"other\"} %lu\n", c.replies[i]);
    fclose(f);
    return text;
}
