/* test_train_qmat: decoding's weight dtypes — half and bfloat16 conversions, q8_0 packing,
 * every kernel variant this CPU has against the portable one (f32, bf16, q8_0; decode-sized
 * and prompt-sized row counts, residual and bias, 1 and 2 threads — the decode pool), and a briefly trained tiny
 * GPT-2 decoded with bf16 and q8_0 weights: validation loss within 0.1 % and 1 % of f32,
 * greedy tokens compared, bf16 KV-cache logits against a full forward. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train/cpu/qmat.h"
#include "train/gen.h"
#include "train/train.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) // uniform in [-1, 1)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * 0x1p-24 * 2 - 1);
}

static void conversions(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) { // every half survives half -> float -> half
        float f = cpu_half_to_float((uint16_t)h);
        if (!isnan(f) && cpu_float_to_half(f) != h)
            bad++;
    }
    CHECK(bad == 0, "every half round-trips through float (%d differ)", bad);
    CHECK(cpu_float_to_half(1.0f + 0x1p-11f) == 0x3c00 &&
              cpu_float_to_half(1.0f + 3 * 0x1p-11f) == 0x3c02 &&
              cpu_float_to_half(65520.0f) == 0x7c00 && cpu_float_to_half(0x1p-25f) == 0 &&
              cpu_float_to_half(0x1p-24f) == 1,
          "float -> half rounds to nearest even, overflows to inf, keeps subnormals");
    CHECK(cpu_float_to_bf16(1.0f + 0x1p-8f) == 0x3f80 &&
              cpu_float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82 &&
              cpu_bf16_to_float(cpu_float_to_bf16(-2.5f)) == -2.5f,
          "float -> bf16 rounds to nearest even");
    enum cpu_dtype dt = CPU_F32;
    errno = 0;
    CHECK(cpu_dtype_parse("q8_0", &dt) == 0 && dt == CPU_Q8_0 &&
              strcmp(cpu_dtype_name(CPU_BF16), "bf16") == 0 &&
              cpu_dtype_parse("fp16", &dt) == -1 && errno == EINVAL,
          "dtype names parse and print; an unknown one is EINVAL");
    CHECK(cpu_dtype_row_bytes(CPU_Q8_0, 64) == 68 && cpu_dtype_row_bytes(CPU_Q8_0, 48) == 0 &&
              cpu_dtype_row_bytes(CPU_BF16, 48) == 96,
          "row bytes: q8_0 is 34 bytes per 32 weights, and needs whole blocks");
}

static void q8_pack(void)
{
    enum { N = 5, K = 96 };
    float w[N * K], r[K];
    struct cpu_q8_block b[N * K / 32];
    for (int i = 0; i < N * K; i++)
        w[i] = frand() * (i % 7 == 0 ? 3.0f : 0.5f);
    cpu_qmat_pack(CPU_Q8_0, b, w, N, K);
    struct cpu_qmat q = {CPU_Q8_0, N, K, b};
    double worst = 0; // |error| in units of the block's scale
    for (int n = 0; n < N; n++) {
        cpu_qmat_row(&q, n, r);
        for (int k = 0; k < K; k++) {
            float d = cpu_half_to_float(b[(n * K + k) / 32].d);
            worst = fmax(worst, fabs(r[k] - w[n * K + k]) / d);
        }
    }
    CHECK(worst <= 0.5 + 1e-3, "q8_0 packing: every weight within half a step (%.3f)", worst);
}

/* out of variant isa vs portable for one dtype and M; tolerance: 1e-5 of sum |terms| (the
 * variants sum in another order; q8_0's block sums are exact integers in all of them). */
static void variants(enum cpu_dtype dt, int M, int N)
{
    int K = dt == CPU_Q8_0 ? 96 : 100;
    size_t rb = cpu_dtype_row_bytes(dt, K);
    float *w = malloc(sizeof(float) * N * K), *in = malloc(sizeof(float) * M * K);
    float *bias = malloc(sizeof(float) * N), *ref = malloc(sizeof(float) * M * N);
    float *out = malloc(sizeof(float) * M * N), *mag = malloc(sizeof(float) * M * N);
    float *scratch = malloc(sizeof(float) * cpu_qmat_scratch_floats(K, omp_get_max_threads()));
    void *packed = malloc(rb * N);
    for (int i = 0; i < N * K; i++)
        w[i] = frand();
    for (int i = 0; i < M * K; i++)
        in[i] = frand();
    for (int i = 0; i < N; i++)
        bias[i] = frand();
    cpu_qmat_pack(dt, packed, w, N, K);
    struct cpu_qmat q = {dt, N, K, packed};
    float *row = malloc(sizeof(float) * K);
    for (int n = 0; n < N; n++) { // magnitude of the terms, and a double reference
        cpu_qmat_row(&q, n, row);
        for (int m = 0; m < M; m++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += fabs(row[k] * in[m * K + k]);
            mag[m * N + n] = (float)s + 1;
        }
    }
    cpu_isa_set(CPU_ISA_PORTABLE);
    for (int i = 0; i < M * N; i++)
        ref[i] = 0.25f * i;
    cpu_qmat_forward(ref, N, ref, in, &q, bias, M, scratch); // resid in place
    double exact = 0;                                         // against the double reference
    for (int n = 0; n < N; n++) {
        cpu_qmat_row(&q, n, row);
        for (int m = 0; m < M; m++) {
            double s = 0.25 * (m * N + n) + bias[n];
            for (int k = 0; k < K; k++)
                s += (double)row[k] * in[m * K + k];
            exact = fmax(exact, fabs(ref[m * N + n] - s) / mag[m * N + n]);
        }
    }
    // q8_0 at decode sizes quantizes the input too: within about 1/127 of the terms
    double tol = dt == CPU_Q8_0 && M <= CPU_QMAT_SMALL_M ? 1e-2 : 1e-5;
    CHECK(exact < tol, "%s M=%d N=%d portable: within %.0e of a double product (%.2g)",
          cpu_dtype_name(dt), M, N, tol, exact);
    for (int isa = CPU_ISA_PORTABLE; isa < CPU_NISAS; isa++) {
        if (!cpu_isa_supported(isa))
            continue;
        for (int threads = 1; threads <= 2; threads++) {
            cpu_isa_set(isa);
            omp_set_num_threads(threads);
            for (int i = 0; i < M * N; i++)
                out[i] = 0.25f * i;
            cpu_qmat_forward(out, N, out, in, &q, bias, M, scratch);
            double worst = 0;
            int same = 1;
            for (int i = 0; i < M * N; i++) {
                worst = fmax(worst, fabs(out[i] - ref[i]) / mag[i]);
                same &= out[i] == ref[i];
            }
            CHECK(worst < 1e-5 && (isa != CPU_ISA_PORTABLE || same),
                  "%s M=%d N=%d %s, %d thread%s: %s the portable kernel (%.2g of the terms)",
                  cpu_dtype_name(dt), M, N, cpu_isa_name(isa), threads, threads > 1 ? "s" : "",
                  same ? "equal to" : "within 1e-5 of", worst);
        }
    }
    omp_set_num_threads(2);
    cpu_isa_set(CPU_ISA_PORTABLE);
    for (int isa = CPU_NISAS - 1; isa >= 0 && cpu_isa_set(isa) < 0; isa--)
        ; // back to the best
    free(w), free(in), free(bias), free(ref), free(out), free(mag), free(scratch), free(packed);
    free(row);
}

/* A structured stream: mostly a fixed successor, sometimes a random token. */
static void stream(int32_t *x, int n, uint64_t s)
{
    int32_t t = (int32_t)(s % 300);
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = t;
        t = (s >> 33) % 5 == 0 ? (int32_t)((s >> 40) % 300) : (t * 7 + 3) % 300;
    }
}

static struct model *trained(void)
{
    struct model_config c;
    model_preset("tiny-gpt2", &c, NULL);
    c.vocab_size = 300, c.padded_vocab = 0, c.n_layer = 2, c.d_model = 64, c.d_ff = 256;
    c.max_seq = 64;
    struct model *m = model_create(&c, NULL);
    model_init_weights(m, 3);
    struct opt_config oc;
    opt_config_default(&oc);
    oc.lr = 3e-3f, oc.min_lr = 3e-3f, oc.total_steps = 1;
    struct opt_state os;
    opt_init(&os, model_nparams(m), NULL);
    int32_t x[4 * 33];
    for (int step = 0; step < 150; step++) {
        stream(x, 4 * 33, 1000 + step);
        model_zero_grad(m);
        model_forward(m, x, x + 1, NULL, 0, 4, 32); // y is x shifted (rows overlap: fine)
        model_backward(m, NULL);
        opt_step(&os, &oc, m, oc.lr);
    }
    opt_release(&os);
    return m;
}

static int greedy(struct model *m, const int32_t *prompt, int np, int n, int32_t *out)
{
    struct gen_engine *e = gen_create(m, 1, np + n, NULL);
    struct gen_seq q = {.prompt = prompt, .nprompt = np, .eot = -1,
                        .s = {.temperature = 0, .top_p = 1, .max_tokens = n}};
    struct gen_seq *qs = &q;
    int ok = e && gen_run(e, &qs, 1, NULL) == 0 && q.nout == n;
    if (ok)
        memcpy(out, q.out, sizeof(int32_t) * n);
    gen_seq_release(&q);
    gen_destroy(e);
    return ok;
}

static void quality(void)
{
    struct model *m = trained();
    int32_t held[64], prompt[8], g[3][48];
    stream(held, 64, 777); // not a training stream
    stream(prompt, 8, 4242);
    double loss[3] = {0};
    int ok = 1;
    for (int dt = 0; dt < CPU_NDTYPES; dt++) {
        mtc_error_t err;
        ok &= model_decode_set_dtype(m, dt, &err) == 0 && (int)model_decode_dtype(m) == dt &&
              model_decode_loss(m, held, 64, &loss[dt], &err) == 0 &&
              greedy(m, prompt, 8, 48, g[dt]);
    }
    double rb = fabs(loss[1] - loss[0]) / loss[0], rq = fabs(loss[2] - loss[0]) / loss[0];
    CHECK(ok && loss[0] < 0.6 * logf(300), "the trained model learned the stream (f32 loss %.3f "
          "vs %.3f at chance)", loss[0], logf(300));
    CHECK(ok && rb < 1e-3, "bf16 weights: held-out loss %.4f vs f32 %.4f (%.3f %%, < 0.1 %%)",
          loss[1], loss[0], 100 * rb);
    CHECK(ok && rq < 1e-2, "q8_0 weights: held-out loss %.4f vs f32 %.4f (%.3f %%, < 1 %%)",
          loss[2], loss[0], 100 * rq);
    int agree[3] = {0};
    for (int dt = 1; dt < 3; dt++)
        for (int i = 0; i < 48; i++)
            agree[dt] += g[dt][i] == g[0][i];
    CHECK(ok && agree[1] >= 40 && agree[2] >= 40,
          "greedy tokens equal to f32's: bf16 %d of 48, q8_0 %d of 48", agree[1], agree[2]);

    // bf16 weights and KV cache against the f32 full forward: close, not equal
    mtc_error_t err;
    model_decode_set_dtype(m, CPU_BF16, &err);
    struct model_kv *kv = model_kv_create(m, 1, 64, NULL);
    int Vp = model_cfg(m)->padded_vocab;
    float *lg = malloc(sizeof(float) * Vp);
    double worst = 0, big = 0;
    for (int t = 0; t < 20 && kv; t++) {
        int32_t slot = 0, pos = t;
        uint8_t want = 1;
        model_decode(m, kv, held + t, &slot, &pos, &want, 1, lg, NULL);
        model_forward(m, held, NULL, NULL, 0, 1, t + 1);
        const float *full = model_last_logits(m);
        for (int v = 0; v < 300; v++) {
            worst = fmax(worst, fabs(full[v] - lg[v]));
            big = fmax(big, fabs(full[v]));
        }
    }
    CHECK(kv && model_kv_bytes(kv) == 2 * 2 * 2 * 64 * 64 && worst < 0.02 * big,
          "bf16 weights and KV cache (%zu bytes): logits within 2 %% of the f32 forward's "
          "largest (max |diff| %.3g, max |logit| %.2f)",
          kv ? model_kv_bytes(kv) : 0, worst, big);
    free(lg);
    model_kv_destroy(kv);
    model_destroy(m);
}

static void refused(void)
{
    struct model_config c;
    model_preset("tiny-gpt2", &c, NULL);
    c.d_model = 48, c.n_head = 4, c.d_ff = 192, c.vocab_size = 100, c.padded_vocab = 0;
    struct model *m = model_create(&c, NULL);
    mtc_error_t err;
    errno = 0;
    int rc = model_decode_set_dtype(m, CPU_Q8_0, &err);
    CHECK(rc == -1 && errno == EINVAL && model_decode_dtype(m) == CPU_F32 &&
              strstr(err.text, "multiple of 32"),
          "q8_0 on a model with 48-wide rows is refused: %s", err.text);
    CHECK(model_decode_set_dtype(m, CPU_BF16, &err) == 0 &&
              model_decode_weight_bytes(m) * 2 < (size_t)model_nparams(m) * 4,
          "bf16 works there, and halves the bytes decoding reads");
    model_destroy(m);
}

int main(void)
{
    omp_set_num_threads(2);
    conversions();
    q8_pack();
    for (int dt = 0; dt < CPU_NDTYPES; dt++) {
        variants(dt, 1, 77);
        variants(dt, 3, 77);
        variants(dt, 9, 77);
        variants(dt, 1, 700); // big enough for the decode pool's helpers
        variants(dt, 4, 700);
    }
    quality();
    refused();
    return check_done();
}
