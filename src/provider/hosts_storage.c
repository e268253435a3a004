/* hosts_storage: the experiment root of a cluster on hosts must be shared
 * storage — the controller writes a marker there (random content, kept for
 * the life of the cluster) and every node's host must read the same content
 * at the same path; and the node's mounts file for mtc-host. */
#include "provider/hosts.h"

#include <dirent.h>
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

/* ---- slurmctld's StateSaveLocation, shared with the backup controller ---- */

void hosts_state_dir(const struct head *c, const struct hstate *s, char path[PLEN])
{
    if (s->state_dir[0])
        snprintf(path, PLEN, "%s", s->state_dir);
    else
        head_path(c, path, "state");
}

/* The entries of dir (not . and ..): counted, and with remove, removed.
 * The count, or -1 when dir cannot be read (0 when it does not exist). */
static long entries(const char *dir, int remove)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    long n = 0;
    char path[PLEN];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        n++;
        if (remove && snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
            mtc_rm_rf(path);
    }
    closedir(d);
    return n;
}

/* "<id> <uid>" of the cluster whose marker is in dir ("" none) into owner. */
static void state_owner(const char *dir, char *owner, size_t len)
{
    char path[PLEN];
    snprintf(path, sizeof(path), "%s/" HOSTS_STATE_MARKER, dir);
    char *text = mtc_read_file(path, NULL);
    const char *sp = text ? strchr(text, ' ') : NULL;
    sp = sp ? strchr(sp + 1, ' ') : NULL;
    snprintf(owner, len, "%.*s", text && sp ? (int)(sp - text) : 0, text ? text : "");
    free(text);
}

int hosts_state_dir_prepare(const struct head *c, const struct hstate *s, char nonce[33],
                            mtc_error_t *err)
{
    char dir[PLEN], path[PLEN], owner[128], mine[128];
    nonce[0] = '\0';
    if (!s->state_dir[0])
        return 0;
    hosts_state_dir(c, s, dir);
    snprintf(mine, sizeof(mine), "%s %s", c->id, s->uid);
    if (mtc_mkdir_p(dir, 0700) < 0)
        return errprintf(err, "controller.stateSaveLocation %s: cannot make it here: %s", dir,
                         strerror(errno));
    state_owner(dir, owner, sizeof(owner));
    if (owner[0] && strcmp(owner, mine) != 0)
        return errprintf(err,
                         "controller.stateSaveLocation %s holds the state of another cluster "
                         "(%s); give each cluster its own",
                         dir, owner);
    if (!owner[0] && entries(dir, 0) != 0)
        return errprintf(err,
                         "controller.stateSaveLocation %s holds files mtc did not put there; "
                         "name an empty directory",
                         dir);
    /* a new nonce each time: a stale copy on a host's own disk never passes */
    char text[200];
    if (mtc_random_hex(nonce, 16) < 0)
        return errprintf(err, "cannot make a marker: %s", strerror(errno));
    int n = snprintf(text, sizeof(text), "%s %s\n", mine, nonce);
    snprintf(path, sizeof(path), "%s/" HOSTS_STATE_MARKER, dir);
    if (mtc_write_file_atomic(path, text, (size_t)n, 0644) < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

int hosts_state_dir_verify(struct provider *p, const struct head *c, const struct hstate *s,
                           const char *nonce, mtc_error_t *err)
{
    struct hbackup bk;
    char dir[PLEN], path[PLEN + 32], cmd[PLEN + 64];
    if (!hosts_backup_of(s, &bk) || !nonce[0])
        return 0;
    hosts_state_dir(c, s, dir);
    snprintf(path, sizeof(path), "%s/" HOSTS_STATE_MARKER, dir);
    char *q = mtc_shell_quote(path), *out = NULL;
    snprintf(cmd, sizeof(cmd), "cat -- %s", q ? q : "/nonexistent");
    free(q);
    struct ssh_conn *ssh = hosts_ssh(p, s, bk.host, err);
    int rc = ssh ? ssh_run(ssh, cmd, &out, MARKER_MS, 0, err) : -1;
    ssh_free(ssh);
    const char *got = out ? strrchr(out, ' ') : NULL;
    int same = rc == 0 && got && strncmp(got + 1, nonce, 32) == 0;
    free(out);
    if (rc < 0)
        return errprintf(err,
                         "cannot check controller.stateSaveLocation %s: the backup controller's "
                         "host %s does not answer",
                         dir, bk.host);
    if (!same)
        return errprintf(err,
                         "controller.stateSaveLocation %s is not shared storage: the backup "
                         "controller's host %s does not see the controller's marker %s (mount "
                         "the same filesystem there)",
                         dir, bk.host, path);
    return 0;
}

void hosts_state_dir_forget(const struct head *c, const struct hstate *s)
{
    char dir[PLEN];
    if (!s->state_dir[0])
        return; /* <cluster dir>/state goes with the cluster's directory */
    hosts_state_dir(c, s, dir);
    char owner[128], mine[128];
    state_owner(dir, owner, sizeof(owner));
    snprintf(mine, sizeof(mine), "%s %s", c->id, s->uid);
    if (strcmp(owner, mine) != 0)
        return; /* never made ours: nothing of ours there */
    entries(dir, 1);
    rmdir(dir); /* fails, and stays, when it is a mount point */
}
