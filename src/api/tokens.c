/* tokens: the API's bearer tokens — create (viewer, editor, admin, or a
 * registrar token scoped to one directory of one run: registrar.c), list and
 * revoke. Only a token's hash is stored; its secret is shown once. */
#include "api/internal.h"
#include "jobs/jobs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A registrar token: {"role": "registrar", "cluster", "project",
 * "location", "model", "run", "checkpoint"}, what `mtc run` asks for a run
 * on hosts (registrar.c). */
static int registrar_create(struct api_req *r, struct api_resp *out)
{
    const char *role, *cluster, *project, *location, *model, *run, *ckpt;
    json_error_t jerr;
    if (json_unpack_ex(r->body, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "role",
                       &role, "cluster", &cluster, "project", &project, "location", &location,
                       "model", &model, "run", &run, "checkpoint", &ckpt) < 0)
        return api_error(out, 400,
                         "token: a registrar token's body is {\"role\": \"registrar\", "
                         "\"cluster\", \"project\", \"location\", \"model\", \"run\", "
                         "\"checkpoint\"}: %s",
                         jerr.text);
    if (api_check_cluster_id(cluster, out) < 0)
        return 0;
    char token[80], id[24];
    mtc_error_t err = {""};
    if (jobs_registrar_mint(r->st, cluster, project, location, model, run, ckpt, token, id, &err) <
        0)
        return api_error(out, errno == ENOENT ? 404 : 400, "token: %s", err.text);
    out->body = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "role", "registrar", "cluster", cluster,
                          "token", token);
    explicit_bzero(token, sizeof(token));
    return 0;
}

int api_token_create(struct api_req *r, struct api_resp *out)
{
    const char *name = NULL, *role = "viewer", *user = NULL;
    json_error_t jerr;
    if (r->body && json_is_string(json_object_get(r->body, "role")) &&
        strcmp(json_string_value(json_object_get(r->body, "role")), "registrar") == 0)
        return registrar_create(r, out);
    if (!r->body || json_unpack_ex(r->body, &jerr, JSON_STRICT, "{s:s, s?:s, s?:s}", "name", &name,
                                   "role", &role, "user", &user) < 0)
        return api_error(out, 400,
                         "token: body must be {\"name\": NAME, \"role\": ROLE, \"user\"?: "
                         "UNIX_USER}: %s",
                         r->body ? jerr.text : "missing body");
    if (!mtc_name_valid(name, 63))
        return api_error(out, 400, "name \"%.64s\": must match [a-z][a-z0-9-]{0,62}", name);
    enum api_role rl = api_role_parse(role);
    if (rl == ROLE_NONE || rl == ROLE_NODE) /* node tokens are mtcd's to mint */
        return api_error(out, 400, "role \"%.32s\": must be viewer, editor, admin or registrar",
                         role);
    /* bound to a Unix user: the training jobs it creates run as that user,
     * never as root (api/jobs.c) */
    struct mtc_user u;
    mtc_error_t uerr = {""};
    if (user && mtc_user_lookup(user, &u, &uerr) < 0)
        return api_error(out, 400, "%s", uerr.text);
    if (user && u.uid == 0)
        return api_error(out, 400,
                         "user %s: uid 0: a token's jobs never run as root (an admin's job "
                         "that names no user does)",
                         user);
    char secret[65], token[80], hash[65], id[24], hex[9];
    mtc_random_hex(secret, 24);
    snprintf(token, sizeof(token), "mtc_%s", secret);
    mtc_sha256_hex(token, hash);
    mtc_random_hex(hex, 4);
    snprintf(id, sizeof(id), "tok-%s", hex);
    if (store_token_add(r->st, id, name, role, user, hash) < 0)
        return api_error(out, errno == EEXIST ? 409 : 500, "token %s: %s", name,
                         errno == EEXIST ? "a token with this name exists" : "cannot store");
    out->body =
        json_pack("{s:s, s:s, s:s, s:s}", "id", id, "name", name, "role", role, "token", token);
    if (user)
        json_object_set_new(out->body, "user", json_string(user));
    return 0;
}

int api_token_list(struct api_req *r, struct api_resp *out)
{
    out->body = json_pack("{s:o}", "tokens", api_tokens_json(r->st));
    return 0;
}

int api_token_revoke(struct api_req *r, struct api_resp *out)
{
    if (store_token_revoke(r->st, r->cap[0]) < 0)
        return api_error(out, 404, "token %.64s not found", r->cap[0]);
    out->body = json_object();
    return 0;
}
