/* model_internal: what the model's files share — model.c (tensor table, layout, init),
 * model_pass.c (activations, forward, backward) and model_decode.c (KV-cache decode): the
 * struct model, the family traits, parameter lookup by role, and the pieces of a layer both
 * passes run. Not an interface: everything else goes through model.h. */
#ifndef MTC_TRAIN_MODEL_INTERNAL_H
#define MTC_TRAIN_MODEL_INTERNAL_H

#include <stdint.h>

#include "train/cpu/kernels.h"
#include "train/cpu/qmat.h"
#include "train/model.h"

/* What a tensor is used for; the passes find parameters by role, not by name. */
enum role {
    R_WTE, R_WPE, R_LNF_W, R_LNF_B, R_LM_HEAD, // global
    R_LN1_W, R_LN1_B, R_QKV_W, R_QKV_B, R_K_W, R_V_W, R_PROJ_W, R_PROJ_B,
    R_LN2_W, R_LN2_B, R_FC_W, R_FC_B, R_UP_W, R_FCPROJ_W, R_FCPROJ_B,
    R_PATT_W, R_PFF_W, R_QN_W, R_KN_W, // Gemma: post-attention / post-MLP norms, QK-norm
    R_NROLES
};

enum norm_kind { NORM_LAYER, NORM_RMS, NORM_RMS1P }; // LayerNorm, RMSNorm w, RMSNorm (1 + w)
enum mlp_kind { MLP_GELU, MLP_SWIGLU, MLP_GEGLU };

struct tdef; // one tensor of a family's table (model.c)
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
    int32_t *pos;   // (M) positions of the last packed forward (model_forward_packed)
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
    int packed;                  // the last forward had positions (a->pos)
    /* decoding's weights (model_decode.c): f32 reads params; bf16 and q8_0 read dw, a copy
     * converted by model_decode_set_dtype (n_layer * DW_PER_LAYER + 1 matrices, the LM head
     * last) in the one block dwbuf */
    enum cpu_dtype ddtype;
    struct cpu_qmat *dw;
    void *dwbuf;
};
/* Matrices of one layer in model->dw: qkv, attention out, fc (gate|up), mlp out. */
enum { DW_QKV, DW_PROJ, DW_FC, DW_FCPROJ, DW_PER_LAYER };

/* Parameter (or gradient, with base = m->grads) of a role; layer -1 for globals.
 * NULL when the family has no such tensor (Llama has no biases). */
static inline float *model_par(const struct model *m, float *base, int layer, enum role r)
{
    size_t o = layer < 0 ? m->goff[r] : m->loff[layer][r];
    return o == SIZE_MAX ? NULL : base + o;
}

/* RoPE tables for positions 0..T-1: the global layers' (Llama 3 or linear scaling) and the
 * local layers' (their own base) when the family rotates. */
void model_rope_tables(const struct model *m, float *cs, float *sn, float *cs_l, float *sn_l,
                       int T);
/* The attention of layer l: query scale, soft-cap, and the window when it is local. */
struct cpu_attn model_layer_attn(const struct model *m, int l);
/* out (M,C) = the family's norm of x (mean is not written by the RMSNorms). */
void model_norm_forward(const struct model *m, float *out, float *mean, float *rstd, const float *x,
                        const float *w, const float *b, int M);
/* fch (M,F) = the family's MLP activation of fc (M,FCN). */
void model_mlp_forward(const struct model *m, float *fch, const float *fc, int M);

#endif
