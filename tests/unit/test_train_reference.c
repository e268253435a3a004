/* test_train_reference: numerical parity of every model family with an independent
 * PyTorch implementation (tests/reference/torch_ref.py, Debian's python3-torch, CPU,
 * float64). For tiny GPT-2, Llama 3, Gemma 2 and Gemma 3 configs with random weights (norm
 * weights too), a forward and backward over two sequences of 80 tokens — longer than the
 * 8-token sliding window and than one 64-row attention tile, so the skipped key blocks are
 * exercised — with Gemma 2's attention and final soft-caps set low enough to bend the
 * numbers. The model and its gradient go out through the HF safetensors export; the script
 * checks the logits (<= 1e-4 relative) and every parameter's gradient (<= 1e-3) and names
 * the tensor and its worst element when one differs. Skipped (a passing "# skip" line)
 * where torch is not installed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/common.h"
#include "train/train.h"

#define B 2
#define T 80

/* The interpreter with torch: $MTC_PYTHON, else Debian's (what scripts/setup installs
 * python3-torch for), else python3 from PATH. */
static const char *python(void)
{
    const char *p = getenv("MTC_PYTHON");
    if (p && *p)
        return p;
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

static struct model_config config(const char *preset)
{
    struct model_config c;
    model_preset(preset, &c, NULL);
    c.vocab_size = 250; // padded to 256: the export trims the padded rows
    c.padded_vocab = 0;
    c.max_seq = 96;
    c.n_layer = 2;
    c.n_head = 4;
    c.d_model = 32;
    c.d_ff = 48;
    if (c.family == MODEL_GPT2)
        c.d_ff = 128;
    if (c.family == MODEL_LLAMA) {
        c.n_kv_head = 2;
        c.tied = 0;
    }
    if (MODEL_IS_GEMMA(&c)) {
        c.head_dim = 12; // 4 x 12 != d_model
        c.query_scalar = 20.0f;
        c.window = 8;
    }
    if (c.family == MODEL_GEMMA2) {
        c.n_kv_head = 2;
        c.attn_softcap = 0.3f;
        c.final_softcap = 0.5f;
    }
    if (c.family == MODEL_GEMMA3) {
        c.n_kv_head = 1;
        c.n_layer = 3;
        c.local_period = 3; // local, local, global
    }
    return c;
}

/* Random weights with std 0.1, norm weights and biases away from their init values. */
static void randomize(struct model *m, uint64_t seed)
{
    model_init_weights(m, seed);
    float *p = model_params(m);
    const struct model_config *c = model_cfg(m);
    for (size_t i = 0; i < model_nparams(m); i++)
        p[i] *= 5.0f;
    for (int t = 0; t < model_ntensors(m); t++) {
        const struct model_tensor *mt = model_tensor(m, t);
        if (mt->ndim != 1)
            continue;
        int bias = strstr(mt->name, "bias") != NULL;
        float base = MODEL_IS_GEMMA(c) || bias ? 0.0f : 1.0f; // Gemma norms scale by (1 + w)
        for (size_t i = 0; i < mt->numel; i++)
            p[mt->offset + i] = base + 0.3f * sinf(0.7f * (float)i + (float)t);
    }
}

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Run the reference on every directory under tmp (one torch import); its exit status (77:
 * no torch), its output in out. */
static int run_reference(const char *tmp, char *out, size_t outlen)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' tests/reference/torch_ref.py %s/*/ 2>&1", python(), tmp);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Write the model, logits and gradient of a preset's test config under tmp/preset.
 * 0, or -1 with err. */
static int write_family(const char *tmp, const char *preset, mtc_error_t *err)
{
    struct model_config c = config(preset);
    struct model *m = model_create(&c, err), *g = model_create(&c, err);
    if (!m || !g) {
        model_destroy(m);
        return -1;
    }
    randomize(m, 1234);
    int32_t x[B * T], y[B * T];
    uint64_t s = 99;
    for (int i = 0; i < B * T; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (int32_t)((s >> 33) % c.vocab_size);
    }
    for (int i = 0; i < B * T; i++) // next token; every 7th position without a target
        y[i] = (i % T == T - 1 || i % 7 == 3) ? -1 : x[i + 1];
    float loss = model_forward(m, x, y, NULL, 0, B, T);
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/%s", tmp, preset);
    int ok = isfinite(loss) && mtc_mkdir_p(dir, 0755) == 0;
    // logits (B*T, vocab_size)
    const float *lg = model_logits(m);
    float *lv = malloc(sizeof(float) * B * T * c.vocab_size);
    for (int r = 0; ok && r < B * T; r++)
        memcpy(lv + (size_t)r * c.vocab_size, lg + (size_t)r * model_cfg(m)->padded_vocab,
               sizeof(float) * c.vocab_size);
    snprintf(path, sizeof path, "%s/logits.bin", dir);
    ok = ok && write_file(path, lv, sizeof(float) * B * T * c.vocab_size) == 0;
    free(lv);
    model_zero_grad(m);
    model_backward(m, NULL);
    // the gradient goes out as the parameters of a second model: same names and layouts
    memcpy(model_params(g), model_grads(m), sizeof(float) * model_nparams(m));
    snprintf(path, sizeof path, "%s/model", dir);
    ok = ok && interop_export_hf(m, path, err) == 0;
    snprintf(path, sizeof path, "%s/grads", dir);
    ok = ok && interop_export_hf(g, path, err) == 0;
    json_t *xs = json_array(), *ys = json_array();
    for (int i = 0; i < B * T; i++) {
        json_array_append_new(xs, json_integer(x[i]));
        json_array_append_new(ys, json_integer(y[i]));
    }
    json_t *io = json_pack("{s:i,s:i,s:o,s:o,s:f}", "B", B, "T", T, "x", xs, "y", ys, "loss",
                           (double)loss);
    snprintf(path, sizeof path, "%s/io.json", dir);
    ok = ok && io && json_dump_file(io, path, 0) == 0;
    json_decref(io);
    if (!ok && !err->text[0])
        errprintf(err, "cannot write %s", dir);
    model_destroy(m);
    model_destroy(g);
    return ok ? 0 : -1;
}

/* The reference's verdict on one preset: its lines of out. */
static void report(const char *preset, const char *out, int rc)
{
    char tag[64], ok_tag[80], fail_tag[80], line[1024] = "";
    snprintf(tag, sizeof tag, "%s\t#\t", preset);
    snprintf(ok_tag, sizeof ok_tag, "%s\tok\t", preset);
    snprintf(fail_tag, sizeof fail_tag, "%s\tFAIL\t", preset);
    int ok = 0;
    for (const char *l = out; *l;) {
        const char *nl = strchr(l, '\n');
        int n = nl ? (int)(nl - l) : (int)strlen(l);
        if (!strncmp(l, ok_tag, strlen(ok_tag)) || !strncmp(l, fail_tag, strlen(fail_tag))) {
            ok = l[strlen(preset) + 1] == 'o';
            const char *v = strchr(l, '\t') + 1;
            v = strchr(v, '\t') + 1;
            snprintf(line, sizeof line, "%.*s", n - (int)(v - l), v);
        } else if (!strncmp(l, tag, strlen(tag))) { // a mismatch: a TAP comment
            printf("# %.*s\n", n - (int)strlen(tag), l + strlen(tag));
        }
        l = nl ? nl + 1 : l + n;
    }
    if (!line[0]) // no verdict for this preset: show what the script said
        printf("# reference exit %d: %.2000s\n", rc, out);
    CHECK(ok && rc == 0, "%s: logits and every gradient equal the PyTorch reference (%s)",
          preset, line[0] ? line : "no verdict");
}

int main(void)
{
    static const char *const presets[] = {"tiny-gpt2", "tiny-llama", "tiny-gemma2", "tiny-gemma3"};
    char tmp[] = "/tmp/test_train_reference.XXXXXX";
    if (!mkdtemp(tmp))
        return 1;
    int written = 1;
    for (int i = 0; i < 4; i++) {
        mtc_error_t err = {{0}};
        int rc = write_family(tmp, presets[i], &err);
        CHECK(rc == 0, "%s: model, logits and gradient exported (%s)", presets[i],
              rc ? err.text : "ok");
        written &= rc == 0;
    }
    char *out = calloc(1, 1 << 16);
    int rc = written ? run_reference(tmp, out, 1 << 16) : -1;
    if (rc == 77) {
        printf("ok %d - # skip no PyTorch reference here: %s", ++check_n, out);
    } else {
        for (int i = 0; i < 4; i++)
            report(presets[i], out, rc);
    }
    free(out);
    mtc_rm_rf(tmp);
    return check_done();
}
