/* serve load: the model REF of mtc-serve — a registered version (NAME, NAME@N, NAME@alias,
 * through registry_resolve), a checkpoint directory (a root: its newest complete step_N; or
 * a step_N itself) whose tokenizer is tokenizer.json beside it or the one recorded at
 * training time, or a Hugging Face directory (config.json + model.safetensors +
 * tokenizer.json, or GPT-2's vocab.json + merges.txt). */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "registry/registry.h"
#include "serve/internal.h"

static int is_hf_dir(const char *dir)
{
    char p[4200];
    if (snprintf(p, sizeof p, "%s/config.json", dir) >= (int)sizeof p || !mtc_path_exists(p))
        return 0;
    if (snprintf(p, sizeof p, "%s/model.safetensors", dir) >= (int)sizeof p)
        return 0;
    return mtc_path_exists(p);
}

/* An HF directory's tokenizer into path (tok_load's name for it): tokenizer.json,
 * else a slow GPT-2 tokenizer's vocab.json + merges.txt (what GPT2Tokenizer's
 * save_pretrained writes) as "vocab.json:merges.txt"; "" for none. */
static void hf_tokenizer(const char *dir, char *path, size_t len)
{
    char vocab[4200], merges[4200];
    snprintf(path, len, "%s/tokenizer.json", dir);
    if (mtc_path_exists(path))
        return;
    path[0] = 0;
    snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
    snprintf(merges, sizeof merges, "%s/merges.txt", dir);
    if (mtc_path_exists(vocab) && mtc_path_exists(merges) && !strchr(vocab, ':') &&
        snprintf(path, len, "%s:%s", vocab, merges) >= (int)len)
        path[0] = 0;
}

int serve_load_model(struct serve *s, mtc_error_t *err)
{
    const char *ref = s->cfg.model;
    char dir[4000], tkpath[4200] = "", resolved[4000];
    if (!ref || !*ref || strlen(ref) >= 4000) {
        errno = EINVAL;
        return errprintf(err, "--model needs a registered model or a checkpoint or Hugging Face "
                              "directory");
    }
    if (!strchr(ref, '/') && !mtc_path_exists(ref)) { // a registry reference
        struct registry_ref r;
        if (registry_ref_parse(ref, &r, err) < 0 ||
            registry_resolve_version(s->cfg.home, s->cfg.project, s->cfg.location, ref,
                                     &s->reg_version, err) < 0 ||
            registry_resolve(s->cfg.home, s->cfg.project, s->cfg.location, ref, -1, NULL,
                             resolved, sizeof resolved, err) < 0)
            return -1;
        snprintf(s->reg_name, sizeof s->reg_name, "%s", r.name);
        ref = resolved;
    } else if (!mtc_path_exists(ref)) {
        errno = ENOENT;
        return errprintf(err, "model %s: no such directory", ref);
    } else { // a directory: its own name serves too
        char tmp[4000];
        snprintf(tmp, sizeof tmp, "%s", ref);
        snprintf(s->dir_name, sizeof s->dir_name, "%s", basename(tmp));
    }
    if (is_hf_dir(ref)) {
        s->m = interop_import_hf(ref, NULL, err);
        hf_tokenizer(ref, tkpath, sizeof tkpath);
    } else {
        s->m = interop_load_checkpoint(ref, dir, sizeof dir, err);
        static struct ckpt_meta meta; // large (per-rank loader positions)
        snprintf(tkpath, sizeof tkpath, "%s/tokenizer.json", s->m ? dir : ref);
        if (s->m && mtc_path_exists(tkpath)) // stored with a registered version
            ;
        else if (s->m && ckpt_load(dir, NULL, model_nparams(s->m), NULL, &meta, NULL) == 0) {
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

json_t *serve_model_ids(struct serve *s)
{
    json_t *ids = json_array();
    json_array_append_new(ids, json_string(s->name));
    char id[200];
    if (s->reg_version > 0) {
        /* NAME@N, then every alias on that version now */
        snprintf(id, sizeof id, "%s@%d", s->reg_name, s->reg_version);
        json_array_append_new(ids, json_string(id));
        int v = 0;
        mtc_error_t err;
        json_t *aliases = registry_version_aliases(s->cfg.home, s->cfg.project, s->cfg.location,
                                                   id, &v, &err), *a;
        size_t i;
        json_array_foreach(aliases, i, a)
        {
            if (strcmp(json_string_value(a), "default") == 0)
                json_array_append_new(ids, json_string(s->reg_name));
            snprintf(id, sizeof id, "%s@%s", s->reg_name, json_string_value(a));
            json_array_append_new(ids, json_string(id));
        }
        json_decref(aliases);
    } else if (*s->dir_name) {
        json_array_append_new(ids, json_string(s->dir_name));
    }
    /* each once, in this order */
    json_t *out = json_array(), *x, *y;
    size_t i, j;
    json_array_foreach(ids, i, x)
    {
        int seen = 0;
        json_array_foreach(out, j, y) seen |= json_equal(x, y);
        if (!seen)
            json_array_append(out, x);
    }
    json_decref(ids);
    return out;
}

int serve_model_known(struct serve *s, const char *model)
{
    if (strcmp(model, s->name) == 0 || (*s->dir_name && strcmp(model, s->dir_name) == 0))
        return 1;
    if (s->reg_version <= 0)
        return 0;
    /* a reference of this model that resolves to the served version now */
    struct registry_ref r;
    int v = 0;
    mtc_error_t err;
    return registry_ref_parse(model, &r, &err) == 0 && strcmp(r.name, s->reg_name) == 0 &&
           registry_resolve_version(s->cfg.home, s->cfg.project, s->cfg.location, model, &v,
                                    &err) == 0 &&
           v == s->reg_version;
}
