/* grpo_rollout: GRPO's rollouts with the KV-cache engine (gen_run: every sequence of the step
 * batched in KV slots) against cache-less sampling (sample_generate: a full forward over the
 * whole prefix per token, one sequence at a time, what mtc-train sample does), on the same
 * model, prompts, lengths and seeds. `grpo_rollout PRESET SEQS PROMPT_LEN NEW_TOKENS`; prints
 * generated tokens/s of each and the ratio. Built and run by bench/grpo.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/gen.h"
#include "train/train.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: grpo_rollout PRESET SEQS PROMPT_LEN NEW_TOKENS\n");
        return 2;
    }
    int nseq = atoi(argv[2]), np = atoi(argv[3]), nn = atoi(argv[4]);
    struct model_config c;
    mtc_error_t err;
    if (model_preset(argv[1], &c, &err) < 0 || nseq < 1 || np < 1 || nn < 1) {
        fprintf(stderr, "grpo_rollout: %s\n", err.text);
        return 2;
    }
    struct model *m = model_create(&c, &err);
    if (!m) {
        fprintf(stderr, "grpo_rollout: %s\n", err.text);
        return 1;
    }
    model_init_weights(m, 7);
    int32_t *prompt = malloc(sizeof(int32_t) * np);
    for (int i = 0; i < np; i++)
        prompt[i] = (i * 37 + 11) % c.vocab_size;
    // the engine: every sequence in one batch, as a GRPO step submits them (no eot: all run to
    // NEW_TOKENS, so both sides generate the same count)
    struct gen_engine *e = gen_create(m, nseq < 64 ? nseq : 64, np + nn, &err);
    struct gen_seq *q = calloc(nseq, sizeof *q);
    struct gen_seq **qp = calloc(nseq, sizeof *qp);
    if (!e || !q || !qp) {
        fprintf(stderr, "grpo_rollout: %s\n", err.text);
        return 1;
    }
    for (int i = 0; i < nseq; i++) {
        q[i] = (struct gen_seq){.prompt = prompt, .nprompt = np, .eot = -1};
        q[i].s =
            (struct gen_sampling){.temperature = 1, .top_p = 1, .max_tokens = nn, .seed = 1000 + i};
        qp[i] = &q[i];
    }
    double t0 = gen_now();
    if (gen_run(e, qp, nseq, &err) < 0) {
        fprintf(stderr, "grpo_rollout: %s\n", err.text);
        return 1;
    }
    double kv_s = gen_now() - t0, kv_tok = 0;
    for (int i = 0; i < nseq; i++)
        kv_tok += q[i].nout;
    t0 = gen_now();
    double nc_tok = 0;
    int same = 0; // sequences whose tokens are identical both ways (same seeds)
    for (int i = 0; i < nseq; i++) {
        size_t n = 0;
        int32_t *out = sample_generate(m, prompt, np, nn, 1.0f, 1000 + i, -1, &n, &err);
        if (!out) {
            fprintf(stderr, "grpo_rollout: %s\n", err.text);
            return 1;
        }
        nc_tok += n;
        same += (int)n == q[i].nout && memcmp(out, q[i].out, n * sizeof(int32_t)) == 0;
        free(out);
    }
    double nc_s = gen_now() - t0;
    printf("%s: %d sequences, prompt %d, %d new tokens each | KV cache, batched: %.0f tok/s "
           "(%.2f s) | no cache: %.0f tok/s (%.2f s) | speed-up %.1fx\n",
           argv[1], nseq, np, nn, kv_tok / kv_s, kv_s, nc_tok / nc_s, nc_s,
           (kv_tok / kv_s) / (nc_tok / nc_s));
    printf("%s: the same tokens both ways in %d of %d sequences (same seeds; a difference is a "
           "sampled token flipped by float rounding between the two forwards)\n",
           argv[1], same, nseq);
    for (int i = 0; i < nseq; i++)
        gen_seq_release(&q[i]);
    free(q);
    free(qp);
    free(prompt);
    gen_destroy(e);
    model_destroy(m);
    return 0;
}
