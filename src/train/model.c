/* model: GPT-2, Llama, Gemma 2 and Gemma 3 decoders on the CPU — the tensor table over one
 * flat fp32 parameter buffer and weight init. What differs between the families is one row
 * of families[] (tensor tables and traits), not branches on the family; the passes
 * over the tensors are model_pass.c (training) and model_decode.c (KV-cache decode). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model_internal.h"

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

#define COUNT(a) (int)(sizeof a / sizeof a[0])
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
    free(m->dw);
    free(m->dwbuf);
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
