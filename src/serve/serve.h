/* serve: mtc-serve's interface — an OpenAI-compatible HTTP server (libmicrohttpd) over the
 * generation engine of src/train/gen.h: /v1/completions, /v1/chat/completions, /v1/models,
 * SSE streaming, /health, /metrics (docs/serve.md). */
#ifndef MTC_SERVE_H
#define MTC_SERVE_H

#include <stddef.h>

#include "common/common.h"
#include "train/cpu/qmat.h"

struct serve_config {
    const char *model;       // REF: NAME[@N|@alias] in the registry, a checkpoint directory
                             // (root or step_N) or an HF directory
    const char *home;        // the registry's MTC_HOME (NAME refs)
    const char *project, *location; // the registry's (NULL: local, local)
    const char *tokenizer;   // NULL: the one recorded in the checkpoint / the HF dir's
    const char *listen;      // "HOST:PORT", IPv4 address or "localhost"; port 0 picks one
    const char *served_name; // NULL: the model directory's base name
    int max_batch;           // KV slots: sequences decoded together (default 8)
    int ctx;                 // positions per slot (0: the model's max_seq)
    int threads;             // OpenMP threads (0: OMP_NUM_THREADS or the cores)
    enum cpu_dtype dtype;    // decoding's weights and KV cache (default CPU_F32)
    int max_conn;            // concurrent connections (default 64)
    int max_conn_per_ip;     // of them from one client address (default 16)
    int request_timeout;     // seconds to deliver a whole request, headers and body (default 10)
    size_t max_body;         // request body bytes (default 1 MiB)
    int idle_timeout;        // seconds a client may send nothing (default 60)
};

struct serve;
/* Start listening (/health answers 503 until serve_load succeeds). NULL with err. */
struct serve *serve_create(const struct serve_config *cfg, mtc_error_t *err);
/* Load the model and tokenizer and start the engine; /health turns 200. 0, or -1 with err. */
int serve_load(struct serve *s, mtc_error_t *err);
/* The port listened on; the name /v1/models lists (borrowed). */
int serve_port(const struct serve *s);
const char *serve_name(const struct serve *s);
/* Stop listening, cancel what runs, free everything. NULL is fine. */
void serve_destroy(struct serve *s);

#endif
