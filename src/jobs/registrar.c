/* registrar: minting the tokens a job on a hosts cluster registers what it
 * trained with (api/registrar.c says what such a token may do): the scope —
 * project, location, model, run directory, and as "checkpoint" the one
 * directory it registers — is fixed here, and only the secret's hash is
 * stored. */
#include "jobs/jobs.h"
#include "registry/registry.h"
#include "store/store.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An absolute path without "..", a quote or a control character (it lands in
 * the job's script and in path checks). */
static int path_ok(const char *p)
{
    if (!p || p[0] != '/' || strlen(p) >= PATH_MAX || strstr(p, "/../") ||
        (strlen(p) >= 3 && strcmp(p + strlen(p) - 3, "/..") == 0))
        return 0;
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == '\'' || *c == 0x7f)
            return 0;
    return 1;
}

int jobs_registrar_mint(struct store *st, const char *cluster, const char *project,
                        const char *location, const char *model, const char *run,
                        const char *checkpoint, char token[80], char id[24], mtc_error_t *err)
{
    struct store_cluster cl;
    if (store_cluster_get(st, cluster, &cl) < 0) {
        errno = ENOENT;
        return errprintf(err, "cluster %s not found", cluster);
    }
    int same = strcmp(cl.project, project) == 0 && strcmp(cl.location, location) == 0;
    store_cluster_release(&cl);
    if (!same) {
        errno = ENOENT;
        return errprintf(err, "cluster %s is not in projects/%s/locations/%s", cluster, project,
                         location);
    }
    if (!registry_name_valid(model)) {
        errno = EINVAL;
        return registry_name_error(model, err);
    }
    if (!path_ok(run) || !path_ok(checkpoint)) {
        errno = EINVAL;
        return errprintf(err,
                         "%s %.200s: not an absolute path (without '..', quotes or control "
                         "characters)",
                         path_ok(run) ? "checkpoint" : "run", path_ok(run) ? checkpoint : run);
    }
    json_t *scope = json_pack("{s:s, s:s, s:s, s:s, s:s}", "project", project, "location", location,
                              "model", model, "run", run, "checkpoint", checkpoint);
    char *text = scope ? json_dumps(scope, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(scope);
    if (!text) {
        errno = ENOMEM;
        return errprintf(err, "out of memory");
    }
    char secret[65], hash[65], hex[9], name[128];
    mtc_random_hex(secret, 24);
    snprintf(token, 80, "mtc_%s", secret);
    mtc_sha256_hex(token, hash);
    mtc_random_hex(hex, 4);
    snprintf(id, 24, "tok-%s", hex);
    snprintf(name, sizeof(name), "registrar-%s-%s", cluster, hex);
    int rc = store_registrar_token_add(st, id, name, cluster, text, hash);
    free(text);
    explicit_bzero(secret, sizeof(secret));
    if (rc < 0)
        return errprintf(err, errno == ENAMETOOLONG ? "the token's scope is too long"
                                                    : "store: cannot add the token");
    return 0;
}
