/* hosts_storage: the experiment root of a cluster on hosts must be shared
 * storage — the controller writes a marker there (random content, kept for
 * the life of the cluster) and every node's host must read the same content
 * at the same path; and the node's mounts file for mtc-host. */
#include "provider/hosts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/cluster.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define MARKER_MS 20000

/* The marker's path from the spec, its content from the cluster dir (made once). */
int hosts_storage_marker(const struct head *c, const struct hstate *s, const json_t *spec,
                         char path[PLEN], char content[33], mtc_error_t *err)
{
    const char *root = hosts_experiment_root(spec);
    path[0] = content[0] = '\0';
    if (!root)
        return 0;
    snprintf(path, PLEN, "%s/.mtc/%s-%s.marker", root, c->id, s->uid);
    char mine[PLEN];
    head_path(c, mine, "storage.marker");
    size_t len = 0;
    char *old = mtc_read_file(mine, &len);
    if (old && len == 32) {
        memcpy(content, old, 32);
        content[32] = '\0';
        free(old);
        return 0;
    }
    free(old);
    if (mtc_random_hex(content, 16) < 0 || mtc_write_file_atomic(mine, content, 32, 0644) < 0)
        return errprintf(err, "cannot write %s: %s", mine, strerror(errno));
    return 0;
}

/* The node's mounts file in its image, a line per mount. */
int hosts_node_mounts(const struct head *c, const struct hstate *s, const json_t *spec,
                      const struct hnode *n, mtc_error_t *err)
{
    char path[PLEN];
    head_path(c, path, "nodes/%s/image/etc/mtc/%s/nodes/%s", n->name, s->uid, n->name);
    if (mtc_mkdir_p(path, 0755) < 0)
        return errprintf(err, "mkdir %s: %s", path, strerror(errno));
    strncat(path, "/mounts", sizeof(path) - strlen(path) - 1);
    json_t *m = cluster_spec_mounts(spec, n->pool);
    size_t len = 0, i;
    json_t *e;
    char *text = calloc(json_array_size(m) + 1, 1024);
    if (!text) {
        json_decref(m);
        return errprintf(err, "out of memory");
    }
    /* every word was checked by the spec's rules: no blank, no shell character */
    json_array_foreach(m, i, e) len += (size_t)snprintf(
        text + len, 1024, "%s %s %s %s\n", json_string_value(json_object_get(e, "type")),
        json_string_value(json_object_get(e, "source")),
        json_string_value(json_object_get(e, "path")),
        json_string_value(json_object_get(e, "options")));
    json_decref(m);
    int rc = mtc_write_if_changed(path, text, err);
    free(text);
    return rc < 0 ? -1 : 0;
}

struct marker_job {
    struct provider *p;
    const struct head *c;
    const struct hstate *s;
    const char *cmd, *want;
    int *seen; /* 1: same content, 0: not */
};

/* One node's host: cat the marker (seen: 1 same, 0 not, -1 unreachable). */
static int t_marker(void *arg, size_t i, mtc_error_t *err)
{
    struct marker_job *j = arg;
    char *out = NULL;
    if (hosts_node_off(j->c, &j->s->nodes[i])) { /* powered down: checked at power-on */
        j->seen[i] = 1;
        return 0;
    }
    struct ssh_conn *ssh = hosts_ssh(j->p, j->s, j->s->nodes[i].host, err);
    int rc = ssh ? ssh_run(ssh, j->cmd, &out, MARKER_MS, 0, err) : -1;
    ssh_free(ssh);
    j->seen[i] = rc == 0 && out && strncmp(out, j->want, 32) == 0 && strlen(out) >= 32;
    if (rc < 0) /* unreachable: say so, it is not a storage fault */
        j->seen[i] = -1;
    free(out);
    return 0;
}

/* The marker into the experiment root here (before any agent looks for it). */
int hosts_storage_write(const struct head *c, const struct hstate *s, const json_t *spec,
                        mtc_error_t *err)
{
    char path[PLEN], want[33], dir[PLEN];
    if (hosts_storage_marker(c, s, spec, path, want, err) < 0)
        return -1;
    if (!path[0])
        return 0;
    const char *root = hosts_experiment_root(spec);
    snprintf(dir, sizeof(dir), "%s/.mtc", root);
    struct stat st;
    if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode))
        return errprintf(err,
                         "experimentRoot %s does not exist on the controller (mount the shared "
                         "storage there too)",
                         root);
    char text[40], mine[PLEN];
    snprintf(text, sizeof(text), "%s\n", want);
    /* where it is, first: teardown removes it */
    if (mtc_write_if_changed(head_path(c, mine, "storage.marker-path"), path, err) < 0)
        return -1;
    if (mtc_mkdir_p(dir, 0755) < 0 || mtc_write_file_atomic(path, text, 33, 0644) < 0)
        return errprintf(err, "cannot write the storage marker %s: %s", path, strerror(errno));
    return 0;
}

/* Write the marker here (again: it may have been removed), read it on every node's host. */
int hosts_storage_verify(struct provider *p, const struct head *c, const struct hstate *s,
                         const json_t *spec, mtc_error_t *err)
{
    char path[PLEN], want[33];
    if (hosts_storage_write(c, s, spec, err) < 0 ||
        hosts_storage_marker(c, s, spec, path, want, err) < 0)
        return -1;
    if (!path[0] || s->nnodes == 0)
        return 0;
    const char *root = hosts_experiment_root(spec);
    char *q = mtc_shell_quote(path), cmd[PLEN + 64];
    snprintf(cmd, sizeof(cmd), "cat -- %s", q ? q : "/nonexistent");
    free(q);
    int *seen = calloc(s->nnodes, sizeof(int));
    mtc_error_t *errs = calloc(s->nnodes, sizeof(*errs));
    if (!seen || !errs) {
        free(seen);
        free(errs);
        return errprintf(err, "out of memory");
    }
    struct marker_job j = {.p = p, .c = c, .s = s, .cmd = cmd, .want = want, .seen = seen};
    hosts_parallel(s->nnodes, t_marker, &j, errs);
    char bad[768] = "", gone[768] = "";
    for (size_t i = 0; i < s->nnodes; i++) {
        char *list = seen[i] < 0 ? gone : seen[i] == 0 ? bad : NULL;
        if (list && strlen(list) + strlen(s->nodes[i].host) + 80 < sizeof(bad))
            snprintf(list + strlen(list), sizeof(bad) - strlen(list), "%s%s (%s)",
                     *list ? ", " : "", s->nodes[i].host, s->nodes[i].name);
    }
    free(seen);
    free(errs);
    if (*bad)
        return errprintf(err,
                         "experimentRoot %s is not shared storage: host(s) %s do not see the "
                         "controller's marker %s (mount the same filesystem there)",
                         root, bad, path);
    if (*gone)
        return errprintf(err, "cannot check experimentRoot %s: host(s) %s do not answer", root,
                         gone);
    return 0;
}

/* The marker (its path recorded by verify) and <root>/.mtc when empty. */
void hosts_storage_forget(const struct head *c)
{
    char mine[PLEN];
    char *path = mtc_read_file(head_path(c, mine, "storage.marker-path"), NULL);
    if (path && path[0] == '/' && strstr(path, "/.mtc/")) {
        unlink(path);
        *strrchr(path, '/') = '\0';
        rmdir(path); /* <root>/.mtc, when no other cluster's marker is there */
    }
    free(path);
}

/* provider_ops.check_storage: the state's nodes against the stored spec. */
int hosts_check_storage(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err)
{
    struct head c;
    if (head_init(&c, p, id, err) < 0)
        return -1;
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s)
        return errprintf(err, "out of memory");
    int rc = hosts_state_load(&c, s) < 0
                 ? errprintf(err, "cluster %s has no node on a host yet", id)
                 : hosts_storage_verify(p, &c, s, spec, err);
    free(s);
    return rc;
}
