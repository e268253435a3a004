/* serve internals shared by the HTTP front (http.c), its connections (conns.c), the
 * OpenAI routes (openai.c), the model loader (load.c) and the Prometheus metrics
 * (metrics.c). */
#ifndef MTC_SERVE_INTERNAL_H
#define MTC_SERVE_INTERNAL_H

#include <jansson.h>
#include <pthread.h>

#include "serve/serve.h"
#include "train/gen.h"
#include "train/train.h"

struct serve_metrics;

struct serve {
    struct serve_config cfg;
    char name[129];
    /* a registered version: its model name and version (NAME@N is its
     * canonical id); 0 for a directory, whose base name is dir_name */
    char reg_name[64];
    int reg_version;
    char dir_name[129];
    struct model *m;
    struct tok *tk;
    struct gen_engine *e;
    int ctx;
    volatile int ready, stopping;
    pthread_t engine_thread;
    int engine_started;
    struct MHD_Daemon *d;
    int port;
    struct serve_metrics *mt;
    struct serve_conns *conns; // the request deadline (conns.c)
    unsigned long next_id;     // under id_mu
    pthread_mutex_t id_mu;
};

/* Connections being read (conns.c): each has request_timeout seconds to
 * deliver a complete request, from its accept and again after each response;
 * a watchdog thread answers 408 on a late one's socket and shuts it down
 * (on_timeout(arg) counts it). open/close: libmicrohttpd's connection
 * notifications (fd: its socket). handle: the request is complete, 0 — or -1
 * when it was answered 408 already (drop it). done: its response was sent. */
struct serve_conns;
struct serve_conn;
struct serve_conns *serve_conns_create(int timeout_s, void (*on_timeout)(void *), void *arg,
                                       mtc_error_t *err);
void serve_conns_destroy(struct serve_conns *c);
struct serve_conn *serve_conns_open(struct serve_conns *c, int fd);
void serve_conns_close(struct serve_conns *c, struct serve_conn *k);
int serve_conns_handle(struct serve_conns *c, struct serve_conn *k);
void serve_conns_done(struct serve_conns *c, struct serve_conn *k);

/* An HTTP reply: status and body (JSON, or text when body_text is set), or a stream. */
struct serve_reply {
    int status;
    json_t *body;
    char *body_text; // owned; with content_type
    const char *content_type;
    struct serve_stream *stream; // SSE: http.c pulls from it
};

/* The names a request's "model" may give for what this server serves (load.c):
 * the served name; a registered version's every reference that resolves to it
 * now (NAME@N, NAME@alias, NAME when default points at it); a directory's base
 * name. As a JSON array, served name first, canonical id next (caller decrefs). */
json_t *serve_model_ids(struct serve *s);
/* 1 when model names what this server serves (one of serve_model_ids). */
int serve_model_known(struct serve *s, const char *model);

/* Route handlers (openai.c): fill r from the request body (NULL for GET). */
void serve_completions(struct serve *s, const json_t *body, struct serve_reply *r);
void serve_chat(struct serve *s, const json_t *body, struct serve_reply *r);
void serve_models(struct serve *s, struct serve_reply *r);
/* An OpenAI error body {"error":{"message","type","code"}} into r. */
void serve_error(struct serve_reply *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* SSE streams (openai.c): bytes to send, blocking until some are ready. Returns the count
 * copied into buf, 0 at the end of the stream. */
size_t serve_stream_read(struct serve_stream *st, char *buf, size_t max);
/* The client left or the stream ended: cancel what runs, wait for the engine, free. */
void serve_stream_free(struct serve_stream *st);

/* Model and tokenizer from cfg->model (load.c). 0, or -1 with err. */
int serve_load_model(struct serve *s, mtc_error_t *err);

/* Metrics (metrics.c). */
struct serve_metrics *serve_metrics_create(void);
void serve_metrics_destroy(struct serve_metrics *mt);
/* One finished request: seconds from arrival to last token and to first token (< 0: none). */
void serve_metrics_request(struct serve_metrics *mt, double latency, double ttft);
/* One HTTP reply with this status. */
void serve_metrics_status(struct serve_metrics *mt, int status);
/* Prometheus text of the metrics and the engine's gauges (caller frees). */
char *serve_metrics_render(struct serve_metrics *mt, struct gen_engine *e);

#endif
