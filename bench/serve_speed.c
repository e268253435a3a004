/* serve_speed: the generation engine against the cache-less sampler on one model in the same
 * run — mtc-train sample's decode (sample_generate: a full forward per token) vs the KV-cache
 * engine for one stream (time to first token, decode tokens/s) and the aggregate tokens/s of
 * 1, 4 and 16 concurrent streams. Random-init weights (speed does not depend on them).
 * Usage: serve_speed PRESET PROMPT_TOKENS NEW_TOKENS */
#include <stdio.h>
#include <stdlib.h>

#include "train/gen.h"
#include "train/train.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: serve_speed PRESET PROMPT_TOKENS NEW_TOKENS\n");
        return 2;
    }
    struct model_config c;
    mtc_error_t err;
    if (model_preset(argv[1], &c, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return 2;
    }
    int P = atoi(argv[2]), N = atoi(argv[3]), ctx = P + N;
    struct model *m = model_create(&c, &err);
    if (!m) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    model_init_weights(m, 1);
    int32_t *prompt = malloc(sizeof(int32_t) * 16 * P);
    for (int i = 0; i < 16 * P; i++)
        prompt[i] = (int32_t)((i * 2654435761u) % (unsigned)c.vocab_size);

    // baseline: the cache-less sampler (greedy; eot -1 so all N tokens are made)
    size_t nout;
    double t0 = gen_now();
    int32_t *ref = sample_generate(m, prompt, P, N, 0, 1, -1, &nout, &err);
    double nocache = nout / (gen_now() - t0);
    free(ref);

    printf("%s: prompt %d, %d new tokens, threads %s\n", argv[1], P, N,
           getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "(all)");
    printf("  no cache (mtc-train sample): %8.1f tok/s end to end\n", nocache);
    double kv1 = 0;
    const int streams[] = {1, 4, 16};
    for (int si = 0; si < 3; si++) {
        int k = streams[si];
        struct gen_engine *e = gen_create(m, k, ctx, &err);
        if (!e) {
            fprintf(stderr, "%s\n", err.text);
            return 1;
        }
        struct gen_seq *q = calloc(k, sizeof *q), **qs = calloc(k, sizeof *qs);
        for (int i = 0; i < k; i++) {
            q[i] = (struct gen_seq){.prompt = prompt + (size_t)i * P, .nprompt = P, .eot = -1,
                                    .s = {.temperature = 0, .top_p = 1, .max_tokens = N}};
            qs[i] = &q[i];
        }
        t0 = gen_now();
        if (gen_run(e, qs, k, &err) < 0) {
            fprintf(stderr, "%s\n", err.text);
            return 1;
        }
        double wall = gen_now() - t0, ttft = 0, decode = 0;
        for (int i = 0; i < k; i++) {
            ttft += (q[i].t_first - q[i].t_submit) / k;
            decode += (q[i].nout - 1) / (q[i].t_done - q[i].t_first) / k;
        }
        if (k == 1) {
            kv1 = N / wall;
            printf("  KV cache, 1 stream:          %8.1f tok/s end to end (%.1fx no cache), "
                   "decode %.1f tok/s, time to first token %.1f ms\n",
                   kv1, kv1 / nocache, decode, ttft * 1e3);
        } else {
            printf("  KV cache, %2d streams:        %8.1f tok/s aggregate (%.2fx 1 stream), "
                   "%.1f tok/s per stream, time to first token %.1f ms\n",
                   k, k * N / wall, k * N / wall / kv1, decode, ttft * 1e3);
        }
        for (int i = 0; i < k; i++)
            gen_seq_release(&q[i]);
        free(q);
        free(qs);
        gen_destroy(e);
    }
    free(prompt);
    model_destroy(m);
    return 0;
}
