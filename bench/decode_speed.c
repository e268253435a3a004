/* decode_speed: one stream's decode against the machine's memory bandwidth, measured in the
 * same run — a STREAM triad (a = b + s*c over arrays far beyond cache, OMP_NUM_THREADS
 * threads, 3 streams counted) and a read-only sum; then, for each weight dtype, the
 * generation engine on one stream (random-init weights): prefill ms, decode ms/token, bytes
 * of weights and KV cache read per decoded token, that over the time as a fraction of the
 * triad's bandwidth, and the speed-up over f32. One stable line per dtype:
 *   decode PRESET dtype=D prompt=P new=N prefill_ms=X ms_per_token=X bytes_per_token=X
 *     gbps=X bound_frac=X read_frac=X vs_f32=X
 * (bound_frac: against the triad, the bound; read_frac: against the read-only sum,
 * which is what decoding does)
 * Usage: decode_speed PRESET PROMPT_TOKENS NEW_TOKENS [DTYPE...] (default f32 bf16 q8_0) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/gen.h"
#include "train/train.h"

#define NBW (32L << 20) // floats per array: 128 MiB each

/* Best of 10: GB/s of the triad (3 streams) and of a read-only sum (1 stream). */
static void bandwidth(double *triad, double *read)
{
    float *a = malloc(NBW * 4), *b = malloc(NBW * 4), *c = malloc(NBW * 4);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < NBW; i++)
        a[i] = 0, b[i] = 1, c[i] = 2;
    *triad = *read = 0;
    for (int r = 0; r < 10; r++) {
        double t0 = gen_now();
#pragma omp parallel for simd schedule(static) // simd: no alias check stops the vectorizer
        for (long i = 0; i < NBW; i++)
            a[i] = b[i] + 0.5f * c[i];
        double t = gen_now() - t0, g = 3.0 * NBW * 4 / t / 1e9;
        *triad = g > *triad ? g : *triad;
        float s = 0;
        t0 = gen_now();
#pragma omp parallel for simd schedule(static) reduction(+ : s)
        for (long i = 0; i < NBW; i++)
            s += a[i];
        t = gen_now() - t0;
        g = (double)NBW * 4 / t / 1e9 + (s == 12345 ? 1e-9 : 0); // s used
        *read = g > *read ? g : *read;
    }
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: decode_speed PRESET PROMPT_TOKENS NEW_TOKENS [DTYPE...]\n");
        return 2;
    }
    struct model_config c;
    mtc_error_t err;
    if (model_preset(argv[1], &c, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return 2;
    }
    int P = atoi(argv[2]), N = atoi(argv[3]), ctx = P + N;
    const char *def[] = {"f32", "bf16", "q8_0"};
    const char **names = argc > 4 ? (const char **)argv + 4 : def;
    int nd = argc > 4 ? argc - 4 : 3;
    struct model *m = model_create(&c, &err);
    if (!m) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    model_init_weights(m, 1);
    double triad, read;
    bandwidth(&triad, &read);
    printf("bandwidth: triad %.1f GB/s, read %.1f GB/s (%d threads, kernels %s)\n", triad, read,
           omp_get_max_threads(), cpu_isa_name(cpu_isa_get()));
    int32_t *prompt = malloc(sizeof(int32_t) * P);
    for (int i = 0; i < P; i++)
        prompt[i] = (int32_t)((i * 2654435761u) % (unsigned)c.vocab_size);
    double f32_ms = 0;
    for (int d = 0; d < nd; d++) {
        enum cpu_dtype dt;
        if (cpu_dtype_parse(names[d], &dt) < 0 || model_decode_set_dtype(m, dt, &err) < 0) {
            fprintf(stderr, "dtype %s: %s\n", names[d], dt < CPU_NDTYPES ? err.text : "unknown");
            return 2;
        }
        struct gen_engine *e = gen_create(m, 1, ctx, &err);
        if (!e) {
            fprintf(stderr, "%s\n", err.text);
            return 1;
        }
        double best = 1e30, prefill = 0;
        for (int rep = 0; rep < 2; rep++) { // the first run warms pages and threads
            struct gen_seq q = {.prompt = prompt, .nprompt = P, .eot = -1,
                                .s = {.temperature = 0, .top_p = 1, .max_tokens = N}};
            struct gen_seq *qs = &q;
            if (gen_run(e, &qs, 1, &err) < 0) {
                fprintf(stderr, "%s\n", err.text);
                return 1;
            }
            double ms = (q.t_done - q.t_first) / (q.nout - 1) * 1e3;
            if (ms < best)
                best = ms, prefill = (q.t_first - q.t_submit) * 1e3;
            gen_seq_release(&q);
        }
        gen_destroy(e);
        // K and V read per decoded token: positions P..ctx-2 attend to pos+1 entries
        const struct model_config *mc = model_cfg(m);
        double kvw = (double)(mc->n_kv_head ? mc->n_kv_head : mc->n_head) *
                     (mc->head_dim ? mc->head_dim : mc->d_model / mc->n_head);
        double kvpos = (P + 1 + ctx - 1) / 2.0, kvel = dt == CPU_F32 ? 4 : 2;
        double bytes = model_decode_weight_bytes(m) + 2.0 * mc->n_layer * kvw * kvpos * kvel;
        double gbps = bytes / (best * 1e-3) / 1e9;
        if (dt == CPU_F32)
            f32_ms = best;
        printf("decode %s dtype=%s prompt=%d new=%d prefill_ms=%.1f ms_per_token=%.2f "
               "bytes_per_token=%.0f gbps=%.1f bound_frac=%.2f read_frac=%.2f vs_f32=%.2f\n",
               argv[1], names[d], P, N, prefill, best, bytes, gbps, gbps / triad, gbps / read,
               f32_ms > 0 ? f32_ms / best : 0);
        fflush(stdout);
    }
    free(prompt);
    model_destroy(m);
    return 0;
}
