/* decode_quality: what bf16 and q8_0 weights cost in answers — a trained checkpoint's mean
 * loss on held-out text through the decode path (model_decode_loss, windows of max_seq
 * tokens) for f32, bf16 and q8_0, the change against f32, and greedy continuations of a few
 * held-out prompts compared token for token with f32's. One line per dtype:
 *   quality dtype=D loss=X ppl=X rel_change=X greedy_agree=A/N
 * Usage: decode_quality CHECKPOINT TOKENIZER TEXTFILE HELDOUT_BYTES */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data.h"
#include "train/gen.h"
#include "train/train.h"

#define NPROMPTS 4
#define PROMPT 16
#define GREEDY 48

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: decode_quality CHECKPOINT TOKENIZER TEXTFILE HELDOUT_BYTES\n");
        return 2;
    }
    mtc_error_t err;
    char dir[4096];
    struct model *m = interop_load_checkpoint(argv[1], dir, sizeof dir, &err);
    struct tok *tk = m ? tok_load(argv[2], &err) : NULL;
    size_t len = 0;
    char *text = tk ? mtc_read_file(argv[3], &len) : NULL;
    if (!text) {
        fprintf(stderr, "%s\n", m && tk ? "cannot read the text" : err.text);
        return 1;
    }
    size_t held = strtoul(argv[4], NULL, 10);
    held = held < len ? held : len;
    int32_t *ids;
    size_t n;
    if (tok_encode(tk, text + len - held, held, &ids, &n, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    int W = model_cfg(m)->max_seq, nwin = (int)(n / W);
    printf("held-out: the last %zu bytes, %zu tokens, %d windows of %d\n", held, n, nwin, W);
    double loss[CPU_NDTYPES];
    int32_t greedy[CPU_NDTYPES][NPROMPTS][GREEDY];
    for (int dt = 0; dt < CPU_NDTYPES; dt++) {
        if (model_decode_set_dtype(m, dt, &err) < 0) {
            fprintf(stderr, "%s\n", err.text);
            return 1;
        }
        double sum = 0;
        for (int w = 0; w < nwin; w++) {
            double l;
            if (model_decode_loss(m, ids + (size_t)w * W, W, &l, &err) < 0) {
                fprintf(stderr, "%s\n", err.text);
                return 1;
            }
            sum += l;
        }
        loss[dt] = sum / nwin;
        struct gen_engine *e = gen_create(m, 1, PROMPT + GREEDY, &err);
        for (int p = 0; e && p < NPROMPTS; p++) {
            struct gen_seq q = {.prompt = ids + (size_t)p * (n / NPROMPTS), .nprompt = PROMPT,
                                .eot = -1, .s = {.temperature = 0, .top_p = 1,
                                                 .max_tokens = GREEDY}};
            struct gen_seq *qs = &q;
            if (gen_run(e, &qs, 1, &err) < 0) {
                fprintf(stderr, "%s\n", err.text);
                return 1;
            }
            memcpy(greedy[dt][p], q.out, sizeof(int32_t) * GREEDY);
            gen_seq_release(&q);
        }
        gen_destroy(e);
        int agree = 0, first = 0;
        for (int p = 0; p < NPROMPTS; p++) {
            int same = 1;
            for (int i = 0; i < GREEDY; i++) {
                agree += greedy[dt][p][i] == greedy[0][p][i];
                same &= greedy[dt][p][i] == greedy[0][p][i];
                first += same;
            }
        }
        printf("quality dtype=%s loss=%.5f ppl=%.3f rel_change=%+.4f%% greedy_agree=%d/%d "
               "greedy_prefix=%d/%d\n",
               cpu_dtype_name(dt), loss[dt], exp(loss[dt]), 100 * (loss[dt] - loss[0]) / loss[0],
               agree, NPROMPTS * GREEDY, first, NPROMPTS * GREEDY);
    }
    free(ids);
    free(text);
    tok_destroy(tk);
    model_destroy(m);
    return 0;
}
