/* serve load: the model REF of mtc-serve — a checkpoint directory (a root: its newest
 * complete step_N; or a step_N itself) whose tokenizer is the one recorded at training
 * time, or a Hugging Face directory (config.json + model.safetensors + tokenizer.json). */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "serve/internal.h"

static int is_hf_dir(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (!mtc_path_exists(p))
        return 0;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    return mtc_path_exists(p);
}

int serve_load_model(struct serve *s, mtc_error_t *err)
{
    const char *ref = s->cfg.model;
    char dir[4096], tkpath[4096] = "";
    if (!ref || !*ref || strlen(ref) >= 4000) {
        errno = EINVAL;
        return errprintf(err, "--model needs a checkpoint or Hugging Face directory");
    }
    if (!mtc_path_exists(ref)) {
        errno = ENOENT;
        return errprintf(err, "model %s: no such directory", ref);
    }
    if (is_hf_dir(ref)) {
        s->m = interop_import_hf(ref, NULL, err);
        snprintf(tkpath, sizeof tkpath, "%s/tokenizer.json", ref);
        if (!mtc_path_exists(tkpath))
            tkpath[0] = 0;
    } else {
        s->m = interop_load_checkpoint(ref, dir, sizeof dir, err);
        static struct ckpt_meta meta; // large (per-rank loader positions)
        if (s->m && ckpt_load(dir, NULL, model_nparams(s->m), NULL, &meta, NULL) == 0) {
            snprintf(tkpath, sizeof tkpath, "%s", meta.tokenizer);
            json_decref(meta.train);
        }
    }
    if (!s->m)
        return -1;
    if (s->cfg.tokenizer)
        snprintf(tkpath, sizeof tkpath, "%s", s->cfg.tokenizer);
    if (!tkpath[0]) {
        errno = EINVAL;
        return errprintf(err, "model %s: no tokenizer recorded; pass --tokenizer", ref);
    }
    s->tk = tok_load(tkpath, err);
    if (!s->tk)
        return -1;
    if (tok_vocab_size(s->tk) > model_cfg(s->m)->vocab_size) {
        errno = EINVAL;
        return errprintf(err, "tokenizer %s has %d ids; the model only %d", tkpath,
                         tok_vocab_size(s->tk), model_cfg(s->m)->vocab_size);
    }
    return 0;
}
