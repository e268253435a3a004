/* dpo: direct preference optimisation steps (Rafailov et al. 2023; formats.md "Losses") —
 * chosen and rejected answers run as rows of one batch through the policy and the
 * frozen reference model; the loss's gradient goes back as per-token d(loss)/d(logprob). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "train/ft_internal.h"

double dpo_pair_loss(double beta, double pc, double pr, double rc, double rr, double *dz)
{
    double z = beta * ((pc - rc) - (pr - rr));
    // -log σ(z) = softplus(-z), written so that neither sign overflows
    double loss = z > 0 ? log1p(exp(-z)) : -z + log1p(exp(z));
    if (dz)
        *dz = -1.0 / (1.0 + exp(z)); // d/dz softplus(-z) = -σ(-z)
    return loss;
}

/* Sum of w·logp over row r of (rows, T) arrays. */
static double row_sum(const float *lp, const float *w, int r, int T)
{
    double s = 0;
    for (int t = 0; t < T; t++)
        s += (double)w[(size_t)r * T + t] * lp[(size_t)r * T + t];
    return s;
}

int dpo_batch(struct ft *f, struct model *m, const struct ft_set *set, uint64_t g0, int backward,
              double sums[5], mtc_error_t *err)
{
    int M = f->c.micro, T = f->c.seq, R = f->c.nranks, rows = 2 * M;
    double G = (double)M * R * f->c.accum, beta = f->c.beta;
    for (int k = 0; k < f->c.accum; k++) {
        // rows [0, M) chosen, [M, 2M) rejected: (2M, T)
        uint64_t base = g0 + (uint64_t)k * M * R + (uint64_t)f->c.rank * M;
        for (int j = 0; j < M; j++)
            for (int side = 0; side < 2; side++) {
                size_t r = (size_t)(side * M + j) * T;
                ft_fill_row(ft_example(f, set, base + j, side), T, f->x + r, f->y + r, f->w + r);
            }
        errno = 0;
        float lr = model_forward(f->ref, f->x, f->y, NULL, 0, rows, T);
        if (isnan(lr) && errno == EINVAL)
            return errprintf(err,
                             "model forward rejected the batch: token id >= vocab_size %d "
                             "(tokenizer does not match the model)",
                             model_cfg(m)->vocab_size);
        model_token_logprobs(f->ref, f->lpr);
        model_forward(m, f->x, f->y, NULL, 0, rows, T);
        model_token_logprobs(m, f->lp);
        for (int j = 0; j < M; j++) {
            double pc = row_sum(f->lp, f->w, j, T), pr = row_sum(f->lp, f->w, M + j, T);
            double rc = row_sum(f->lpr, f->w, j, T), rr = row_sum(f->lpr, f->w, M + j, T);
            double dz;
            double loss = dpo_pair_loss(beta, pc, pr, rc, rr, &dz);
            double rwc = beta * (pc - rc), rwr = beta * (pr - rr);
            sums[0] += loss / G;
            sums[1] += rwc;
            sums[2] += rwr;
            sums[3] += rwc > rwr ? 1.0 : 0.0;
            sums[4] += rwc - rwr;
            // z = β(pc - pr - ...): dL/dlogp = dz·β on chosen response tokens, −dz·β on
            // rejected ones, divided by the pairs of the global batch
            float gc = (float)(dz * beta / G), gr = (float)(-dz * beta / G);
            for (int t = 0; t < T; t++) {
                f->dlogp[(size_t)j * T + t] = gc * f->w[(size_t)j * T + t];
                f->dlogp[(size_t)(M + j) * T + t] = gr * f->w[(size_t)(M + j) * T + t];
            }
        }
        if (backward)
            model_backward(m, f->dlogp);
    }
    return 0;
}
