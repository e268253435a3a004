/* test_train_model: finite-difference gradient checks of every CPU layer and of whole
 * GPT-2 and Llama models, log-prob backward, padded vocab, determinism, a tiny model
 * learning a repeated sequence with SGD, presets and JSON configs; packed rows (several
 * sequences per row) against each sequence alone, kernel and model. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train/cpu/kernels.h"
#include "train/cpu/vmath.h"
#include "train/model.h"

/* ---- helpers ---- */

static uint64_t rng_state = 42;
static float frand(void) // uniform [-1, 1)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}
static float *rand_buf(size_t n, float scale)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * scale;
    return p;
}
static float *zero_buf(size_t n)
{
    return calloc(n, sizeof(float));
}
static double dotd(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* Scalar loss of the layer under test, from its current inputs. */
typedef double (*loss_fn)(void *ctx);

/* Central differences of f w.r.t. up to `samples` entries of x (spread over it),
 * compared with the analytic gradient g. Returns the largest |g - fd| divided by the
 * largest |fd| seen (the tensor's gradient scale). */
static double fd_error(float *x, const float *g, size_t n, loss_fn f, void *ctx, float eps,
                       int samples)
{
    double maxerr = 0, maxg = 1e-12;
    size_t step = n > (size_t)samples ? n / samples : 1;
    for (size_t i = (step > 1 ? step / 2 : 0); i < n; i += step) {
        float old = x[i];
        x[i] = old + eps;
        double lp = f(ctx);
        x[i] = old - eps;
        double lm = f(ctx);
        x[i] = old;
        double num = (lp - lm) / (2.0 * eps);
        double e = fabs(num - g[i]);
        maxerr = e > maxerr ? e : maxerr;
        maxg = fabs(num) > maxg ? fabs(num) : maxg;
    }
    return maxerr / maxg;
}

#define TOL 1e-2

/* ---- matmul ---- */

struct mm {
    int M, N, K;
    float *in, *w, *b, *res, *out, *r;
};
static double mm_loss(void *p)
{
    struct mm *c = p;
    cpu_matmul_forward(c->out, c->N, c->res, c->in, c->w, c->b, c->M, c->N, c->K);
    return dotd(c->out, c->r, (size_t)c->M * c->N);
}
static void test_matmul(void)
{
    struct mm c = {.M = 6, .N = 5, .K = 7};
    c.in = rand_buf(c.M * c.K, 1), c.w = rand_buf(c.N * c.K, 1), c.b = rand_buf(c.N, 1);
    c.res = rand_buf(c.M * c.N, 1), c.out = zero_buf(c.M * c.N), c.r = rand_buf(c.M * c.N, 1);
    mm_loss(&c);
    // residual passes through: out - res equals in @ w^T + b at one element
    double e0 = c.b[2];
    for (int k = 0; k < c.K; k++)
        e0 += (double)c.in[1 * c.K + k] * c.w[2 * c.K + k];
    CHECK(fabs(c.out[1 * c.N + 2] - c.res[1 * c.N + 2] - e0) < 1e-5, "matmul forward value");
    float *din = zero_buf(c.M * c.K), *dw = zero_buf(c.N * c.K), *db = zero_buf(c.N);
    cpu_matmul_backward(din, 0, dw, db, c.r, c.N, c.in, c.w, c.M, c.N, c.K);
    CHECK(fd_error(c.in, din, c.M * c.K, mm_loss, &c, 1e-2f, 50) < TOL, "matmul d(in)");
    CHECK(fd_error(c.w, dw, c.N * c.K, mm_loss, &c, 1e-2f, 50) < TOL, "matmul d(w)");
    CHECK(fd_error(c.b, db, c.N, mm_loss, &c, 1e-2f, 50) < TOL, "matmul d(bias)");
    // backward accumulates into dw and, when asked, into din
    float *din2 = zero_buf(c.M * c.K);
    memcpy(din2, din, sizeof(float) * c.M * c.K);
    cpu_matmul_backward(din2, 1, dw, NULL, c.r, c.N, c.in, c.w, c.M, c.N, c.K);
    CHECK(fabsf(din2[3] - 2 * din[3]) < 1e-5, "matmul backward accumulates into din");
    free(c.in), free(c.w), free(c.b), free(c.res), free(c.out), free(c.r);
    free(din), free(dw), free(db), free(din2);
}

/* ---- norms ---- */

struct nm {
    int M, C, rms;
    float *x, *w, *b, *out, *mean, *rstd, *r;
};
static double nm_loss(void *p)
{
    struct nm *c = p;
    if (c->rms)
        cpu_rmsnorm_forward(c->out, c->rstd, c->x, c->w, c->M, c->C, 1e-5f);
    else
        cpu_layernorm_forward(c->out, c->mean, c->rstd, c->x, c->w, c->b, c->M, c->C, 1e-5f);
    return dotd(c->out, c->r, (size_t)c->M * c->C);
}
static void test_norm(int rms)
{
    // C = 70 spans two column blocks of the weight-gradient reduction
    struct nm c = {.M = 5, .C = 70, .rms = rms};
    c.x = rand_buf(c.M * c.C, 2), c.w = rand_buf(c.C, 1), c.b = rand_buf(c.C, 1);
    c.out = zero_buf(c.M * c.C), c.mean = zero_buf(c.M), c.rstd = zero_buf(c.M);
    c.r = rand_buf(c.M * c.C, 1);
    nm_loss(&c);
    float *dx = zero_buf(c.M * c.C), *dw = zero_buf(c.C), *db = zero_buf(c.C);
    if (rms)
        cpu_rmsnorm_backward(dx, dw, c.r, c.x, c.w, c.rstd, c.M, c.C);
    else
        cpu_layernorm_backward(dx, dw, db, c.r, c.x, c.w, c.mean, c.rstd, c.M, c.C);
    const char *n = rms ? "rmsnorm" : "layernorm";
    CHECK(fd_error(c.x, dx, c.M * c.C, nm_loss, &c, 1e-2f, 80) < TOL, "%s d(x)", n);
    CHECK(fd_error(c.w, dw, c.C, nm_loss, &c, 1e-2f, 70) < TOL, "%s d(w)", n);
    if (!rms)
        CHECK(fd_error(c.b, db, c.C, nm_loss, &c, 1e-2f, 70) < TOL, "%s d(b)", n);
    free(c.x), free(c.w), free(c.b), free(c.out), free(c.mean), free(c.rstd), free(c.r);
    free(dx), free(dw), free(db);
}

/* ---- RoPE ---- */

static void test_rope(void)
{
    // Llama 3.1 frequencies (hd 128, theta 5e5, factor 8, low 1, high 4, orig 8192),
    // reference values from the HF formula in double precision.
    int hd = 128, half = 64, T = 3;
    float *cs = zero_buf(T * half), *sn = zero_buf(T * half);
    cpu_rope_tables(cs, sn, T, hd, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    const struct {
        int i;
        double freq;
    } ref[] = {{0, 1.0}, {10, 0.12868737343265052}, {30, 0.0013718935677611381},
               {40, 3.428102195952591e-05}, {63, 3.068925988914511e-07}};
    int ok = 1;
    for (size_t k = 0; k < sizeof ref / sizeof ref[0]; k++) {
        double got = atan2(sn[half + ref[k].i], cs[half + ref[k].i]); // angle at t = 1
        ok &= fabs(got - ref[k].freq) <= 1e-5 * ref[k].freq + 1e-9;
    }
    CHECK(ok, "rope llama3 scaled frequencies match the HF formula");
    CHECK(cs[0] == 1.0f && sn[0] == 0.0f, "rope position 0 is the identity");
    free(cs), free(sn);

    // rotate_half layout: pairs (i, i + hd/2) rotate together
    hd = 8, half = 4, T = 4;
    int B = 2, nh = 3, ld = 3 * 8 + 5; // row wider than the rotated heads
    cs = zero_buf(T * half), sn = zero_buf(T * half);
    cpu_rope_tables(cs, sn, T, hd, 10000.0f, 0.0f, 0, 0, 0);
    float *x = rand_buf(B * T * ld, 1), *x0 = malloc(sizeof(float) * B * T * ld);
    memcpy(x0, x, sizeof(float) * B * T * ld);
    cpu_rope(x, ld, cs, sn, B, T, nh, hd, 0);
    int t = 2, h = 1, i = 1;
    const float *a = x0 + (1 * T + t) * ld + h * hd, *o = x + (1 * T + t) * ld + h * hd;
    float c0 = cosf(t * powf(10000.0f, -2.0f * i / hd)), s0 = sinf(t * powf(10000.0f, -2.0f * i / hd));
    CHECK(fabsf(o[i] - (a[i] * c0 - a[i + half] * s0)) < 1e-5 &&
              fabsf(o[i + half] - (a[i + half] * c0 + a[i] * s0)) < 1e-5,
          "rope rotates (x_i, x_{i+hd/2}) pairs (HF rotate_half)");
    CHECK(x[(0 * T + 1) * ld + 3 * 8 + 2] == x0[(0 * T + 1) * ld + 3 * 8 + 2],
          "rope leaves columns past the rotated heads alone");
    // backward: the inverse (transpose) rotation; rotation is orthogonal so <Rx, r> = <x, R^T r>
    float *r = rand_buf(B * T * ld, 1), *rt = malloc(sizeof(float) * B * T * ld);
    memcpy(rt, r, sizeof(float) * B * T * ld);
    cpu_rope(rt, ld, cs, sn, B, T, nh, hd, 1);
    CHECK(fabs(dotd(x, r, B * T * ld) - dotd(x0, rt, B * T * ld)) < 1e-4,
          "rope backward is the transpose of forward");
    cpu_rope(x, ld, cs, sn, B, T, nh, hd, 1);
    double md = 0;
    for (int k = 0; k < B * T * ld; k++)
        md = fmax(md, fabs(x[k] - x0[k]));
    CHECK(md < 1e-5, "rope inverse undoes forward");
    free(cs), free(sn), free(x), free(x0), free(r), free(rt);
}

/* ---- attention ---- */

struct at {
    int B, T, H, KV, hd;
    float *qkv, *out, *lse, *r, *scr;
    int slots;
};
static double at_loss(void *p)
{
    struct at *c = p;
    cpu_attention_forward(c->out, c->lse, c->qkv, c->B, c->T, c->H, c->KV, c->hd, NULL, c->scr,
                          c->slots);
    return dotd(c->out, c->r, (size_t)c->B * c->T * c->H * c->hd);
}
static void test_attention(int T, int H, int KV)
{
    struct at c = {.B = 2, .T = T, .H = H, .KV = KV, .hd = 8};
    size_t nq = (size_t)c.B * c.T * (H + 2 * KV) * c.hd, no = (size_t)c.B * c.T * H * c.hd;
    c.qkv = rand_buf(nq, 1), c.out = zero_buf(no), c.lse = zero_buf(c.B * H * c.T);
    c.r = rand_buf(no, 1);
    c.slots = omp_get_max_threads();
    c.scr = zero_buf(cpu_attention_scratch_floats(c.T, c.hd) * c.slots);
    at_loss(&c);
    // causal: the first position attends only to itself, so its output is v_0
    int ld = (H + 2 * KV) * c.hd, kvh = (H - 1) / (H / KV);
    CHECK(fabsf(c.out[(H - 1) * c.hd + 3] - c.qkv[(H + KV + kvh) * c.hd + 3]) < 1e-6,
          "attention T=%d H=%d KV=%d: position 0 output is its value (causal, GQA head map)", T,
          H, KV);
    (void)ld;
    float *dqkv = rand_buf(nq, 1); // must be fully overwritten
    cpu_attention_backward(dqkv, c.r, c.qkv, c.out, c.lse, c.B, c.T, H, KV, c.hd, NULL, c.scr,
                           c.slots);
    CHECK(fd_error(c.qkv, dqkv, nq, at_loss, &c, 1e-2f, 200) < TOL,
          "attention T=%d H=%d KV=%d d(q,k,v)", T, H, KV);
    free(c.qkv), free(c.out), free(c.lse), free(c.r), free(dqkv), free(c.scr);
}

/* Packed rows: attention over rows holding several sequences (positions restart at 0) equals
 * each sequence run alone — forward (out, lse) and backward (d(q,k,v)) — with tiles split at
 * sequence starts (one of 70 spans the 64-row tile boundary), 1-token sequences, GQA, and the
 * window and soft-cap of Gemma. */
static void test_attention_packed(int H, int KV, int window, float cap)
{
    enum { B = 2, T = 150, HD = 8 };
    static const int segs[B][6] = {{40, 70, 30, 10}, {1, 1, 100, 45, 3}};
    int W = (H + 2 * KV) * HD, O = H * HD, slots = omp_get_max_threads();
    struct cpu_attn ao = {1.0f / sqrtf((float)HD), cap, window};
    float *qkv = rand_buf((size_t)B * T * W, 1.5f), *dout = rand_buf((size_t)B * T * O, 1);
    float *out = zero_buf((size_t)B * T * O), *lse = zero_buf((size_t)B * H * T);
    float *dqkv = rand_buf((size_t)B * T * W, 1); // must be fully overwritten
    float *scr = zero_buf(cpu_attention_scratch_floats(T, HD) * slots);
    int32_t pos[B * T];
    for (int b = 0; b < B; b++)
        for (int k = 0, t = 0; segs[b][k]; t += segs[b][k++])
            for (int j = 0; j < segs[b][k]; j++)
                pos[b * T + t + j] = j;
    cpu_attention_forward_pos(out, lse, qkv, pos, B, T, H, KV, HD, &ao, scr, slots);
    cpu_attention_backward_pos(dqkv, dout, qkv, out, lse, pos, B, T, H, KV, HD, &ao, scr, slots);
    double eo = 0, el = 0, ed = 0, md = 0;
    float *o1 = zero_buf((size_t)T * O), *l1 = zero_buf((size_t)H * T),
          *d1 = zero_buf((size_t)T * W);
    for (int b = 0; b < B; b++)
        for (int k = 0, t = 0; segs[b][k]; t += segs[b][k++]) {
            int n = segs[b][k];
            const float *q1 = qkv + ((size_t)b * T + t) * W, *g1 = dout + ((size_t)b * T + t) * O;
            cpu_attention_forward(o1, l1, q1, 1, n, H, KV, HD, &ao, scr, slots);
            cpu_attention_backward(d1, g1, q1, o1, l1, 1, n, H, KV, HD, &ao, scr, slots);
            for (size_t i = 0; i < (size_t)n * O; i++)
                eo = fmax(eo, fabs(o1[i] - out[((size_t)b * T + t) * O + i]));
            for (int h = 0; h < H; h++)
                for (int j = 0; j < n; j++)
                    el = fmax(el, fabs(l1[h * n + j] - lse[((size_t)b * H + h) * T + t + j]));
            for (size_t i = 0; i < (size_t)n * W; i++) {
                ed = fmax(ed, fabs(d1[i] - dqkv[((size_t)b * T + t) * W + i]));
                md = fmax(md, fabs(d1[i]));
            }
        }
    CHECK(eo < 1e-5 && el < 1e-5 && ed < 1e-5 * fmax(md, 1),
          "packed attention H=%d KV=%d window %d cap %g = each sequence alone (out %.2g, lse "
          "%.2g, d(q,k,v) %.2g of %.2g)",
          H, KV, window, cap, eo, el, ed, md);
    // with every position = its column it is the unpacked kernel, bitwise
    for (int i = 0; i < B * T; i++)
        pos[i] = i % T;
    float *o2 = zero_buf((size_t)B * T * O), *l2 = zero_buf((size_t)B * H * T);
    cpu_attention_forward_pos(out, lse, qkv, pos, B, T, H, KV, HD, &ao, scr, slots);
    cpu_attention_forward(o2, l2, qkv, B, T, H, KV, HD, &ao, scr, slots);
    CHECK(memcmp(out, o2, sizeof(float) * B * T * O) == 0 &&
              memcmp(lse, l2, sizeof(float) * B * H * T) == 0,
          "packed attention with one sequence per row = the causal kernel, bitwise");
    free(qkv), free(dout), free(out), free(lse), free(dqkv), free(scr);
    free(o1), free(l1), free(d1), free(o2), free(l2);
}

/* ---- gelu, swiglu ---- */

struct ew {
    int M, F, swi;
    float *x, *out, *r;
};
static double ew_loss(void *p)
{
    struct ew *c = p;
    if (c->swi)
        cpu_swiglu_forward(c->out, c->x, c->M, c->F);
    else
        cpu_gelu_forward(c->out, c->x, (long)c->M * c->F);
    return dotd(c->out, c->r, (size_t)c->M * c->F);
}
static void test_elementwise(int swi)
{
    struct ew c = {.M = 4, .F = 9, .swi = swi};
    size_t nx = (size_t)c.M * c.F * (swi ? 2 : 1);
    c.x = rand_buf(nx, 3), c.out = zero_buf(c.M * c.F), c.r = rand_buf(c.M * c.F, 1);
    ew_loss(&c);
    float *dx = zero_buf(nx);
    if (swi) {
        cpu_swiglu_backward(dx, c.r, c.x, c.M, c.F);
        float g = c.x[2], u = c.x[c.F + 2];
        CHECK(fabsf(c.out[2] - g / (1 + expf(-g)) * u) < 1e-5, "swiglu forward silu(gate)*up");
    } else {
        cpu_gelu_backward(dx, c.r, c.x, (long)c.M * c.F);
        CHECK(fabsf(c.out[0] - 0.5f * c.x[0] *
                                   (1 + tanhf(0.7978845608f *
                                              (c.x[0] + 0.044715f * c.x[0] * c.x[0] * c.x[0])))) <
                  1e-6,
              "gelu forward tanh approximation");
    }
    CHECK(fd_error(c.x, dx, nx, ew_loss, &c, 1e-3f, 80) < TOL, "%s d(x)", swi ? "swiglu" : "gelu");
    free(c.x), free(c.out), free(c.r), free(dx);
}

/* ---- embedding ---- */

struct em {
    int B, T, C;
    int32_t *x;
    float *wte, *wpe, *out, *r;
};
static double em_loss(void *p)
{
    struct em *c = p;
    cpu_embedding_forward(c->out, c->x, c->wte, c->wpe, c->B, c->T, c->C);
    return dotd(c->out, c->r, (size_t)c->B * c->T * c->C);
}
static void test_embedding(void)
{
    int32_t x[] = {3, 1, 3, 0, 3, 2}; // repeated ids must accumulate
    struct em c = {.B = 2, .T = 3, .C = 70, .x = x};
    c.wte = rand_buf(5 * 70, 1), c.wpe = rand_buf(3 * 70, 1), c.out = zero_buf(6 * 70);
    c.r = rand_buf(6 * 70, 1);
    em_loss(&c);
    float *dwte = zero_buf(5 * 70), *dwpe = zero_buf(3 * 70);
    cpu_embedding_backward(dwte, dwpe, c.r, x, 2, 3, 70);
    CHECK(fd_error(c.wte, dwte, 5 * 70, em_loss, &c, 1e-2f, 350) < TOL, "embedding d(wte)");
    CHECK(fd_error(c.wpe, dwpe, 3 * 70, em_loss, &c, 1e-2f, 210) < TOL, "embedding d(wpe)");
    CHECK(dwte[4 * 70 + 5] == 0.0f, "embedding: unused row gets no gradient");
    free(c.wte), free(c.wpe), free(c.out), free(c.r), free(dwte), free(dwpe);
}

/* ---- softmax + cross-entropy ---- */

struct ce {
    int M, V, ld;
    int32_t *y;
    float *logits, *work, *lse, *logp, *c;
};
static double ce_loss(void *p)
{
    struct ce *c = p;
    memcpy(c->work, c->logits, sizeof(float) * c->M * c->ld);
    cpu_logsoftmax_forward(c->work, c->ld, c->V, c->y, c->lse, c->logp, c->M);
    return dotd(c->logp, c->c, c->M);
}
static void test_softmax_ce(void)
{
    int32_t y[] = {0, 6, -1, 3};
    struct ce c = {.M = 4, .V = 7, .ld = 16, .y = y};
    c.logits = rand_buf(c.M * c.ld, 3), c.work = zero_buf(c.M * c.ld);
    c.lse = zero_buf(c.M), c.logp = zero_buf(c.M);
    float cw[] = {-0.5f, -2.0f, 1.0f, 0.7f}; // d(loss)/d(logp): CE weights or DPO terms
    c.c = cw;
    ce_loss(&c);
    double s = 0;
    for (int v = 0; v < c.V; v++)
        s += exp(c.logits[c.ld + v] - c.lse[1]);
    CHECK(fabs(s - 1.0) < 1e-5, "softmax over the V real columns sums to 1");
    CHECK(isinf(c.work[c.ld + 9]) && c.work[c.ld + 9] < 0, "padded vocab logits are -inf");
    CHECK(c.logp[2] == 0.0f, "no target (y<0) gives log-prob 0");
    cpu_logsoftmax_backward(c.work, c.ld, c.V, y, c.lse, c.c, c.M);
    int zero = 1;
    for (int v = 0; v < c.ld; v++)
        zero &= c.work[2 * c.ld + v] == 0.0f && (v < c.V || c.work[v] == 0.0f);
    CHECK(zero, "dlogits are 0 for untargeted rows and padded columns");
    float *dl = malloc(sizeof(float) * c.M * c.ld); // ce_loss reuses c.work
    memcpy(dl, c.work, sizeof(float) * c.M * c.ld);
    CHECK(fd_error(c.logits, dl, c.M * c.ld, ce_loss, &c, 1e-2f, 64) < TOL,
          "softmax+CE backward from weighted d(logp)");
    free(c.logits), free(c.work), free(c.lse), free(c.logp), free(dl);
}

/* ---- whole model ---- */

static struct model_config tiny_cfg(enum model_family fam, int tied)
{
    struct model_config c = {.family = fam, .vocab_size = 50, .max_seq = 16, .n_layer = 2,
                             .n_head = 4, .n_kv_head = fam == MODEL_LLAMA ? 2 : 4,
                             .d_model = 16, .d_ff = fam == MODEL_LLAMA ? 24 : 64,
                             .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_factor = 8.0f,
                             .rope_low_freq = 1.0f, .rope_high_freq = 4.0f, .rope_orig_max = 8,
                             .tied = tied};
    return c;
}

struct mdl {
    struct model *m;
    const int32_t *x, *y;
    const float *w, *c; // c: d(loss)/d(logp) for the log-prob check
    int B, T;
    float *lp;
};
static double mdl_loss(void *p)
{
    struct mdl *c = p;
    double l = model_forward(c->m, c->x, c->y, c->w, 1.0f, c->B, c->T);
    if (!c->c)
        return l;
    model_token_logprobs(c->m, c->lp);
    return dotd(c->lp, c->c, (size_t)c->B * c->T);
}

/* Check every tensor's gradient (a few entries each). Returns the worst error. */
static double model_fd(struct mdl *c, const char **worst)
{
    struct model *m = c->m;
    model_zero_grad(m);
    mdl_loss(c);
    model_backward(m, c->c);
    double we = 0;
    for (int i = 0; i < model_ntensors(m); i++) {
        const struct model_tensor *t = model_tensor(m, i);
        size_t n = t->numel;
        if (t->ndim == 2 && t->shape[0] == model_cfg(m)->padded_vocab)
            n = (size_t)model_cfg(m)->vocab_size * t->shape[1]; // real rows only
        double e = fd_error(model_params(m) + t->offset, model_grads(m) + t->offset, n, mdl_loss,
                            c, 3e-3f, 12);
        if (e > we)
            we = e, *worst = t->name;
    }
    return we;
}

static void test_model_grads(enum model_family fam, int tied)
{
    const char *fn = fam == MODEL_LLAMA ? (tied ? "llama tied" : "llama untied") : "gpt2";
    struct model_config cfg = tiny_cfg(fam, tied);
    mtc_error_t err = {{0}};
    struct model *m = model_create(&cfg, &err);
    CHECK(m != NULL, "%s: create tiny model %s", fn, err.text);
    if (!m)
        return;
    model_init_weights(m, 7);
    // larger weights than the 0.02 init give gradients well above float noise
    float *p = model_params(m);
    for (size_t i = 0; i < model_nparams(m); i++)
        p[i] *= 4.0f;
    enum { B = 2, T = 6 };
    int32_t x[B * T], y[B * T];
    float w[B * T], cl[B * T];
    for (int i = 0; i < B * T; i++) {
        x[i] = (i * 7 + 3) % 50;
        y[i] = (i * 11 + 5) % 50;
        w[i] = (i % 3) * 0.5f; // includes zero weights (SFT prompt masking)
        cl[i] = frand();
    }
    y[4] = -1;
    struct mdl c = {m, x, y, w, NULL, B, T, zero_buf(B * T)};
    const char *worst = "";
    double e = model_fd(&c, &worst);
    CHECK(e < 2e-2, "%s: whole-model gradients, weighted CE (worst %.2g at %s)", fn, e, worst);
    c.c = cl;
    c.w = NULL;
    e = model_fd(&c, &worst);
    CHECK(e < 2e-2, "%s: whole-model gradients from d(logprob) (worst %.2g at %s)", fn, e, worst);

    // padded vocab rows never get gradient or probability
    const struct model_config *mc = model_cfg(m);
    const struct model_tensor *te = model_tensor(m, 0);
    int pad0 = 1;
    for (size_t i = (size_t)mc->vocab_size * mc->d_model; i < te->numel; i++)
        pad0 &= model_grads(m)[te->offset + i] == 0.0f && model_params(m)[te->offset + i] == 0.0f;
    CHECK(pad0 && mc->padded_vocab == 64, "%s: padded vocab rows stay zero", fn);

    // sampling forward (no targets) gives the same last logits
    c.c = NULL;
    model_forward(m, x, y, NULL, 0, B, T);
    float *l1 = malloc(sizeof(float) * B * mc->padded_vocab);
    memcpy(l1, model_last_logits(m), sizeof(float) * B * mc->padded_vocab);
    model_forward(m, x, NULL, NULL, 0, B, T);
    const float *l2 = model_last_logits(m);
    double md = 0;
    for (int i = 0; i < B * mc->padded_vocab; i++)
        if (!isinf(l1[i]) || !isinf(l2[i]))
            md = fmax(md, fabs(l1[i] - l2[i]));
    CHECK(md < 1e-4 && isinf(l2[mc->vocab_size]) && l2[mc->vocab_size] < 0,
          "%s: last logits without targets match, padded entries -inf", fn);
    free(l1);
    free(c.lp);
    model_destroy(m);
}

/* model_forward_packed: two rows of T=16 holding five sequences (and a padding segment)
 * give each sequence's log-probs and, summed, its gradients, as model_forward of each
 * sequence alone — GPT-2 (wpe at the position in the sequence), Llama (RoPE), Gemma 2
 * (window 4, soft-caps) and Gemma 3 (QK-norm, local and global RoPE); bad positions are
 * refused. */
static void test_model_packed(const char *preset)
{
    struct model_config cfg;
    model_preset(preset, &cfg, NULL);
    cfg.vocab_size = 100, cfg.padded_vocab = 0, cfg.n_layer = 2, cfg.max_seq = 32;
    if (cfg.window)
        cfg.window = 4;
    struct model *m = model_create(&cfg, NULL);
    model_init_weights(m, 5);
    float *p = model_params(m);
    for (size_t i = 0; i < model_nparams(m); i++)
        p[i] *= 3.0f;
    enum { B = 2, T = 16 };
    static const int segs[B][5] = {{5, 7, 4}, {3, 9, 4}}; // row 1 ends in 4 padding tokens
    int32_t x[B * T], y[B * T], pos[B * T];
    for (int i = 0; i < B * T; i++) {
        x[i] = (i * 37 + 11) % 100;
        y[i] = (i * 53 + 7) % 100;
    }
    for (int b = 0; b < B; b++)
        for (int k = 0, t = 0; segs[b][k]; t += segs[b][k++])
            for (int j = 0; j < segs[b][k]; j++)
                pos[b * T + t + j] = j;
    y[1] = -1;                                 // a masked target inside a sequence
    for (int i = B * T - 4; i < B * T; i++)    // padding: no targets
        y[i] = -1;
    size_t n = model_nparams(m);
    float lpk[B * T], lp1[T], *gk = malloc(n * sizeof(float)), *g1 = zero_buf(n);
    model_zero_grad(m);
    float lk = model_forward_packed(m, x, y, NULL, 1.0f, pos, B, T);
    model_token_logprobs(m, lpk);
    model_backward(m, NULL);
    memcpy(gk, model_grads(m), n * sizeof(float));
    model_zero_grad(m);
    double l1 = 0, elp = 0;
    for (int b = 0; b < B; b++)
        for (int k = 0, t = 0; segs[b][k] && !(b == 1 && k == 2); t += segs[b][k++]) {
            int len = segs[b][k], o = b * T + t;
            l1 += model_forward(m, x + o, y + o, NULL, 1.0f, 1, len);
            model_token_logprobs(m, lp1);
            model_backward(m, NULL); // accumulates
            for (int j = 0; j < len; j++)
                elp = fmax(elp, fabs(lp1[j] - lpk[o + j]));
        }
    const float *g = model_grads(m);
    double eg = 0, mg = 0;
    for (size_t i = 0; i < n; i++) {
        eg = fmax(eg, fabs(g[i] - gk[i]));
        mg = fmax(mg, fabs(g[i]));
    }
    CHECK(elp < 1e-5 && fabs(lk - l1) < 1e-5 * fmax(1, fabs(l1)) && eg < 1e-5 * mg,
          "%s: packed rows = each sequence alone (log-probs %.2g, loss %.7g vs %.7g, gradients "
          "%.2g of %.2g)",
          preset, elp, lk, l1, eg, mg);
    pos[3] = 7; // neither 0 nor the previous + 1
    errno = 0;
    float bad = model_forward_packed(m, x, y, NULL, 1.0f, pos, B, T);
    pos[3] = 3, pos[T] = 1; // a row that does not start a sequence
    errno = 0;
    float bad2 = model_forward_packed(m, x, y, NULL, 1.0f, pos, B, T);
    CHECK(isnan(bad) && isnan(bad2) && errno == EINVAL, "%s: bad positions refused (EINVAL)",
          preset);
    free(gk), free(g1);
    model_destroy(m);
}

/* Mean CE equals the manual mean of -logp; loss_norm scales it. */
static void test_loss_norm(void)
{
    struct model_config cfg = tiny_cfg(MODEL_LLAMA, 1);
    struct model *m = model_create(&cfg, NULL);
    model_init_weights(m, 1);
    int32_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8] = {2, 3, 4, 5, 6, 7, 8, -1};
    float w[8] = {0, 0, 1, 1, 1, 1, 2, 1}, lp[8];
    float l = model_forward(m, x, y, NULL, 0, 2, 4);
    model_token_logprobs(m, lp);
    double s = 0;
    for (int i = 0; i < 7; i++)
        s -= lp[i];
    CHECK(fabs(l - s / 7) < 1e-5 && lp[7] == 0.0f, "mean CE over targets (y<0 skipped)");
    float lw = model_forward(m, x, y, w, 0, 2, 4);
    s = 0;
    for (int i = 0; i < 7; i++)
        s -= w[i] * lp[i];
    CHECK(fabs(lw - s / 6) < 1e-5, "weighted CE normalised by the sum of weights");
    float ln = model_forward(m, x, y, w, 12.0f, 2, 4);
    CHECK(fabs(ln - s / 12) < 1e-5, "loss_norm given by the caller (accumulated batch)");
    int32_t bad[8] = {1, 2, 3, 4, 5, 6, 7, 50};
    CHECK(isnan(model_forward(m, bad, NULL, NULL, 0, 2, 4)), "token id >= vocab is rejected");
    CHECK(isnan(model_forward(m, x, NULL, NULL, 0, 1, 17)), "T > max_seq is rejected");

    // a sampler grows T one token at a time: activations regrow, results stay the same
    struct model *f = model_create(&cfg, NULL);
    model_init_weights(f, 1);
    CHECK(model_reserve(f, 1, 16, NULL) == 0, "reserve up front");
    int same = 1;
    for (int t = 1; t <= 8; t++) {
        model_forward(m, x, NULL, NULL, 0, 1, t);
        model_forward(f, x, NULL, NULL, 0, 1, t);
        same &= memcmp(model_last_logits(m), model_last_logits(f), sizeof(float) * 50) == 0;
    }
    CHECK(same, "growing T call by call gives the logits of a model reserved up front");
    model_destroy(f);
    model_destroy(m);
}

/* ---- determinism and learning ---- */

static void test_determinism(void)
{
    uint32_t bits[2];
    float *g[2];
    for (int r = 0; r < 2; r++) {
        struct model_config cfg = tiny_cfg(MODEL_GPT2, 1);
        struct model *m = model_create(&cfg, NULL);
        model_init_weights(m, 123);
        int32_t x[32], y[32];
        for (int i = 0; i < 32; i++)
            x[i] = (i * 13) % 50, y[i] = (i * 17 + 1) % 50;
        float l = model_forward(m, x, y, NULL, 0, 2, 16);
        model_backward(m, NULL);
        memcpy(&bits[r], &l, 4);
        g[r] = malloc(model_nparams(m) * sizeof(float));
        memcpy(g[r], model_grads(m), model_nparams(m) * sizeof(float));
        if (r == 1)
            CHECK(memcmp(g[0], g[1], model_nparams(m) * sizeof(float)) == 0,
                  "same seed: bitwise identical gradients");
        model_destroy(m);
    }
    CHECK(bits[0] == bits[1], "same seed: bitwise identical loss");
    free(g[0]), free(g[1]);
}

/* Matmul blocks and attention slots follow the thread count: 1 and 3 threads agree. */
static void test_thread_counts(void)
{
    struct model_config cfg = tiny_cfg(MODEL_LLAMA, 0);
    cfg.d_model = 64, cfg.d_ff = 160, cfg.max_seq = 40; // matmul splits over 32-wide blocks
    struct model *m = model_create(&cfg, NULL);
    model_init_weights(m, 9);
    int32_t x[80], y[80];
    for (int i = 0; i < 80; i++)
        x[i] = (i * 13) % 50, y[i] = (i * 17 + 1) % 50;
    int saved = omp_get_max_threads();
    float loss[2], *g[2];
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r == 0 ? 1 : 3);
        model_zero_grad(m);
        loss[r] = model_forward(m, x, y, NULL, 0, 2, 40);
        model_backward(m, NULL);
        g[r] = malloc(model_nparams(m) * sizeof(float));
        memcpy(g[r], model_grads(m), model_nparams(m) * sizeof(float));
    }
    omp_set_num_threads(saved);
    double md = 0, mg = 0;
    for (size_t i = 0; i < model_nparams(m); i++)
        md = fmax(md, fabs(g[0][i] - g[1][i])), mg = fmax(mg, fabs(g[0][i]));
    CHECK(fabsf(loss[0] - loss[1]) < 1e-5 && md < 1e-4 * mg,
          "1 and 3 threads give the same loss and gradients (to rounding)");
    free(g[0]), free(g[1]);
    model_destroy(m);
}

static void test_vexpf(void)
{
    double worst = 0;
    for (float x = -87.0f; x < 88.0f; x += 0.0137f)
        worst = fmax(worst, fabs((double)vexpf(x) - exp(x)) / exp(x));
    CHECK(worst < 1e-6 && vexpf(0.0f) == 1.0f && isnan(vexpf(NAN)),
          "vectorized exp: relative error %.2g, exp(0) = 1, NaN stays NaN", worst);
}

static void test_learns(enum model_family fam)
{
    struct model_config cfg = tiny_cfg(fam, 0);
    struct model *m = model_create(&cfg, NULL);
    model_init_weights(m, 5);
    int32_t seq[17];
    for (int i = 0; i < 17; i++)
        seq[i] = (i * 19 + 4) % 50;
    float first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        model_zero_grad(m);
        last = model_forward(m, seq, seq + 1, NULL, 0, 1, 16);
        if (step == 0)
            first = last;
        model_backward(m, NULL);
        float *p = model_params(m), *g = model_grads(m);
        for (size_t i = 0; i < model_nparams(m); i++)
            p[i] -= 0.5f * g[i];
    }
    CHECK(last < 0.3f * first, "%s: SGD on a repeated sequence lowers the loss (%.3f -> %.3f)",
          fam == MODEL_LLAMA ? "llama" : "gpt2", first, last);
    model_destroy(m);
}

/* ---- presets, tensor table, JSON ---- */

static void test_presets(void)
{
    struct model_config c;
    mtc_error_t err = {{0}};
    const struct {
        const char *name;
        size_t n;
    } known[] = {
        {"gpt2-124m", 124475904},     // llm.c's count (padded vocab 50304)
        {"llama3.2-1b", 1235814400},  // HF Llama-3.2-1B
        {"llama3.2-3b", 3212749824},  // HF Llama-3.2-3B
        {"llama3.1-8b", 8030261248},  // HF Llama-3.1-8B
        {"llama3p1-2b", 1985054720},  // ours, docs/trainer.md
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        int rc = model_preset(known[i].name, &c, &err);
        CHECK(rc == 0 && model_config_nparams(&c) == known[i].n, "preset %s has %zu parameters",
              known[i].name, known[i].n);
    }
    CHECK(model_preset("gpt2-350m", &c, NULL) == 0 && c.n_layer == 24 && c.d_model == 1024,
          "preset gpt2-350m");
    CHECK(model_preset("tiny-llama", &c, NULL) == 0 && c.n_kv_head < c.n_head,
          "tiny-llama uses grouped-query attention");
    CHECK(model_preset("gpt5", &c, &err) == -1 && strstr(err.text, "gpt5"),
          "unknown preset is an error naming it");

    // HF Llama config.json
    json_error_t je;
    json_t *hf = json_loads(
        "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":256,"
        "\"intermediate_size\":512,\"num_hidden_layers\":3,\"num_attention_heads\":8,"
        "\"num_key_value_heads\":2,\"vocab_size\":1000,\"max_position_embeddings\":512,"
        "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"rope_scaling\":{\"factor\":4.0,"
        "\"low_freq_factor\":1.0,\"high_freq_factor\":2.0,\"original_max_position_embeddings\":"
        "256,\"rope_type\":\"llama3\"},\"tie_word_embeddings\":false,\"hidden_act\":\"silu\","
        "\"torch_dtype\":\"bfloat16\"}",
        0, &je);
    model_preset("tiny-gpt2", &c, NULL);
    int rc = model_config_apply_json(&c, hf, &err);
    CHECK(rc == 0 && c.family == MODEL_LLAMA && c.d_model == 256 && c.d_ff == 512 &&
              c.n_layer == 3 && c.n_head == 8 && c.n_kv_head == 2 && c.vocab_size == 1000 &&
              c.padded_vocab == 1024 && c.max_seq == 512 && fabsf(c.norm_eps - 1e-6f) < 1e-12 &&
              c.rope_factor == 4.0f && c.rope_high_freq == 2.0f && c.rope_orig_max == 256 &&
              c.tied == 0,
          "HF Llama config.json applies %s", err.text);
    json_decref(hf);

    json_t *g = json_loads("{\"n_embd\":96,\"n_layer\":2,\"n_head\":3,\"n_positions\":64,"
                           "\"layer_norm_epsilon\":1e-5,\"vocab_size\":300}",
                           0, &je);
    model_preset("gpt2-124m", &c, NULL);
    rc = model_config_apply_json(&c, g, &err);
    CHECK(rc == 0 && c.d_model == 96 && c.n_head == 3 && c.n_kv_head == 3 && c.max_seq == 64 &&
              c.padded_vocab == 320,
          "HF GPT-2 config names apply");
    json_decref(g);

    json_t *bad = json_loads("{\"hidden_size\":64,\"hiden_layers\":2}", 0, &je);
    struct model_config before = c;
    rc = model_config_apply_json(&c, bad, &err);
    CHECK(rc == -1 && strstr(err.text, "hiden_layers") && model_config_equal(&c, &before),
          "unknown key is an error naming it, config unchanged");
    json_decref(bad);
    bad = json_loads("{\"rope_scaling\":{\"factor\":2,\"beta\":1}}", 0, &je);
    rc = model_config_apply_json(&c, bad, &err);
    CHECK(rc == -1 && strstr(err.text, "beta"), "unknown rope_scaling key is an error");
    json_decref(bad);
    bad = json_loads("{\"n_layer\":\"two\"}", 0, &je);
    CHECK(model_config_apply_json(&c, bad, &err) == -1 && strstr(err.text, "n_layer"),
          "wrong type is an error naming the key");
    json_decref(bad);

    // our JSON round-trips
    model_preset("llama3.1-8b", &c, NULL);
    json_t *j = model_config_to_json(&c);
    struct model_config d;
    model_preset("tiny-gpt2", &d, NULL);
    rc = model_config_apply_json(&d, j, &err);
    CHECK(rc == 0 && model_config_equal(&c, &d), "model_config_to_json round-trips");
    json_decref(j);

    // tensor table
    struct model_config t = tiny_cfg(MODEL_LLAMA, 0);
    struct model *m = model_create(&t, &err);
    size_t sum = 0;
    int contiguous = 1;
    for (int i = 0; i < model_ntensors(m); i++) {
        contiguous &= model_tensor(m, i)->offset == sum;
        sum += model_tensor(m, i)->numel;
    }
    CHECK(contiguous && sum == model_nparams(m) && sum == model_config_nparams(&t),
          "tensor table covers the flat buffer contiguously");
    int k = model_find_tensor(m, "model.layers.1.self_attn.k_proj.weight");
    CHECK(k >= 0 && model_tensor(m, k)->shape[0] == 8 && model_tensor(m, k)->shape[1] == 16 &&
              model_tensor(m, k)->decay,
          "llama k_proj is (n_kv_head*head_dim, d_model), decayed");
    CHECK(model_find_tensor(m, "lm_head.weight") >= 0, "untied llama has lm_head.weight");
    model_destroy(m);
    t = tiny_cfg(MODEL_GPT2, 1);
    m = model_create(&t, &err);
    k = model_find_tensor(m, "transformer.h.0.attn.c_attn.weight");
    CHECK(k >= 0 && model_tensor(m, k)->shape[0] == 48 && model_tensor(m, k)->shape[1] == 16 &&
              model_find_tensor(m, "lm_head.weight") < 0 &&
              !model_tensor(m, model_find_tensor(m, "transformer.ln_f.bias"))->decay,
          "gpt2 table: c_attn (3C, C) stored (out,in), tied, biases not decayed");
    CHECK(model_flops_per_token(m, 16) > 6.0 * 2 * 12 * 16 * 16, "flops per token counted");
    model_destroy(m);
    t.n_head = 5;
    CHECK(model_create(&t, &err) == NULL && strstr(err.text, "n_head"),
          "bad shape rejected by model_create");
}

int main(void)
{
    test_matmul();
    test_norm(0);
    test_norm(1);
    test_rope();
    test_attention(5, 4, 4);
    test_attention(5, 4, 2);
    test_attention(5, 6, 1);
    test_attention(150, 2, 1); // three query tiles of 64
    test_attention_packed(4, 2, 0, 0.0f);
    test_attention_packed(6, 1, 0, 0.0f);
    test_attention_packed(4, 4, 20, 5.0f);

    test_elementwise(0);
    test_elementwise(1);
    test_embedding();
    test_softmax_ce();
    test_model_grads(MODEL_GPT2, 1);
    test_model_grads(MODEL_LLAMA, 1);
    test_model_grads(MODEL_LLAMA, 0);
    test_model_packed("tiny-gpt2");
    test_model_packed("tiny-llama");
    test_model_packed("tiny-gemma2");
    test_model_packed("tiny-gemma3");
    test_loss_norm();
    test_determinism();
    test_thread_counts();
    test_vexpf();
    test_learns(MODEL_GPT2);
    test_learns(MODEL_LLAMA);
    test_presets();
    return check_done();
}
