/* registry refs: <models>/refs/<project>/<location>/<name>.json, mtcd's
 * mirror of each model's versions and aliases, and registry_resolve, which
 * reads it to turn a reference into a directory (mtc-serve's one call). */
#include "registry/registry.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void refs_path(const char *models, const char *project, const char *location,
                      const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/refs/%s/%s/%s.json", models, project, location, name);
}

int registry_refs_write(const char *models, const char *project, const char *location,
                        const char *name, const json_t *versions, const json_t *aliases)
{
    char path[PATH_MAX + 256], dir[PATH_MAX + 256];
    if (!mtc_name_valid(project, 63) || !mtc_name_valid(location, 63) ||
        !registry_name_valid(name)) {
        errno = EINVAL;
        return -1;
    }
    refs_path(models, project, location, name, path, sizeof(path));
    if (!versions || json_object_size(versions) == 0)
        return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
    snprintf(dir, sizeof(dir), "%s/refs/%s/%s", models, project, location);
    if (mtc_mkdir_p(dir, 0700) < 0)
        return -1;
    json_t *o = json_pack("{s:O, s:O}", "versions", versions, "aliases", aliases);
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text)
        return errno = ENOMEM, -1;
    int rc = mtc_write_file_atomic(path, text, strlen(text), 0600);
    free(text);
    return rc;
}

/* The refs file's version a reference names: its manifest (borrowed from
 * *refs, which the caller decrefs) and number. NULL + err, errno ENOENT. */
static const json_t *lookup(const char *home, const char *project, const char *location,
                            const char *ref, json_t **refs, int *number, mtc_error_t *err)
{
    struct registry_ref r;
    char models[PATH_MAX], path[PATH_MAX + 256];
    *refs = NULL;
    if (registry_ref_parse(ref, &r, err) < 0)
        return NULL;
    if (!home || !*home) {
        errno = EINVAL;
        return errprintf(err, "no MTC_HOME to find the registry in"), NULL;
    }
    snprintf(models, sizeof(models), "%s/models", home);
    refs_path(models, project ? project : "local", location ? location : "local", r.name, path,
              sizeof(path));
    *refs = json_load_file(path, 0, NULL);
    if (!*refs) {
        errno = ENOENT;
        return errprintf(err, "model %s not found", r.name), NULL;
    }
    int version = r.version;
    const char *alias = r.version ? NULL : *r.alias ? r.alias : "default";
    json_t *versions = json_object_get(*refs, "versions"), *aliases = json_object_get(*refs, "aliases");
    if (alias) {
        json_t *v = json_object_get(aliases, alias);
        if (!json_is_integer(v)) {
            char known[256] = "";
            const char *k;
            json_t *x;
            json_object_foreach(aliases, k, x)
            {
                size_t l = strlen(known);
                snprintf(known + l, sizeof(known) - l, "%s%s", l ? ", " : "", k);
            }
            errno = ENOENT;
            return errprintf(err, "model %s: no alias %s (aliases: %s)", r.name, alias, known),
                   NULL;
        }
        version = (int)json_integer_value(v);
    }
    char key[16];
    snprintf(key, sizeof(key), "%d", version);
    const json_t *manifest = json_object_get(versions, key);
    if (!manifest) {
        errno = ENOENT;
        return errprintf(err, "model %s: no version %d", r.name, version), NULL;
    }
    *number = version;
    return manifest;
}

int registry_resolve(const char *home, const char *project, const char *location, const char *ref,
                     int format, const char *trainer, char *out, size_t len, mtc_error_t *err)
{
    json_t *refs = NULL;
    int version = 0;
    char models[PATH_MAX];
    const json_t *manifest = lookup(home, project, location, ref, &refs, &version, err);
    int rc = -1;
    if (manifest) {
        snprintf(models, sizeof(models), "%s/models", home);
        rc = registry_materialize(models, manifest, format, trainer, out, len, err);
    }
    json_decref(refs);
    return rc;
}

int registry_resolve_version(const char *home, const char *project, const char *location,
                             const char *ref, int *version, mtc_error_t *err)
{
    json_t *refs = NULL;
    const json_t *manifest = lookup(home, project, location, ref, &refs, version, err);
    json_decref(refs);
    return manifest ? 0 : -1;
}

json_t *registry_version_aliases(const char *home, const char *project, const char *location,
                                 const char *ref, int *version, mtc_error_t *err)
{
    json_t *refs = NULL;
    if (!lookup(home, project, location, ref, &refs, version, err))
        return NULL;
    json_t *out = json_array(), *v;
    const char *k;
    json_object_foreach(json_object_get(refs, "aliases"), k, v)
    {
        if (json_is_integer(v) && json_integer_value(v) == *version)
            json_array_append_new(out, json_string(k));
    }
    json_decref(refs);
    return out;
}
