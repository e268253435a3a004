/* greedy_ids: the token ids mtc-serve's engine (src/train/gen.c) decodes greedily for one
 * stream of a model, with its prefill and decode times — bench/serve_vs_ggml.sh compares the
 * ids with what ggml's gpt-2 example makes of the same weights.
 * Usage: greedy_ids MODEL NEW_TOKENS ID[,ID...]   (MODEL: a checkpoint or HF directory)
 * Prints "prefill_ms X", "decode_ms_per_token X" and "ids A B C ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/gen.h"
#include "train/train.h"

int main(int argc, char **argv)
{
    if (argc != 4 || atoi(argv[2]) < 2) {
        fprintf(stderr, "usage: greedy_ids MODEL NEW_TOKENS ID[,ID...]\n");
        return 2;
    }
    int N = atoi(argv[2]), P = 0;
    int32_t prompt[1024];
    for (char *s = argv[3], *end; *s && P < 1024; s = *end ? end + 1 : end) {
        prompt[P++] = (int32_t)strtol(s, &end, 10);
        if (end == s || (*end && *end != ',')) {
            fprintf(stderr, "greedy_ids: bad prompt %s\n", argv[3]);
            return 2;
        }
    }
    mtc_error_t err;
    char dir[4096];
    struct model *m = interop_load_checkpoint(argv[1], dir, sizeof dir, &err);
    if (!m)
        m = interop_import_hf(argv[1], NULL, &err);
    if (!m) {
        fprintf(stderr, "greedy_ids: %s: %s\n", argv[1], err.text);
        return 1;
    }
    struct gen_engine *e = gen_create(m, 1, P + N, &err);
    if (!e) {
        fprintf(stderr, "greedy_ids: %s\n", err.text);
        return 1;
    }
    struct gen_seq q = {.prompt = prompt, .nprompt = P, .eot = -1,
                        .s = {.temperature = 0, .top_p = 1, .max_tokens = N}};
    struct gen_seq *qs = &q;
    if (gen_run(e, &qs, 1, &err) < 0) {
        fprintf(stderr, "greedy_ids: %s\n", err.text);
        return 1;
    }
    printf("prefill_ms %.3f\n", (q.t_first - q.t_submit) * 1e3);
    printf("decode_ms_per_token %.3f\n", (q.t_done - q.t_first) * 1e3 / (q.nout - 1));
    printf("ids");
    for (int i = 0; i < q.nout; i++)
        printf(" %d", q.out[i]);
    printf("\n");
    gen_seq_release(&q);
    gen_destroy(e);
    model_destroy(m);
    return 0;
}
