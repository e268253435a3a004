/* interop: Hugging Face safetensors + config.json export/import (GPT-2, Llama,
 * Gemma 2 and Gemma 3 names; GPT-2 Conv1D weights transposed) and llm.c GPT-2 model files,
 * plus the `export` and `import` subcommands. Llama q/k projections need no
 * permutation: our RoPE already rotates the two halves of each head
 * (HF rotate_half), the layout HF checkpoints are stored in. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/data.h"
#include "train/train.h"

/* HF GPT-2 keeps these in Conv1D (in,out); we store (out,in). */
static int is_conv1d(const struct model_config *c, const char *name)
{
    static const char *const sfx[] = {".attn.c_attn.weight", ".attn.c_proj.weight",
                                      ".mlp.c_fc.weight", ".mlp.c_proj.weight", NULL};
    if (c->family != MODEL_GPT2)
        return 0;
    size_t n = strlen(name);
    for (int i = 0; sfx[i]; i++) {
        size_t l = strlen(sfx[i]);
        if (n > l && strcmp(name + n - l, sfx[i]) == 0)
            return 1;
    }
    return 0;
}

/* Embedding-like tensors carry padded_vocab rows here and vocab_size rows in HF. */
static int is_vocab_rows(const struct model_config *c, const struct model_tensor *t)
{
    return t->ndim == 2 && t->shape[0] == c->padded_vocab &&
           (strstr(t->name, "wte") || strstr(t->name, "embed_tokens") ||
            strcmp(t->name, "lm_head.weight") == 0);
}

/* HF shape of tensor t into shape[], returns ndim. */
static int hf_shape(const struct model_config *c, const struct model_tensor *t, int64_t *shape)
{
    for (int d = 0; d < t->ndim; d++)
        shape[d] = t->shape[d];
    if (is_vocab_rows(c, t))
        shape[0] = c->vocab_size;
    if (is_conv1d(c, t->name)) {
        shape[0] = t->shape[1];
        shape[1] = t->shape[0];
    }
    return t->ndim;
}

/* Gemma2ForCausalLM / Gemma3ForCausalLM (model_type gemma3_text) config.json. */
static json_t *hf_gemma_config(const struct model_config *c)
{
    int g3 = c->family == MODEL_GEMMA3;
    json_t *types = json_array();
    for (int l = 0; l < c->n_layer; l++)
        json_array_append_new(types, json_string(model_layer_local(c, l) ? "sliding_attention"
                                                                         : "full_attention"));
    json_t *o = json_pack(
        "{s:s,s:[s],s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:b,s:s,s:s,s:f,s:i,s:i,s:o}",
        "model_type", g3 ? "gemma3_text" : "gemma2", "architectures",
        g3 ? "Gemma3ForCausalLM" : "Gemma2ForCausalLM", "hidden_size", c->d_model,
        "intermediate_size", c->d_ff, "num_hidden_layers", c->n_layer, "num_attention_heads",
        c->n_head, "num_key_value_heads", c->n_kv_head, "head_dim", c->head_dim, "vocab_size",
        c->vocab_size, "max_position_embeddings", c->max_seq, "rms_norm_eps", (double)c->norm_eps,
        "rope_theta", (double)c->rope_theta, "tie_word_embeddings", c->tied, "hidden_activation",
        "gelu_pytorch_tanh", "torch_dtype", "float32", "query_pre_attn_scalar",
        (double)(c->query_scalar > 0 ? c->query_scalar : (float)c->head_dim), "sliding_window",
        c->window, "sliding_window_pattern", c->local_period, "layer_types", types);
    if (!o)
        return NULL;
    json_object_set_new(o, "attn_logit_softcapping",
                        c->attn_softcap > 0 ? json_real(c->attn_softcap) : json_null());
    json_object_set_new(o, "final_logit_softcapping",
                        c->final_softcap > 0 ? json_real(c->final_softcap) : json_null());
    if (g3) {
        json_object_set_new(o, "rope_local_base_freq",
                            json_real(c->rope_local_theta > 0 ? c->rope_local_theta : c->rope_theta));
        json_object_set_new(o, "rope_scaling",
                            c->rope_linear > 0 ? json_pack("{s:s,s:f}", "rope_type", "linear",
                                                           "factor", (double)c->rope_linear)
                                               : json_null());
    }
    return o;
}

static json_t *hf_config(const struct model_config *c)
{
    if (c->family == MODEL_GPT2)
        return json_pack("{s:s,s:[s],s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:f,s:b,s:s}", "model_type",
                         "gpt2", "architectures", "GPT2LMHeadModel", "vocab_size", c->vocab_size,
                         "n_positions", c->max_seq, "n_ctx", c->max_seq, "n_embd", c->d_model,
                         "n_layer", c->n_layer, "n_head", c->n_head, "n_inner", c->d_ff,
                         "activation_function", "gelu_new", "layer_norm_epsilon",
                         (double)c->norm_eps, "tie_word_embeddings", 1, "torch_dtype", "float32");
    if (MODEL_IS_GEMMA(c))
        return hf_gemma_config(c);
    json_t *o = json_pack(
        "{s:s,s:[s],s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:b,s:s,s:s}", "model_type", "llama",
        "architectures", "LlamaForCausalLM", "hidden_size", c->d_model, "intermediate_size",
        c->d_ff, "num_hidden_layers", c->n_layer, "num_attention_heads", c->n_head,
        "num_key_value_heads", c->n_kv_head, "vocab_size", c->vocab_size, "max_position_embeddings",
        c->max_seq, "rms_norm_eps", (double)c->norm_eps, "rope_theta", (double)c->rope_theta,
        "tie_word_embeddings", c->tied, "hidden_act", "silu", "torch_dtype", "float32");
    if (c->rope_factor > 0)
        json_object_set_new(o, "rope_scaling",
                            json_pack("{s:s,s:f,s:f,s:f,s:i}", "rope_type", "llama3", "factor",
                                      (double)c->rope_factor, "low_freq_factor",
                                      (double)c->rope_low_freq, "high_freq_factor",
                                      (double)c->rope_high_freq,
                                      "original_max_position_embeddings", c->rope_orig_max));
    return o;
}

int interop_export_hf(const struct model *m, const char *outdir, mtc_error_t *err)
{
    struct model *mm = (struct model *)m;
    const struct model_config *c = model_cfg(m);
    int nt = model_ntensors(m);
    if (mtc_mkdir_p(outdir, 0755) < 0)
        return errprintf(err, "cannot create %s: %s", outdir, strerror(errno));
    struct st_tensor *st = calloc((size_t)nt, sizeof *st);
    if (!st)
        return errprintf(err, "out of memory");
    int rc = -1;
    const float *p = model_params(mm);
    for (int i = 0; i < nt; i++) {
        const struct model_tensor *t = model_tensor(m, i);
        st[i].name = (char *)t->name;
        strcpy(st[i].dtype, "F32");
        st[i].ndim = hf_shape(c, t, st[i].shape);
        size_t n = 1;
        for (int d = 0; d < st[i].ndim; d++)
            n *= (size_t)st[i].shape[d];
        st[i].nbytes = n * sizeof(float);
        if (is_conv1d(c, t->name)) {
            // (out,in) -> (in,out)
            int rows = t->shape[0], cols = t->shape[1];
            float *tr = malloc(st[i].nbytes);
            if (!tr) {
                errprintf(err, "out of memory");
                goto done;
            }
            for (int r = 0; r < rows; r++)
                for (int k = 0; k < cols; k++)
                    tr[(size_t)k * rows + r] = p[t->offset + (size_t)r * cols + k];
            st[i].data = tr;
        } else {
            st[i].data = (void *)(p + t->offset);  // leading vocab_size rows when padded
        }
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", outdir);
    if (st_write(path, st, nt, err) < 0)
        goto done;
    json_t *cj = hf_config(c);
    snprintf(path, sizeof path, "%s/config.json", outdir);
    rc = json_dump_file(cj, path, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(cj);
    if (rc < 0)
        errprintf(err, "cannot write %s", path);
done:
    for (int i = 0; i < nt; i++)
        if (is_conv1d(c, st[i].name ? st[i].name : ""))
            free(st[i].data);
    free(st);
    return rc;
}

static float half_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    float v;
    if (e == 0)
        v = ldexpf((float)f, -24);
    else if (e == 31)
        v = f ? NAN : INFINITY;
    else
        v = ldexpf((float)(f | 0x400), (int)e - 25);
    return s ? -v : v;
}

/* Copy n elements of an F32/BF16/F16 tensor into out as fp32. */
static int to_f32(const struct st_tensor *t, float *out, size_t n, mtc_error_t *err)
{
    const unsigned char *d = t->data;
    if (strcmp(t->dtype, "F32") == 0) {
        memcpy(out, d, n * 4);
    } else if (strcmp(t->dtype, "BF16") == 0) {
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)(d[2 * i] | d[2 * i + 1] << 8) << 16;
            memcpy(&out[i], &u, 4);
        }
    } else if (strcmp(t->dtype, "F16") == 0) {
        for (size_t i = 0; i < n; i++)
            out[i] = half_to_f32((uint16_t)(d[2 * i] | d[2 * i + 1] << 8));
    } else {
        return errprintf(err, "tensor %s: dtype %s not supported (F32, BF16, F16)", t->name,
                         t->dtype);
    }
    return 0;
}

char *interop_config_diff(const struct model_config *got, const struct model_config *want,
                          char *buf, size_t len)
{
    static const char *const fam[] = {"gpt2", "llama", "gemma2", "gemma3"};
    static const struct {
        const char *name;
        size_t off;
    } ints[] = {
        {"vocab_size", offsetof(struct model_config, vocab_size)},
        {"padded_vocab", offsetof(struct model_config, padded_vocab)},
        {"max_seq", offsetof(struct model_config, max_seq)},
        {"n_layer", offsetof(struct model_config, n_layer)},
        {"n_head", offsetof(struct model_config, n_head)},
        {"n_kv_head", offsetof(struct model_config, n_kv_head)},
        {"d_model", offsetof(struct model_config, d_model)},
        {"d_ff", offsetof(struct model_config, d_ff)},
        {"rope_orig_max", offsetof(struct model_config, rope_orig_max)},
        {"tied", offsetof(struct model_config, tied)},
        {"head_dim", offsetof(struct model_config, head_dim)},
        {"window", offsetof(struct model_config, window)},
        {"local_period", offsetof(struct model_config, local_period)},
    };
    static const struct {
        const char *name;
        size_t off;
    } floats[] = {
        {"norm_eps", offsetof(struct model_config, norm_eps)},
        {"rope_theta", offsetof(struct model_config, rope_theta)},
        {"rope_factor", offsetof(struct model_config, rope_factor)},
        {"rope_low_freq", offsetof(struct model_config, rope_low_freq)},
        {"rope_high_freq", offsetof(struct model_config, rope_high_freq)},
        {"query_scalar", offsetof(struct model_config, query_scalar)},
        {"attn_softcap", offsetof(struct model_config, attn_softcap)},
        {"final_softcap", offsetof(struct model_config, final_softcap)},
        {"rope_local_theta", offsetof(struct model_config, rope_local_theta)},
        {"rope_linear", offsetof(struct model_config, rope_linear)},
    };
    size_t o = 0;
    buf[0] = 0;
    if (got->family != want->family)
        o += (size_t)snprintf(buf + o, len - o, "family %s vs %s", fam[got->family & 3],
                              fam[want->family & 3]);
    for (size_t i = 0; i < sizeof ints / sizeof ints[0] && o < len; i++) {
        int a = *(const int *)((const char *)got + ints[i].off);
        int b = *(const int *)((const char *)want + ints[i].off);
        if (a != b)
            o += (size_t)snprintf(buf + o, len - o, "%s%s %d vs %d", o ? ", " : "", ints[i].name,
                                  a, b);
    }
    for (size_t i = 0; i < sizeof floats / sizeof floats[0] && o < len; i++) {
        float a = *(const float *)((const char *)got + floats[i].off);
        float b = *(const float *)((const char *)want + floats[i].off);
        if (a != b)
            o += (size_t)snprintf(buf + o, len - o, "%s%s %g vs %g", o ? ", " : "",
                                  floats[i].name, (double)a, (double)b);
    }
    return buf;
}

static int check_want(const struct model_config *got, const struct model_config *want,
                      const char *what, mtc_error_t *err)
{
    char d[160];
    if (want && !model_config_equal(got, want))
        return errprintf(err, "%s does not match the requested model (%s)", what,
                         interop_config_diff(got, want, d, sizeof d));
    return 0;
}

struct model *interop_import_hf(const char *dir, const struct model_config *want, mtc_error_t *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t je;
    json_t *cj = json_load_file(path, 0, &je);
    if (!cj)
        return errprintf(err, "%s: %s", path, je.text), NULL;
    const char *mt = json_string_value(json_object_get(cj, "model_type"));
    struct model_config cfg;
    struct model *m = NULL;
    struct st_file *sf = NULL;
    float *tmp = NULL;
    static const char *const types[][2] = {{"gpt2", "tiny-gpt2"},
                                           {"llama", "tiny-llama"},
                                           {"gemma2", "tiny-gemma2"},
                                           {"gemma3_text", "tiny-gemma3"}};
    int ti = -1;
    for (int i = 0; mt && i < 4; i++)
        if (strcmp(mt, types[i][0]) == 0)
            ti = i;
    if (ti < 0) {
        errprintf(err, "%s: model_type must be \"gpt2\", \"llama\", \"gemma2\" or \"gemma3_text\"",
                  path);
        goto error;
    }
    if (model_preset(types[ti][1], &cfg, err) < 0)
        goto error;
    // fields a config.json may omit take Hugging Face's defaults, not the preset's
    cfg.padded_vocab = 0;
    cfg.d_ff = 0;       // GPT-2: n_inner absent/null = 4*n_embd
    cfg.n_kv_head = 0;  // Llama: num_key_value_heads absent = num_attention_heads
    if (ti >= 2) { // Gemma2Config / Gemma3TextConfig defaults
        cfg.head_dim = 256;
        cfg.query_scalar = 256.0f;
        cfg.window = 4096;
        cfg.norm_eps = 1e-6f;
        cfg.tied = 1;
        cfg.attn_softcap = ti == 2 ? 50.0f : 0.0f;
        cfg.final_softcap = ti == 2 ? 30.0f : 0.0f;
        cfg.rope_theta = ti == 2 ? 10000.0f : 1000000.0f;
        cfg.rope_local_theta = ti == 2 ? 0.0f : 10000.0f;
        cfg.rope_linear = 0.0f;
    } else if (strcmp(mt, "llama") == 0) {
        cfg.rope_factor = cfg.rope_low_freq = cfg.rope_high_freq = 0;
        cfg.rope_orig_max = 0;
        cfg.rope_theta = 10000.0f;
        cfg.norm_eps = 1e-6f;
        cfg.tied = 0;
    } else {
        cfg.norm_eps = 1e-5f;
    }
    // save_pretrained writes unset options as null ("n_inner": null): drop them
    const char *k;
    void *tmpk;
    json_t *v;
    json_object_foreach_safe(cj, tmpk, k, v)
    {
        if (json_is_null(v) && strcmp(k, "rope_scaling") != 0 &&
            strcmp(k, "attn_logit_softcapping") != 0 && strcmp(k, "final_logit_softcapping") != 0)
            json_object_del(cj, k);
    }
    mtc_error_t why;
    if (model_config_apply_json(&cfg, cj, &why) < 0 || model_config_check(&cfg, &why) < 0) {
        errprintf(err, "%s: %s", path, why.text);
        goto error;
    }
    if (check_want(&cfg, want, dir, err) < 0)
        goto error;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    sf = st_open(path, err);
    if (!sf)
        goto error;
    // every tensor must be in the file at >= 2 bytes an element (F16/BF16), padded vocab
    // rows excepted: a config.json far larger than its weights is refused before the
    // model is allocated
    size_t nparams = model_config_nparams(&cfg);
    size_t pad =
        (size_t)(cfg.padded_vocab - cfg.vocab_size) * (size_t)cfg.d_model * (cfg.tied ? 1u : 2u);
    if (nparams == 0 || nparams - pad > sf->map_len / 2) {
        errprintf(err, "%s: %zu bytes cannot hold the %zu parameters of config.json", path,
                  sf->map_len, nparams - pad);
        goto error;
    }
    m = model_create(&cfg, err);
    if (!m)
        goto error;
    float *p = model_params(m);
    for (int i = 0; i < model_ntensors(m); i++) {
        const struct model_tensor *t = model_tensor(m, i);
        const struct st_tensor *s = st_find(sf, t->name);
        if (!s) {
            errprintf(err, "%s: tensor %s missing", path, t->name);
            goto error;
        }
        int64_t shape[4];
        int nd = hf_shape(&cfg, t, shape);
        int same = s->ndim == nd;
        for (int d = 0; same && d < nd; d++)
            same = s->shape[d] == shape[d];
        if (!same) {
            errprintf(err, "%s: tensor %s has the wrong shape for config.json", path, t->name);
            goto error;
        }
        size_t n = 1;
        for (int d = 0; d < nd; d++)
            n *= (size_t)shape[d];
        if (is_conv1d(&cfg, t->name)) {
            free(tmp);
            tmp = malloc(n * sizeof(float));
            if (!tmp || to_f32(s, tmp, n, err) < 0)
                goto error;
            int rows = t->shape[0], cols = t->shape[1];  // ours (out,in); file (in,out)
            for (int r = 0; r < rows; r++)
                for (int k = 0; k < cols; k++)
                    p[t->offset + (size_t)r * cols + k] = tmp[(size_t)k * rows + r];
        } else if (to_f32(s, p + t->offset, n, err) < 0) {
            goto error;
        }
    }
    free(tmp);
    st_close(sf);
    json_decref(cj);
    return m;
error:
    free(tmp);
    model_destroy(m);
    st_close(sf);
    json_decref(cj);
    return NULL;
}

/* llm.c's tensor order; each per-layer entry is (L, ...) across layers. */
static const struct {
    const char *fmt;  // HF name, %d = layer (NULL-layer entries have no %d)
    int layered;
} llmc_order[] = {
    {"transformer.wte.weight", 0},        {"transformer.wpe.weight", 0},
    {"transformer.h.%d.ln_1.weight", 1},  {"transformer.h.%d.ln_1.bias", 1},
    {"transformer.h.%d.attn.c_attn.weight", 1}, {"transformer.h.%d.attn.c_attn.bias", 1},
    {"transformer.h.%d.attn.c_proj.weight", 1}, {"transformer.h.%d.attn.c_proj.bias", 1},
    {"transformer.h.%d.ln_2.weight", 1},  {"transformer.h.%d.ln_2.bias", 1},
    {"transformer.h.%d.mlp.c_fc.weight", 1}, {"transformer.h.%d.mlp.c_fc.bias", 1},
    {"transformer.h.%d.mlp.c_proj.weight", 1}, {"transformer.h.%d.mlp.c_proj.bias", 1},
    {"transformer.ln_f.weight", 0},       {"transformer.ln_f.bias", 0},
};

struct model *interop_import_llmc(const char *path, const struct model_config *want,
                                  mtc_error_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return errprintf(err, "%s: %s", path, strerror(errno)), NULL;
    int32_t h[256];
    struct model *m = NULL;
    if (fread(h, sizeof h, 1, f) != 1 || h[0] != 20240326) {
        errprintf(err, "%s: not an llm.c model file (magic 20240326)", path);
        goto error;
    }
    if (h[1] != 3) {
        errprintf(err, "%s: llm.c model version %d; only 3 (fp32) is supported", path, h[1]);
        goto error;
    }
    struct model_config cfg;
    if (model_preset("tiny-gpt2", &cfg, err) < 0)
        goto error;
    cfg.max_seq = h[2];
    cfg.vocab_size = h[3];
    cfg.n_layer = h[4];
    cfg.n_head = cfg.n_kv_head = h[5];
    cfg.d_model = h[6];
    cfg.d_ff = 0; // 4 * d_model, once model_config_check has bounded d_model
    cfg.padded_vocab = h[7];
    mtc_error_t why;
    if (model_config_check(&cfg, &why) < 0) {
        errprintf(err, "%s: %s", path, why.text);
        goto error;
    }
    if (check_want(&cfg, want, path, err) < 0)
        goto error;
    if (cfg.padded_vocab != h[7]) {
        errprintf(err, "%s: padded vocab %d is not ours (%d)", path, h[7], cfg.padded_vocab);
        goto error;
    }
    // the file must hold exactly the header's model: checked before allocating it
    struct stat st;
    size_t nparams = model_config_nparams(&cfg), need;
    if (fstat(fileno(f), &st) < 0 || nparams == 0 ||
        mtc_size_mul(nparams, sizeof(float), &need) < 0 ||
        mtc_size_add(need, sizeof h, &need) < 0) {
        errprintf(err, "%s: cannot size the model of its header", path);
        goto error;
    }
    if ((uint64_t)st.st_size < need) {
        errprintf(err, "%s: truncated: %lld bytes, its header's model needs %zu", path,
                  (long long)st.st_size, need);
        goto error;
    }
    if ((uint64_t)st.st_size > need) {
        errprintf(err, "%s: trailing data after the last tensor (shape mismatch?)", path);
        goto error;
    }
    m = model_create(&cfg, err);
    if (!m)
        goto error;
    float *p = model_params(m);
    for (size_t e = 0; e < sizeof llmc_order / sizeof llmc_order[0]; e++) {
        for (int l = 0; l < (llmc_order[e].layered ? cfg.n_layer : 1); l++) {
            char name[128];
            snprintf(name, sizeof name, llmc_order[e].fmt, l);
            int i = model_find_tensor(m, name);
            if (i < 0) {
                errprintf(err, "internal: model has no tensor %s", name);
                goto error;
            }
            const struct model_tensor *t = model_tensor(m, i);
            if (fread(p + t->offset, sizeof(float), t->numel, f) != t->numel) {
                errprintf(err, "%s: truncated at %s", path, name);
                goto error;
            }
        }
    }
    char extra;
    if (fread(&extra, 1, 1, f) == 1) {
        errprintf(err, "%s: trailing data after the last tensor (shape mismatch?)", path);
        goto error;
    }
    fclose(f);
    return m;
error:
    model_destroy(m);
    fclose(f);
    return NULL;
}

int interop_export_llmc(const struct model *m, const char *path, mtc_error_t *err)
{
    /* llm.c holds one shape of model: the importer's GPT-2 with this one's sizes */
    const struct model_config *got = model_cfg(m);
    struct model_config want;
    char diff[256];
    if (model_preset("tiny-gpt2", &want, err) < 0)
        return -1;
    want.max_seq = got->max_seq;
    want.vocab_size = got->vocab_size;
    want.n_layer = got->n_layer;
    want.n_head = want.n_kv_head = got->n_head;
    want.d_model = got->d_model;
    want.d_ff = 0;
    want.padded_vocab = got->padded_vocab;
    if (model_config_check(&want, err) < 0)
        return -1;
    if (interop_config_diff(got, &want, diff, sizeof diff)[0])
        return errprintf(err, "llm.c's format holds GPT-2 models only; this one differs: %s",
                         diff);
    int32_t h[256] = {20240326, 3,           got->max_seq, got->vocab_size,
                      got->n_layer, got->n_head, got->d_model, got->padded_vocab};
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return errprintf(err, "%s: %s", tmp, strerror(errno));
    int ok = fwrite(h, sizeof h, 1, f) == 1;
    const float *p = model_params((struct model *)m);
    for (size_t e = 0; ok && e < sizeof llmc_order / sizeof llmc_order[0]; e++)
        for (int l = 0; ok && l < (llmc_order[e].layered ? got->n_layer : 1); l++) {
            char name[128];
            snprintf(name, sizeof name, llmc_order[e].fmt, l);
            int i = model_find_tensor((struct model *)m, name);
            if (i < 0) {
                fclose(f);
                unlink(tmp);
                return errprintf(err, "internal: model has no tensor %s", name);
            }
            const struct model_tensor *t = model_tensor((struct model *)m, i);
            ok = fwrite(p + t->offset, sizeof(float), t->numel, f) == t->numel;
        }
    ok = fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
    if (fclose(f) != 0 || !ok || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return errprintf(err, "%s: %s", path, strerror(e));
    }
    return 0;
}

int interop_load_weights(struct model *m, const char *path, mtc_error_t *err)
{
    char p2[4200], ck[4096];
    const struct model_config *cfg = model_cfg(m);
    snprintf(p2, sizeof p2, "%s/meta.json", path);
    if (mtc_path_exists(p2) || ckpt_find_latest(path, ck, sizeof ck, err) == 1) {
        const char *dir = mtc_path_exists(p2) ? path : ck;
        struct model_config got;
        if (ckpt_read_config(dir, &got, err) < 0 || check_want(&got, cfg, dir, err) < 0)
            return -1;
        return ckpt_load(dir, model_params(m), model_nparams(m), NULL, NULL, err);
    }
    snprintf(p2, sizeof p2, "%s/config.json", path);
    struct model *src = mtc_path_exists(p2) ? interop_import_hf(path, cfg, err)
                                            : interop_import_llmc(path, cfg, err);
    if (!src)
        return -1;
    memcpy(model_params(m), model_params(src), model_nparams(m) * sizeof(float));
    model_destroy(src);
    return 0;
}

/* ---- subcommands ---- */

static int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mtc-train: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

/* Resolve a checkpoint argument: a step dir, or a root holding step_ dirs. */
static int resolve_ckpt(const char *arg, char *out, size_t len, mtc_error_t *err)
{
    char meta[4200];
    snprintf(meta, sizeof meta, "%s/meta.json", arg);
    if (mtc_path_exists(meta)) {
        snprintf(out, len, "%s", arg);
        return 0;
    }
    int rc = ckpt_find_latest(arg, out, len, err);
    if (rc == 0)
        return errprintf(err, "%s: no complete checkpoint", arg);
    return rc < 0 ? -1 : 0;
}

struct model *interop_load_checkpoint(const char *arg, char *dir, size_t dlen, mtc_error_t *err)
{
    struct model_config cfg;
    if (resolve_ckpt(arg, dir, dlen, err) < 0 || ckpt_read_config(dir, &cfg, err) < 0)
        return NULL;
    struct model *m = model_create(&cfg, err);
    if (!m)
        return NULL;
    if (ckpt_load(dir, model_params(m), model_nparams(m), NULL, NULL, err) < 0) {
        model_destroy(m);
        return NULL;
    }
    return m;
}

/* The tokenizer of the checkpoint step dir: tokenizer.json beside its weights
 * (a registered version), in its checkpoint root, else the one recorded at
 * training time; into path. 1 found, 0 none recorded, -1 recorded but gone
 * (path: what was recorded). */
static int find_tokenizer(const char *dir, size_t nparams, char *path, size_t len)
{
    static const char *const beside[] = {"tokenizer.json", "../tokenizer.json"};
    for (size_t i = 0; i < 2; i++)
        if (snprintf(path, len, "%s/%s", dir, beside[i]) < (int)len && mtc_path_exists(path))
            return 1;
    static struct ckpt_meta meta; // large (per-rank loader positions)
    path[0] = 0;
    if (ckpt_load(dir, NULL, nparams, NULL, &meta, NULL) == 0) {
        snprintf(path, len, "%s", meta.tokenizer);
        json_decref(meta.train);
    }
    return !*path ? 0 : mtc_path_exists(path) ? 1 : -1;
}

/* The export's tokenizer: tokenizer.json (copied; a built-in one whose cached
 * file is gone made again) and tokenizer_config.json with the chat template
 * mtc-serve applies, beside config.json. 0, or -1 with err; a checkpoint with
 * no tokenizer recorded exports none (said on stderr). */
static int export_tokenizer(const struct model *m, const char *dir, const char *out,
                            mtc_error_t *err)
{
    char src[4096], dst[4200];
    snprintf(dst, sizeof dst, "%s/tokenizer.json", out);
    int found = find_tokenizer(dir, model_nparams(m), src, sizeof src);
    int vocab = 0;
    const char *tc = strstr(src, "/tiny-corpus-");
    if (found < 0 && tc && sscanf(tc, "/tiny-corpus-%d-", &vocab) == 1 && vocab > 256) {
        if (dset_builtin_tokenizer_write(vocab, dst, err) < 0) // the built-in, made again
            return -1;
    } else if (found < 0) {
        return errprintf(err, "the tokenizer recorded with %s, %s, is gone: pass it (cp it to "
                              "%s/tokenizer.json)",
                         dir, src, dir);
    } else if (found == 0) {
        fprintf(stderr, "mtc-train: %s records no tokenizer: the export has none\n", dir);
        return 0;
    } else if (mtc_copy_file(src, dst, 0644, err) < 0) {
        return -1;
    }
    struct tok *t = tok_load(dst, err);
    if (!t)
        return -1;
    char *tpl = chat_template_jinja(t);
    const char *eos = tok_eot_text(t);
    json_t *cfg = json_pack("{s:s, s:i}", "tokenizer_class", "PreTrainedTokenizerFast",
                            "model_max_length", model_cfg(m)->max_seq);
    if (eos)
        json_object_set_new(cfg, "eos_token", json_string(eos));
    if (tok_special(t, "<bos>") >= 0)
        json_object_set_new(cfg, "bos_token", json_string("<bos>"));
    else if (tok_special(t, "<|begin_of_text|>") >= 0)
        json_object_set_new(cfg, "bos_token", json_string("<|begin_of_text|>"));
    if (tpl)
        json_object_set_new(cfg, "chat_template", json_string(tpl));
    snprintf(dst, sizeof dst, "%s/tokenizer_config.json", out);
    int rc = json_dump_file(cfg, dst, JSON_INDENT(2)) < 0 ? errprintf(err, "%s: cannot write", dst)
                                                           : 0;
    json_decref(cfg);
    free(tpl);
    tok_destroy(t);
    return rc;
}

const char train_export_usage[] =
    "mtc-train export --checkpoint DIR --format safetensors|llmc --output DIR|FILE.bin\n";
const char train_import_usage[] =
    "mtc-train import --from llmc|safetensors PATH --output CKPTDIR [--model PRESET]\n";

int train_export_main(int argc, char **argv)
{
    const char *ckarg = NULL, *format = "safetensors", *out = NULL;
    static const struct option lo[] = {{"checkpoint", required_argument, NULL, 'c'},
                                       {"format", required_argument, NULL, 'f'},
                                       {"output", required_argument, NULL, 'o'},
                                       {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == 'c')
            ckarg = optarg;
        else if (c == 'f')
            format = optarg;
        else if (c == 'o')
            out = optarg;
        else
            return fprintf(stderr, "usage: %s", train_export_usage), 2;
    }
    if (!ckarg || !out)
        return die("export needs --checkpoint DIR and --output DIR");
    int llmc = strcmp(format, "llmc") == 0;
    if (strcmp(format, "safetensors") != 0 && !llmc)
        return die("export: unknown --format %s (safetensors, llmc)", format);
    mtc_error_t err;
    char dir[4096];
    struct model *m = interop_load_checkpoint(ckarg, dir, sizeof dir, &err);
    if (!m || (llmc ? interop_export_llmc(m, out, &err) : interop_export_hf(m, out, &err)) < 0 ||
        (!llmc && export_tokenizer(m, dir, out, &err) < 0)) {
        model_destroy(m);
        return die("%s", err.text);
    }
    model_destroy(m);
    fprintf(stderr, "mtc-train: exported %s to %s\n", dir, out);
    return 0;
}

int train_import_main(int argc, char **argv)
{
    const char *from = NULL, *out = NULL, *preset = NULL;
    static const struct option lo[] = {{"from", required_argument, NULL, 'f'},
                                       {"output", required_argument, NULL, 'o'},
                                       {"model", required_argument, NULL, 'm'},
                                       {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == 'f')
            from = optarg;
        else if (c == 'o')
            out = optarg;
        else if (c == 'm')
            preset = optarg;
        else
            return fprintf(stderr, "usage: %s", train_import_usage), 2;
    }
    if (!from || optind != argc - 1 || !out)
        return fprintf(stderr, "usage: %s", train_import_usage), 2;
    const char *src = argv[optind];
    mtc_error_t err;
    struct model_config want;
    if (preset && model_preset(preset, &want, &err) < 0)
        return die("%s", err.text);
    if (preset && model_config_check(&want, &err) < 0)
        return die("%s", err.text);
    struct model *m;
    if (strcmp(from, "llmc") == 0)
        m = interop_import_llmc(src, preset ? &want : NULL, &err);
    else if (strcmp(from, "safetensors") == 0 || strcmp(from, "hf") == 0)
        m = interop_import_hf(src, preset ? &want : NULL, &err);
    else
        return die("import: unknown --from %s (llmc, safetensors)", from);
    if (!m)
        return die("%s", err.text);
    static struct ckpt_meta meta;
    meta.step = 0;
    meta.nranks = 1;
    int rc = ckpt_save(out, model_cfg(m), model_params(m), model_nparams(m), NULL, &meta, &err);
    model_destroy(m);
    if (rc < 0)
        return die("%s", err.text);
    fprintf(stderr, "mtc-train: imported %s into %s/step_00000000 (use --init %s)\n", src, out, out);
    return 0;
}
