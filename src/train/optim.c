/* optim: AdamW with decoupled weight decay (none on norms/biases), global-norm
 * gradient clipping and the warmup + cosine learning-rate schedule. Everything
 * here is elementwise or reduced in a fixed order, so results are bitwise
 * reproducible for any thread count — exact resume depends on that. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

void opt_config_default(struct opt_config *c)
{
    memset(c, 0, sizeof *c);
    c->lr = 3e-4f;
    c->min_lr = 3e-5f;
    c->warmup = 0;
    c->total_steps = 1000;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->weight_decay = 0.1f;
    c->grad_clip = 1.0f;
}

float opt_lr(const struct opt_config *c, int64_t step)
{
    if (c->warmup > 0 && step < c->warmup)
        return c->lr * (float)(step + 1) / (float)c->warmup;
    int64_t decay_steps = c->total_steps - c->warmup;
    if (decay_steps <= 0 || step >= c->total_steps)
        return step >= c->total_steps && decay_steps > 0 ? c->min_lr : c->lr;
    double ratio = (double)(step - c->warmup) / (double)decay_steps;  // 0..1
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));                    // 1..0
    return (float)(c->min_lr + coeff * (c->lr - c->min_lr));
}

/* Fixed partition: 256 chunks regardless of threads, summed in order. */
#define NORM_CHUNKS 256

double opt_grad_norm(const float *g, size_t n)
{
    double part[NORM_CHUNKS];
    size_t per = (n + NORM_CHUNKS - 1) / NORM_CHUNKS;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < NORM_CHUNKS; c++) {
        size_t lo = (size_t)c * per, hi = lo + per > n ? n : lo + per;
        double s = 0;
        for (size_t i = lo; i < hi; i++)
            s += (double)g[i] * g[i];
        part[c] = s;
    }
    double s = 0;
    for (int c = 0; c < NORM_CHUNKS; c++)
        s += part[c];
    return sqrt(s);
}

double opt_clip(float *g, size_t n, float max_norm)
{
    double norm = opt_grad_norm(g, n);
    if (max_norm > 0 && norm > max_norm && isfinite(norm)) {
        float scale = (float)(max_norm / (norm + 1e-6));
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            g[i] *= scale;
    }
    return norm;
}

int opt_init(struct opt_state *s, size_t n, mtc_error_t *err)
{
    memset(s, 0, sizeof *s);
    s->m = calloc(n ? n : 1, sizeof(float));
    s->v = calloc(n ? n : 1, sizeof(float));
    if (!s->m || !s->v) {
        opt_release(s);
        errno = ENOMEM;
        return errprintf(err, "optimizer: cannot allocate moments for %zu parameters", n);
    }
    s->n = n;
    return 0;
}

void opt_release(struct opt_state *s)
{
    if (!s)
        return;
    int e = errno;
    free(s->m);
    free(s->v);
    s->m = s->v = NULL;
    s->n = 0;
    errno = e;
}

void opt_adamw_update(float *p, const float *g, float *m, float *v, size_t n, float lr,
                      const struct opt_config *c, int decay, int64_t t)
{
    float b1 = c->beta1, b2 = c->beta2;
    float bc1 = 1.0f - powf(b1, (float)(t + 1));
    float bc2 = 1.0f - powf(b2, (float)(t + 1));
    float wd = decay ? c->weight_decay : 0.0f;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        // decoupled decay: shrink the weight itself, not the gradient
        p[i] -= lr * (mhat / (sqrtf(vhat) + c->eps) + wd * p[i]);
    }
}

static size_t tensor_numel(const struct model_tensor *t)
{
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

void opt_step(struct opt_state *s, const struct opt_config *c, struct model *m, float lr)
{
    float *p = model_params(m), *g = model_grads(m);
    int nt = model_ntensors(m);
    for (int i = 0; i < nt; i++) {
        const struct model_tensor *t = model_tensor(m, i);
        size_t off = t->offset, n = tensor_numel(t);
        opt_adamw_update(p + off, g + off, s->m + off, s->v + off, n, lr, c, t->decay, s->t);
    }
    s->t++;
}
