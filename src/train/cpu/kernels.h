/* cpu kernels: forward and backward of every transformer layer on the CPU in fp32.
 * Matmuls go through cblas_sgemm; the rest are OpenMP loops whose results do not
 * depend on the thread count (no float reductions split across threads).
 * Backward kernels ACCUMULATE (+=) into parameter gradients; activation gradients
 * are written or accumulated as each comment says. M = B*T rows throughout. */
#ifndef MTC_TRAIN_CPU_KERNELS_H
#define MTC_TRAIN_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Loops over fewer elements than this run on the calling thread: waking the team costs
 * more than the work (tiny models, sampling). Results do not depend on it. */
#define CPU_PAR_MIN 32768L

/* out (M,N) row stride ldo = [resid (M,N, stride ldo) +] [bias (N) +] in (M,K) @ w^T,
 * w (N,K) row-major. resid may equal out (in-place residual add). */
void cpu_matmul_forward(float *out, int ldo, const float *resid, const float *in, const float *w,
                        const float *bias, int M, int N, int K);
/* out (M,N) row stride ldo = [resid (M,N, stride ldo)] + [bias (N)] (0 with neither): what a
 * product then accumulates into. */
void cpu_matmul_prefill(float *out, int ldo, const float *resid, const float *bias, int M, int N);
/* dout (M,N) row stride lddo. din (M,K) = dout @ w (or += when din_accumulate);
 * dw (N,K) += dout^T @ in; dbias (N) += column sums of dout. din, dbias may be NULL. */
void cpu_matmul_backward(float *din, int din_accumulate, float *dw, float *dbias,
                         const float *dout, int lddo, const float *in, const float *w, int M,
                         int N, int K);
/* Set OpenBLAS to one thread (once): every kernel that calls sgemm does, so sgemm can run
 * inside OpenMP loops and OpenBLAS's pool never competes with them. */
void cpu_blas_single_thread(void);
/* dst (N) += sum over the M rows of src (M,N) row stride ld. */
void cpu_colsum_add(float *dst, const float *src, int M, int N, int ld);

/* LayerNorm over C: out (M,C), mean (M), rstd (M) saved for backward. */
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                           const float *b, int M, int C, float eps);
/* dx (M,C) += ; dw, db (C) += */
void cpu_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const float *mean, const float *rstd, int M, int C);
/* RMSNorm over C: out (M,C) = x * rstd * w, rstd (M). */
void cpu_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int M, int C,
                         float eps);
/* dx (M,C) += ; dw (C) += */
void cpu_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                          const float *rstd, int M, int C);
/* Gemma's RMSNorm: out = x * rstd * (1 + w); backward as above. */
void cpu_rmsnorm1p_forward(float *out, float *rstd, const float *x, const float *w, int M, int C,
                           float eps);
void cpu_rmsnorm1p_backward(float *dx, float *dw, const float *dout, const float *x,
                            const float *w, const float *rstd, int M, int C);
/* Gemma 3 QK-norm: the first H+KV heads (hd each) of every row of x (M, row stride ld) are
 * normed in place by RMSNorm (1 + w), wq for the H query heads, wk for the KV key heads.
 * saved (M,(H+KV)*hd) gets the input, rstd (M,H+KV). Backward: dx holds d(out) in the
 * same place and becomes d(in); dwq, dwk (hd) +=. */
void cpu_headnorm_forward(float *x, int ld, float *saved, float *rstd, const float *wq,
                          const float *wk, int M, int H, int KV, int hd, float eps);
void cpu_headnorm_backward(float *dx, int ld, float *dwq, float *dwk, const float *saved,
                           const float *rstd, const float *wq, const float *wk, int M, int H,
                           int KV, int hd);

/* RoPE tables for positions 0..T-1: cos, sin (T, hd/2), Llama 3 frequency scaling when
 * factor > 0. */
void cpu_rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta, float factor,
                     float low_freq, float high_freq, int orig_max);
/* The same with linear scaling (Gemma 3's global layers): frequencies divided by linear. */
void cpu_rope_tables_linear(float *cos_t, float *sin_t, int T, int hd, float theta, float linear);
/* Rotate, in place, the first nheads heads of each row of x (B,T, row stride ld), HF
 * rotate_half layout: pairs (i, i+hd/2). inverse=1 applies the transpose (backward). */
void cpu_rope(float *x, int ld, const float *cos_t, const float *sin_t, int B, int T, int nheads,
              int hd, int inverse);

/* Causal attention. qkv (B,T,(H+2*KV)*hd) rows [q heads | k heads | v heads]; query head
 * h reads kv head h/(H/KV). out (B,T,H*hd); lse (B,H,T) log-sum-exp of each score row,
 * kept so backward recomputes probabilities instead of storing (B,H,T,T).
 * scratch holds nslots slots of cpu_attention_scratch_floats(T, hd) floats, one per
 * thread; the parallel region uses at most nslots threads. */
size_t cpu_attention_scratch_floats(int T, int hd);
/* Options (NULL: scale 1/sqrt(hd), no cap, no window): scores are scale * q.k, then
 * softcap * tanh(s / softcap) when softcap > 0; window > 0 lets query i see keys
 * i-window+1..i only, and the keys outside are never multiplied. */
struct cpu_attn {
    float scale, softcap;
    int window;
};
void cpu_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int H, int KV,
                           int hd, const struct cpu_attn *opt, float *scratch, int nslots);
/* dqkv (B,T,(H+2*KV)*hd) written (not accumulated) from dout (B,T,H*hd). */
void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, int B, int T, int H, int KV, int hd,
                            const struct cpu_attn *opt, float *scratch, int nslots);

/* ---- packed rows: several sequences in one row of T (GRPO's training pass) ----
 * pos (B,T) is each token's position in its sequence: 0 where a sequence starts, else the
 * previous token's + 1 (the first token of a row is 0). A token at column t of its row
 * belongs to the sequence that began at column t - pos[t]. */
/* Causal attention within each sequence (block-diagonal): query t sees keys t-pos[t]..t
 * (and the window); keys of other sequences are never multiplied. Otherwise as
 * cpu_attention_forward / _backward, which equal these with every pos[t] = t. */
void cpu_attention_forward_pos(float *out, float *lse, const float *qkv, const int32_t *pos, int B,
                               int T, int H, int KV, int hd, const struct cpu_attn *opt,
                               float *scratch, int nslots);
void cpu_attention_backward_pos(float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, const int32_t *pos, int B, int T, int H, int KV,
                                int hd, const struct cpu_attn *opt, float *scratch, int nslots);
/* cpu_rope over M rows (row stride ld), row i rotated for position pos[i] (tables as
 * cpu_rope's, at least max(pos)+1 rows). */
void cpu_rope_pos(float *x, int ld, const float *cos_t, const float *sin_t, const int32_t *pos,
                  int M, int nheads, int hd, int inverse);
/* out (M,C) = wte[x] (+ wpe[pos] when wpe is non-NULL); backward: dwte[x] += dout,
 * dwpe[pos] += dout. */
void cpu_embedding_forward_pos(float *out, const int32_t *x, const int32_t *pos, const float *wte,
                               const float *wpe, int M, int C);
void cpu_embedding_backward_pos(float *dwte, float *dwpe, const float *dout, const int32_t *x,
                                const int32_t *pos, int M, int C);

/* GELU, tanh approximation. out (n) = gelu(x); dx = dout * gelu'(x) (dx may alias dout). */
void cpu_gelu_forward(float *out, const float *x, long n);
void cpu_gelu_backward(float *dx, const float *dout, const float *x, long n);
/* SwiGLU: gu (M,2F) rows [gate | up]; out (M,F) = silu(gate) * up.
 * dgu (M,2F) written from dout (M,F). */
void cpu_swiglu_forward(float *out, const float *gu, int M, int F);
void cpu_swiglu_backward(float *dgu, const float *dout, const float *gu, int M, int F);
/* GeGLU (Gemma): out (M,F) = gelu_tanh(gate) * up, layout as SwiGLU. */
void cpu_geglu_forward(float *out, const float *gu, int M, int F);
void cpu_geglu_backward(float *dgu, const float *dout, const float *gu, int M, int F);
/* x (M,C) *= s (Gemma's sqrt(d_model) embedding scale). */
void cpu_scale(float *x, long n, float s);

/* out (B,T,C) = wte[x] (+ wpe[t] when wpe is non-NULL). */
void cpu_embedding_forward(float *out, const int32_t *x, const float *wte, const float *wpe, int B,
                           int T, int C);
/* dwte[x] += dout, dwpe[t] += dout (when dwpe non-NULL). */
void cpu_embedding_backward(float *dwte, float *dwpe, const float *dout, const int32_t *x, int B,
                            int T, int C);

/* Fused log-softmax over the first V columns of logits (M, row stride ld >= V):
 * lse (M) = logsumexp, logp (M) = logits[y] - lse (0 when y < 0). Columns V..ld-1 are set
 * to -INFINITY so padded vocab rows never get probability mass. No probability copy. */
void cpu_logsoftmax_forward(float *logits, int ld, int V, const int32_t *y, float *lse, float *logp,
                            int M);
/* In place: logits (M,ld) become dlogits = dlogp * (onehot(y) - softmax) over V columns,
 * 0 beyond. dlogp (M) = d(loss)/d(logp); rows with y < 0 or dlogp 0 become 0. */
void cpu_logsoftmax_backward(float *logits, int ld, int V, const int32_t *y, const float *lse,
                             const float *dlogp, int M);
/* Final-logit soft-capping (Gemma 2): the first V columns of each row of logits (M, ld)
 * become cap * tanh(l / cap). The backward is cpu_logsoftmax_backward's with the chain
 * through the cap (the logits hold the capped values). */
void cpu_softcap_forward(float *logits, int ld, int V, int M, float cap);
void cpu_logsoftmax_softcap_backward(float *logits, int ld, int V, const int32_t *y,
                                     const float *lse, const float *dlogp, int M, float cap);

#endif
