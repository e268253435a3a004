/* gen: the generation engine mtc-serve and GRPO share — sequences held in KV-cache slots,
 * continuous batching at token granularity (each step decodes one token of every running
 * sequence and a chunk of the prompts that joined), and seeded sampling (temperature,
 * top_k, top_p) whose result depends only on the sequence's own seed. */
#ifndef MTC_TRAIN_GEN_H
#define MTC_TRAIN_GEN_H

#include <stdint.h>

#include "common/common.h"
#include "train/model.h"

/* Tokens one step decodes at most: every running sequence's next token first, then chunks
 * of the prompts that are being read (prefill), so a long prompt never stalls the others. */
#define GEN_STEP_TOKENS 256

struct gen_sampling {
    float temperature; // 0: greedy (the first largest logit, as mtc-train sample)
    float top_p;       // (0,1]; 1: off
    int top_k;         // 0: off
    int max_tokens;    // > 0
    uint64_t seed;
};

enum gen_finish { GEN_RUNNING, GEN_STOP, GEN_LENGTH, GEN_CANCELLED };

/* One request. The caller fills the inputs, owns the struct and keeps it (and prompt) alive
 * from gen_submit until on_done has been called; gen_seq_release frees what the engine
 * allocated. Callbacks run on the thread calling gen_step. */
struct gen_seq {
    const int32_t *prompt; // (nprompt) token ids, borrowed; nprompt >= 1
    int nprompt;
    struct gen_sampling s;
    int eot; // a token that ends the sequence (kept as its last token), -1: none
    /* Each new token with its log-probability under the model (temperature 1, no
     * filtering: what a policy gradient needs). Nonzero return: stop here (GEN_STOP). */
    int (*on_token)(struct gen_seq *q, int32_t tok, float logprob);
    void (*on_done)(struct gen_seq *q); // after finish is set; the engine is done with q
    void *ctx;                          // the caller's
    // written by the engine
    int32_t *out; // (nout) generated ids
    float *logprob; // (nout)
    int nout;
    enum gen_finish finish;
    double t_submit, t_first, t_done; // CLOCK_MONOTONIC seconds
    // private to the engine
    int slot, ncached, cap;
    uint64_t rng;
    volatile int cancel;
    struct gen_seq *next;
};
void gen_seq_release(struct gen_seq *q);

struct gen_stats {
    int running, queued, slots, ctx;
    long positions_used; // KV positions held by running sequences
    double prompt_tokens, generated_tokens, steps;
    size_t kv_bytes;
};

struct gen_engine;
/* An engine over model m (borrowed; not changed, but its weights may be updated between
 * steps by a trainer) with nslots KV slots of ctx positions. NULL with err. */
struct gen_engine *gen_create(struct model *m, int nslots, int ctx, mtc_error_t *err);
void gen_destroy(struct gen_engine *e);
/* Queue q (thread-safe). -1 with err (errno EINVAL) when it can never run: empty prompt,
 * prompt + max_tokens longer than ctx, bad sampling values, a token out of range. A request
 * waits in the queue until a slot is free. */
int gen_submit(struct gen_engine *e, struct gen_seq *q, mtc_error_t *err);
/* Ask a queued or running q to end (thread-safe): finish GEN_CANCELLED at the next step. */
void gen_cancel(struct gen_engine *e, struct gen_seq *q);
/* One scheduler step (one thread only): admit queued requests into free slots, decode,
 * sample, call back, retire finished ones. Returns the number of requests still queued or
 * running, or -1 with err (the running requests are then cancelled). */
int gen_step(struct gen_engine *e, mtc_error_t *err);
/* Block until there is work or gen_wake was called; 1 when there is work. */
int gen_wait(struct gen_engine *e);
void gen_wake(struct gen_engine *e); // wake gen_wait (shutdown)
/* Synchronous batch (GRPO's rollouts): submit every seqs[i] and step until all are done.
 * 0, or -1 with err. */
int gen_run(struct gen_engine *e, struct gen_seq *const *seqs, int n, mtc_error_t *err);
void gen_get_stats(struct gen_engine *e, struct gen_stats *st);
/* Pick a token from logits (V entries) with s and the sequence's rng; *logprob gets its
 * log-probability at temperature 1. scratch holds 2*V floats. */
int gen_sample(const float *logits, int V, const struct gen_sampling *s, uint64_t *rng,
               float *scratch, float *logprob);
/* Monotonic clock in seconds. */
double gen_now(void);

#endif
