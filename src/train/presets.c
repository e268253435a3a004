/* presets: published model shapes by name, JSON overrides (our names and Hugging Face
 * config.json names), config validation, equality and JSON output. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

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

/* ---- JSON ---- */

enum ftype { F_INT, F_FLOAT, F_BOOL, F_FAMILY, F_ROPE_SCALING, F_IGNORE, F_HEAD_DIM };
struct field {
    const char *key;
    enum ftype type;
    size_t off;
};
#define I(k, f) {k, F_INT, offsetof(struct model_config, f)}
#define R(k, f) {k, F_FLOAT, offsetof(struct model_config, f)}

static const struct field fields[] = {
    // ours (model_config_to_json writes these)
    {"family", F_FAMILY, 0}, I("vocab_size", vocab_size), I("padded_vocab", padded_vocab),
    I("max_seq", max_seq), I("n_layer", n_layer), I("n_head", n_head),
    I("n_kv_head", n_kv_head), I("d_model", d_model), I("d_ff", d_ff), R("norm_eps", norm_eps),
    R("rope_theta", rope_theta), R("rope_factor", rope_factor),
    R("rope_low_freq", rope_low_freq), R("rope_high_freq", rope_high_freq),
    I("rope_orig_max", rope_orig_max), {"tied", F_BOOL, offsetof(struct model_config, tied)},
    // Hugging Face Llama config.json
    {"model_type", F_FAMILY, 0}, I("hidden_size", d_model), I("intermediate_size", d_ff),
    I("num_hidden_layers", n_layer), I("num_attention_heads", n_head),
    I("num_key_value_heads", n_kv_head), I("max_position_embeddings", max_seq),
    R("rms_norm_eps", norm_eps), {"rope_scaling", F_ROPE_SCALING, 0},
    {"tie_word_embeddings", F_BOOL, offsetof(struct model_config, tied)},
    {"head_dim", F_HEAD_DIM, 0},
    // Hugging Face GPT-2 config.json
    I("n_embd", d_model), I("n_positions", max_seq), I("n_ctx", max_seq), I("n_inner", d_ff),
    R("layer_norm_epsilon", norm_eps),
    // informational HF keys that do not change the shape
    {"architectures", F_IGNORE, 0}, {"torch_dtype", F_IGNORE, 0},
    {"transformers_version", F_IGNORE, 0}, {"bos_token_id", F_IGNORE, 0},
    {"eos_token_id", F_IGNORE, 0}, {"pad_token_id", F_IGNORE, 0}, {"hidden_act", F_IGNORE, 0},
    {"activation_function", F_IGNORE, 0}, {"initializer_range", F_IGNORE, 0},
    {"attention_bias", F_IGNORE, 0}, {"attention_dropout", F_IGNORE, 0},
    {"mlp_bias", F_IGNORE, 0}, {"pretraining_tp", F_IGNORE, 0}, {"use_cache", F_IGNORE, 0},
    {"resid_pdrop", F_IGNORE, 0}, {"embd_pdrop", F_IGNORE, 0}, {"attn_pdrop", F_IGNORE, 0},
    {"scale_attn_weights", F_IGNORE, 0}, {"summary_activation", F_IGNORE, 0},
    {"summary_first_dropout", F_IGNORE, 0}, {"summary_proj_to_labels", F_IGNORE, 0},
    {"summary_type", F_IGNORE, 0}, {"summary_use_proj", F_IGNORE, 0},
    {"task_specific_params", F_IGNORE, 0}, {"reorder_and_upcast_attn", F_IGNORE, 0},
    {"scale_attn_by_inverse_layer_idx", F_IGNORE, 0},
};

static const struct {
    const char *key;
    size_t off;
    int is_int;
} rope_fields[] = {
    {"factor", offsetof(struct model_config, rope_factor), 0},
    {"low_freq_factor", offsetof(struct model_config, rope_low_freq), 0},
    {"high_freq_factor", offsetof(struct model_config, rope_high_freq), 0},
    {"original_max_position_embeddings", offsetof(struct model_config, rope_orig_max), 1},
};

static int apply_rope_scaling(struct model_config *c, const json_t *v, mtc_error_t *err)
{
    if (json_is_null(v)) {
        c->rope_factor = 0.0f;
        return 0;
    }
    if (!json_is_object(v))
        return errprintf(err, "rope_scaling must be an object or null");
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x) {
        if (strcmp(k, "rope_type") == 0 || strcmp(k, "type") == 0) {
            if (!json_is_string(x) || strcmp(json_string_value(x), "llama3") != 0)
                return errprintf(err, "rope_scaling.%s: only \"llama3\" is supported", k);
            continue;
        }
        size_t i, n = sizeof rope_fields / sizeof rope_fields[0];
        for (i = 0; i < n && strcmp(rope_fields[i].key, k) != 0; i++)
            ;
        if (i == n)
            return errprintf(err, "unknown model config key 'rope_scaling.%s'", k);
        if (rope_fields[i].is_int ? !json_is_integer(x) : !json_is_number(x))
            return errprintf(err, "rope_scaling.%s must be a number", k);
        char *p = (char *)c + rope_fields[i].off;
        if (rope_fields[i].is_int)
            *(int *)p = (int)json_integer_value(x);
        else
            *(float *)p = (float)json_number_value(x);
    }
    return 0;
}

static int apply_field(struct model_config *c, const struct field *f, const char *k,
                       const json_t *v, int *head_dim, mtc_error_t *err)
{
    char *p = (char *)c + f->off;
    switch (f->type) {
    case F_INT:
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return errprintf(err, "model config '%s' must be a non-negative integer", k);
        *(int *)p = (int)json_integer_value(v);
        return 0;
    case F_FLOAT:
        if (!json_is_number(v))
            return errprintf(err, "model config '%s' must be a number", k);
        *(float *)p = (float)json_number_value(v);
        return 0;
    case F_BOOL:
        if (!json_is_boolean(v) && !json_is_integer(v))
            return errprintf(err, "model config '%s' must be a boolean", k);
        *(int *)p = json_is_boolean(v) ? json_is_true(v) : json_integer_value(v) != 0;
        return 0;
    case F_FAMILY:
        if (json_is_string(v) && strcmp(json_string_value(v), "gpt2") == 0)
            c->family = MODEL_GPT2;
        else if (json_is_string(v) && strcmp(json_string_value(v), "llama") == 0)
            c->family = MODEL_LLAMA;
        else
            return errprintf(err, "model config '%s' must be \"gpt2\" or \"llama\"", k);
        return 0;
    case F_ROPE_SCALING:
        return apply_rope_scaling(c, v, err);
    case F_HEAD_DIM:
        if (!json_is_integer(v))
            return errprintf(err, "model config '%s' must be an integer", k);
        *head_dim = (int)json_integer_value(v);
        return 0;
    case F_IGNORE:
        return 0;
    }
    return 0;
}

int model_config_apply_json(struct model_config *cfg, const json_t *obj, mtc_error_t *err)
{
    if (!json_is_object(obj)) {
        errno = EINVAL;
        return errprintf(err, "model config must be a JSON object");
    }
    struct model_config c = *cfg;
    int head_dim = 0, vocab_before = c.vocab_size, padded_given = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        size_t i, n = sizeof fields / sizeof fields[0];
        for (i = 0; i < n && strcmp(fields[i].key, k) != 0; i++)
            ;
        if (i == n) {
            errno = EINVAL;
            return errprintf(err, "unknown model config key '%s'", k);
        }
        if (apply_field(&c, &fields[i], k, v, &head_dim, err) < 0) {
            errno = EINVAL;
            return -1;
        }
        padded_given |= strcmp(k, "padded_vocab") == 0;
    }
    if (c.vocab_size != vocab_before && !padded_given)
        c.padded_vocab = 0; // recomputed by the check
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
