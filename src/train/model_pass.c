/* model_pass: the training passes of model.c's decoders — activation memory, forward with
 * the per-token loss, backward into the gradients — chaining the kernels of src/train/cpu/
 * as the family's traits say. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/model_internal.h"

/* ---- activations ---- */

/* RoPE tables for positions 0..T-1: the global layers' (Llama 3 or linear scaling) and the
 * local layers' (their own base) when the family rotates. */
void model_rope_tables(const struct model *m, float *cs, float *sn, float *cs_l, float *sn_l, int T)
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
struct cpu_attn model_layer_attn(const struct model *m, int l)
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
        {(float **)&a->x, Mz}, {(float **)&a->y, Mz}, {(float **)&a->pos, Mz},
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
    model_rope_tables(m, a->rcos, a->rsin, a->rcos_l, a->rsin_l, T);
    m->has_y = m->has_logits = 0;
    a->aslots = 0; // cap_t changed
    return reserve_attention(m, err);
}

/* ---- forward / backward ---- */

void model_norm_forward(const struct model *m, float *out, float *mean, float *rstd, const float *x,
                        const float *w, const float *b, int M)
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

void model_mlp_forward(const struct model *m, float *fch, const float *fc, int M)
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

/* 1 when pos (B,T) is a valid packing: each row starts a sequence, and a position is 0
 * (a new sequence) or the previous one + 1. */
static int packing_ok(const int32_t *pos, int B, int T)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int32_t p = pos[(size_t)b * T + t];
            if (p != 0 && (t == 0 || p != pos[(size_t)b * T + t - 1] + 1))
                return 0;
        }
    return 1;
}

/* Rotate the q and k heads of x (B,T rows of the last forward's shape, stride qkv) for
 * their positions: the column within the row, or a->pos when packed. inverse: backward. */
static void rope(const struct model *m, float *x, int local, int inverse)
{
    const struct acts *a = &m->a;
    const float *cs = local ? a->rcos_l : a->rcos, *sn = local ? a->rsin_l : a->rsin;
    int nh = m->cfg.n_head + m->cfg.n_kv_head;
    if (m->packed)
        cpu_rope_pos(x, m->qkv, cs, sn, a->pos, m->B * m->T, nh, m->hd, inverse);
    else
        cpu_rope(x, m->qkv, cs, sn, m->B, m->T, nh, m->hd, inverse);
}

float model_forward(struct model *m, const int32_t *x, const int32_t *y, const float *w,
                    float loss_norm, int B, int T)
{
    return model_forward_packed(m, x, y, w, loss_norm, NULL, B, T);
}

float model_forward_packed(struct model *m, const int32_t *x, const int32_t *y, const float *w,
                           float loss_norm, const int32_t *pos, int B, int T)
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
    if (pos && !packing_ok(pos, B, T)) {
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
    m->packed = pos != NULL;
    m->B = B;
    m->T = T;
    if (pos)
        memcpy(a->pos, pos, M * sizeof(int32_t));
    float *P = m->params;
    size_t MC = (size_t)M * C;

    if (pos)
        cpu_embedding_forward_pos(a->res, x, pos, model_par(m, P, -1, R_WTE),
                                  model_par(m, P, -1, R_WPE), M, C);
    else
        cpu_embedding_forward(a->res, x, model_par(m, P, -1, R_WTE), model_par(m, P, -1, R_WPE), B,
                              T, C);
    if (fm->embed_scale)
        cpu_scale(a->res, (long)MC, sqrtf((float)C));
    for (int l = 0; l < c->n_layer; l++) {
        const float *in = a->res + l * MC; // (M,C)
        float *res2 = a->res2 + l * MC, *out = a->res + (l + 1) * MC;
        float *ln1 = a->ln1 + l * MC, *ln2 = a->ln2 + l * MC;
        float *qkv = a->qkv + (size_t)l * M * m->qkv, *att = a->att + (size_t)l * M * m->q;
        float *alse = a->alse + (size_t)l * M * H;
        float *fc = a->fc + (size_t)l * M * m->fcn, *fch = a->fch + (size_t)l * M * F;

        model_norm_forward(m, ln1, a->mean1 + l * M, a->rstd1 + l * M, in,
                           model_par(m, P, l, R_LN1_W), model_par(m, P, l, R_LN1_B), M);
        // qkv (M, QKV) = ln1 @ Wqkv^T
        cpu_matmul_forward(qkv, m->qkv, NULL, ln1, model_par(m, P, l, R_QKV_W),
                           model_par(m, P, l, R_QKV_B), M, m->qkv, C);
        if (fm->qk_norm)
            cpu_headnorm_forward(qkv, m->qkv, a->qkn + (size_t)l * M * (H + KV) * m->hd,
                                 a->qkr + (size_t)l * M * (H + KV), model_par(m, P, l, R_QN_W),
                                 model_par(m, P, l, R_KN_W), M, H, KV, m->hd, c->norm_eps);
        struct cpu_attn ao = model_layer_attn(m, l);
        if (fm->rope) // rotate q and k heads (the first H+KV heads of each row)
            rope(m, qkv, ao.window, 0);
        if (pos)
            cpu_attention_forward_pos(att, alse, qkv, pos, B, T, H, KV, m->hd, &ao, a->ascratch,
                                      a->aslots);
        else
            cpu_attention_forward(att, alse, qkv, B, T, H, KV, m->hd, &ao, a->ascratch, a->aslots);
        if (fm->post_norms) { // res2 (M,C) = in + norm(att @ Wo^T)
            float *patt = a->patt + l * MC;
            cpu_matmul_forward(patt, C, NULL, att, model_par(m, P, l, R_PROJ_W), NULL, M, C, m->q);
            post_norm_add(m, res2, a->rstdpa + l * M, in, patt, model_par(m, P, l, R_PATT_W), M);
        } else { // res2 (M,C) = in + att @ Wo^T
            cpu_matmul_forward(res2, C, in, att, model_par(m, P, l, R_PROJ_W),
                               model_par(m, P, l, R_PROJ_B), M, C, m->q);
        }
        model_norm_forward(m, ln2, a->mean2 + l * M, a->rstd2 + l * M, res2,
                           model_par(m, P, l, R_LN2_W), model_par(m, P, l, R_LN2_B), M);
        // fc (M, FCN) = ln2 @ Wfc^T: GPT-2 c_fc, Llama [gate | up]
        cpu_matmul_forward(fc, m->fcn, NULL, ln2, model_par(m, P, l, R_FC_W),
                           model_par(m, P, l, R_FC_B), M, m->fcn, C);
        model_mlp_forward(m, fch, fc, M);
        if (fm->post_norms) { // out (M,C) = res2 + norm(fch @ Wdown^T)
            float *pff = a->pff + l * MC;
            cpu_matmul_forward(pff, C, NULL, fch, model_par(m, P, l, R_FCPROJ_W), NULL, M, C, F);
            post_norm_add(m, out, a->rstdpf + l * M, res2, pff, model_par(m, P, l, R_PFF_W), M);
        } else { // out (M,C) = res2 + fch @ Wdown^T
            cpu_matmul_forward(out, C, res2, fch, model_par(m, P, l, R_FCPROJ_W),
                               model_par(m, P, l, R_FCPROJ_B), M, C, F);
        }
    }
    model_norm_forward(m, a->lnf, a->meanf, a->rstdf, a->res + c->n_layer * MC,
                       model_par(m, P, -1, R_LNF_W), model_par(m, P, -1, R_LNF_B), M);
    const float *wlm = model_par(m, P, -1, R_LM_HEAD);
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
    cpu_matmul_backward(a->db, 0, model_par(m, G, -1, R_LM_HEAD), NULL, a->logits, Vp, a->lnf,
                        model_par(m, P, -1, R_LM_HEAD), M, V, C);
    memset(a->dres, 0, MC * sizeof(float));
    norm_backward(m, a->dres, model_par(m, G, -1, R_LNF_W), model_par(m, G, -1, R_LNF_B), a->db,
                  a->res + c->n_layer * MC, model_par(m, P, -1, R_LNF_W), a->meanf, a->rstdf, M);
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
            cpu_rmsnorm1p_backward(a->dc, model_par(m, G, l, R_PFF_W), a->dres, a->pff + l * MC,
                                   model_par(m, P, l, R_PFF_W), a->rstdpf + l * M, M, C);
            dmlp = a->dc;
        }
        // db (M,F) = d(fch)
        cpu_matmul_backward(a->db, 0, model_par(m, G, l, R_FCPROJ_W),
                            model_par(m, G, l, R_FCPROJ_B), dmlp, C, fch,
                            model_par(m, P, l, R_FCPROJ_W), M, C, F);
        // da (M,FCN) = d(fc): d[gate | up] or d(c_fc)
        mlp_backward(m, a->da, a->db, fc, M);
        // db (M,C) = d(ln2)
        cpu_matmul_backward(a->db, 0, model_par(m, G, l, R_FC_W), model_par(m, G, l, R_FC_B), a->da,
                            m->fcn, ln2, model_par(m, P, l, R_FC_W), M, m->fcn, C);
        norm_backward(m, a->dres, model_par(m, G, l, R_LN2_W), model_par(m, G, l, R_LN2_B), a->db,
                      res2, model_par(m, P, l, R_LN2_W), a->mean2 + l * M, a->rstd2 + l * M, M);
        // attention: dres is now d(res2); datt = d(attention output) (through the post-norm)
        const float *datt = a->dres;
        if (fm->post_norms) {
            memset(a->dc, 0, MC * sizeof(float));
            cpu_rmsnorm1p_backward(a->dc, model_par(m, G, l, R_PATT_W), a->dres, a->patt + l * MC,
                                   model_par(m, P, l, R_PATT_W), a->rstdpa + l * M, M, C);
            datt = a->dc;
        }
        // db (M,Q) = d(att)
        cpu_matmul_backward(a->db, 0, model_par(m, G, l, R_PROJ_W), model_par(m, G, l, R_PROJ_B),
                            datt, C, att, model_par(m, P, l, R_PROJ_W), M, C, m->q);
        // da (M,QKV) = d(qkv)
        struct cpu_attn ao = model_layer_attn(m, l);
        if (m->packed)
            cpu_attention_backward_pos(a->da, a->db, qkv, att, alse, a->pos, B, T, H, KV, m->hd,
                                       &ao, a->ascratch, a->aslots);
        else
            cpu_attention_backward(a->da, a->db, qkv, att, alse, B, T, H, KV, m->hd, &ao,
                                   a->ascratch, a->aslots);
        if (fm->rope) // back through the rotation: apply its transpose
            rope(m, a->da, ao.window, 1);
        if (fm->qk_norm)
            cpu_headnorm_backward(
                a->da, m->qkv, model_par(m, G, l, R_QN_W), model_par(m, G, l, R_KN_W),
                a->qkn + (size_t)l * M * (H + KV) * m->hd, a->qkr + (size_t)l * M * (H + KV),
                model_par(m, P, l, R_QN_W), model_par(m, P, l, R_KN_W), M, H, KV, m->hd);
        // db (M,C) = d(ln1)
        cpu_matmul_backward(a->db, 0, model_par(m, G, l, R_QKV_W), model_par(m, G, l, R_QKV_B),
                            a->da, m->qkv, ln1, model_par(m, P, l, R_QKV_W), M, m->qkv, C);
        norm_backward(m, a->dres, model_par(m, G, l, R_LN1_W), model_par(m, G, l, R_LN1_B), a->db,
                      in, model_par(m, P, l, R_LN1_W), a->mean1 + l * M, a->rstd1 + l * M, M);
    }
    if (fm->embed_scale)
        cpu_scale(a->dres, (long)MC, sqrtf((float)C));
    if (m->packed)
        cpu_embedding_backward_pos(model_par(m, G, -1, R_WTE), model_par(m, G, -1, R_WPE), a->dres,
                                   a->x, a->pos, M, C);
    else
        cpu_embedding_backward(model_par(m, G, -1, R_WTE), model_par(m, G, -1, R_WPE), a->dres,
                               a->x, B, T, C);
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
