/* presets: published model shapes by name, JSON overrides (our names and Hugging Face
 * config.json names), config validation, equality and JSON output. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "schema/schema.h"
#include "train/model.h"

#define LLAMA3_ROPE(f) .rope_theta = 500000.0f, .rope_factor = (f), .rope_low_freq = 1.0f, \
                       .rope_high_freq = 4.0f, .rope_orig_max = 8192

static const struct preset {
    const char *name;
    struct model_config cfg;
} presets[] = {
    {"gpt2-124m", {.family = MODEL_GPT2, .vocab_size = 50257, .max_seq = 1024, .n_layer = 12,
                   .n_head = 12, .n_kv_head = 12, .d_model = 768, .d_ff = 3072,
                   .norm_eps = 1e-5f, .tied = 1}},
    {"gpt2-350m", {.family = MODEL_GPT2, .vocab_size = 50257, .max_seq = 1024, .n_layer = 24,
                   .n_head = 16, .n_kv_head = 16, .d_model = 1024, .d_ff = 4096,
                   .norm_eps = 1e-5f, .tied = 1}},
    {"llama3.2-1b", {.family = MODEL_LLAMA, .vocab_size = 128256, .max_seq = 131072,
                     .n_layer = 16, .n_head = 32, .n_kv_head = 8, .d_model = 2048,
                     .d_ff = 8192, .norm_eps = 1e-5f, LLAMA3_ROPE(32.0f), .tied = 1}},
    {"llama3.2-3b", {.family = MODEL_LLAMA, .vocab_size = 128256, .max_seq = 131072,
                     .n_layer = 28, .n_head = 24, .n_kv_head = 8, .d_model = 3072,
                     .d_ff = 8192, .norm_eps = 1e-5f, LLAMA3_ROPE(32.0f), .tied = 1}},
    {"llama3.1-8b", {.family = MODEL_LLAMA, .vocab_size = 128256, .max_seq = 131072,
                     .n_layer = 32, .n_head = 32, .n_kv_head = 8, .d_model = 4096,
                     .d_ff = 14336, .norm_eps = 1e-5f, LLAMA3_ROPE(8.0f), .tied = 0}},
    /* llama3p1-2b: our ~2B Llama-3.1-style shape (not a published checkpoint): the 3.2-1B
     * width (d 2048, 32 heads, 8 KV heads, ff 8192, head_dim 64) at 24 layers, untied
     * 128256-token embeddings, Llama 3.1 RoPE (theta 500000, factor 8). 1,985,054,720
     * parameters (1.46B in the blocks + 2 x 262.7M embeddings). See docs/trainer.md. */
    {"llama3p1-2b", {.family = MODEL_LLAMA, .vocab_size = 128256, .max_seq = 131072,
                     .n_layer = 24, .n_head = 32, .n_kv_head = 8, .d_model = 2048,
                     .d_ff = 8192, .norm_eps = 1e-5f, LLAMA3_ROPE(8.0f), .tied = 0}},
    /* Tiny shapes for tests and CPU smoke runs: a few million FLOPs per token. */
    {"tiny-gpt2", {.family = MODEL_GPT2, .vocab_size = 4096, .max_seq = 256, .n_layer = 4,
                   .n_head = 4, .n_kv_head = 4, .d_model = 128, .d_ff = 512, .norm_eps = 1e-5f,
                   .tied = 1}},
    {"tiny-llama", {.family = MODEL_LLAMA, .vocab_size = 4096, .max_seq = 256, .n_layer = 4,
                    .n_head = 4, .n_kv_head = 2, .d_model = 128, .d_ff = 384, .norm_eps = 1e-5f,
                    LLAMA3_ROPE(8.0f), .tied = 1}},
};

int model_preset(const char *name, struct model_config *cfg, mtc_error_t *err)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) {
            *cfg = presets[i].cfg;
            return model_config_check(cfg, err);
        }
    errno = EINVAL;
    return errprintf(err,
                     "unknown model preset '%s' (known: gpt2-124m, gpt2-350m, llama3.2-1b, "
                     "llama3.2-3b, llama3.1-8b, llama3p1-2b, tiny-gpt2, tiny-llama)",
                     name);
}

static int pad_vocab(int v)
{
    return (v + 63) / 64 * 64;
}

/* The bound of each dimension (model.h); checked first, so that the defaults derived
 * below (4*d_model, padded vocab) and every size computed from the config cannot wrap. */
static const struct {
    const char *name;
    size_t off;
    int max;
} bounds[] = {
    {"vocab_size", offsetof(struct model_config, vocab_size), MODEL_MAX_VOCAB},
    {"padded_vocab", offsetof(struct model_config, padded_vocab), MODEL_MAX_VOCAB},
    {"max_seq", offsetof(struct model_config, max_seq), MODEL_MAX_SEQ},
    {"n_layer", offsetof(struct model_config, n_layer), MODEL_MAX_LAYERS},
    {"n_head", offsetof(struct model_config, n_head), MODEL_MAX_D_MODEL},
    {"n_kv_head", offsetof(struct model_config, n_kv_head), MODEL_MAX_D_MODEL},
    {"d_model", offsetof(struct model_config, d_model), MODEL_MAX_D_MODEL},
    {"d_ff", offsetof(struct model_config, d_ff), MODEL_MAX_D_FF},
    {"rope_orig_max", offsetof(struct model_config, rope_orig_max), MODEL_MAX_SEQ},
};

int model_config_check(struct model_config *c, mtc_error_t *err)
{
    errno = EINVAL;
    if (c->family != MODEL_GPT2 && c->family != MODEL_LLAMA)
        return errprintf(err, "unknown model family %d", (int)c->family);
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        int v = *(const int *)((const char *)c + bounds[i].off);
        if (v < 0)
            return errprintf(err, "model sizes must be positive (%s %d)", bounds[i].name, v);
        if (v > bounds[i].max)
            return errprintf(err, "model %s %d is above the limit %d", bounds[i].name, v,
                             bounds[i].max);
    }
    const struct {
        const char *name;
        float v;
    } floats[] = {{"norm_eps", c->norm_eps},
                  {"rope_theta", c->rope_theta},
                  {"rope_factor", c->rope_factor},
                  {"rope_low_freq", c->rope_low_freq},
                  {"rope_high_freq", c->rope_high_freq}};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
        if (!isfinite(floats[i].v))
            return errprintf(err, "model %s must be finite", floats[i].name);
    if (c->n_kv_head == 0)
        c->n_kv_head = c->n_head;
    if (c->d_ff == 0)
        c->d_ff = 4 * c->d_model;
    if (c->padded_vocab == 0)
        c->padded_vocab = pad_vocab(c->vocab_size);
    if (c->family == MODEL_GPT2) { // always tied, never grouped
        c->tied = 1;
        c->n_kv_head = c->n_head;
    }
    if (c->vocab_size <= 0 || c->max_seq <= 0 || c->n_layer <= 0 || c->n_head <= 0 ||
        c->d_model <= 0 || c->d_ff <= 0 || c->n_kv_head <= 0)
        return errprintf(err, "model sizes must be positive");
    if (c->padded_vocab < c->vocab_size || c->padded_vocab % 64)
        return errprintf(err, "padded_vocab %d must be a multiple of 64 >= vocab_size %d",
                         c->padded_vocab, c->vocab_size);
    if (c->d_model % c->n_head)
        return errprintf(err, "d_model %d is not a multiple of n_head %d", c->d_model, c->n_head);
    if (c->n_head % c->n_kv_head)
        return errprintf(err, "n_head %d is not a multiple of n_kv_head %d", c->n_head,
                         c->n_kv_head);
    if (c->family == MODEL_LLAMA && (c->d_model / c->n_head) % 2)
        return errprintf(err, "RoPE needs an even head dimension");
    if (!(c->norm_eps > 0))
        return errprintf(err, "norm_eps must be > 0");
    if (c->family == MODEL_LLAMA) {
        if (!(c->rope_theta > 0))
            return errprintf(err, "rope_theta must be > 0");
        if (c->rope_factor > 0 && (c->rope_orig_max <= 0 || !(c->rope_low_freq > 0) ||
                                   !(c->rope_high_freq > c->rope_low_freq)))
            return errprintf(err, "rope scaling needs original_max_position_embeddings > 0 and "
                                  "high_freq_factor > low_freq_factor > 0");
    }
    errno = 0;
    return 0;
}

/* ---- JSON: one field table for our names and Hugging Face config.json's ---- */

static const struct schema_enum family_enum =
    SCHEMA_NAMES(NULL, [MODEL_GPT2] = "gpt2", [MODEL_LLAMA] = "llama");
static const struct schema_enum rope_type_enum = SCHEMA_NAMES(NULL, "llama3");

#define MC(m) SCHEMA_MEMBER(struct model_config, m)
#define NAT .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 0, .hi = INT32_MAX
#define REAL .kind = SCHEMA_NUM
// clang-format off
#define ALIASES(...) .aliases = (const char *const[]){__VA_ARGS__, NULL}
// clang-format on

/* rope_scaling{}: Llama 3 RoPE scaling, into the same struct. */
static const struct schema_field rope_fields[] = {
    {.name = "factor", REAL, MC(rope_factor)},
    {.name = "low_freq_factor", REAL, MC(rope_low_freq)},
    {.name = "high_freq_factor", REAL, MC(rope_high_freq)},
    {.name = "original_max_position_embeddings", .kind = SCHEMA_INT, MC(rope_orig_max)},
    {.name = "rope_type", .kind = SCHEMA_ENUM, .enm = &rope_type_enum},
    {.name = "type", .kind = SCHEMA_ENUM, .enm = &rope_type_enum},
    {.name = NULL},
};
static const struct schema rope_schema = {rope_fields, SCHEMA_EXACT, NULL, NULL};

/* Hook: rope_scaling is an object, or null for "no scaling". */
static int rope_scaling(const struct schema_field *f, json_t **v, const char *path,
                        mtc_error_t *err)
{
    json_t *n = json_is_null(*v) ? json_pack("{s:f}", "factor", 0.0)
                                 : schema_normalize(*v, f->obj, path, err);
    if (!n)
        return -1;
    json_decref(*v);
    *v = n;
    return 0;
}

/* Hook: tie_word_embeddings may be written 0/1. */
static int bool_or_int(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    if (!json_is_boolean(*v) && !json_is_integer(*v))
        return schema_error(err, path, "must be a boolean");
    json_t *b = json_boolean(json_is_true(*v) || json_integer_value(*v) != 0);
    json_decref(*v);
    *v = b;
    return 0;
}

/* Ours first (model_config_to_json writes them, in this order), HF names as aliases. */
static const struct schema_field config_fields[] = {
    {.name = "family", .kind = SCHEMA_ENUM, .enm = &family_enum, ALIASES("model_type"), MC(family)},
    {.name = "vocab_size", NAT, MC(vocab_size)},
    {.name = "padded_vocab", NAT, MC(padded_vocab)},
    {.name = "max_seq",
     NAT,
     ALIASES("max_position_embeddings", "n_positions", "n_ctx"),
     MC(max_seq)},
    {.name = "n_layer", NAT, ALIASES("num_hidden_layers"), MC(n_layer)},
    {.name = "n_head", NAT, ALIASES("num_attention_heads"), MC(n_head)},
    {.name = "n_kv_head", NAT, ALIASES("num_key_value_heads"), MC(n_kv_head)},
    {.name = "d_model", NAT, ALIASES("hidden_size", "n_embd"), MC(d_model)},
    {.name = "d_ff", NAT, ALIASES("intermediate_size", "n_inner"), MC(d_ff)},
    {.name = "norm_eps", REAL, ALIASES("rms_norm_eps", "layer_norm_epsilon"), MC(norm_eps)},
    {.name = "rope_theta", REAL, MC(rope_theta)},
    {.name = "rope_factor", REAL, MC(rope_factor)},
    {.name = "rope_low_freq", REAL, MC(rope_low_freq)},
    {.name = "rope_high_freq", REAL, MC(rope_high_freq)},
    {.name = "rope_orig_max", NAT, MC(rope_orig_max)},
    {.name = "tied",
     .kind = SCHEMA_CUSTOM,
     .check = bool_or_int,
     ALIASES("tie_word_embeddings"),
     MC(tied)},
    /* HF only */
    {.name = "rope_scaling",
     .kind = SCHEMA_CUSTOM,
     .check = rope_scaling,
     .obj = &rope_schema,
     .size = sizeof(struct model_config)},
    {.name = "head_dim", .kind = SCHEMA_INT}, /* checked against the shape below */
    {.name = NULL},
};

/* informational HF keys that do not change the shape */
static const char *const hf_info[] = {"architectures",
                                      "torch_dtype",
                                      "transformers_version",
                                      "bos_token_id",
                                      "eos_token_id",
                                      "pad_token_id",
                                      "hidden_act",
                                      "activation_function",
                                      "initializer_range",
                                      "attention_bias",
                                      "attention_dropout",
                                      "mlp_bias",
                                      "pretraining_tp",
                                      "use_cache",
                                      "resid_pdrop",
                                      "embd_pdrop",
                                      "attn_pdrop",
                                      "scale_attn_weights",
                                      "summary_activation",
                                      "summary_first_dropout",
                                      "summary_proj_to_labels",
                                      "summary_type",
                                      "summary_use_proj",
                                      "task_specific_params",
                                      "reorder_and_upcast_attn",
                                      "scale_attn_by_inverse_layer_idx",
                                      NULL};

static const struct schema config_schema = {config_fields, SCHEMA_EXACT, hf_info, NULL};

int model_config_apply_json(struct model_config *cfg, const json_t *obj, mtc_error_t *err)
{
    json_t *canon = schema_normalize(obj, &config_schema, "", err);
    if (!canon)
        return -1;
    struct model_config c = *cfg;
    int rc = schema_fill(canon, &config_schema, &c);
    int head_dim = (int)json_integer_value(json_object_get(canon, "head_dim"));
    if (c.vocab_size != cfg->vocab_size && !json_object_get(canon, "padded_vocab"))
        c.padded_vocab = 0; // recomputed by the check
    json_decref(canon);
    if (rc < 0)
        return errprintf(err, "model config does not fit struct model_config");
    if (model_config_check(&c, err) < 0)
        return -1;
    if (head_dim && head_dim != c.d_model / c.n_head) {
        errno = EINVAL;
        return errprintf(err, "head_dim %d != hidden_size/num_attention_heads (%d)", head_dim,
                         c.d_model / c.n_head);
    }
    *cfg = c;
    return 0;
}

json_t *model_config_to_json(const struct model_config *c)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, "
                     "s:i, s:b}",
                     "family", c->family == MODEL_LLAMA ? "llama" : "gpt2", "vocab_size",
                     c->vocab_size, "padded_vocab", c->padded_vocab, "max_seq", c->max_seq,
                     "n_layer", c->n_layer, "n_head", c->n_head, "n_kv_head", c->n_kv_head,
                     "d_model", c->d_model, "d_ff", c->d_ff, "norm_eps", (double)c->norm_eps,
                     "rope_theta", (double)c->rope_theta, "rope_factor", (double)c->rope_factor,
                     "rope_low_freq", (double)c->rope_low_freq, "rope_high_freq",
                     (double)c->rope_high_freq, "rope_orig_max", c->rope_orig_max, "tied",
                     c->tied);
}

int model_config_equal(const struct model_config *a, const struct model_config *b)
{
    return a->family == b->family && a->vocab_size == b->vocab_size &&
           a->padded_vocab == b->padded_vocab && a->max_seq == b->max_seq &&
           a->n_layer == b->n_layer && a->n_head == b->n_head && a->n_kv_head == b->n_kv_head &&
           a->d_model == b->d_model && a->d_ff == b->d_ff && a->norm_eps == b->norm_eps &&
           a->rope_theta == b->rope_theta && a->rope_factor == b->rope_factor &&
           a->rope_low_freq == b->rope_low_freq && a->rope_high_freq == b->rope_high_freq &&
           a->rope_orig_max == b->rope_orig_max && a->tied == b->tied;
}
