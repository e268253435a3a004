/* presets: published model shapes by name (GPT-2, Llama 3, Gemma 2, Gemma 3), JSON overrides (our names and Hugging Face
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
    /* Gemma: shapes of the published text decoders (HF config.json of google/gemma-2-2b,
     * google/gemma-3-1b-pt and the text model of google/gemma-3-4b-pt); their parameter
     * counts are in docs/trainer.md. */
    {"gemma2-2b", {.family = MODEL_GEMMA2, .vocab_size = 256000, .max_seq = 8192, .n_layer = 26,
                   .n_head = 8, .n_kv_head = 4, .d_model = 2304, .d_ff = 9216, .norm_eps = 1e-6f,
                   .rope_theta = 10000.0f, .tied = 1, .head_dim = 256, .query_scalar = 256.0f,
                   .attn_softcap = 50.0f, .final_softcap = 30.0f, .window = 4096,
                   .local_period = 2}},
    {"gemma3-1b", {.family = MODEL_GEMMA3, .vocab_size = 262144, .max_seq = 32768, .n_layer = 26,
                   .n_head = 4, .n_kv_head = 1, .d_model = 1152, .d_ff = 6912, .norm_eps = 1e-6f,
                   .rope_theta = 1000000.0f, .rope_local_theta = 10000.0f, .tied = 1,
                   .head_dim = 256, .query_scalar = 256.0f, .window = 512, .local_period = 6}},
    {"gemma3-4b", {.family = MODEL_GEMMA3, .vocab_size = 262208, .max_seq = 131072, .n_layer = 34,
                   .n_head = 8, .n_kv_head = 4, .d_model = 2560, .d_ff = 10240, .norm_eps = 1e-6f,
                   .rope_theta = 1000000.0f, .rope_local_theta = 10000.0f, .rope_linear = 8.0f,
                   .tied = 1, .head_dim = 256, .query_scalar = 256.0f, .window = 1024,
                   .local_period = 6}},
    /* Tiny shapes for tests and CPU smoke runs: a few million FLOPs per token. */
    {"tiny-gpt2", {.family = MODEL_GPT2, .vocab_size = 4096, .max_seq = 256, .n_layer = 4,
                   .n_head = 4, .n_kv_head = 4, .d_model = 128, .d_ff = 512, .norm_eps = 1e-5f,
                   .tied = 1}},
    {"tiny-llama", {.family = MODEL_LLAMA, .vocab_size = 4096, .max_seq = 256, .n_layer = 4,
                    .n_head = 4, .n_kv_head = 2, .d_model = 128, .d_ff = 384, .norm_eps = 1e-5f,
                    LLAMA3_ROPE(8.0f), .tied = 1}},
    /* tiny Gemmas: head_dim 48 (4 heads: 192 != d_model), query_pre_attn_scalar 64 != head_dim,
     * a 64-token window, so every Gemma-only path changes the numbers */
    {"tiny-gemma2", {.family = MODEL_GEMMA2, .vocab_size = 4096, .max_seq = 256, .n_layer = 4,
                     .n_head = 4, .n_kv_head = 2, .d_model = 128, .d_ff = 384, .norm_eps = 1e-6f,
                     .rope_theta = 10000.0f, .tied = 1, .head_dim = 48, .query_scalar = 64.0f,
                     .attn_softcap = 50.0f, .final_softcap = 30.0f, .window = 64,
                     .local_period = 2}},
    {"tiny-gemma3", {.family = MODEL_GEMMA3, .vocab_size = 4096, .max_seq = 256, .n_layer = 6,
                     .n_head = 4, .n_kv_head = 2, .d_model = 128, .d_ff = 384, .norm_eps = 1e-6f,
                     .rope_theta = 1000000.0f, .rope_local_theta = 10000.0f, .rope_linear = 8.0f,
                     .tied = 1, .head_dim = 48, .query_scalar = 64.0f, .window = 64,
                     .local_period = 6}},
};

int model_layer_local(const struct model_config *c, int l)
{
    return c->window > 0 && c->local_period > 0 && (l + 1) % c->local_period != 0;
}

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
                     "llama3.2-3b, llama3.1-8b, llama3p1-2b, gemma2-2b, gemma3-1b, gemma3-4b, "
                     "tiny-gpt2, tiny-llama, tiny-gemma2, tiny-gemma3)",
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
    {"head_dim", offsetof(struct model_config, head_dim), MODEL_MAX_D_MODEL},
    {"window", offsetof(struct model_config, window), MODEL_MAX_SEQ},
    {"local_period", offsetof(struct model_config, local_period), MODEL_MAX_LAYERS},
};

int model_config_check(struct model_config *c, mtc_error_t *err)
{
    errno = EINVAL;
    if ((unsigned)c->family > MODEL_GEMMA3)
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
                  {"rope_high_freq", c->rope_high_freq},
                  {"query_scalar", c->query_scalar},
                  {"attn_softcap", c->attn_softcap},
                  {"final_softcap", c->final_softcap},
                  {"rope_local_theta", c->rope_local_theta},
                  {"rope_linear", c->rope_linear}};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
        if (!isfinite(floats[i].v))
            return errprintf(err, "model %s must be finite", floats[i].name);
        else if (i >= 5 && floats[i].v < 0)
            return errprintf(err, "model %s must be >= 0", floats[i].name);
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
    if (!MODEL_IS_GEMMA(c)) { // head_dim is derived, the rest is Gemma's alone
        if (c->d_model % c->n_head)
            return errprintf(err, "d_model %d is not a multiple of n_head %d", c->d_model,
                             c->n_head);
        c->head_dim = c->d_model / c->n_head;
        c->query_scalar = c->attn_softcap = c->final_softcap = 0.0f;
        c->rope_local_theta = c->rope_linear = 0.0f;
        c->window = c->local_period = 0;
    } else if (c->head_dim == 0) {
        if (c->d_model % c->n_head)
            return errprintf(err, "d_model %d is not a multiple of n_head %d (and no head_dim)",
                             c->d_model, c->n_head);
        c->head_dim = c->d_model / c->n_head;
    }
    if ((int64_t)c->head_dim * (c->n_head + 2 * c->n_kv_head) > MODEL_MAX_D_FF * 4)
        return errprintf(err, "head_dim %d x %d heads is above the limit", c->head_dim,
                         c->n_head + 2 * c->n_kv_head);
    if (c->n_head % c->n_kv_head)
        return errprintf(err, "n_head %d is not a multiple of n_kv_head %d", c->n_head,
                         c->n_kv_head);
    if (c->family != MODEL_GPT2 && c->head_dim % 2)
        return errprintf(err, "RoPE needs an even head dimension");
    if (!(c->norm_eps > 0))
        return errprintf(err, "norm_eps must be > 0");
    if (c->family != MODEL_GPT2) {
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
    SCHEMA_NAMES(NULL, [MODEL_GPT2] = "gpt2", [MODEL_LLAMA] = "llama", [MODEL_GEMMA2] = "gemma2",
                 [MODEL_GEMMA3] = "gemma3");
static const struct schema_enum rope_type_enum = SCHEMA_NAMES(NULL, "llama3", "linear", "default");

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
    {.name = "linear_factor", REAL, MC(rope_linear)}, // rope_type "linear" (the hook's)
    {.name = NULL},
};
static const struct schema rope_schema = {rope_fields, SCHEMA_EXACT, NULL, NULL};

/* Hook: rope_scaling is an object, or null for "no scaling". */
static int rope_scaling(const struct schema_field *f, json_t **v, const char *path,
                        mtc_error_t *err)
{
    json_t *type = json_is_object(*v) ? json_object_get(*v, "rope_type") : NULL;
    if (!type && json_is_object(*v))
        type = json_object_get(*v, "type");
    json_t *n;
    if (json_is_null(*v)) {
        n = json_pack("{s:f,s:f}", "factor", 0.0, "linear_factor", 0.0);
    } else if (type && json_is_string(type) && strcmp(json_string_value(type), "linear") == 0) {
        // Gemma 3: positions divided by factor (the global layers' RoPE)
        json_t *lin = json_deep_copy(*v), *fac = json_object_get(*v, "factor");
        json_object_del(lin, "rope_type");
        json_object_del(lin, "type");
        json_object_del(lin, "factor");
        json_object_set(lin, "linear_factor", fac ? fac : json_null());
        json_object_set_new(lin, "factor", json_real(0.0));
        n = schema_normalize(lin, f->obj, path, err);
        json_decref(lin);
    } else {
        n = schema_normalize(*v, f->obj, path, err);
    }
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
    {.name = "head_dim", NAT, MC(head_dim)},
    {.name = "query_scalar", REAL, ALIASES("query_pre_attn_scalar"), MC(query_scalar)},
    {.name = "attn_softcap", REAL, ALIASES("attn_logit_softcapping"), MC(attn_softcap)},
    {.name = "final_softcap", REAL, ALIASES("final_logit_softcapping"), MC(final_softcap)},
    {.name = "window", NAT, ALIASES("sliding_window"), MC(window)},
    {.name = "local_period",
     NAT,
     ALIASES("sliding_window_pattern", "_sliding_window_pattern"),
     MC(local_period)},
    {.name = "rope_local_theta", REAL, ALIASES("rope_local_base_freq"), MC(rope_local_theta)},
    {.name = "rope_linear", REAL, MC(rope_linear)},
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
                                      "hidden_activation",
                                      "cache_implementation",
                                      "layer_types", // checked against local_period below
                                      "use_bidirectional_attention",
                                      NULL};

static const struct schema config_schema = {config_fields, SCHEMA_EXACT, hf_info, NULL};

/* HF Gemma spellings into ours: model_type gemma3_text is family gemma3; null soft-caps are
 * none; the local/global alternation HF leaves implicit (Gemma 2 alternates, Gemma 3
 * defaults to 6). New reference. */
static json_t *hf_gemma_in(const json_t *obj)
{
    json_t *o = json_copy((json_t *)obj);
    const char *mt = json_string_value(json_object_get(o, "model_type"));
    static const char *const nullable[] = {"attn_logit_softcapping", "final_logit_softcapping",
                                           NULL};
    for (int i = 0; nullable[i]; i++)
        if (json_is_null(json_object_get(o, nullable[i])))
            json_object_set_new(o, nullable[i], json_real(0.0));
    if (json_is_null(json_object_get(o, "sliding_window")))
        json_object_set_new(o, "sliding_window", json_integer(0));
    if (!mt)
        return o;
    int has_pattern = json_object_get(o, "sliding_window_pattern") ||
                      json_object_get(o, "_sliding_window_pattern");
    if (strcmp(mt, "gemma3_text") == 0) {
        json_object_set_new(o, "model_type", json_string("gemma3"));
        if (!has_pattern)
            json_object_set_new(o, "sliding_window_pattern", json_integer(6));
    } else if (strcmp(mt, "gemma2") == 0 && !has_pattern) {
        json_object_set_new(o, "sliding_window_pattern", json_integer(2));
    }
    return o;
}

/* layer_types (newer HF configs) must say what local_period says. */
static int check_layer_types(const json_t *types, const struct model_config *c, mtc_error_t *err)
{
    if (!types)
        return 0;
    errno = EINVAL;
    if (!json_is_array(types) || (int)json_array_size(types) != c->n_layer)
        return errprintf(err, "layer_types must list num_hidden_layers (%d) layers", c->n_layer);
    for (int l = 0; l < c->n_layer; l++) {
        const char *t = json_string_value(json_array_get(types, l));
        const char *want = model_layer_local(c, l) ? "sliding_attention" : "full_attention";
        if (!t || strcmp(t, want) != 0)
            return errprintf(err, "layer_types[%d] is %s, the sliding window pattern says %s", l,
                             t ? t : "not a string", want);
    }
    errno = 0;
    return 0;
}

int model_config_apply_json(struct model_config *cfg, const json_t *obj, mtc_error_t *err)
{
    if (!json_is_object(obj)) {
        errno = EINVAL;
        return errprintf(err, "model config must be a JSON object");
    }
    json_t *in = hf_gemma_in(obj);
    json_t *canon = in ? schema_normalize(in, &config_schema, "", err) : NULL;
    json_t *types = in ? json_incref(json_object_get(in, "layer_types")) : NULL;
    json_decref(in);
    if (!canon) {
        json_decref(types);
        return -1;
    }
    struct model_config c = *cfg;
    int rc = schema_fill(canon, &config_schema, &c);
    if (!MODEL_IS_GEMMA(&c) && !json_object_get(canon, "head_dim"))
        c.head_dim = 0; // derived again below
    int head_dim = (int)json_integer_value(json_object_get(canon, "head_dim"));
    if (c.vocab_size != cfg->vocab_size && !json_object_get(canon, "padded_vocab"))
        c.padded_vocab = 0; // recomputed by the check
    json_decref(canon);
    if (rc < 0) {
        json_decref(types);
        return errprintf(err, "model config does not fit struct model_config");
    }
    if (model_config_check(&c, err) < 0 || check_layer_types(types, &c, err) < 0) {
        json_decref(types);
        return -1;
    }
    json_decref(types);
    if (!MODEL_IS_GEMMA(&c) && head_dim && head_dim != c.d_model / c.n_head) {
        errno = EINVAL;
        return errprintf(err, "head_dim %d != hidden_size/num_attention_heads (%d)", head_dim,
                         c.d_model / c.n_head);
    }
    *cfg = c;
    return 0;
}

json_t *model_config_to_json(const struct model_config *c)
{
    json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, "
                     "s:i, s:b}",
                     "family", schema_enum_name(&family_enum, c->family), "vocab_size",
                     c->vocab_size, "padded_vocab", c->padded_vocab, "max_seq", c->max_seq,
                     "n_layer", c->n_layer, "n_head", c->n_head, "n_kv_head", c->n_kv_head,
                     "d_model", c->d_model, "d_ff", c->d_ff, "norm_eps", (double)c->norm_eps,
                     "rope_theta", (double)c->rope_theta, "rope_factor", (double)c->rope_factor,
                     "rope_low_freq", (double)c->rope_low_freq, "rope_high_freq",
                     (double)c->rope_high_freq, "rope_orig_max", c->rope_orig_max, "tied",
                     c->tied);
    json_t *g = NULL;
    if (o && MODEL_IS_GEMMA(c) &&
        json_object_update(o, g = json_pack("{s:i, s:f, s:f, s:f, s:i, s:i, s:f, s:f}", "head_dim",
                                        c->head_dim, "query_scalar", (double)c->query_scalar,
                                        "attn_softcap", (double)c->attn_softcap, "final_softcap",
                                        (double)c->final_softcap, "window", c->window,
                                        "local_period", c->local_period, "rope_local_theta",
                                        (double)c->rope_local_theta, "rope_linear",
                                        (double)c->rope_linear)) < 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(g);
    return o;
}

int model_config_equal(const struct model_config *a, const struct model_config *b)
{
    return a->family == b->family && a->vocab_size == b->vocab_size &&
           a->padded_vocab == b->padded_vocab && a->max_seq == b->max_seq &&
           a->n_layer == b->n_layer && a->n_head == b->n_head && a->n_kv_head == b->n_kv_head &&
           a->d_model == b->d_model && a->d_ff == b->d_ff && a->norm_eps == b->norm_eps &&
           a->rope_theta == b->rope_theta && a->rope_factor == b->rope_factor &&
           a->rope_low_freq == b->rope_low_freq && a->rope_high_freq == b->rope_high_freq &&
           a->rope_orig_max == b->rope_orig_max && a->tied == b->tied &&
           a->head_dim == b->head_dim && a->query_scalar == b->query_scalar &&
           a->attn_softcap == b->attn_softcap && a->final_softcap == b->final_softcap &&
           a->window == b->window && a->local_period == b->local_period &&
           a->rope_local_theta == b->rope_local_theta && a->rope_linear == b->rope_linear;
}
