/* model: decoder-only transformers (GPT-2, Llama, Gemma 2 and Gemma 3) in fp32 on the CPU —
 * configuration and presets, one flat parameter buffer with a named tensor table
 * (Hugging Face names), forward, backward, per-token log-probs. Code: presets.c
 * (configuration), model.c (tensor table, init), model_pass.c (forward, backward),
 * model_decode.c (KV cache). */
#ifndef MTC_TRAIN_MODEL_H
#define MTC_TRAIN_MODEL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "train/cpu/qmat.h"

enum model_family { MODEL_GPT2, MODEL_LLAMA, MODEL_GEMMA2, MODEL_GEMMA3 };

struct model_config {
    enum model_family family;
    int vocab_size;   // logical vocab
    int padded_vocab; // rows of wte/lm_head, multiple of 64 >= vocab_size (0 → computed)
    int max_seq;      // positions (GPT-2 wpe rows; Llama RoPE table length)
    int n_layer, n_head, n_kv_head, d_model, d_ff; // n_kv_head 0 → n_head; d_ff 0 → 4*d_model
    float norm_eps;
    float rope_theta;                                 // Llama
    float rope_factor, rope_low_freq, rope_high_freq; // Llama 3 scaling; factor 0 = none
    int rope_orig_max;
    int tied; // tie lm_head to wte (GPT-2 always 1)
    /* Gemma (0 = off / derived): */
    int head_dim;          // 0 → d_model / n_head
    float query_scalar;    // query_pre_attn_scalar: scores scaled by its -1/2 (0 → head_dim)
    float attn_softcap;    // attention logits → cap*tanh(s/cap) (Gemma 2)
    float final_softcap;   // output logits likewise (Gemma 2)
    int window;            // sliding window of the local layers (keys i-window+1..i)
    int local_period;      // layer l is local unless (l+1) % local_period == 0 (2: Gemma 2, 6: Gemma 3)
    float rope_local_theta; // RoPE base of local layers (0 → rope_theta)
    float rope_linear;     // linear RoPE scaling of the global layers (Gemma 3), 0 = none
};
/* 1 for the Gemma families. */
#define MODEL_IS_GEMMA(c) ((c)->family == MODEL_GEMMA2 || (c)->family == MODEL_GEMMA3)
/* 1 when layer l of c attends through its sliding window. */
int model_layer_local(const struct model_config *c, int l);

/* Fill cfg with a named preset: gpt2-124m, gpt2-350m, llama3.2-1b, llama3.2-3b,
 * llama3.1-8b, llama3p1-2b, gemma2-2b, gemma3-1b, gemma3-4b, tiny-gpt2, tiny-llama,
 * tiny-gemma2, tiny-gemma3. 0, or -1 (errno EINVAL) naming the
 * known presets in err. */
int model_preset(const char *name, struct model_config *cfg, mtc_error_t *err);
/* Apply overrides from a JSON object: our field names (family "gpt2"|"llama",
 * vocab_size, padded_vocab, max_seq, n_layer, n_head, n_kv_head, d_model, d_ff,
 * norm_eps, rope_theta, rope_factor, rope_low_freq, rope_high_freq, rope_orig_max,
 * tied) or Hugging Face config.json names (hidden_size, intermediate_size,
 * num_hidden_layers, num_attention_heads, num_key_value_heads, max_position_embeddings,
 * rms_norm_eps, rope_theta, rope_scaling{factor,low_freq_factor,high_freq_factor,
 * original_max_position_embeddings,rope_type}, tie_word_embeddings, n_embd, n_layer,
 * n_head, n_positions, n_ctx, n_inner, layer_norm_epsilon, model_type; informational HF
 * keys such as architectures, torch_dtype, bos_token_id are accepted and ignored).
 * Unknown key or wrong type → -1 with err naming it. Derived fields (padded_vocab)
 * are recomputed when vocab_size changes. */
int model_config_apply_json(struct model_config *cfg, const json_t *obj, mtc_error_t *err);
/* Our field names; new reference owned by the caller. */
json_t *model_config_to_json(const struct model_config *cfg);
/* 1 when every field is equal, else 0. */
int model_config_equal(const struct model_config *a, const struct model_config *b);
/* Upper bounds of the model dimensions, the one place every config read from a file
 * (llm.c header, HF config.json, checkpoint meta.json, --config) is checked against
 * (model_config_check). Far above any published shape (Llama 3.1 405B: vocab 128256,
 * d_model 16384, d_ff 53248, 126 layers), and low enough that no size derived from a
 * checked config wraps: parameters < 2^47, every int shape product < 2^31. */
#define MODEL_MAX_VOCAB (1 << 24)   // vocab_size, padded_vocab
#define MODEL_MAX_SEQ (1 << 24)     // max_seq, rope_orig_max
#define MODEL_MAX_LAYERS 1024       // n_layer
#define MODEL_MAX_D_MODEL (1 << 16) // d_model (so n_head, n_kv_head <= it too)
#define MODEL_MAX_D_FF (1 << 18)    // d_ff

/* Fill defaults (padded_vocab, n_kv_head, d_ff, tied for GPT-2) and validate shapes: each
 * dimension within the MODEL_MAX_* bounds (checked before anything is derived from it),
 * positive, divisible as the layers need; floats finite. 0 or -1 with err naming the
 * field. model_create calls it on its own copy. */
int model_config_check(struct model_config *cfg, mtc_error_t *err);
/* Number of parameters a model of this (checked) config holds (padded vocab rows included). */
size_t model_config_nparams(const struct model_config *cfg);

/* One named parameter tensor inside the flat parameter buffer. Weights are stored
 * (out,in) row-major, the HF nn.Linear layout. GPT-2: HF's Conv1D stores (in,out), so
 * c_attn, c_proj, c_fc, mlp.c_proj need a transpose on export/import. Embedding and
 * lm_head tensors have padded_vocab rows; HF files carry vocab_size rows (rows beyond
 * vocab_size are zero here). Names are HF names, e.g. "transformer.h.0.attn.c_attn.weight",
 * "model.layers.3.self_attn.k_proj.weight", "lm_head.weight" (absent when tied). */
struct model_tensor {
    const char *name; // owned by the model
    size_t offset;    // in floats, into model_params()/model_grads()
    size_t numel;
    int ndim;
    int shape[4];
    int decay; // 1 for 2-D weights (weight decay applies), 0 for norms and biases
};

struct model;
/* Allocates parameters (zero) and gradients (zero). NULL with err on a bad config or ENOMEM.
 * Threads: OMP_NUM_THREADS sets them all. Matmuls are OpenMP blocks of single-threaded
 * cblas_sgemm calls (the kernels call openblas_set_num_threads(1) once, so OpenBLAS's own
 * pool never competes with the OpenMP loops). Results are bitwise reproducible for a
 * fixed thread count. */
struct model *model_create(const struct model_config *cfg, mtc_error_t *err);
void model_destroy(struct model *m);
const struct model_config *model_cfg(const struct model *m);
float *model_params(struct model *m);
size_t model_nparams(const struct model *m);
float *model_grads(struct model *m); // same layout as params
int model_ntensors(const struct model *m);
const struct model_tensor *model_tensor(const struct model *m, int i);
/* Index of the tensor with that name, or -1. */
int model_find_tensor(const struct model *m, const char *name);
/* GPT-2 style init: N(0,0.02) for weights, residual output projections (c_proj,
 * mlp.c_proj, o_proj, down_proj) scaled by 1/sqrt(2*n_layer), norms 1, biases 0,
 * padded vocab rows 0. Deterministic for a seed, independent of the thread count. */
void model_init_weights(struct model *m, uint64_t seed);

/* Size activations for B,T up front (forward does it on demand). 0 or -1 with err. */
int model_reserve(struct model *m, int B, int T, mtc_error_t *err);
/* Forward over x (B,T) token ids. When y is non-NULL computes per-token CE loss;
 * y[i] < 0 means "no target" (weight 0, log-prob 0).
 * w (B,T) optional per-token loss weights (NULL = all 1): loss = sum(w*ce) / loss_norm,
 * loss_norm passed by caller (0 → sum of weights when w is given, else the count of
 * targets), so SFT can normalise over a whole accumulated batch. Returns the loss
 * (0 when y is NULL). Activations are sized for the largest B,T seen (reallocated when
 * larger). Returns NAN with errno EINVAL (token id out of range, T > max_seq) or ENOMEM. */
float model_forward(struct model *m, const int32_t *x, const int32_t *y, const float *w,
                    float loss_norm, int B, int T);
/* model_forward over rows that each hold several sequences (packing, GRPO's training pass):
 * pos (B,T) is each token's position within its sequence — 0 where a sequence starts, else
 * the previous token's + 1; every row starts with 0. A token sees only the earlier tokens
 * of its own sequence (block-diagonal causal attention; keys of other sequences are never
 * multiplied) at its own position (GPT-2's wpe row, RoPE angle), so each sequence's
 * log-probs and gradients are those of running it alone, up to float summation order.
 * pos NULL is model_forward. The following model_backward uses the same packing. Returns
 * NAN with errno EINVAL on a pos that breaks those rules; model_last_logits gives each
 * row's last column. */
float model_forward_packed(struct model *m, const int32_t *x, const int32_t *y, const float *w,
                           float loss_norm, const int32_t *pos, int B, int T);
/* Per-token log-probs of y after a forward with y: out (B,T) = log p(y_t | x_<=t). */
void model_token_logprobs(const struct model *m, float *out);
/* Backward of the last forward (which must have had y); ACCUMULATES into grads (for
 * gradient accumulation). dlogp optional (B,T): when non-NULL, backprop
 * d(loss)/d(logprob) given per token instead of the CE loss (used by DPO). Overwrites
 * the logits of the last forward. */
void model_backward(struct model *m, const float *dlogp);
void model_zero_grad(struct model *m);
/* All logits of the last forward with targets, before its backward: (B*T, padded_vocab) rows
 * (soft-capped when the model caps them); NULL when there are none. */
const float *model_logits(const struct model *m);
/* Logits of the last position of each sequence after a forward (for sampling):
 * (B, padded_vocab) with row stride padded_vocab; entries >= vocab_size are -INFINITY. */
const float *model_last_logits(const struct model *m);
/* Training FLOPs per token: 6*N (N = weights used in matmuls, lm_head with vocab_size
 * rows) + 12*n_layer*n_head*head_dim*T for attention, for MFU. */
double model_flops_per_token(const struct model *m, int T);

/* ---- incremental decoding (the KV cache of mtc-serve and of GRPO's rollouts) ---- */

/* K and V of every layer for nslots sequences of up to ctx positions (ctx <= max_seq),
 * plus the workspace of one model_decode call. NULL with err (EINVAL, ENOMEM). */
struct model_kv;
struct model_kv *model_kv_create(const struct model *m, int nslots, int ctx, mtc_error_t *err);
void model_kv_destroy(struct model_kv *kv);
size_t model_kv_bytes(const struct model_kv *kv); // K and V storage
int model_kv_ctx(const struct model_kv *kv);
int model_kv_slots(const struct model_kv *kv);
/* One forward over n new tokens of any number of sequences: row i is token tok[i] at
 * position pos[i] of the sequence in slot slot[i]. Its K and V are written to the cache at
 * that position and it attends to positions 0..pos[i] of its slot (earlier positions come
 * from earlier calls or from earlier rows of this call). Rows with want[i] != 0 get logits,
 * in row order, in logits (count of want, padded_vocab); entries >= vocab_size are
 * -INFINITY. Each row's result depends only on its own sequence. 0, or -1 with err
 * (EINVAL: a token, slot or position out of range; ENOMEM). */
int model_decode(struct model *m, struct model_kv *kv, const int32_t *tok, const int32_t *slot,
                 const int32_t *pos, const uint8_t *want, int n, float *logits, mtc_error_t *err);
/* The weights model_decode reads: CPU_F32 (default) reads the parameters themselves, so
 * decoding follows every update (GRPO); CPU_BF16 and CPU_Q8_0 convert a snapshot of them
 * now (call again after the parameters change). A KV cache made afterwards stores K and V in
 * bf16 unless the dtype is f32. Training never reads the copy. 0, or -1 with err (EINVAL:
 * q8_0 and a matrix whose rows are not a multiple of 32; ENOMEM). */
int model_decode_set_dtype(struct model *m, enum cpu_dtype dt, mtc_error_t *err);
enum cpu_dtype model_decode_dtype(const struct model *m);
/* Bytes of weights one decode step reads (every linear of every layer and the LM head's
 * vocab_size rows, in the decode dtype); embeddings and norms not counted. */
size_t model_decode_weight_bytes(const struct model *m);
/* Mean cross-entropy of tok[1..n-1] given the tokens before, through model_decode one token
 * at a time as generation reads them (a private one-slot cache of n positions): the quality
 * measure of a decode dtype. 0 and *loss, or -1 with err (EINVAL: n < 2 or > max_seq, a
 * token out of range; ENOMEM). */
int model_decode_loss(struct model *m, const int32_t *tok, int n, double *loss, mtc_error_t *err);

#endif
