/* sft: supervised fine-tuning steps — the cross-entropy of the response tokens, averaged
 * over the whole global batch, on the examples ft_data.c hands this rank. */
#include <errno.h>
#include <math.h>

#include "train/ft_internal.h"

int sft_batch(struct ft *f, struct model *m, const struct ft_set *set, uint64_t g0, int backward,
              double *loss, mtc_error_t *err)
{
    int M = f->c.micro, T = f->c.seq, R = f->c.nranks;
    uint64_t G = (uint64_t)M * R * f->c.accum;
    // the response tokens of the whole global batch, counted before any forward: every
    // micro-step on every rank divides by it, so the summed gradient is the global mean
    double count = 0;
    for (uint64_t g = g0; g < g0 + G; g++)
        count += ft_example(f, set, g, 0)->ntrain;
    for (int k = 0; k < f->c.accum; k++) {
        uint64_t base = g0 + (uint64_t)k * M * R + (uint64_t)f->c.rank * M;
        for (int j = 0; j < M; j++)
            ft_fill_row(ft_example(f, set, base + j, 0), T, f->x + (size_t)j * T,
                        f->y + (size_t)j * T, f->w + (size_t)j * T);
        errno = 0;
        float l = model_forward(m, f->x, f->y, f->w, (float)count, M, T);
        if (isnan(l) && errno == EINVAL)
            return errprintf(err,
                             "model forward rejected the batch: token id >= vocab_size %d "
                             "(tokenizer does not match the model)",
                             model_cfg(m)->vocab_size);
        if (backward)
            model_backward(m, NULL);
        *loss += l;
    }
    return 0;
}
