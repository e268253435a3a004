/* model_decode: incremental decoding with a KV cache (mtc-serve, GRPO's rollouts) — one
 * forward over new tokens of many sequences, each attending to its slot's cached K and V.
 * Inference only: no activations are kept for a backward. Linears stream their weights
 * through cpu_qmat_forward in f32 (the parameters themselves), bf16 or q8_0 (a copy). */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/model_internal.h"

/* K and V of every layer for nslots sequences of up to ctx positions, and the workspace of
 * one decode call (grown to the largest row count seen). */
struct model_kv {
    int nslots, ctx, nlayer, kvw; // kvw = n_kv_head * head_dim values per position
    int bf16;             // K and V stored as bf16 (the weights' dtype is not f32)
    void *k, *v;          // (L, nslots, ctx, kvw) floats or bf16
    float *rcos, *rsin;   // (ctx, hd/2) RoPE tables (global layers)
    float *rcos_l, *rsin_l; // (ctx, hd/2) RoPE tables of the local layers (Gemma)
    int cap;              // rows the workspace holds
    float *x, *ln, *qkv, *att, *fc, *fch; // (cap, C|C|QKV|Q|FCN|F)
    float *tmp, *qkn;     // (cap, C) post-norm input; (cap, QKV + H + KV) QK-norm scratch
    float *last;          // (cap, C) normed rows that want logits
    float *scratch;       // (max(nthreads, 4 * n_head), ctx) attention scores
    int nscratch;
    float *qscratch;      // cpu_qmat_forward's scratch for nscratch threads
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
    kv->bf16 = m->ddtype != CPU_F32;
    if (mtc_size_mul((size_t)c->n_layer * nslots, (size_t)ctx * kv->kvw, &n) < 0 ||
        mtc_size_mul(n, kv->bf16 ? 2 : sizeof(float), &bytes) < 0)
        goto nomem;
    kv->k = malloc(bytes);
    kv->v = malloc(bytes);
    kv->rcos = malloc((size_t)ctx * (m->hd / 2) * sizeof(float));
    kv->rsin = malloc((size_t)ctx * (m->hd / 2) * sizeof(float));
    kv->rcos_l = malloc((size_t)ctx * (m->hd / 2) * sizeof(float));
    kv->rsin_l = malloc((size_t)ctx * (m->hd / 2) * sizeof(float));
    if (!kv->k || !kv->v || !kv->rcos || !kv->rsin || !kv->rcos_l || !kv->rsin_l)
        goto nomem;
    model_rope_tables(m, kv->rcos, kv->rsin, kv->rcos_l, kv->rsin_l, ctx);
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
    free(kv->qscratch);
    free(kv);
    errno = e;
}

size_t model_kv_bytes(const struct model_kv *kv)
{
    return 2 * (kv->bf16 ? 2 : sizeof(float)) * (size_t)kv->nslots * kv->ctx * kv->kvw * (size_t)kv->nlayer;
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
        int K = m->cfg.d_model > m->q ? m->cfg.d_model : m->q;
        K = m->cfg.d_ff > K ? m->cfg.d_ff : K;
        int slots = threads > CPU_QMAT_SMALL_M * m->cfg.n_head ? threads
                                                               : CPU_QMAT_SMALL_M * m->cfg.n_head;
        float *s = realloc(kv->scratch, (size_t)slots * kv->ctx * sizeof(float));
        if (s)
            kv->scratch = s;
        float *qs = s ? realloc(kv->qscratch, cpu_qmat_scratch_floats(K, threads) * sizeof(float))
                      : NULL;
        if (!qs)
            return -1;
        kv->qscratch = qs;
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

/* K and V of one position (kvw each) into the cache at element at. */
static void kv_store(struct model_kv *kv, size_t at, const float *k, const float *v)
{
    size_t kvw = kv->kvw;
    if (!kv->bf16) {
        memcpy((float *)kv->k + at, k, kvw * sizeof(float));
        memcpy((float *)kv->v + at, v, kvw * sizeof(float));
        return;
    }
    uint16_t *kb = (uint16_t *)kv->k + at, *vb = (uint16_t *)kv->v + at;
    for (size_t c = 0; c < kvw; c++) {
        kb[c] = cpu_float_to_bf16(k[c]);
        vb[c] = cpu_float_to_bf16(v[c]);
    }
}

/* Layer l's matrix `which` (DW_*; l -1: the LM head, its V real rows) as decoding reads it:
 * the parameters in f32, else the converted copy. */
static struct cpu_qmat wmat(const struct model *m, int l, int which)
{
    if (m->ddtype != CPU_F32)
        return m->dw[l < 0 ? m->cfg.n_layer * DW_PER_LAYER : l * DW_PER_LAYER + which];
    static const enum role role[DW_PER_LAYER] = {R_QKV_W, R_PROJ_W, R_FC_W, R_FCPROJ_W};
    int C = m->cfg.d_model;
    const int shape[DW_PER_LAYER][2] = {{m->qkv, C}, {C, m->q}, {m->fcn, C}, {C, m->cfg.d_ff}};
    if (l < 0)
        return (struct cpu_qmat){CPU_F32, m->cfg.vocab_size, C,
                                 model_par(m, m->params, -1, R_LM_HEAD)};
    return (struct cpu_qmat){CPU_F32, shape[which][0], shape[which][1],
                             model_par(m, m->params, l, role[which])};
}

int model_decode_set_dtype(struct model *m, enum cpu_dtype dt, mtc_error_t *err)
{
    if ((unsigned)dt >= CPU_NDTYPES) {
        errno = EINVAL;
        return errprintf(err, "unknown weight dtype %d", (int)dt);
    }
    int L = m->cfg.n_layer, n = L * DW_PER_LAYER + 1;
    free(m->dw);
    free(m->dwbuf);
    m->dw = NULL;
    m->dwbuf = NULL;
    m->ddtype = CPU_F32;
    if (dt == CPU_F32)
        return 0;
    struct cpu_qmat *dw = calloc(n, sizeof *dw);
    size_t total = 0;
    for (int i = 0; dw && i < n; i++) {
        dw[i] = wmat(m, i == n - 1 ? -1 : i / DW_PER_LAYER, i % DW_PER_LAYER);
        size_t rb = cpu_dtype_row_bytes(dt, dw[i].K);
        if (rb == 0) {
            int K = dw[i].K;
            free(dw);
            errno = EINVAL;
            return errprintf(err, "%s weights need rows that are a multiple of %d values; this "
                                  "model has rows of %d",
                             cpu_dtype_name(dt), CPU_Q8_BLOCK, K);
        }
        total += (size_t)dw[i].N * rb;
    }
    char *buf = dw ? malloc(total) : NULL;
    if (!buf) {
        free(dw);
        errno = ENOMEM;
        return errprintf(err, "out of memory for %s weights (%zu bytes)", cpu_dtype_name(dt),
                         total);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cpu_qmat_pack(dt, buf + off, dw[i].data, dw[i].N, dw[i].K);
        dw[i].dtype = dt;
        dw[i].data = buf + off;
        off += (size_t)dw[i].N * cpu_dtype_row_bytes(dt, dw[i].K);
    }
    m->dw = dw;
    m->dwbuf = buf;
    m->ddtype = dt;
    return 0;
}

enum cpu_dtype model_decode_dtype(const struct model *m)
{
    return m->ddtype;
}

size_t model_decode_weight_bytes(const struct model *m)
{
    size_t total = 0;
    for (int l = -1; l < m->cfg.n_layer; l++)
        for (int w = 0; w < (l < 0 ? 1 : DW_PER_LAYER); w++) {
            struct cpu_qmat q = wmat(m, l, w);
            total += (size_t)q.N * cpu_dtype_row_bytes(q.dtype, q.K);
        }
    return total;
}

/* One attention of the decode step (kv_attention's arguments). */
struct attn_job {
    const struct model *m;
    struct model_kv *kv;
    int l, ldq;
    const float *q;
    float *out;
    const int32_t *slot, *pos;
};

/* Query head h of row i attends to the positions 0..pos[i] of its slot in layer l's K and V
 * (pos[i]-window+1..pos[i] in a local layer), scaled and soft-capped as the layer says;
 * s (ctx) holds the scores. */
static void attn_one(const struct attn_job *a, int i, int h, float *s)
{
    const struct model *m = a->m;
    struct model_kv *kv = a->kv;
    int l = a->l, ldq = a->ldq;
    const float *q = a->q;
    float *out = a->out;
    const int32_t *slot = a->slot, *pos = a->pos;
    int H = m->cfg.n_head, KV = m->cfg.n_kv_head, hd = m->hd, group = H / KV, kvw = kv->kvw;
    struct cpu_attn ao = model_layer_attn(m, l);
    float scale = ao.scale, cap = ao.softcap;
    size_t base = ((size_t)l * kv->nslots + slot[i]) * kv->ctx;
    size_t at = base * kvw + (size_t)(h / group) * hd; // + j * kvw: position j
    const float *kc = (const float *)kv->k + at, *vc = (const float *)kv->v + at;
    const uint16_t *kb = (const uint16_t *)kv->k + at, *vb = (const uint16_t *)kv->v + at;
    const float *qi = q + (size_t)i * ldq + (size_t)h * hd;
    int np = pos[i] + 1;
    int j0 = ao.window > 0 && np - ao.window > 0 ? np - ao.window : 0;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = j0; j < np; j++) {
        float d = 0.0f;
        if (kv->bf16) {
            const uint16_t *kj = kb + (size_t)j * kvw;
#pragma omp simd reduction(+ : d)
            for (int c = 0; c < hd; c++)
                d += qi[c] * cpu_bf16_to_float(kj[c]);
        } else {
            const float *kj = kc + (size_t)j * kvw;
#pragma omp simd reduction(+ : d)
            for (int c = 0; c < hd; c++)
                d += qi[c] * kj[c];
        }
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
        float p = s[j] * inv;
        if (kv->bf16) {
            const uint16_t *vj = vb + (size_t)j * kvw;
#pragma omp simd
            for (int c = 0; c < hd; c++)
                o[c] += p * cpu_bf16_to_float(vj[c]);
        } else {
            const float *vj = vc + (size_t)j * kvw;
#pragma omp simd
            for (int c = 0; c < hd; c++)
                o[c] += p * vj[c];
        }
    }
}

/* heads lo..hi-1 of the step, head ih = row ih / H, query head ih % H; scores in a slot of
 * the scratch of its own (a decode step has at most CPU_QMAT_SMALL_M rows here) */
static void attn_heads(void *ctx, int lo, int hi)
{
    const struct attn_job *a = ctx;
    int H = a->m->cfg.n_head;
    for (int ih = lo; ih < hi; ih++)
        attn_one(a, ih / H, ih % H, a->kv->scratch + (size_t)ih * a->kv->ctx);
}

/* Causal attention of n rows against the cache (attn_one for every row and query head).
 * out (n, Q). Decode-sized steps run on the decode pool, larger ones on OpenMP. */
static void kv_attention(const struct model *m, struct model_kv *kv, int l, const float *q,
                         int ldq, float *out, const int32_t *slot, const int32_t *pos, int n)
{
    struct attn_job a = {m, kv, l, ldq, q, out, slot, pos};
    int H = m->cfg.n_head;
    long work = 0;
    for (int i = 0; i < n; i++)
        work += (long)(pos[i] + 1) * H * m->hd;
    if (n <= CPU_QMAT_SMALL_M) {
        cpu_pool_for(attn_heads, &a, n * H, 1, work);
        return;
    }
#pragma omp parallel for schedule(dynamic) if (work > CPU_PAR_MIN)
    for (int ih = 0; ih < n * H; ih++)
        attn_one(&a, ih / H, ih % H, kv->scratch + (size_t)omp_get_thread_num() * kv->ctx);
}

int model_decode(struct model *m, struct model_kv *kv, const int32_t *tok, const int32_t *slot,
                 const int32_t *pos, const uint8_t *want, int n, float *logits, mtc_error_t *err)
{
    const struct model_config *c = &m->cfg;
    int C = c->d_model, V = c->vocab_size, Vp = c->padded_vocab;
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
    const float *wte = model_par(m, P, -1, R_WTE), *wpe = model_par(m, P, -1, R_WPE);
    for (int i = 0; i < n; i++) { // x (n,C) = wte[tok] (+ wpe[pos])
        float *o = kv->x + (size_t)i * C;
        const float *e = wte + (size_t)tok[i] * C;
        for (int j = 0; j < C; j++)
            o[j] = e[j] + (wpe ? wpe[(size_t)pos[i] * C + j] : 0.0f);
    }
    if (fm->embed_scale)
        cpu_scale(kv->x, (long)n * C, sqrtf((float)C));
    float *mean = kv->fch, *rstd = kv->fch + n; // norm statistics are not kept: scratch
    float *qs = kv->qscratch;
    size_t kvw = kv->kvw;
    for (int l = 0; l < c->n_layer; l++) {
        model_norm_forward(m, kv->ln, mean, rstd, kv->x, model_par(m, P, l, R_LN1_W),
                           model_par(m, P, l, R_LN1_B), n);
        // qkv (n, QKV) = ln @ Wqkv^T
        struct cpu_qmat wq = wmat(m, l, DW_QKV), wo = wmat(m, l, DW_PROJ);
        struct cpu_qmat wfc = wmat(m, l, DW_FC), wdn = wmat(m, l, DW_FCPROJ);
        cpu_qmat_forward(kv->qkv, m->qkv, NULL, kv->ln, &wq, model_par(m, P, l, R_QKV_B), n, qs);
        if (fm->qk_norm) // (the saved input is not needed: scratch)
            cpu_headnorm_forward(kv->qkv, m->qkv, kv->qkn, kv->qkn + (size_t)n * m->qkv,
                                 model_par(m, P, l, R_QN_W), model_par(m, P, l, R_KN_W), n, H, KV,
                                 hd, c->norm_eps);
        int local = model_layer_attn(m, l).window > 0;
        const float *rc = local ? kv->rcos_l : kv->rcos, *rs = local ? kv->rsin_l : kv->rsin;
        for (int i = 0; i < n; i++) {
            float *row = kv->qkv + (size_t)i * m->qkv;
            if (fm->rope) // rotate q and k heads at this row's position
                cpu_rope(row, m->qkv, rc + (size_t)pos[i] * (hd / 2), rs + (size_t)pos[i] * (hd / 2),
                         1, 1, H + KV, hd, 0);
            size_t at = (((size_t)l * kv->nslots + slot[i]) * kv->ctx + pos[i]) * kvw;
            kv_store(kv, at, row + (size_t)H * hd, row + (size_t)(H + KV) * hd);
        }
        kv_attention(m, kv, l, kv->qkv, m->qkv, kv->att, slot, pos, n);
        if (fm->post_norms) { // x (n,C) += norm(att @ Wo^T)
            cpu_qmat_forward(kv->tmp, C, NULL, kv->att, &wo, NULL, n, qs);
            norm_add_inplace(m, kv->x, kv->tmp, rstd, model_par(m, P, l, R_PATT_W), n);
        } else { // x (n,C) += att @ Wo^T
            cpu_qmat_forward(kv->x, C, kv->x, kv->att, &wo, model_par(m, P, l, R_PROJ_B), n, qs);
        }
        model_norm_forward(m, kv->ln, mean, rstd, kv->x, model_par(m, P, l, R_LN2_W),
                           model_par(m, P, l, R_LN2_B), n);
        cpu_qmat_forward(kv->fc, m->fcn, NULL, kv->ln, &wfc, model_par(m, P, l, R_FC_B), n, qs);
        model_mlp_forward(m, kv->fch, kv->fc, n);
        if (fm->post_norms) { // x (n,C) += norm(fch @ Wdown^T)
            cpu_qmat_forward(kv->tmp, C, NULL, kv->fch, &wdn, NULL, n, qs);
            norm_add_inplace(m, kv->x, kv->tmp, rstd, model_par(m, P, l, R_PFF_W), n);
        } else { // x (n,C) += fch @ Wdown^T
            cpu_qmat_forward(kv->x, C, kv->x, kv->fch, &wdn, model_par(m, P, l, R_FCPROJ_B), n,
                             qs);
        }
    }
    int nw = 0;
    for (int i = 0; i < n; i++)
        if (want[i])
            memcpy(kv->ln + (size_t)nw++ * C, kv->x + (size_t)i * C, C * sizeof(float));
    if (nw == 0)
        return 0;
    model_norm_forward(m, kv->last, mean, rstd, kv->ln, model_par(m, P, -1, R_LNF_W),
                       model_par(m, P, -1, R_LNF_B), nw);
    // logits (nw, Vp): only the V real rows of the head
    struct cpu_qmat head = wmat(m, -1, 0);
    cpu_qmat_forward(logits, Vp, NULL, kv->last, &head, NULL, nw, qs);
    if (c->final_softcap > 0)
        cpu_softcap_forward(logits, Vp, V, nw, c->final_softcap);
    for (int i = 0; i < nw; i++)
        for (int v = V; v < Vp; v++)
            logits[(size_t)i * Vp + v] = -INFINITY;
    return 0;
}

int model_decode_loss(struct model *m, const int32_t *tok, int n, double *loss, mtc_error_t *err)
{
    if (n < 2 || n > m->cfg.max_seq) {
        errno = EINVAL;
        return errprintf(err, "a loss needs 2 to %d tokens, not %d", m->cfg.max_seq, n);
    }
    struct model_kv *kv = model_kv_create(m, 1, n, err);
    float *logits = kv ? malloc(sizeof(float) * m->cfg.padded_vocab) : NULL;
    if (kv && !logits) {
        errno = ENOMEM;
        errprintf(err, "out of memory for logits");
    }
    double nll = 0;
    int rc = logits ? 0 : -1;
    for (int t = 0; rc == 0 && t + 1 < n; t++) {
        int32_t slot = 0, pos = t, y = tok[t + 1];
        uint8_t want = 1;
        float lse, logp;
        rc = model_decode(m, kv, tok + t, &slot, &pos, &want, 1, logits, err);
        if (rc == 0 && (y < 0 || y >= m->cfg.vocab_size)) {
            errno = EINVAL;
            rc = errprintf(err, "token %d is %d, outside the vocabulary", t + 1, y);
        }
        if (rc == 0) {
            cpu_logsoftmax_forward(logits, m->cfg.padded_vocab, m->cfg.vocab_size, &y, &lse,
                                   &logp, 1);
            nll -= logp;
        }
    }
    free(logits);
    model_kv_destroy(kv);
    if (rc == 0)
        *loss = nll / (n - 1);
    return rc;
}
