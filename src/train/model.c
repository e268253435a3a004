/* model: GPT-2, Llama, Gemma 2 and Gemma 3 decoders on the CPU — the tensor table over one
 * flat fp32 parameter buffer, weight init, activation memory, and the forward/backward
 * passes that chain the kernels of src/train/cpu/. What differs between the families is
 * one row of families[] (tensor tables and traits), not branches on the family. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/cpu/kernels.h"
#include "train/model.h"

/* What a tensor is used for; the passes find parameters by role, not by name. */
enum role {
    R_WTE, R_WPE, R_LNF_W, R_LNF_B, R_LM_HEAD, // global
    R_LN1_W, R_LN1_B, R_QKV_W, R_QKV_B, R_K_W, R_V_W, R_PROJ_W, R_PROJ_B,
    R_LN2_W, R_LN2_B, R_FC_W, R_FC_B, R_UP_W, R_FCPROJ_W, R_FCPROJ_B,
    R_PATT_W, R_PFF_W, R_QN_W, R_KN_W, // Gemma: post-attention / post-MLP norms, QK-norm
    R_NROLES
};
enum dim { D_1, D_C, D_F, D_VP, D_T, D_Q, D_KV, D_QKV, D_HD };
enum init { I_NORMAL, I_RESID, I_ONE, I_ZERO };

struct tdef {
    enum role role;
    const char *name; // "%d" is the layer index in layer tables
    enum dim rows, cols; // cols D_1: a 1-D tensor
    enum init init;
};

/* Storage order follows each table. Llama's q,k,v (and gate,up) are adjacent rows of one
 * matrix, so one sgemm computes them together. */
static const struct tdef gpt2_head[] = {
    {R_WTE, "transformer.wte.weight", D_VP, D_C, I_NORMAL},
    {R_WPE, "transformer.wpe.weight", D_T, D_C, I_NORMAL},
};
static const struct tdef gpt2_layer[] = {
    {R_LN1_W, "transformer.h.%d.ln_1.weight", D_C, D_1, I_ONE},
    {R_LN1_B, "transformer.h.%d.ln_1.bias", D_C, D_1, I_ZERO},
    {R_QKV_W, "transformer.h.%d.attn.c_attn.weight", D_QKV, D_C, I_NORMAL},
    {R_QKV_B, "transformer.h.%d.attn.c_attn.bias", D_QKV, D_1, I_ZERO},
    {R_PROJ_W, "transformer.h.%d.attn.c_proj.weight", D_C, D_Q, I_RESID},
    {R_PROJ_B, "transformer.h.%d.attn.c_proj.bias", D_C, D_1, I_ZERO},
    {R_LN2_W, "transformer.h.%d.ln_2.weight", D_C, D_1, I_ONE},
    {R_LN2_B, "transformer.h.%d.ln_2.bias", D_C, D_1, I_ZERO},
    {R_FC_W, "transformer.h.%d.mlp.c_fc.weight", D_F, D_C, I_NORMAL},
    {R_FC_B, "transformer.h.%d.mlp.c_fc.bias", D_F, D_1, I_ZERO},
    {R_FCPROJ_W, "transformer.h.%d.mlp.c_proj.weight", D_C, D_F, I_RESID},
    {R_FCPROJ_B, "transformer.h.%d.mlp.c_proj.bias", D_C, D_1, I_ZERO},
};
static const struct tdef gpt2_tail[] = {
    {R_LNF_W, "transformer.ln_f.weight", D_C, D_1, I_ONE},
    {R_LNF_B, "transformer.ln_f.bias", D_C, D_1, I_ZERO},
};
static const struct tdef llama_head[] = {
    {R_WTE, "model.embed_tokens.weight", D_VP, D_C, I_NORMAL},
};
static const struct tdef llama_layer[] = {
    {R_LN1_W, "model.layers.%d.input_layernorm.weight", D_C, D_1, I_ONE},
    {R_QKV_W, "model.layers.%d.self_attn.q_proj.weight", D_Q, D_C, I_NORMAL},
    {R_K_W, "model.layers.%d.self_attn.k_proj.weight", D_KV, D_C, I_NORMAL},
    {R_V_W, "model.layers.%d.self_attn.v_proj.weight", D_KV, D_C, I_NORMAL},
    {R_PROJ_W, "model.layers.%d.self_attn.o_proj.weight", D_C, D_Q, I_RESID},
    {R_LN2_W, "model.layers.%d.post_attention_layernorm.weight", D_C, D_1, I_ONE},
    {R_FC_W, "model.layers.%d.mlp.gate_proj.weight", D_F, D_C, I_NORMAL},
    {R_UP_W, "model.layers.%d.mlp.up_proj.weight", D_F, D_C, I_NORMAL},
    {R_FCPROJ_W, "model.layers.%d.mlp.down_proj.weight", D_C, D_F, I_RESID},
};
static const struct tdef llama_tail[] = {
    {R_LNF_W, "model.norm.weight", D_C, D_1, I_ONE},
    {R_LM_HEAD, "lm_head.weight", D_VP, D_C, I_NORMAL}, // only when untied
};

/* Gemma: every norm is RMSNorm (1 + w), so its weights start at 0. q, k, v stay adjacent
 * (one matrix); Gemma 3's per-head q_norm, k_norm follow them. */
#define GEMMA_LAYER_QKV                                                                            \
    {R_LN1_W, "model.layers.%d.input_layernorm.weight", D_C, D_1, I_ZERO},                        \
        {R_QKV_W, "model.layers.%d.self_attn.q_proj.weight", D_Q, D_C, I_NORMAL},                 \
        {R_K_W, "model.layers.%d.self_attn.k_proj.weight", D_KV, D_C, I_NORMAL},                  \
        {R_V_W, "model.layers.%d.self_attn.v_proj.weight", D_KV, D_C, I_NORMAL}
#define GEMMA_LAYER_REST                                                                           \
    {R_PROJ_W, "model.layers.%d.self_attn.o_proj.weight", D_C, D_Q, I_RESID},                     \
        {R_PATT_W, "model.layers.%d.post_attention_layernorm.weight", D_C, D_1, I_ZERO},          \
        {R_LN2_W, "model.layers.%d.pre_feedforward_layernorm.weight", D_C, D_1, I_ZERO},          \
        {R_FC_W, "model.layers.%d.mlp.gate_proj.weight", D_F, D_C, I_NORMAL},                     \
        {R_UP_W, "model.layers.%d.mlp.up_proj.weight", D_F, D_C, I_NORMAL},                       \
        {R_FCPROJ_W, "model.layers.%d.mlp.down_proj.weight", D_C, D_F, I_RESID},                  \
        {R_PFF_W, "model.layers.%d.post_feedforward_layernorm.weight", D_C, D_1, I_ZERO}
static const struct tdef gemma_head[] = {
    {R_WTE, "model.embed_tokens.weight", D_VP, D_C, I_NORMAL},
};
static const struct tdef gemma2_layer[] = {GEMMA_LAYER_QKV, GEMMA_LAYER_REST};
static const struct tdef gemma3_layer[] = {
    GEMMA_LAYER_QKV,
    {R_QN_W, "model.layers.%d.self_attn.q_norm.weight", D_HD, D_1, I_ZERO},
    {R_KN_W, "model.layers.%d.self_attn.k_norm.weight", D_HD, D_1, I_ZERO},
    GEMMA_LAYER_REST,
};
static const struct tdef gemma_tail[] = {
    {R_LNF_W, "model.norm.weight", D_C, D_1, I_ZERO},
    {R_LM_HEAD, "lm_head.weight", D_VP, D_C, I_NORMAL}, // only when untied
};

enum norm_kind { NORM_LAYER, NORM_RMS, NORM_RMS1P }; // LayerNorm, RMSNorm w, RMSNorm (1 + w)
enum mlp_kind { MLP_GELU, MLP_SWIGLU, MLP_GEGLU };

#define COUNT(a) (int)(sizeof a / sizeof a[0])
/* One row per family: its tensors and the traits the passes follow. */
struct family_tables {
    const struct tdef *head;
    int nhead;
    const struct tdef *layer;
    int nlayer;
    const struct tdef *tail;
    int ntail;
    enum norm_kind norm;
    enum mlp_kind mlp;
    int rope;        // q, k rotated
    int embed_scale; // embeddings times sqrt(d_model)
    int post_norms;  // a norm on the attention and MLP outputs before the residual add
    int qk_norm;     // per-head RMSNorm of q and k
};
#define TABLES(h, l, t)                                                                            \
    .head = h, .nhead = COUNT(h), .layer = l, .nlayer = COUNT(l), .tail = t, .ntail = COUNT(t)
static const struct family_tables families[] = {
    [MODEL_GPT2] = {TABLES(gpt2_head, gpt2_layer, gpt2_tail), .norm = NORM_LAYER, .mlp = MLP_GELU},
    [MODEL_LLAMA] = {TABLES(llama_head, llama_layer, llama_tail), .norm = NORM_RMS,
                     .mlp = MLP_SWIGLU, .rope = 1},
    [MODEL_GEMMA2] = {TABLES(gemma_head, gemma2_layer, gemma_tail), .norm = NORM_RMS1P,
                      .mlp = MLP_GEGLU, .rope = 1, .embed_scale = 1, .post_norms = 1},
    [MODEL_GEMMA3] = {TABLES(gemma_head, gemma3_layer, gemma_tail), .norm = NORM_RMS1P,
                      .mlp = MLP_GEGLU, .rope = 1, .embed_scale = 1, .post_norms = 1, .qk_norm = 1},
};
#undef TABLES

/* Activations of one forward, sized for up to cap_m = B*T rows and cap_t positions. */
struct acts {
    int cap_m, cap_t;
    float *res;    // (L+1, M, C): res[0] embeddings, res[l+1] output of layer l
    float *res2;   // (L, M, C) residual after attention
    float *ln1, *ln2;                    // (L, M, C) normed inputs
    float *mean1, *rstd1, *mean2, *rstd2; // (L, M)
    float *qkv;    // (L, M, QKV) after RoPE for Llama
    float *att;    // (L, M, Q) attention output before projection
    float *alse;   // (L, B, H, T) attention log-sum-exp
    float *fc;     // (L, M, FCN) fc pre-activation (GPT-2, FCN=F) or gate|up (Llama, 2F)
    float *fch;    // (L, M, F) gelu / swiglu output
    float *lnf, *meanf, *rstdf; // (M, C), (M), (M)
    float *logits; // (M, Vp); dlogits after backward
    float *lse, *logp, *dlogp; // (M)
    float *last;   // (cap_b, Vp) last-position logits, allocated apart (B varies)
    int cap_b;
    float *dres;   // (M, C) gradient of the residual stream
    float *da;     // (M, max(QKV, FCN))
    float *db;     // (M, max(C, F, Q))
    float *rcos, *rsin; // (cap_t, hd/2) RoPE tables (global layers)
    float *rcos_l, *rsin_l; // (cap_t, hd/2) RoPE tables of the local layers (Gemma)
    float *patt, *pff;  // (L, M, C) attention / MLP outputs before their post-norm (Gemma)
    float *rstdpa, *rstdpf; // (L, M)
    float *qkn, *qkr;   // (L, M, (H+KV)*hd) q,k before the QK-norm; (L, M, H+KV) its rstd
    float *dc;          // (M, C) gradient scratch (post-norms)
    int32_t *x, *y; // (M) inputs of the last forward
    void *block;
    float *ascratch; // attention scratch: aslots per-thread slots sized for cap_t
    int aslots;
};

struct model {
    struct model_config cfg;
    const struct family_tables *fam;
    int hd, q, kv, qkv, fcn; // head dim, q width, kv width, qkv row, fc rows
    float *params, *grads;
    size_t nparams;
    struct model_tensor *tensors;
    int ntensors;
    size_t goff[R_NROLES];
    size_t (*loff)[R_NROLES]; // per layer
    struct acts a;
    int B, T, has_y, has_logits; // last forward
};

static int dim_value(const struct model_config *c, enum dim d)
{
    int hd = c->head_dim;
    const int v[] = {
        [D_1] = 1, [D_C] = c->d_model, [D_F] = c->d_ff, [D_VP] = c->padded_vocab,
        [D_T] = c->max_seq, [D_Q] = c->n_head * hd, [D_KV] = c->n_kv_head * hd,
        [D_QKV] = (c->n_head + 2 * c->n_kv_head) * hd, [D_HD] = hd,
    };
    return v[d];
}

static int tdef_skip(const struct model_config *c, const struct tdef *d)
{
    return d->role == R_LM_HEAD && c->tied;
}

/* Walk the tables in storage order; visit(d, layer (-1 global), ctx). */
static void walk_tables(const struct model_config *c,
                        void (*visit)(const struct tdef *, int, void *), void *ctx)
{
    const struct family_tables *f = &families[c->family];
    for (int i = 0; i < f->nhead; i++)
        if (!tdef_skip(c, &f->head[i]))
            visit(&f->head[i], -1, ctx);
    for (int l = 0; l < c->n_layer; l++)
        for (int i = 0; i < f->nlayer; i++)
            visit(&f->layer[i], l, ctx);
    for (int i = 0; i < f->ntail; i++)
        if (!tdef_skip(c, &f->tail[i]))
            visit(&f->tail[i], -1, ctx);
}

struct count_ctx {
    const struct model_config *c;
    size_t n;
    int ntensors;
    int overflow; // cannot happen within the MODEL_MAX_* bounds; checked all the same
};
static void count_visit(const struct tdef *d, int layer, void *p)
{
    struct count_ctx *x = p;
    size_t rows = (size_t)dim_value(x->c, d->rows), cols = (size_t)dim_value(x->c, d->cols), numel;
    (void)layer;
    if (mtc_size_mul(rows, cols, &numel) < 0 || mtc_size_add(x->n, numel, &x->n) < 0)
        x->overflow = 1;
    x->ntensors++;
}

size_t model_config_nparams(const struct model_config *cfg)
{
    struct model_config c = *cfg;
    if (model_config_check(&c, NULL) < 0)
        return 0;
    struct count_ctx x = {&c, 0, 0, 0};
    walk_tables(&c, count_visit, &x);
    return x.overflow ? 0 : x.n;
}

struct build_ctx {
    struct model *m;
    size_t off;
    int i;
    int failed;
};
static void build_visit(const struct tdef *d, int layer, void *p)
{
    struct build_ctx *x = p;
    struct model *m = x->m;
    struct model_tensor *t = &m->tensors[x->i++];
    char name[128];
    snprintf(name, sizeof name, d->name, layer);
    if (!(t->name = strdup(name)))
        x->failed = 1;
    t->offset = x->off;
    t->shape[0] = dim_value(&m->cfg, d->rows);
    t->ndim = d->cols == D_1 ? 1 : 2;
    if (t->ndim == 2)
        t->shape[1] = dim_value(&m->cfg, d->cols);
    t->numel = (size_t)t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
    t->decay = t->ndim == 2;
    if (layer < 0)
        m->goff[d->role] = x->off;
    else
        m->loff[layer][d->role] = x->off;
    x->off += t->numel;
}

struct model *model_create(const struct model_config *cfg, mtc_error_t *err)
{
    struct model *m = calloc(1, sizeof *m);
    if (!m) {
        errprintf(err, "out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    if (model_config_check(&m->cfg, err) < 0)
        goto error;
    const struct model_config *c = &m->cfg;
    m->fam = &families[c->family];
    m->hd = c->head_dim;
    m->q = c->n_head * m->hd;
    m->kv = c->n_kv_head * m->hd;
    m->qkv = m->q + 2 * m->kv;
    m->fcn = m->fam->mlp == MLP_GELU ? c->d_ff : 2 * c->d_ff;

    struct count_ctx cnt = {c, 0, 0, 0};
    walk_tables(c, count_visit, &cnt);
    if (cnt.overflow) {
        errno = EOVERFLOW;
        errprintf(err, "model too large: its parameter count overflows");
        goto error;
    }
    m->nparams = cnt.n;
    m->ntensors = cnt.ntensors;
    m->tensors = calloc(cnt.ntensors, sizeof *m->tensors);
    m->loff = calloc(c->n_layer, sizeof *m->loff);
    // calloc: zero pages are mapped lazily, so huge presets cost nothing until touched.
    m->params = calloc(m->nparams, sizeof(float));
    m->grads = calloc(m->nparams, sizeof(float));
    if (!m->tensors || !m->loff || !m->params || !m->grads) {
        errprintf(err, "out of memory for %zu parameters", m->nparams);
        goto error;
    }
    memset(m->goff, 0xff, sizeof m->goff); // SIZE_MAX: role absent in this family
    memset(m->loff, 0xff, c->n_layer * sizeof *m->loff);
    struct build_ctx b = {m, 0, 0, 0};
    walk_tables(c, build_visit, &b);
    if (b.failed) {
        errprintf(err, "out of memory");
        goto error;
    }
    if (c->tied)
        m->goff[R_LM_HEAD] = m->goff[R_WTE];
    return m;
error:
    model_destroy(m);
    return NULL;
}

void model_destroy(struct model *m)
{
    if (!m)
        return;
    int e = errno;
    for (int i = 0; m->tensors && i < m->ntensors; i++)
        free((char *)m->tensors[i].name);
    free(m->tensors);
    free(m->loff);
    free(m->params);
    free(m->grads);
    free(m->a.block);
    free(m->a.last);
    free(m->a.ascratch);
    free(m);
    errno = e;
}

const struct model_config *model_cfg(const struct model *m) { return &m->cfg; }
float *model_params(struct model *m) { return m->params; }
size_t model_nparams(const struct model *m) { return m->nparams; }
float *model_grads(struct model *m) { return m->grads; }
int model_ntensors(const struct model *m) { return m->ntensors; }

const struct model_tensor *model_tensor(const struct model *m, int i)
{
    return i >= 0 && i < m->ntensors ? &m->tensors[i] : NULL;
}

int model_find_tensor(const struct model *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return i;
    return -1;
}

void model_zero_grad(struct model *m)
{
    memset(m->grads, 0, m->nparams * sizeof(float));
}

/* ---- init ---- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) // (0, 1]
{
    return ((splitmix64(s) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

#define INIT_CHUNK 4096

/* Fill p[0..n) with N(0,std). Chunks get their own stream seeded from (seed, tensor,
 * chunk), so the result does not depend on how threads split the work. */
static void fill_normal(float *p, size_t n, float std, uint64_t seed, int tensor)
{
    size_t nchunks = (n + INIT_CHUNK - 1) / INIT_CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t ch = 0; ch < nchunks; ch++) {
        uint64_t s = seed ^ ((uint64_t)tensor << 40) ^ ch;
        splitmix64(&s);
        size_t end = (ch + 1) * INIT_CHUNK < n ? (ch + 1) * INIT_CHUNK : n;
        for (size_t i = ch * INIT_CHUNK; i < end; i += 2) {
            double r = sqrt(-2.0 * log(uniform01(&s))), th = 2.0 * M_PI * uniform01(&s);
            p[i] = (float)(std * r * cos(th));
            if (i + 1 < end)
                p[i + 1] = (float)(std * r * sin(th));
        }
    }
}

struct init_ctx {
    struct model *m;
    uint64_t seed;
    int i;
};
static void init_visit(const struct tdef *d, int layer, void *p)
{
    struct init_ctx *x = p;
    struct model *m = x->m;
    const struct model_tensor *t = &m->tensors[x->i];
    float *w = m->params + t->offset;
    (void)layer;
    if (d->init == I_ONE) {
        for (size_t i = 0; i < t->numel; i++)
            w[i] = 1.0f;
    } else if (d->init == I_ZERO) {
        memset(w, 0, t->numel * sizeof(float));
    } else {
        float std = 0.02f;
        if (d->init == I_RESID)
            std /= sqrtf(2.0f * m->cfg.n_layer);
        fill_normal(w, t->numel, std, x->seed, x->i);
        if (d->rows == D_VP) // padded vocab rows stay zero
            memset(w + (size_t)m->cfg.vocab_size * t->shape[1], 0,
                   (size_t)(m->cfg.padded_vocab - m->cfg.vocab_size) * t->shape[1] * sizeof(float));
    }
    x->i++;
}

void model_init_weights(struct model *m, uint64_t seed)
{
    struct init_ctx x = {m, seed, 0};
    walk_tables(&m->cfg, init_visit, &x);
}

/* ---- activations ---- */

/* RoPE tables for positions 0..T-1: the global layers' (Llama 3 or linear scaling) and the
 * local layers' (their own base) when the family rotates. */
static void rope_tables(const struct model *m, float *cs, float *sn, float *cs_l, float *sn_l, int T)
{
    const struct model_config *c = &m->cfg;
    if (!m->fam->rope)
        return;
    if (c->rope_linear > 0)
        cpu_rope_tables_linear(cs, sn, T, m->hd, c->rope_theta, c->rope_linear);
    else
        cpu_rope_tables(cs, sn, T, m->hd, c->rope_theta, c->rope_factor, c->rope_low_freq,
                        c->rope_high_freq, c->rope_orig_max);
    cpu_rope_tables(cs_l, sn_l, T, m->hd, c->rope_local_theta > 0 ? c->rope_local_theta : c->rope_theta,
                    0.0f, 0, 0, 0);
}

/* The attention of layer l: query scale, soft-cap, and the window when it is local. */
static struct cpu_attn layer_attn(const struct model *m, int l)
{
    const struct model_config *c = &m->cfg;
    float qs = c->query_scalar > 0 ? c->query_scalar : (float)m->hd;
    struct cpu_attn o = {1.0f / sqrtf(qs), c->attn_softcap, model_layer_local(c, l) ? c->window : 0};
    return o;
}

/* One attention scratch slot per OpenMP thread (the count OMP_NUM_THREADS gives now). */
static int reserve_attention(struct model *m, mtc_error_t *err)
{
    struct acts *a = &m->a;
    int slots = omp_get_max_threads();
    if (slots <= a->aslots)
        return 0;
    size_t per = cpu_attention_scratch_floats(a->cap_t, m->hd);
    float *p = realloc(a->ascratch, per * slots * sizeof(float));
    if (!p) {
        errno = ENOMEM;
        return errprintf(err, "out of memory for attention scratch");
    }
    a->ascratch = p;
    a->aslots = slots;
    return 0;
}

int model_reserve(struct model *m, int B, int T, mtc_error_t *err)
{
    const struct model_config *c = &m->cfg;
    if (B <= 0 || T <= 0 || T > c->max_seq || (int64_t)B * T > INT32_MAX / 4) {
        errno = EINVAL;
        return errprintf(err, "bad batch shape B=%d T=%d (max_seq %d)", B, T, c->max_seq);
    }
    struct acts *a = &m->a;
    int M = B * T;
    if (a->block && M <= a->cap_m && T <= a->cap_t)
        return reserve_attention(m, err);
    if (a->block) { // grow geometrically (a sampler lengthens T by one each call)
        int m2 = a->cap_m * 2 < INT32_MAX / 8 ? a->cap_m * 2 : a->cap_m;
        int t2 = a->cap_t * 2 < c->max_seq ? a->cap_t * 2 : c->max_seq;
        M = M > m2 ? M : m2;
        T = T > t2 ? T : t2;
    }
    size_t L = c->n_layer, C = c->d_model, F = c->d_ff, Vp = c->padded_vocab;
    size_t Mz = M, H = c->n_head, half = m->hd / 2;
    size_t pn = m->fam->post_norms, qn = m->fam->qk_norm, nqk = H + c->n_kv_head;
    size_t da = (size_t)(m->qkv > m->fcn ? m->qkv : m->fcn);
    size_t db = C > F ? C : F;
    db = db > (size_t)m->q ? db : (size_t)m->q;
    struct {
        float **p;
        size_t n;
    } f[] = {
        {&a->res, (L + 1) * Mz * C}, {&a->res2, L * Mz * C}, {&a->ln1, L * Mz * C},
        {&a->ln2, L * Mz * C}, {&a->mean1, L * Mz}, {&a->rstd1, L * Mz},
        {&a->mean2, L * Mz}, {&a->rstd2, L * Mz}, {&a->qkv, L * Mz * m->qkv},
        {&a->att, L * Mz * m->q}, {&a->alse, L * Mz * H}, {&a->fc, L * Mz * m->fcn},
        {&a->fch, L * Mz * F}, {&a->lnf, Mz * C}, {&a->meanf, Mz}, {&a->rstdf, Mz},
        {&a->logits, Mz * Vp}, {&a->lse, Mz}, {&a->logp, Mz}, {&a->dlogp, Mz},
        {&a->dres, Mz * C}, {&a->da, Mz * da}, {&a->db, Mz * db},
        {&a->rcos, (size_t)T * half}, {&a->rsin, (size_t)T * half},
        {&a->rcos_l, (size_t)T * half}, {&a->rsin_l, (size_t)T * half},
        {&a->patt, pn * L * Mz * C}, {&a->pff, pn * L * Mz * C}, {&a->rstdpa, pn * L * Mz},
        {&a->rstdpf, pn * L * Mz}, {&a->qkn, qn * L * Mz * nqk * m->hd}, {&a->qkr, qn * L * Mz * nqk},
        {&a->dc, pn * Mz * C},
        {(float **)&a->x, Mz}, {(float **)&a->y, Mz},
    };
    // the products above stay < 2^59 within the MODEL_MAX_* bounds and B*T < 2^29;
    // the sum and the byte count are checked all the same
    size_t total = 0, n = sizeof f / sizeof f[0], bytes;
    int wrap = 0;
    for (size_t i = 0; i < n; i++)
        wrap |= mtc_size_add(total, (f[i].n + 15) & ~(size_t)15, &total); // 64-byte aligned
    float *block =
        wrap || mtc_size_mul(total, sizeof(float), &bytes) < 0 ? NULL : aligned_alloc(64, bytes);
    if (!block) {
        errno = ENOMEM;
        return errprintf(err, "out of memory for activations (%.1f MiB)",
                         total * 4.0 / (1 << 20));
    }
    free(a->block);
    a->block = block;
    free(a->last);
    a->last = NULL;
    a->cap_b = 0;
    for (size_t i = 0, off = 0; i < n; i++) {
        *f[i].p = block + off;
        off += (f[i].n + 15) & ~(size_t)15;
    }
    a->cap_m = M;
    a->cap_t = T;
    rope_tables(m, a->rcos, a->rsin, a->rcos_l, a->rsin_l, T);
    m->has_y = m->has_logits = 0;
    a->aslots = 0; // cap_t changed
    return reserve_attention(m, err);
}

/* ---- forward / backward ---- */

/* Parameter (or gradient, with base = m->grads) of a role; layer -1 for globals.
 * NULL when the family has no such tensor (Llama has no biases). */
static float *par(const struct model *m, float *base, int layer, enum role r)
{
    size_t o = layer < 0 ? m->goff[r] : m->loff[layer][r];
    return o == SIZE_MAX ? NULL : base + o;
}

static void norm_forward(const struct model *m, float *out, float *mean, float *rstd,
                         const float *x, const float *w, const float *b, int M)
{
    if (m->fam->norm == NORM_LAYER)
        cpu_layernorm_forward(out, mean, rstd, x, w, b, M, m->cfg.d_model, m->cfg.norm_eps);
    else if (m->fam->norm == NORM_RMS)
        cpu_rmsnorm_forward(out, rstd, x, w, M, m->cfg.d_model, m->cfg.norm_eps);
    else
        cpu_rmsnorm1p_forward(out, rstd, x, w, M, m->cfg.d_model, m->cfg.norm_eps);
}

static void norm_backward(const struct model *m, float *dx, float *dw, float *db, const float *dout,
                          const float *x, const float *w, const float *mean, const float *rstd,
                          int M)
{
    if (m->fam->norm == NORM_LAYER)
        cpu_layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, M, m->cfg.d_model);
    else if (m->fam->norm == NORM_RMS)
        cpu_rmsnorm_backward(dx, dw, dout, x, w, rstd, M, m->cfg.d_model);
    else
        cpu_rmsnorm1p_backward(dx, dw, dout, x, w, rstd, M, m->cfg.d_model);
}

static void mlp_forward(const struct model *m, float *fch, const float *fc, int M)
{
    int F = m->cfg.d_ff;
    if (m->fam->mlp == MLP_SWIGLU)
        cpu_swiglu_forward(fch, fc, M, F);
    else if (m->fam->mlp == MLP_GEGLU)
        cpu_geglu_forward(fch, fc, M, F);
    else
        cpu_gelu_forward(fch, fc, (long)M * F);
}

static void mlp_backward(const struct model *m, float *dfc, const float *dfch, const float *fc, int M)
{
    int F = m->cfg.d_ff;
    if (m->fam->mlp == MLP_SWIGLU)
        cpu_swiglu_backward(dfc, dfch, fc, M, F);
    else if (m->fam->mlp == MLP_GEGLU)
        cpu_geglu_backward(dfc, dfch, fc, M, F);
    else
        cpu_gelu_backward(dfc, dfch, fc, (long)M * F);
}

/* out (M,C) = resid + RMSNorm1p(x) (Gemma's post-norm before the residual add). */
static void post_norm_add(const struct model *m, float *out, float *rstd, const float *resid,
                          const float *x, const float *w, int M)
{
    long n = (long)M * m->cfg.d_model;
    cpu_rmsnorm1p_forward(out, rstd, x, w, M, m->cfg.d_model, m->cfg.norm_eps);
#pragma omp parallel for simd schedule(static) if (n > CPU_PAR_MIN)
    for (long i = 0; i < n; i++)
        out[i] += resid[i];
}

float model_forward(struct model *m, const int32_t *x, const int32_t *y, const float *w,
                    float loss_norm, int B, int T)
{
    const struct model_config *c = &m->cfg;
    struct acts *a = &m->a;
    m->has_y = m->has_logits = 0;
    if (model_reserve(m, B, T, NULL) < 0)
        return NAN;
    int M = B * T, C = c->d_model, F = c->d_ff, V = c->vocab_size, Vp = c->padded_vocab;
    int H = c->n_head, KV = c->n_kv_head;
    const struct family_tables *fm = m->fam;
    for (int i = 0; i < M; i++)
        if (x[i] < 0 || x[i] >= V || (y && y[i] >= V)) {
            errno = EINVAL;
            return NAN;
        }
    if (B > a->cap_b) {
        float *last = realloc(a->last, (size_t)B * Vp * sizeof(float));
        if (!last) {
            errno = ENOMEM;
            return NAN;
        }
        a->last = last;
        a->cap_b = B;
    }
    memcpy(a->x, x, M * sizeof(int32_t));
    for (int i = 0; i < M; i++)
        a->y[i] = y ? y[i] : -1;
    float *P = m->params;
    size_t MC = (size_t)M * C;

    cpu_embedding_forward(a->res, x, par(m, P, -1, R_WTE), par(m, P, -1, R_WPE), B, T, C);
    if (fm->embed_scale)
        cpu_scale(a->res, (long)MC, sqrtf((float)C));
    for (int l = 0; l < c->n_layer; l++) {
        const float *in = a->res + l * MC; // (M,C)
        float *res2 = a->res2 + l * MC, *out = a->res + (l + 1) * MC;
        float *ln1 = a->ln1 + l * MC, *ln2 = a->ln2 + l * MC;
        float *qkv = a->qkv + (size_t)l * M * m->qkv, *att = a->att + (size_t)l * M * m->q;
        float *alse = a->alse + (size_t)l * M * H;
        float *fc = a->fc + (size_t)l * M * m->fcn, *fch = a->fch + (size_t)l * M * F;

        norm_forward(m, ln1, a->mean1 + l * M, a->rstd1 + l * M, in, par(m, P, l, R_LN1_W),
                     par(m, P, l, R_LN1_B), M);
        // qkv (M, QKV) = ln1 @ Wqkv^T
        cpu_matmul_forward(qkv, m->qkv, NULL, ln1, par(m, P, l, R_QKV_W), par(m, P, l, R_QKV_B),
                           M, m->qkv, C);
        if (fm->qk_norm)
            cpu_headnorm_forward(qkv, m->qkv, a->qkn + (size_t)l * M * (H + KV) * m->hd,
                                 a->qkr + (size_t)l * M * (H + KV), par(m, P, l, R_QN_W),
                                 par(m, P, l, R_KN_W), M, H, KV, m->hd, c->norm_eps);
        struct cpu_attn ao = layer_attn(m, l);
        if (fm->rope) // rotate q and k heads (the first H+KV heads of each row)
            cpu_rope(qkv, m->qkv, ao.window ? a->rcos_l : a->rcos, ao.window ? a->rsin_l : a->rsin,
                     B, T, H + KV, m->hd, 0);
        cpu_attention_forward(att, alse, qkv, B, T, H, KV, m->hd, &ao, a->ascratch, a->aslots);
        if (fm->post_norms) { // res2 (M,C) = in + norm(att @ Wo^T)
            float *patt = a->patt + l * MC;
            cpu_matmul_forward(patt, C, NULL, att, par(m, P, l, R_PROJ_W), NULL, M, C, m->q);
            post_norm_add(m, res2, a->rstdpa + l * M, in, patt, par(m, P, l, R_PATT_W), M);
        } else { // res2 (M,C) = in + att @ Wo^T
            cpu_matmul_forward(res2, C, in, att, par(m, P, l, R_PROJ_W), par(m, P, l, R_PROJ_B), M,
                               C, m->q);
        }
        norm_forward(m, ln2, a->mean2 + l * M, a->rstd2 + l * M, res2, par(m, P, l, R_LN2_W),
                     par(m, P, l, R_LN2_B), M);
        // fc (M, FCN) = ln2 @ Wfc^T: GPT-2 c_fc, Llama [gate | up]
        cpu_matmul_forward(fc, m->fcn, NULL, ln2, par(m, P, l, R_FC_W), par(m, P, l, R_FC_B), M,
                           m->fcn, C);
        mlp_forward(m, fch, fc, M);
        if (fm->post_norms) { // out (M,C) = res2 + norm(fch @ Wdown^T)
            float *pff = a->pff + l * MC;
            cpu_matmul_forward(pff, C, NULL, fch, par(m, P, l, R_FCPROJ_W), NULL, M, C, F);
            post_norm_add(m, out, a->rstdpf + l * M, res2, pff, par(m, P, l, R_PFF_W), M);
        } else { // out (M,C) = res2 + fch @ Wdown^T
            cpu_matmul_forward(out, C, res2, fch, par(m, P, l, R_FCPROJ_W),
                               par(m, P, l, R_FCPROJ_B), M, C, F);
        }
    }
    norm_forward(m, a->lnf, a->meanf, a->rstdf, a->res + c->n_layer * MC, par(m, P, -1, R_LNF_W),
                 par(m, P, -1, R_LNF_B), M);
    const float *wlm = par(m, P, -1, R_LM_HEAD);
    m->B = B;
    m->T = T;
    if (!y) {
        // Sampling: only the last position of each sequence needs logits.
        for (int b = 0; b < B; b++)
            memcpy(a->db + (size_t)b * C, a->lnf + ((size_t)b * T + T - 1) * C, C * sizeof(float));
        cpu_matmul_forward(a->last, Vp, NULL, a->db, wlm, NULL, B, V, C);
        if (c->final_softcap > 0)
            cpu_softcap_forward(a->last, Vp, V, B, c->final_softcap);
        for (int b = 0; b < B; b++)
            for (int v = V; v < Vp; v++)
                a->last[(size_t)b * Vp + v] = -INFINITY;
        return 0.0f;
    }
    // logits (M, Vp): only the V real rows of the head are multiplied
    cpu_matmul_forward(a->logits, Vp, NULL, a->lnf, wlm, NULL, M, V, C);
    if (c->final_softcap > 0)
        cpu_softcap_forward(a->logits, Vp, V, M, c->final_softcap);
    cpu_logsoftmax_forward(a->logits, Vp, V, a->y, a->lse, a->logp, M);
    for (int b = 0; b < B; b++)
        memcpy(a->last + (size_t)b * Vp, a->logits + ((size_t)b * T + T - 1) * Vp,
               Vp * sizeof(float));
    double norm = loss_norm, loss = 0.0;
    if (norm <= 0) {
        norm = 0.0;
        for (int i = 0; i < M; i++)
            if (a->y[i] >= 0)
                norm += w ? w[i] : 1.0f;
    }
    for (int i = 0; i < M; i++) { // serial, fixed order: the loss is reproducible
        float wi = (a->y[i] >= 0 && norm > 0) ? (w ? w[i] : 1.0f) : 0.0f;
        loss -= (double)wi * a->logp[i];
        a->dlogp[i] = norm > 0 ? (float)(-wi / norm) : 0.0f;
    }
    m->has_y = m->has_logits = 1;
    return norm > 0 ? (float)(loss / norm) : 0.0f;
}

void model_token_logprobs(const struct model *m, float *out)
{
    if (m->has_y)
        memcpy(out, m->a.logp, (size_t)m->B * m->T * sizeof(float));
}

void model_backward(struct model *m, const float *dlogp)
{
    const struct model_config *c = &m->cfg;
    struct acts *a = &m->a;
    if (!m->has_y || !m->has_logits)
        return; // no forward with targets to differentiate
    m->has_logits = 0; // logits become dlogits below
    int B = m->B, T = m->T, M = B * T, C = c->d_model, F = c->d_ff, V = c->vocab_size;
    int Vp = c->padded_vocab, H = c->n_head, KV = c->n_kv_head;
    const struct family_tables *fm = m->fam;
    float *P = m->params, *G = m->grads;
    size_t MC = (size_t)M * C;
    if (dlogp)
        for (int i = 0; i < M; i++)
            a->dlogp[i] = a->y[i] >= 0 ? dlogp[i] : 0.0f;

    if (c->final_softcap > 0)
        cpu_logsoftmax_softcap_backward(a->logits, Vp, V, a->y, a->lse, a->dlogp, M,
                                        c->final_softcap);
    else
        cpu_logsoftmax_backward(a->logits, Vp, V, a->y, a->lse, a->dlogp, M);
    // db (M,C) = dlogits @ Wlm ; dWlm += dlogits^T @ lnf
    cpu_matmul_backward(a->db, 0, par(m, G, -1, R_LM_HEAD), NULL, a->logits, Vp, a->lnf,
                        par(m, P, -1, R_LM_HEAD), M, V, C);
    memset(a->dres, 0, MC * sizeof(float));
    norm_backward(m, a->dres, par(m, G, -1, R_LNF_W), par(m, G, -1, R_LNF_B), a->db,
                  a->res + c->n_layer * MC, par(m, P, -1, R_LNF_W), a->meanf, a->rstdf, M);
    for (int l = c->n_layer - 1; l >= 0; l--) {
        const float *in = a->res + l * MC, *res2 = a->res2 + l * MC;
        const float *ln1 = a->ln1 + l * MC, *ln2 = a->ln2 + l * MC;
        const float *qkv = a->qkv + (size_t)l * M * m->qkv, *att = a->att + (size_t)l * M * m->q;
        const float *alse = a->alse + (size_t)l * M * H;
        const float *fc = a->fc + (size_t)l * M * m->fcn, *fch = a->fch + (size_t)l * M * F;

        // MLP: dres is d(out); dmlp = d(MLP output) (through the post-norm: dc)
        const float *dmlp = a->dres;
        if (fm->post_norms) {
            memset(a->dc, 0, MC * sizeof(float));
            cpu_rmsnorm1p_backward(a->dc, par(m, G, l, R_PFF_W), a->dres, a->pff + l * MC,
                                   par(m, P, l, R_PFF_W), a->rstdpf + l * M, M, C);
            dmlp = a->dc;
        }
        // db (M,F) = d(fch)
        cpu_matmul_backward(a->db, 0, par(m, G, l, R_FCPROJ_W), par(m, G, l, R_FCPROJ_B), dmlp, C,
                            fch, par(m, P, l, R_FCPROJ_W), M, C, F);
        // da (M,FCN) = d(fc): d[gate | up] or d(c_fc)
        mlp_backward(m, a->da, a->db, fc, M);
        // db (M,C) = d(ln2)
        cpu_matmul_backward(a->db, 0, par(m, G, l, R_FC_W), par(m, G, l, R_FC_B), a->da, m->fcn,
                            ln2, par(m, P, l, R_FC_W), M, m->fcn, C);
        norm_backward(m, a->dres, par(m, G, l, R_LN2_W), par(m, G, l, R_LN2_B), a->db, res2,
                      par(m, P, l, R_LN2_W), a->mean2 + l * M, a->rstd2 + l * M, M);
        // attention: dres is now d(res2); datt = d(attention output) (through the post-norm)
        const float *datt = a->dres;
        if (fm->post_norms) {
            memset(a->dc, 0, MC * sizeof(float));
            cpu_rmsnorm1p_backward(a->dc, par(m, G, l, R_PATT_W), a->dres, a->patt + l * MC,
                                   par(m, P, l, R_PATT_W), a->rstdpa + l * M, M, C);
            datt = a->dc;
        }
        // db (M,Q) = d(att)
        cpu_matmul_backward(a->db, 0, par(m, G, l, R_PROJ_W), par(m, G, l, R_PROJ_B), datt, C,
                            att, par(m, P, l, R_PROJ_W), M, C, m->q);
        // da (M,QKV) = d(qkv)
        struct cpu_attn ao = layer_attn(m, l);
        cpu_attention_backward(a->da, a->db, qkv, att, alse, B, T, H, KV, m->hd, &ao, a->ascratch,
                               a->aslots);
        if (fm->rope) // back through the rotation: apply its transpose
            cpu_rope(a->da, m->qkv, ao.window ? a->rcos_l : a->rcos, ao.window ? a->rsin_l : a->rsin,
                     B, T, H + KV, m->hd, 1);
        if (fm->qk_norm)
            cpu_headnorm_backward(a->da, m->qkv, par(m, G, l, R_QN_W), par(m, G, l, R_KN_W),
                                  a->qkn + (size_t)l * M * (H + KV) * m->hd,
                                  a->qkr + (size_t)l * M * (H + KV), par(m, P, l, R_QN_W),
                                  par(m, P, l, R_KN_W), M, H, KV, m->hd);
        // db (M,C) = d(ln1)
        cpu_matmul_backward(a->db, 0, par(m, G, l, R_QKV_W), par(m, G, l, R_QKV_B), a->da, m->qkv,
                            ln1, par(m, P, l, R_QKV_W), M, m->qkv, C);
        norm_backward(m, a->dres, par(m, G, l, R_LN1_W), par(m, G, l, R_LN1_B), a->db, in,
                      par(m, P, l, R_LN1_W), a->mean1 + l * M, a->rstd1 + l * M, M);
    }
    if (fm->embed_scale)
        cpu_scale(a->dres, (long)MC, sqrtf((float)C));
    cpu_embedding_backward(par(m, G, -1, R_WTE), par(m, G, -1, R_WPE), a->dres, a->x, B, T, C);
}

const float *model_logits(const struct model *m)
{
    return m->has_y && m->has_logits ? m->a.logits : NULL;
}

const float *model_last_logits(const struct model *m)
{
    return m->a.last;
}

double model_flops_per_token(const struct model *m, int T)
{
    const struct model_config *c = &m->cfg;
    double per_layer = (double)c->d_model * m->qkv + (double)m->q * c->d_model +
                       (double)m->fcn * c->d_model + (double)c->d_ff * c->d_model;
    double n = c->n_layer * per_layer + (double)c->vocab_size * c->d_model;
    return 6.0 * n + 12.0 * c->n_layer * m->q * (double)T;
}

/* ---- incremental decoding with a KV cache ---- */

/* K and V of every layer for nslots sequences of up to ctx positions, and the workspace of
 * one decode call (grown to the largest row count seen). */
struct model_kv {
    int nslots, ctx, nlayer, kvw; // kvw = n_kv_head * head_dim floats per position
    float *k, *v;         // (L, nslots, ctx, kvw)
    float *rcos, *rsin;   // (ctx, hd/2) RoPE tables (global layers)
    float *rcos_l, *rsin_l; // (ctx, hd/2) RoPE tables of the local layers (Gemma)
    int cap;              // rows the workspace holds
    float *x, *ln, *qkv, *att, *fc, *fch; // (cap, C|C|QKV|Q|FCN|F)
    float *tmp, *qkn;     // (cap, C) post-norm input; (cap, QKV + H + KV) QK-norm scratch
    float *last;          // (cap, C) normed rows that want logits
    float *scratch;       // (nthreads, ctx) attention scores
    int nscratch;
};

struct model_kv *model_kv_create(const struct model *m, int nslots, int ctx, mtc_error_t *err)
{
    const struct model_config *c = &m->cfg;
    if (nslots <= 0 || ctx <= 0 || ctx > c->max_seq) {
        errno = EINVAL;
        errprintf(err, "bad KV cache shape: %d slots of %d positions (the model has %d)", nslots,
                  ctx, c->max_seq);
        return NULL;
    }
    struct model_kv *kv = calloc(1, sizeof *kv);
    size_t n, bytes;
    if (!kv)
        goto nomem;
    kv->nslots = nslots;
    kv->ctx = ctx;
    kv->nlayer = c->n_layer;
    kv->kvw = c->n_kv_head * m->hd;
    if (mtc_size_mul((size_t)c->n_layer * nslots, (size_t)ctx * kv->kvw, &n) < 0 ||
        mtc_size_mul(n, sizeof(float), &bytes) < 0)
        goto nomem;
    kv->k = malloc(bytes);
    kv->v = malloc(bytes);
    kv->rcos = malloc((size_t)ctx * (m->hd / 2) * sizeof(float));
    kv->rsin = malloc((size_t)ctx * (m->hd / 2) * sizeof(float));
    kv->rcos_l = malloc((size_t)ctx * (m->hd / 2) * sizeof(float));
    kv->rsin_l = malloc((size_t)ctx * (m->hd / 2) * sizeof(float));
    if (!kv->k || !kv->v || !kv->rcos || !kv->rsin || !kv->rcos_l || !kv->rsin_l)
        goto nomem;
    rope_tables(m, kv->rcos, kv->rsin, kv->rcos_l, kv->rsin_l, ctx);
    return kv;
nomem:
    model_kv_destroy(kv);
    errno = ENOMEM;
    errprintf(err, "out of memory for a KV cache of %d slots x %d positions", nslots, ctx);
    return NULL;
}

void model_kv_destroy(struct model_kv *kv)
{
    if (!kv)
        return;
    int e = errno;
    free(kv->k);
    free(kv->v);
    free(kv->rcos);
    free(kv->rsin);
    free(kv->rcos_l);
    free(kv->rsin_l);
    free(kv->x);
    free(kv->scratch);
    free(kv);
    errno = e;
}

size_t model_kv_bytes(const struct model_kv *kv)
{
    return 2 * sizeof(float) * (size_t)kv->nslots * kv->ctx * kv->kvw * (size_t)kv->nlayer;
}

int model_kv_ctx(const struct model_kv *kv)
{
    return kv->ctx;
}

int model_kv_slots(const struct model_kv *kv)
{
    return kv->nslots;
}

/* x (n,C) += RMSNorm1p(t), t normed in place (decode keeps no activations). */
static void norm_add_inplace(const struct model *m, float *x, float *t, float *rstd,
                             const float *w, int n)
{
    long N = (long)n * m->cfg.d_model;
    cpu_rmsnorm1p_forward(t, rstd, t, w, n, m->cfg.d_model, m->cfg.norm_eps);
    for (long i = 0; i < N; i++)
        x[i] += t[i];
}

/* Workspace for n rows (one allocation; the old rows are not kept). */
static int kv_workspace(const struct model *m, struct model_kv *kv, int n)
{
    int threads = omp_get_max_threads();
    if (threads > kv->nscratch) {
        float *s = realloc(kv->scratch, (size_t)threads * kv->ctx * sizeof(float));
        if (!s)
            return -1;
        kv->scratch = s;
        kv->nscratch = threads;
    }
    if (n <= kv->cap)
        return 0;
    size_t C = m->cfg.d_model, F = m->cfg.d_ff, N = n;
    size_t nqk = (size_t)m->cfg.n_head + m->cfg.n_kv_head;
    size_t w[] = {C, C, (size_t)m->qkv, (size_t)m->q, (size_t)m->fcn, F, C, C, m->qkv + nqk};
    float **p[] = {&kv->x,   &kv->ln,   &kv->qkv,  &kv->att, &kv->fc,
                   &kv->fch, &kv->last, &kv->tmp, &kv->qkn};
    size_t total = 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        total += N * w[i];
    float *block = malloc(total * sizeof(float));
    if (!block)
        return -1;
    free(kv->x);
    for (size_t i = 0, off = 0; i < sizeof w / sizeof w[0]; i++) {
        *p[i] = block + off;
        off += N * w[i];
    }
    kv->cap = n;
    return 0;
}

/* Causal attention of n rows against the cache: row i (query heads in q) attends to the
 * positions 0..pos[i] of its slot in layer l's K and V (pos[i]-window+1..pos[i] in a local
 * layer), scaled and soft-capped as the layer says. out (n, Q). */
static void kv_attention(const struct model *m, struct model_kv *kv, int l, const float *q,
                         int ldq, float *out, const int32_t *slot, const int32_t *pos, int n)
{
    int H = m->cfg.n_head, KV = m->cfg.n_kv_head, hd = m->hd, group = H / KV, kvw = kv->kvw;
    struct cpu_attn ao = layer_attn(m, l);
    float scale = ao.scale, cap = ao.softcap;
    long work = 0;
    for (int i = 0; i < n; i++)
        work += (long)(pos[i] + 1) * H * hd;
#pragma omp parallel for collapse(2) schedule(dynamic) if (work > CPU_PAR_MIN)
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            float *s = kv->scratch + (size_t)omp_get_thread_num() * kv->ctx;
            size_t base = ((size_t)l * kv->nslots + slot[i]) * kv->ctx;
            const float *kc = kv->k + base * kvw + (size_t)(h / group) * hd;
            const float *vc = kv->v + base * kvw + (size_t)(h / group) * hd;
            const float *qi = q + (size_t)i * ldq + (size_t)h * hd;
            int np = pos[i] + 1;
            int j0 = ao.window > 0 && np - ao.window > 0 ? np - ao.window : 0;
            float mx = -INFINITY, sum = 0.0f;
            for (int j = j0; j < np; j++) {
                const float *kj = kc + (size_t)j * kvw;
                float d = 0.0f;
#pragma omp simd reduction(+ : d)
                for (int c = 0; c < hd; c++)
                    d += qi[c] * kj[c];
                s[j] = d * scale;
                if (cap > 0)
                    s[j] = cap * tanhf(s[j] / cap);
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int j = j0; j < np; j++)
                sum += s[j] = expf(s[j] - mx);
            float *o = out + (size_t)i * m->q + (size_t)h * hd, inv = 1.0f / sum;
            memset(o, 0, sizeof(float) * hd);
            for (int j = j0; j < np; j++) {
                const float *vj = vc + (size_t)j * kvw;
                float p = s[j] * inv;
#pragma omp simd
                for (int c = 0; c < hd; c++)
                    o[c] += p * vj[c];
            }
        }
}

int model_decode(struct model *m, struct model_kv *kv, const int32_t *tok, const int32_t *slot,
                 const int32_t *pos, const uint8_t *want, int n, float *logits, mtc_error_t *err)
{
    const struct model_config *c = &m->cfg;
    int C = c->d_model, F = c->d_ff, V = c->vocab_size, Vp = c->padded_vocab;
    int H = c->n_head, KV = c->n_kv_head, hd = m->hd;
    const struct family_tables *fm = m->fam;
    if (n <= 0) {
        errno = EINVAL;
        return errprintf(err, "no tokens to decode");
    }
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= V || slot[i] < 0 || slot[i] >= kv->nslots || pos[i] < 0 ||
            pos[i] >= kv->ctx) {
            errno = EINVAL;
            return errprintf(err, "row %d: token %d at position %d of slot %d is out of range", i,
                             tok[i], pos[i], slot[i]);
        }
    if (kv_workspace(m, kv, n) < 0) {
        errno = ENOMEM;
        return errprintf(err, "out of memory for a decode step of %d tokens", n);
    }
    float *P = m->params;
    const float *wte = par(m, P, -1, R_WTE), *wpe = par(m, P, -1, R_WPE);
    for (int i = 0; i < n; i++) { // x (n,C) = wte[tok] (+ wpe[pos])
        float *o = kv->x + (size_t)i * C;
        const float *e = wte + (size_t)tok[i] * C;
        for (int j = 0; j < C; j++)
            o[j] = e[j] + (wpe ? wpe[(size_t)pos[i] * C + j] : 0.0f);
    }
    if (fm->embed_scale)
        cpu_scale(kv->x, (long)n * C, sqrtf((float)C));
    float *mean = kv->fch, *rstd = kv->fch + n; // norm statistics are not kept: scratch
    size_t kvw = kv->kvw;
    for (int l = 0; l < c->n_layer; l++) {
        norm_forward(m, kv->ln, mean, rstd, kv->x, par(m, P, l, R_LN1_W), par(m, P, l, R_LN1_B),
                     n);
        // qkv (n, QKV) = ln @ Wqkv^T
        cpu_matmul_forward(kv->qkv, m->qkv, NULL, kv->ln, par(m, P, l, R_QKV_W),
                           par(m, P, l, R_QKV_B), n, m->qkv, C);
        if (fm->qk_norm) // (the saved input is not needed: scratch)
            cpu_headnorm_forward(kv->qkv, m->qkv, kv->qkn, kv->qkn + (size_t)n * m->qkv,
                                 par(m, P, l, R_QN_W), par(m, P, l, R_KN_W), n, H, KV, hd,
                                 c->norm_eps);
        int local = layer_attn(m, l).window > 0;
        const float *rc = local ? kv->rcos_l : kv->rcos, *rs = local ? kv->rsin_l : kv->rsin;
        for (int i = 0; i < n; i++) {
            float *row = kv->qkv + (size_t)i * m->qkv;
            if (fm->rope) // rotate q and k heads at this row's position
                cpu_rope(row, m->qkv, rc + (size_t)pos[i] * (hd / 2), rs + (size_t)pos[i] * (hd / 2),
                         1, 1, H + KV, hd, 0);
            size_t at = (((size_t)l * kv->nslots + slot[i]) * kv->ctx + pos[i]) * kvw;
            memcpy(kv->k + at, row + (size_t)H * hd, kvw * sizeof(float));
            memcpy(kv->v + at, row + (size_t)(H + KV) * hd, kvw * sizeof(float));
        }
        kv_attention(m, kv, l, kv->qkv, m->qkv, kv->att, slot, pos, n);
        if (fm->post_norms) { // x (n,C) += norm(att @ Wo^T)
            cpu_matmul_forward(kv->tmp, C, NULL, kv->att, par(m, P, l, R_PROJ_W), NULL, n, C, m->q);
            norm_add_inplace(m, kv->x, kv->tmp, rstd, par(m, P, l, R_PATT_W), n);
        } else { // x (n,C) += att @ Wo^T
            cpu_matmul_forward(kv->x, C, kv->x, kv->att, par(m, P, l, R_PROJ_W),
                               par(m, P, l, R_PROJ_B), n, C, m->q);
        }
        norm_forward(m, kv->ln, mean, rstd, kv->x, par(m, P, l, R_LN2_W), par(m, P, l, R_LN2_B),
                     n);
        cpu_matmul_forward(kv->fc, m->fcn, NULL, kv->ln, par(m, P, l, R_FC_W),
                           par(m, P, l, R_FC_B), n, m->fcn, C);
        mlp_forward(m, kv->fch, kv->fc, n);
        if (fm->post_norms) { // x (n,C) += norm(fch @ Wdown^T)
            cpu_matmul_forward(kv->tmp, C, NULL, kv->fch, par(m, P, l, R_FCPROJ_W), NULL, n, C, F);
            norm_add_inplace(m, kv->x, kv->tmp, rstd, par(m, P, l, R_PFF_W), n);
        } else { // x (n,C) += fch @ Wdown^T
            cpu_matmul_forward(kv->x, C, kv->x, kv->fch, par(m, P, l, R_FCPROJ_W),
                               par(m, P, l, R_FCPROJ_B), n, C, F);
        }
    }
    int nw = 0;
    for (int i = 0; i < n; i++)
        if (want[i])
            memcpy(kv->ln + (size_t)nw++ * C, kv->x + (size_t)i * C, C * sizeof(float));
    if (nw == 0)
        return 0;
    norm_forward(m, kv->last, mean, rstd, kv->ln, par(m, P, -1, R_LNF_W), par(m, P, -1, R_LNF_B),
                 nw);
    // logits (nw, Vp): only the V real rows of the head
    cpu_matmul_forward(logits, Vp, NULL, kv->last, par(m, P, -1, R_LM_HEAD), NULL, nw, V, C);
    if (c->final_softcap > 0)
        cpu_softcap_forward(logits, Vp, V, nw, c->final_softcap);
    for (int i = 0; i < nw; i++)
        for (int v = V; v < Vp; v++)
            logits[(size_t)i * Vp + v] = -INFINITY;
    return 0;
}
