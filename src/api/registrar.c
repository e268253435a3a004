/* registrar: the tokens a job on a hosts cluster registers what it trained
 * with. A job there cannot reach mtcd's unix socket, so it calls the TCP
 * listener (the one the agents report to) with a token that may do one
 * thing: upload one directory of one run (its checkpoints, or what a custom
 * task's program wrote: "checkpoint" in the scope; api/models.c reads files
 * under it only) as a version of one model, then read that upload's
 * operation and that model. The scope (project, location, model, run
 * directory, that directory) is fixed when the token is
 * minted (jobs_registrar_mint) — by mtcd for a trainingJob it submits, or by
 * an admin's POST /v1/tokens for `mtc run` — and the token dies with its
 * cluster. */
#include "api/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"

int api_registrar_scope(const struct api_req *r, struct api_registrar *s)
{
    memset(s, 0, sizeof(*s));
    json_t *o = json_loads(r->who.scope, 0, NULL);
    const char *v[5] = {mtc_json_str(o, "project"), mtc_json_str(o, "location"),
                        mtc_json_str(o, "model"), mtc_json_str(o, "run"),
                        mtc_json_str(o, "checkpoint")};
    int ok = 1;
    for (int i = 0; i < 5; i++)
        ok &= v[i] != NULL;
    if (ok) {
        snprintf(s->project, sizeof(s->project), "%s", v[0]);
        snprintf(s->location, sizeof(s->location), "%s", v[1]);
        snprintf(s->model, sizeof(s->model), "%s", v[2]);
        snprintf(s->run, sizeof(s->run), "%s", v[3]);
        snprintf(s->checkpoint, sizeof(s->checkpoint), "%s", v[4]);
    }
    json_decref(o);
    return ok ? 0 : -1;
}

int api_registrar_model(const struct api_req *r, struct api_resp *out, const char *model)
{
    if (r->who.role != ROLE_REGISTRAR)
        return 0;
    struct api_registrar s;
    if (api_registrar_scope(r, &s) < 0)
        return api_error(out, 403, "this registrar token has no valid scope"), -1;
    if (strcmp(s.project, r->cap[0]) || strcmp(s.location, r->cap[1]) ||
        strcmp(s.model, model ? model : ""))
        return api_error(out, 403,
                         "a registrar token may only register run %.200s as model %s "
                         "(projects/%s/locations/%s)",
                         s.run, s.model, s.project, s.location),
               -1;
    return 0;
}

int api_registrar_upload(const struct api_req *r, struct api_resp *out, const char *model,
                         const char *source_run)
{
    if (r->who.role != ROLE_REGISTRAR)
        return 0;
    if (api_registrar_model(r, out, model) < 0)
        return -1;
    struct api_registrar s;
    api_registrar_scope(r, &s);
    char a[PATH_MAX], b[PATH_MAX];
    if (!source_run || !realpath(source_run, a) || !realpath(s.run, b) || strcmp(a, b))
        return api_error(out, 403, "model.sourceRun: a registrar token registers run %.200s only",
                         s.run),
               -1;
    /* once: a version registered from this run ends what the token may add */
    int n = 0, done = 0;
    struct store_model_version *v = store_model_versions(r->st, s.project, s.location, model, &n);
    for (int i = 0; i < n; i++) {
        const char *td = mtc_json_str(v[i].lineage, "taskDir");
        char c[PATH_MAX];
        if (td && (strcmp(td, s.run) == 0 || (realpath(td, c) && strcmp(c, b) == 0)))
            done = v[i].version;
    }
    store_model_versions_free(v, n);
    if (done)
        return api_error(out, 400,
                         "precondition: run %.200s is registered already as %s@%d (a registrar "
                         "token registers once)",
                         s.run, model, done),
               -1;
    return 0;
}
