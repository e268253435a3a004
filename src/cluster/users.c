/* users: the Unix users a cluster's spec lists (`users: [{name, uid, gid}]`)
 * — the people whose jobs run as themselves (tokens bound to users). mtc
 * makes each where it is missing, with the spec's uid and gid, on mtcd's
 * machine (here jobs are submitted as the user) and, through mtc-host, on
 * every host; a user that exists with other ids, or a uid another user
 * holds, is one line and nothing is made. Users are never removed: files on
 * shared storage keep their ids. */
#include "cluster/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cluster_users_args(const json_t *spec, char *buf, size_t len)
{
    size_t i, n = 0;
    json_t *u;
    *buf = '\0';
    json_array_foreach(json_object_get(spec, "users"), i, u)
    {
        /* names and ids checked by the spec's schema: safe on a command line */
        int w = snprintf(buf + n, len - n, "%s%s:%lld:%lld", n ? " " : "",
                         json_string_value(json_object_get(u, "name")),
                         (long long)json_integer_value(json_object_get(u, "uid")),
                         (long long)json_integer_value(json_object_get(u, "gid")));
        if (w < 0 || (size_t)w >= len - n)
            return -1;
        n += (size_t)w;
    }
    return (int)i;
}

int cluster_users_apply(const json_t *spec, mtc_error_t *err)
{
    char list[CLUSTER_USERS_MAX * 64];
    int n = cluster_users_args(spec, list, sizeof(list));
    if (n <= 0)
        return n < 0 ? errprintf(err, "users: too many") : 0;
    char script[sizeof(CLUSTER_USERS_SH) + sizeof(list) + 64];
    snprintf(script, sizeof(script), "%s\nusers %s\n", CLUSTER_USERS_SH, list);
    char *argv[] = {"sh", "-c", script, NULL}, *out = NULL;
    int rc = mtc_run(argv, NULL, &out, 60000);
    if (rc != 0) {
        /* the function's one line: "mtc-host: user alice is uid 1001 …" */
        const char *m = out ? strstr(out, "mtc-host: ") : NULL;
        errprintf(err, "users: on mtcd's machine: %.*s", m ? (int)strcspn(m + 10, "\n") : 40,
                  m ? m + 10 : "useradd or groupadd failed");
        free(out);
        return -1;
    }
    free(out);
    return 0;
}
