/* register: what a completed run registers in the model registry — mtc-train's
 * final checkpoint, or the directory a custom task's program wrote
 * ("register": {"path", "format"}) — as config.json's "register" section and
 * the job script's last step, `mtc models upload` through mtcd. */
#include "recipes/recipes.h"
#include "registry/registry.h"

#include <stdio.h>
#include <string.h>

json_t *recipe_resolve_register(const json_t *recipe, const struct recipe_run *run,
                                const char *experiment, const char *task_dir, const char *ckdir)
{
    const json_t *want = json_object_get(recipe, "register");
    int custom = recipe_is_custom(recipe);
    char model[REGISTRY_NAME_MAX + 1];
    /* mtc-train's checkpoint unless "register": false; a program's directory
     * only when the recipe names it */
    if (!run->registrar || json_is_false(want) || (custom && !json_is_object(want)))
        return NULL;
    if (run->model_name)
        snprintf(model, sizeof(model), "%s", run->model_name);
    else if (registry_name_from(experiment, model) < 0)
        return NULL;
    if (!custom)
        return json_pack("{s:s, s:s, s:s}", "model", model, "mtc", run->registrar, "dir", ckdir);
    return json_pack("{s:s, s:s, s:s++, s:O}", "model", model, "mtc", run->registrar, "dir",
                     task_dir, "/", json_string_value(json_object_get(want, "path")), "format",
                     json_object_get(want, "format"));
}

/* The registration command: mtc models upload "$var" through mtcd — its unix
 * socket under home, or on a cluster on hosts its TCP listener at url with
 * the registrar token the job got in MTC_REGISTER_TOKEN. */
static void put_upload(FILE *f, const json_t *reg, const char *var)
{
    const char *url = json_string_value(json_object_get(reg, "url"));
    const char *home = json_string_value(json_object_get(reg, "home"));
    const char *ca = json_string_value(json_object_get(reg, "caCert"));
    const char *format = json_string_value(json_object_get(reg, "format"));
    if (url) { /* mtcd over TCP, as the hosts reach it */
        fprintf(f, "MTC_URL=");
        recipe_put_quoted(f, url);
        fprintf(f, " MTC_TOKEN=\"$REGISTER_TOKEN\" ");
        if (ca) {
            fprintf(f, "MTC_CA_CERT=");
            recipe_put_quoted(f, ca);
            fprintf(f, " ");
        }
    } else if (home) {
        fprintf(f, "MTC_HOME=");
        recipe_put_quoted(f, home);
        fprintf(f, " ");
    }
    recipe_put_quoted(f, json_string_value(json_object_get(reg, "mtc")));
    static const char *const scope[] = {"project", "location"};
    for (int i = 0; i < 2; i++)
        if (json_string_value(json_object_get(reg, scope[i]))) {
            fprintf(f, " --%s ", scope[i]);
            recipe_put_quoted(f, json_string_value(json_object_get(reg, scope[i])));
        }
    fprintf(f, " models upload \"$%s\"%s%s --name %s --run \"$TASK_DIR\"", var,
            format ? " --format " : "", format ? format : "",
            json_string_value(json_object_get(reg, "model")));
}

/* A custom task's directory: said in one line and left alone when it is
 * missing, not of its format (hf: config.json + model.safetensors; the
 * others the upload checks) or, through a link, outside the run directory. */
static void put_register_dir(FILE *f, const json_t *reg)
{
    const char *model = json_string_value(json_object_get(reg, "model"));
    const char *format = json_string_value(json_object_get(reg, "format"));
    fprintf(
        f,
        "if [ $rc -eq 0 ]; then\n    # the model registry: what the program wrote (format %s) as a "
        "new version of model %s\n    REG_DIR=",
        format, model);
    recipe_put_quoted(f, json_string_value(json_object_get(reg, "dir")));
    fprintf(f, "\n    if [ ! -d \"$REG_DIR\" ]; then\n"
               "        echo \"mtc: register: $REG_DIR: no such directory (the program wrote no "
               "model there); nothing registered\"\n");
    if (schema_enum_parse(&registry_format_enum, format, 0) == REGISTRY_HF)
        fprintf(f, "    elif [ ! -f \"$REG_DIR/config.json\" ] || [ ! -f "
                   "\"$REG_DIR/model.safetensors\" ]; then\n"
                   "        echo \"mtc: register: $REG_DIR is not an HF directory (config.json + "
                   "model.safetensors); nothing registered\"\n");
    /* realpath prints a path below the base relative to it: an absolute one
     * is elsewhere (a link led out) */
    fprintf(f, "    elif realpath -e --relative-base=\"$TASK_DIR\" \"$REG_DIR\" | grep -q '^/'; "
               "then\n"
               "        echo \"mtc: register: $REG_DIR leads outside the run directory; nothing "
               "registered\"\n    else\n        ");
    put_upload(f, reg, "REG_DIR");
    fprintf(f,
            " ||\n            echo \"mtc: the model registry did not take $REG_DIR (register it "
            "with: mtc models upload $REG_DIR --format %s --name %s --run $TASK_DIR)\"\n"
            "    fi\nfi\n",
            format, model);
}

void recipe_put_register(FILE *f, const json_t *cfg)
{
    const json_t *reg = json_object_get(cfg, "register");
    const char *model = json_string_value(json_object_get(reg, "model"));
    if (!model || !json_string_value(json_object_get(reg, "mtc")) ||
        !json_string_value(json_object_get(reg, "dir")))
        return;
    if (json_object_get(reg, "format")) {
        put_register_dir(f, reg);
        return;
    }
    fprintf(f,
            "if [ $rc -eq 0 ]; then\n    # the model registry: the final checkpoint as a new "
            "version of model %s\n    CKPT_DIR=",
            model);
    recipe_put_quoted(f, json_string_value(json_object_get(reg, "dir")));
    fprintf(f, "\n    ");
    put_upload(f, reg, "CKPT_DIR");
    fprintf(f,
            " ||\n        echo \"mtc: the model registry did not take the checkpoint; it stays in "
            "$CKPT_DIR (register it with: mtc models upload $CKPT_DIR --name %s --run "
            "$TASK_DIR)\"\nfi\n",
            model);
}
