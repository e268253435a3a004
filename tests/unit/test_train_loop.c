/* test_train_loop: AdamW against hand-computed values, clipping, the lr schedule,
 * gradient-accumulation equivalence, checkpoint round trips (sync and async,
 * corruption detection, pruning), HF safetensors / llm.c import-export, and an MFU that
 * stays honest (<= 100%) against a peak lower than the achieved rate. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "train/data.h"
#include "train/train.h"

static int near(double a, double b, double tol)
{
    return fabs(a - b) <= tol * (1 + fabs(b));
}

static void test_adamw(void)
{
    struct opt_config c;
    opt_config_default(&c);
    c.beta1 = 0.9f;
    c.beta2 = 0.95f;
    c.eps = 1e-8f;
    c.weight_decay = 0.1f;
    float p[2] = {1.0f, 1.0f}, g[2] = {0.5f, 0.5f}, m[2] = {0}, v[2] = {0};
    // step 1: m=0.05 v=0.0125, mhat=0.5 vhat=0.25 -> update 1; decay 0.1*1
    opt_adamw_update(p, g, m, v, 1, 0.1f, &c, 1, 0);
    opt_adamw_update(p + 1, g + 1, m + 1, v + 1, 1, 0.1f, &c, 0, 0);
    CHECK(near(m[0], 0.05, 1e-6) && near(v[0], 0.0125, 1e-6), "adamw moments after step 1");
    CHECK(near(p[0], 1 - 0.1 * (1 + 0.1), 1e-6), "adamw decayed step 1: %.7f", p[0]);
    CHECK(near(p[1], 0.9, 1e-6), "adamw undecayed step 1: %.7f", p[1]);
    // step 2 with g=-0.5 on the decayed weight p0=0.89
    g[0] = -0.5f;
    opt_adamw_update(p, g, m, v, 1, 0.1f, &c, 1, 1);
    double m2 = 0.9 * 0.05 - 0.1 * 0.5, v2 = 0.95 * 0.0125 + 0.05 * 0.25;
    double mh = m2 / (1 - 0.81), vh = v2 / (1 - 0.9025);
    double want = 0.89 - 0.1 * (mh / (sqrt(vh) + 1e-8) + 0.1 * 0.89);
    CHECK(near(p[0], want, 1e-5), "adamw step 2: %.7f want %.7f", p[0], want);
}

static void test_clip_schedule(void)
{
    float g[2] = {3, 4};
    double n = opt_clip(g, 2, 1.0f);
    CHECK(near(n, 5, 1e-9) && near(g[0], 0.6, 1e-5) && near(g[1], 0.8, 1e-5),
          "clip (3,4) to norm 1");
    float h[2] = {3, 4};
    opt_clip(h, 2, 10.0f);
    CHECK(h[0] == 3 && h[1] == 4, "no clip under the limit");
    size_t big = 100003;
    float *x = malloc(big * sizeof(float));
    double s = 0;
    for (size_t i = 0; i < big; i++) {
        x[i] = (float)((i % 17) - 8) * 0.01f;
        s += (double)x[i] * x[i];
    }
    CHECK(near(opt_grad_norm(x, big), sqrt(s), 1e-9), "grad norm of a long vector");
    free(x);

    struct opt_config c;
    opt_config_default(&c);
    c.lr = 1.0f;
    c.min_lr = 0.1f;
    c.warmup = 10;
    c.total_steps = 110;
    CHECK(near(opt_lr(&c, 0), 0.1, 1e-6), "warmup starts at lr/warmup");
    CHECK(near(opt_lr(&c, 9), 1.0, 1e-6), "warmup reaches lr");
    CHECK(near(opt_lr(&c, 10), 1.0, 1e-6), "cosine starts at lr");
    CHECK(near(opt_lr(&c, 60), 0.55, 1e-6), "cosine midpoint: %.6f", opt_lr(&c, 60));
    CHECK(near(opt_lr(&c, 110), 0.1, 1e-6) && opt_lr(&c, 109) > 0.1f, "ends at min_lr");
}

static struct model *tiny(enum model_family fam, uint64_t seed)
{
    struct model_config cfg;
    mtc_error_t err;
    static const char *const preset[] = {[MODEL_GPT2] = "tiny-gpt2", [MODEL_LLAMA] = "tiny-llama",
                                         [MODEL_GEMMA2] = "tiny-gemma2",
                                         [MODEL_GEMMA3] = "tiny-gemma3"};
    model_preset(preset[fam], &cfg, &err);
    cfg.n_layer = 2;
    cfg.head_dim = 12;
    cfg.d_model = 32;
    cfg.n_head = 4;
    cfg.n_kv_head = fam == MODEL_GPT2 ? 4 : 2;
    cfg.d_ff = fam == MODEL_GPT2 ? 128 : 64;  // llm.c files assume 4*d_model
    cfg.vocab_size = 100;  // padded to 128: exercises row trimming on export
    cfg.padded_vocab = 0;
    cfg.max_seq = 32;
    if (model_config_check(&cfg, &err) < 0) {
        printf("# config: %s\n", err.text);
        return NULL;
    }
    struct model *m = model_create(&cfg, &err);
    if (!m)
        printf("# model_create: %s\n", err.text);
    else
        model_init_weights(m, seed);
    return m;
}

static void test_accumulation(void)
{
    struct model *m = tiny(MODEL_LLAMA, 7);
    CHECK(m != NULL, "tiny llama");
    if (!m)
        return;
    enum { B = 4, T = 16 };
    int32_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) {
        x[i] = (i * 37 + 11) % 100;
        y[i] = (i * 53 + 5) % 100;
    }
    size_t n = model_nparams(m);
    float *g1 = malloc(n * sizeof(float));
    model_zero_grad(m);
    float l1 = model_forward(m, x, y, NULL, B * T, B, T);
    model_backward(m, NULL);
    memcpy(g1, model_grads(m), n * sizeof(float));
    model_zero_grad(m);
    float l2 = model_forward(m, x, y, NULL, B * T, B / 2, T);
    model_backward(m, NULL);
    l2 += model_forward(m, x + B / 2 * T, y + B / 2 * T, NULL, B * T, B / 2, T);
    model_backward(m, NULL);
    const float *g2 = model_grads(m);
    double md = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs(g1[i] - g2[i]));
        mx = fmax(mx, fabs(g1[i]));
    }
    CHECK(near(l1, l2, 1e-5), "2 micro-steps of B/2 give the loss of 1 of B (%.6f %.6f)", l1, l2);
    CHECK(mx > 0 && md <= 1e-5 * mx, "accumulated gradients match (max diff %.3g of %.3g)", md, mx);
    free(g1);
    model_destroy(m);
}

static void test_checkpoint(const char *dir)
{
    struct model *m = tiny(MODEL_GPT2, 3);
    if (!m)
        return;
    size_t n = model_nparams(m);
    struct opt_state o;
    mtc_error_t err;
    opt_init(&o, n, &err);
    for (size_t i = 0; i < n; i++) {
        o.m[i] = (float)i * 1e-3f;
        o.v[i] = (float)(n - i) * 1e-4f;
    }
    o.t = 42;
    static struct ckpt_meta meta, back;
    meta.step = 42;
    meta.nranks = 2;
    meta.seed = 0xfedcba9876543210ull;
    meta.loader[1].offset = 17;
    meta.loader[1].rng = 0xffffffffffffffffull;
    strcpy(meta.tokenizer, "/x/tok.json");
    meta.train = json_pack("{s:i}", "steps", 100);
    int rc = ckpt_save(dir, model_cfg(m), model_params(m), n, &o, &meta, &err);
    CHECK(rc == 0, "ckpt_save: %s", rc ? err.text : "ok");
    char ck[4096], found[4096];
    snprintf(ck, sizeof ck, "%s/step_00000042", dir);
    CHECK(ckpt_find_latest(dir, found, sizeof found, &err) == 1 && strcmp(found, ck) == 0,
          "find_latest finds step 42");
    struct model_config cfg;
    CHECK(ckpt_read_config(ck, &cfg, &err) == 0 && model_config_equal(&cfg, model_cfg(m)),
          "config round trip");
    float *p2 = malloc(n * sizeof(float));
    struct opt_state o2;
    opt_init(&o2, n, &err);
    rc = ckpt_load(ck, p2, n, &o2, &back, &err);
    CHECK(rc == 0, "ckpt_load: %s", rc ? err.text : "ok");
    CHECK(memcmp(p2, model_params(m), n * 4) == 0 && memcmp(o2.m, o.m, n * 4) == 0 &&
              memcmp(o2.v, o.v, n * 4) == 0 && o2.t == 42,
          "params and moments bitwise equal");
    CHECK(back.step == 42 && back.nranks == 2 && back.seed == meta.seed &&
              back.loader[1].offset == 17 && back.loader[1].rng == meta.loader[1].rng &&
              strcmp(back.tokenizer, "/x/tok.json") == 0,
          "meta round trip");
    json_decref(back.train);
    CHECK(ckpt_load(ck, p2, n + 1, NULL, NULL, &err) < 0 && strstr(err.text, "mismatch"),
          "size mismatch rejected: %s", err.text);

    // async: the snapshot is what gets written, even if params change right after
    struct ckpt_writer *w = ckpt_writer_create(dir, model_cfg(m), n, 2, &err);
    CHECK(w != NULL, "writer create");
    float *p = model_params(m);
    float keep0 = p[0];
    for (int s = 43; s <= 45; s++) {
        meta.step = s;
        rc = ckpt_writer_snapshot(w, p, &o, &meta, &err);
        p[0] = 1234.5f;  // after the snapshot
        p[0] = keep0;
    }
    meta.step = 46;
    ckpt_writer_snapshot(w, p, &o, &meta, &err);
    p[0] = 99.0f;
    CHECK(ckpt_writer_wait(w, &err) == 0, "async writes succeed");
    int cnt;
    ckpt_writer_stats(w, NULL, NULL, NULL, &cnt);
    CHECK(cnt == 4, "4 async checkpoints written");
    ckpt_writer_destroy(w);
    snprintf(ck, sizeof ck, "%s/step_00000046", dir);
    CHECK(ckpt_load(ck, p2, n, NULL, NULL, &err) == 0 && p2[0] == keep0,
          "async checkpoint holds the snapshot value");
    snprintf(ck, sizeof ck, "%s/step_00000043", dir);
    CHECK(!mtc_path_exists(ck), "keep=2 pruned older checkpoints");

    // corruption: flip a byte in params of the newest; find_latest still returns it
    // (the marker is there) but loading reports the checksum
    snprintf(ck, sizeof ck, "%s/step_00000046/params.bin", dir);
    FILE *f = fopen(ck, "r+b");
    fseek(f, 100, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    snprintf(ck, sizeof ck, "%s/step_00000046", dir);
    CHECK(ckpt_load(ck, p2, n, NULL, NULL, &err) < 0 && strstr(err.text, "corrupt"),
          "corrupt params detected: %s", err.text);
    CHECK(ckpt_verify(ck, &err) < 0 && strstr(err.text, "corrupt"), "ckpt_verify flags it");
    CHECK(ckpt_find_latest_valid(dir, found, sizeof found, &err) == 1 &&
              strstr(found, "step_00000045"),
          "find_latest_valid falls back to the previous checkpoint: %s", found);
    snprintf(ck, sizeof ck, "%s/step_00000045", dir);
    CHECK(ckpt_verify(ck, &err) == 0, "previous checkpoint verifies");
    snprintf(ck, sizeof ck, "%s/step_00000046", dir);
    // incomplete: no DONE → skipped by find_latest
    snprintf(ck, sizeof ck, "%s/step_00000046/DONE", dir);
    unlink(ck);
    CHECK(ckpt_find_latest(dir, found, sizeof found, &err) == 1 && strstr(found, "step_00000045"),
          "checkpoint without DONE skipped: %s", found);
    json_decref(meta.train);
    free(p2);
    opt_release(&o);
    opt_release(&o2);
    model_destroy(m);
}

static void test_hf_roundtrip(const char *dir, enum model_family fam)
{
    struct model *m = tiny(fam, 11);
    if (!m)
        return;
    mtc_error_t err;
    char out[4096];
    snprintf(out, sizeof out, "%s/hf-%d", dir, (int)fam);
    int rc = interop_export_hf(m, out, &err);
    static const char *const fname[] = {"gpt2", "llama", "gemma2", "gemma3"};
    CHECK(rc == 0, "export %s: %s", fname[fam], rc ? err.text : "ok");
    struct model *b = interop_import_hf(out, model_cfg(m), &err);
    CHECK(b != NULL, "import: %s", b ? "ok" : err.text);
    if (b)
        CHECK(model_nparams(b) == model_nparams(m) &&
                  memcmp(model_params(b), model_params(m), model_nparams(m) * 4) == 0,
              "%s safetensors round trip is bitwise, config equal", fname[fam]);
    model_destroy(b);
    struct st_file *sf;
    char p[4200];
    snprintf(p, sizeof p, "%s/model.safetensors", out);
    sf = st_open(p, &err);
    if (fam == MODEL_GPT2) {
        const struct st_tensor *t = sf ? st_find(sf, "transformer.h.0.attn.c_attn.weight") : NULL;
        CHECK(t && t->shape[0] == 32 && t->shape[1] == 96, "gpt2 c_attn stored Conv1D (in,out)");
        t = sf ? st_find(sf, "transformer.wte.weight") : NULL;
        CHECK(t && t->shape[0] == 100, "wte exported with vocab_size rows");
    } else {
        const struct st_tensor *t = sf ? st_find(sf, "model.layers.1.self_attn.k_proj.weight") : NULL;
        int kvw = model_cfg(m)->n_kv_head * model_cfg(m)->head_dim;
        CHECK(t && t->shape[0] == kvw && t->shape[1] == 32, "%s k_proj (kv*hd, d)", fname[fam]);
    }
    if (fam == MODEL_GEMMA3) {
        const struct st_tensor *t = sf ? st_find(sf, "model.layers.0.self_attn.q_norm.weight") : NULL;
        CHECK(t && t->ndim == 1 && t->shape[0] == 12, "gemma3 q_norm (head_dim)");
    }
    if (MODEL_IS_GEMMA(model_cfg(m))) {
        snprintf(p, sizeof p, "%s/config.json", out);
        json_t *cj = json_load_file(p, 0, NULL);
        const char *mt = json_string_value(json_object_get(cj, "model_type"));
        CHECK(mt && strcmp(mt, fam == MODEL_GEMMA2 ? "gemma2" : "gemma3_text") == 0 &&
                  json_integer_value(json_object_get(cj, "head_dim")) == 12 &&
                  !json_object_get(cj, "lm_head.weight"),
              "%s config.json: model_type %s, head_dim", fname[fam], mt ? mt : "(none)");
        json_decref(cj);
    }
    st_close(sf);
    // a mismatched shape is a clear error
    struct model_config other = *model_cfg(m);
    other.n_layer = 3;
    b = interop_import_hf(out, &other, &err);
    CHECK(!b && strstr(err.text, "does not match"), "import shape mismatch: %s", err.text);
    model_destroy(m);
}

/* The published config.json files (text models) give the presets, whose parameter counts
 * are the published ones (gemma-2-2b, gemma-3-1b; gemma-3-4b's text decoder, without the
 * vision tower its 4.3B count includes). */
static void test_hf_gemma_configs(void)
{
    static const struct {
        const char *preset, *json;
        size_t nparams;
    } cases[] = {
        {"gemma2-2b",
         "{\"architectures\":[\"Gemma2ForCausalLM\"],\"attention_bias\":false,"
         "\"attention_dropout\":0.0,\"attn_logit_softcapping\":50.0,\"bos_token_id\":2,"
         "\"cache_implementation\":\"hybrid\",\"eos_token_id\":1,\"final_logit_softcapping\":30.0,"
         "\"head_dim\":256,\"hidden_act\":\"gelu_pytorch_tanh\",\"hidden_activation\":"
         "\"gelu_pytorch_tanh\",\"hidden_size\":2304,\"initializer_range\":0.02,"
         "\"intermediate_size\":9216,\"max_position_embeddings\":8192,\"model_type\":\"gemma2\","
         "\"num_attention_heads\":8,\"num_hidden_layers\":26,\"num_key_value_heads\":4,"
         "\"pad_token_id\":0,\"query_pre_attn_scalar\":256,\"rms_norm_eps\":1e-06,"
         "\"rope_theta\":10000.0,\"sliding_window\":4096,\"torch_dtype\":\"float32\","
         "\"transformers_version\":\"4.42.4\",\"use_cache\":true,\"vocab_size\":256000}",
         2614341888u},
        {"gemma3-1b",
         "{\"architectures\":[\"Gemma3ForCausalLM\"],\"attention_bias\":false,"
         "\"attention_dropout\":0.0,\"attn_logit_softcapping\":null,\"bos_token_id\":2,"
         "\"cache_implementation\":\"hybrid\",\"eos_token_id\":[1,106],"
         "\"final_logit_softcapping\":null,\"head_dim\":256,\"hidden_activation\":"
         "\"gelu_pytorch_tanh\",\"hidden_size\":1152,\"initializer_range\":0.02,"
         "\"intermediate_size\":6912,\"max_position_embeddings\":32768,\"model_type\":"
         "\"gemma3_text\",\"num_attention_heads\":4,\"num_hidden_layers\":26,"
         "\"num_key_value_heads\":1,\"pad_token_id\":0,\"query_pre_attn_scalar\":256,"
         "\"rms_norm_eps\":1e-06,\"rope_local_base_freq\":10000,\"rope_scaling\":null,"
         "\"rope_theta\":1000000,\"sliding_window\":512,\"sliding_window_pattern\":6,"
         "\"torch_dtype\":\"bfloat16\",\"use_cache\":true,\"vocab_size\":262144}",
         999885952u},
        {"gemma3-4b",
         "{\"model_type\":\"gemma3_text\",\"hidden_size\":2560,\"intermediate_size\":10240,"
         "\"num_hidden_layers\":34,\"num_attention_heads\":8,\"num_key_value_heads\":4,"
         "\"head_dim\":256,\"query_pre_attn_scalar\":256,\"rms_norm_eps\":1e-06,"
         "\"max_position_embeddings\":131072,\"rope_theta\":1000000.0,"
         "\"rope_local_base_freq\":10000.0,\"rope_scaling\":{\"factor\":8.0,\"rope_type\":"
         "\"linear\"},\"sliding_window\":1024,\"sliding_window_pattern\":6,"
         "\"final_logit_softcapping\":null,\"attn_logit_softcapping\":null,\"vocab_size\":262208}",
         3880263168u}, // the text decoder: 671,252,480 embeddings + 34 x 94,382,592 + 2,560
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct model_config want, got;
        mtc_error_t err = {{0}};
        model_preset(cases[i].preset, &want, NULL);
        model_preset(MODEL_IS_GEMMA(&want) && want.family == MODEL_GEMMA2 ? "tiny-gemma2"
                                                                           : "tiny-gemma3",
                     &got, NULL);
        json_t *j = json_loads(cases[i].json, 0, NULL);
        int rc = model_config_apply_json(&got, j, &err);
        json_decref(j);
        char d[400];
        CHECK(rc == 0 && model_config_equal(&got, &want), "HF config.json of %s gives the preset (%s)",
              cases[i].preset, rc ? err.text : interop_config_diff(&got, &want, d, sizeof d));
        CHECK(model_config_nparams(&want) == cases[i].nparams, "%s has %zu parameters (published %zu)",
              cases[i].preset, model_config_nparams(&want), cases[i].nparams);
    }
    // layer_types that disagree with the pattern are refused
    struct model_config c;
    mtc_error_t err;
    model_preset("tiny-gemma2", &c, NULL);
    json_t *j = json_pack("{s:s,s:i,s:[s,s]}", "model_type", "gemma2", "num_hidden_layers", 2,
                          "layer_types", "full_attention", "sliding_attention");
    CHECK(model_config_apply_json(&c, j, &err) < 0 && strstr(err.text, "layer_types[0]"),
          "layer_types against the pattern: %s", err.text);
    json_decref(j);
}

static void test_llmc(const char *dir)
{
    struct model *m = tiny(MODEL_GPT2, 5);
    if (!m)
        return;
    const struct model_config *c = model_cfg(m);
    char path[4096];
    snprintf(path, sizeof path, "%s/gpt2.bin", dir);
    FILE *f = fopen(path, "wb");
    int32_t h[256] = {20240326, 3, c->max_seq, c->vocab_size, c->n_layer, c->n_head, c->d_model,
                      c->padded_vocab};
    fwrite(h, sizeof h, 1, f);
    static const char *const per[] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight",
                                      "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                                      "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
                                      "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    const float *p = model_params(m);
    const char *first[] = {"transformer.wte.weight", "transformer.wpe.weight"};
    for (int i = 0; i < 2; i++) {
        const struct model_tensor *t = model_tensor(m, model_find_tensor(m, first[i]));
        fwrite(p + t->offset, 4, t->numel, f);
    }
    for (int k = 0; k < 12; k++)
        for (int l = 0; l < c->n_layer; l++) {
            char name[128];
            snprintf(name, sizeof name, "transformer.h.%d.%s", l, per[k]);
            const struct model_tensor *t = model_tensor(m, model_find_tensor(m, name));
            fwrite(p + t->offset, 4, t->numel, f);
        }
    const char *last[] = {"transformer.ln_f.weight", "transformer.ln_f.bias"};
    for (int i = 0; i < 2; i++) {
        const struct model_tensor *t = model_tensor(m, model_find_tensor(m, last[i]));
        fwrite(p + t->offset, 4, t->numel, f);
    }
    fclose(f);
    mtc_error_t err;
    struct model *b = interop_import_llmc(path, NULL, &err);
    CHECK(b && memcmp(model_params(b), p, model_nparams(m) * 4) == 0, "llm.c import: %s",
          b ? "ok" : err.text);
    model_destroy(b);
    // truncate → clear error
    if (truncate(path, 4000) != 0)
        printf("# truncate failed\n");
    b = interop_import_llmc(path, NULL, &err);
    CHECK(!b && strstr(err.text, "truncated"), "truncated llm.c file: %s", err.text);
    model_destroy(m);
}

/* train_mfu: a step faster than the peak raises the peak (MFU 1, never more); later steps
 * are measured against the raised peak. train_peak_flops: MTC_PEAK_FLOPS, else a rate. */
static void test_mfu(void)
{
    double peak = 1e9;
    double a = train_mfu(4e9, &peak);
    CHECK(a == 1.0 && peak == 4e9, "MFU against a low peak: 1 (got %g), the peak raised to %g", a,
          peak);
    double b = train_mfu(2e9, &peak);
    CHECK(b == 0.5 && peak == 4e9, "the next step against the raised peak: 0.5 (got %g)", b);
    double c = train_mfu(0, &peak), z = 0, d = train_mfu(1e9, &z);
    CHECK(c == 0 && d == 0 && z == 0, "no rate or no peak: MFU 0, nothing raised");
    setenv("MTC_PEAK_FLOPS", "2.5e12", 1);
    double e = train_peak_flops(64, 256, 64);
    unsetenv("MTC_PEAK_FLOPS");
    double f = train_peak_flops(64, 256, 64);
    CHECK(e == 2.5e12 && f > 1e6 && isfinite(f), "peak: MTC_PEAK_FLOPS %g, else measured %.3g",
          e, f);
}

/* A training run in-process (train_main) whose peak FLOP/s is far below what it achieves
 * (MTC_PEAK_FLOPS=1000, as a peak sampled at a busy moment can be): every "MFU N%" of the
 * progress lines and every "mfu" of metrics.jsonl stays at most 100% (issue 48 point 3). */
static void test_mfu_low_peak(const char *dir)
{
    char data[4200], ck[4200], out[4200], path[4300];
    snprintf(data, sizeof data, "%s/mfu-data", dir);
    snprintf(ck, sizeof ck, "%s/mfu-ck", dir);
    snprintf(out, sizeof out, "%s/mfu.out", dir);
    snprintf(path, sizeof path, "%s/train_000000.bin", data);
    mtc_error_t err;
    int32_t ids[4096];
    for (int i = 0; i < 4096; i++)
        ids[i] = (i * 7 + i / 13) % 97;
    int rc = mtc_mkdir_p(data, 0755) == 0 ? shard_write(path, ids, 4096, 2, &err) : -1;
    CHECK(rc == 0, "MFU: a shard of 4096 tokens");
    char *argv[] = {"train", "--model", "tiny-gpt2", "--config",
                    "{\"n_layer\":1,\"d_model\":32,\"n_head\":2,\"d_ff\":64,\"vocab_size\":128,"
                    "\"max_seq\":32}",
                    "--data", data, "--steps", "6", "--batch", "4", "--seq", "16",
                    "--log-every", "1", "--checkpoint-dir", ck, NULL};
    setenv("MTC_PEAK_FLOPS", "1000", 1);
    fflush(stdout);
    int saved = dup(1), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    close(fd);
    rc = train_main((int)(sizeof argv / sizeof argv[0]) - 1, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    unsetenv("MTC_PEAK_FLOPS");
    CHECK(rc == 0, "MFU: a 6-step run against a peak of 1000 FLOP/s (exit %d)", rc);
    // the progress lines: every step's MFU
    FILE *f = fopen(out, "r");
    char line[512];
    int lines = 0, over = 0;
    double worst = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "| MFU ");
        if (!m)
            continue;
        double v = atof(m + 6);
        lines++;
        worst = v > worst ? v : worst;
        over += v > 100.0;
    }
    if (f)
        fclose(f);
    CHECK(lines == 6 && over == 0, "MFU: %d progress lines, none above 100%% (highest %.0f%%)",
          lines, worst);
    // metrics.jsonl: "mfu" of every step
    snprintf(path, sizeof path, "%s/metrics.jsonl", ck);
    f = fopen(path, "r");
    int n = 0, bad = 0;
    worst = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "\"mfu\":");
        if (!m)
            continue;
        double v = atof(m + 6);
        n++;
        worst = v > worst ? v : worst;
        bad += !(v > 0 && v <= 1.0);
    }
    if (f)
        fclose(f);
    CHECK(n == 6 && bad == 0, "MFU: metrics.jsonl has 6 steps' mfu, each in (0, 1] (highest %g)",
          worst);
}

int main(void)
{
    char dir[] = "/tmp/test_train_loop.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    test_adamw();
    test_clip_schedule();
    test_accumulation();
    test_checkpoint(dir);
    test_hf_roundtrip(dir, MODEL_GPT2);
    test_hf_roundtrip(dir, MODEL_LLAMA);
    test_hf_roundtrip(dir, MODEL_GEMMA2);
    test_hf_roundtrip(dir, MODEL_GEMMA3);
    test_hf_gemma_configs();
    test_llmc(dir);
    test_mfu();
    test_mfu_low_peak(dir);
    mtc_rm_rf(dir);
    return check_done();
}
