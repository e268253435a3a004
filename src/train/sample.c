/* sample: text generation from a checkpoint (temperature sampling with a seeded
 * RNG, or greedy at temperature 0) and the `sample` subcommand. No KV cache: each
 * token re-runs the forward over the window, fine for the small models here. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int32_t *sample_generate(struct model *m, const int32_t *prompt, size_t nprompt, int ntok,
                         float temperature, uint64_t seed, int eot, size_t *nout,
                         mtc_error_t *err)
{
    const struct model_config *c = model_cfg(m);
    size_t cap = nprompt + (size_t)ntok;
    int32_t *seq = malloc(sizeof(int32_t) * (cap ? cap : 1));
    int32_t *out = malloc(sizeof(int32_t) * (ntok > 0 ? (size_t)ntok : 1));
    float *prob = malloc(sizeof(float) * (size_t)c->vocab_size);
    if (!seq || !out || !prob) {
        free(seq), free(out), free(prob);
        return errprintf(err, "out of memory"), NULL;
    }
    memcpy(seq, prompt, nprompt * sizeof(int32_t));
    size_t len = nprompt, n = 0;
    if (len == 0 && eot >= 0)
        seq[len++] = eot;  // an empty prompt starts from end-of-text
    uint64_t rng = seed;
    for (int i = 0; i < ntok && len > 0; i++) {
        size_t start = len > (size_t)c->max_seq ? len - (size_t)c->max_seq : 0;
        float r = model_forward(m, seq + start, NULL, NULL, 0, 1, (int)(len - start));
        if (isnan(r)) {
            free(seq), free(out), free(prob);
            return errprintf(err, "forward failed (token id out of range for the model?)"), NULL;
        }
        const float *lg = model_last_logits(m);  // (1, padded_vocab)
        int next = 0;
        if (temperature <= 0) {
            for (int v = 1; v < c->vocab_size; v++)
                if (lg[v] > lg[next])
                    next = v;
        } else {
            float mx = lg[0];
            for (int v = 1; v < c->vocab_size; v++)
                mx = lg[v] > mx ? lg[v] : mx;
            double sum = 0;
            for (int v = 0; v < c->vocab_size; v++)
                sum += prob[v] = expf((lg[v] - mx) / temperature);
            double u = (double)(splitmix(&rng) >> 11) * 0x1.0p-53 * sum, acc = 0;
            next = c->vocab_size - 1;
            for (int v = 0; v < c->vocab_size; v++)
                if ((acc += prob[v]) > u) {
                    next = v;
                    break;
                }
        }
        seq[len++] = next;
        out[n++] = next;
        if (next == eot)
            break;
    }
    free(seq);
    free(prob);
    *nout = n;
    return out;
}

const char train_sample_usage[] =
    "mtc-train sample --checkpoint DIR [--tokenizer T] --prompt TEXT [--tokens N] "
    "[--temperature X] [--seed S]\n";

int train_sample_main(int argc, char **argv)
{
    const char *ckarg = NULL, *tkpath = NULL, *prompt = "";
    int ntok = 64;
    double temp = 1.0;
    unsigned long long seed = 1337;
    static const struct option lo[] = {{"checkpoint", required_argument, NULL, 'c'},
                                       {"tokenizer", required_argument, NULL, 't'},
                                       {"prompt", required_argument, NULL, 'p'},
                                       {"tokens", required_argument, NULL, 'n'},
                                       {"temperature", required_argument, NULL, 'T'},
                                       {"seed", required_argument, NULL, 's'},
                                       {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'c': ckarg = optarg; break;
        case 't': tkpath = optarg; break;
        case 'p': prompt = optarg; break;
        case 'n': ntok = atoi(optarg); break;
        case 'T': temp = atof(optarg); break;
        case 's': seed = strtoull(optarg, NULL, 10); break;
        default:
            fprintf(stderr, "usage: %s", train_sample_usage);
            return 2;
        }
    }
    if (!ckarg) {
        fprintf(stderr, "mtc-train: sample needs --checkpoint DIR\n");
        return 2;
    }
    mtc_error_t err;
    char dir[4096];
    struct model *m = interop_load_checkpoint(ckarg, dir, sizeof dir, &err);
    if (!m) {
        fprintf(stderr, "mtc-train: %s\n", err.text);
        return 1;
    }
    static struct ckpt_meta meta;
    char tkbuf[1024] = "";
    if (!tkpath && ckpt_load(dir, NULL, model_nparams(m), NULL, &meta, &err) == 0) {
        // the tokenizer recorded at training time
        snprintf(tkbuf, sizeof tkbuf, "%s", meta.tokenizer);
        json_decref(meta.train);
        tkpath = tkbuf[0] ? tkbuf : NULL;
    }
    if (!tkpath) {
        fprintf(stderr, "mtc-train: sample needs --tokenizer (none recorded in %s)\n", dir);
        model_destroy(m);
        return 1;
    }
    struct tok *tk = tok_load(tkpath, &err);
    int32_t *ids = NULL, *gen = NULL;
    size_t nids = 0, ngen = 0;
    int rc = 1;
    if (!tk || tok_encode(tk, prompt, strlen(prompt), &ids, &nids, &err) < 0)
        goto done;
    gen = sample_generate(m, ids, nids, ntok, (float)temp, seed, tok_eot(tk), &ngen, &err);
    if (!gen)
        goto done;
    char *text = tok_decode(tk, gen, ngen);
    printf("%s%s\n", prompt, text ? text : "");
    free(text);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "mtc-train: %s\n", err.text);
    free(ids);
    free(gen);
    tok_destroy(tk);
    model_destroy(m);
    return rc;
}
