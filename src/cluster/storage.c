/* storage: the spec's shared storage — NFS (Filestore-style) and Lustre
 * entries, the home directory storage, mount options and paths, the
 * experiment root — checked strictly (every value reaches a root command line
 * on the hosts), and the mounts a node of a pool gets on a cluster on hosts. */
#include "cluster/cluster.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define PATH_LEN 512

/* Directories a mount must not cover or sit inside: the system's, and mtc's
 * own on a host (clean removes those with rm -rf). */
static const char *const reserved[] = {"/bin",  "/boot",        "/dev",         "/etc",
                                       "/lib",  "/lib32",       "/lib64",       "/libx32",
                                       "/proc", "/root",        "/run",         "/sbin",
                                       "/sys",  "/usr",         "/var/lib/mtc", "/var/lib/slurm",
                                       "/var/spool", "/var/log", NULL};

/* An absolute path of [A-Za-z0-9/._+-], no empty, "." or ".." component, no
 * trailing '/'; up to 255. */
static int clean_path(const char *s)
{
    size_t n = strlen(s);
    if (n < 2 || n > 255 || s[0] != '/' || s[n - 1] == '/')
        return 0;
    for (const char *c = s; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("/._+-", *c))
            return 0;
    for (const char *c = s; c; c = strchr(c + 1, '/')) {
        size_t k = strcspn(c + 1, "/");
        if (k == 0 || (k == 1 && c[1] == '.') || (k == 2 && c[1] == '.' && c[2] == '.'))
            return 0;
    }
    return 1;
}

/* A mount point (or experiment root): clean, and off the reserved directories. */
int cluster_mount_path_bad(const char *s, char *why, size_t len)
{
    if (!clean_path(s)) {
        snprintf(why, len,
                 "must be an absolute path of up to 255 of [A-Za-z0-9/._+-] (no \"..\", no "
                 "trailing /)");
        return 1;
    }
    for (const char *const *r = reserved; *r; r++)
        if (mtc_path_under(s, *r) || strcmp(s, "/var") == 0) {
            snprintf(why, len, "\"%s\" is a system directory (or mtc's own on a host)", s);
            return 1;
        }
    return 0;
}

/* A cloud resource name ("projects/p/locations/l/instances/i"): kept, not mounted. */
static int cloud_name(const char *s)
{
    if (strncmp(s, "projects/", 9) != 0 || strlen(s) > 255)
        return 0;
    for (const char *c = s; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("/._-", *c))
            return 0;
    return 1;
}

/* ADDRESS:/share, ADDRESS a host name or IPv4 address, or [IPv6]. */
int cluster_nfs_source_valid(const char *s)
{
    const char *colon = strstr(s, ":/");
    char host[256];
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host))
        return 0;
    if (s[0] == '[') { /* [IPv6]:/share */
        if (colon[-1] != ']')
            return 0;
        snprintf(host, sizeof(host), "%.*s", (int)(colon - s - 2), s + 1);
        if (!strchr(host, ':'))
            return 0;
    } else {
        snprintf(host, sizeof(host), "%.*s", (int)(colon - s), s);
        if (strchr(host, ':'))
            return 0;
    }
    return cluster_host_valid(host) && (strcmp(colon + 1, "/") == 0 || clean_path(colon + 1));
}

/* One Lustre NID: host@net (net [a-z][a-z0-9]*: tcp, tcp1, o2ib, o2ib3, ...). */
static int nid_valid(const char *s, size_t n)
{
    char buf[300];
    if (n == 0 || n >= sizeof(buf))
        return 0;
    snprintf(buf, sizeof(buf), "%.*s", (int)n, s);
    char *at = strchr(buf, '@');
    if (!at || strchr(at + 1, '@'))
        return 0;
    *at = '\0';
    const char *net = at + 1;
    size_t k = 0;
    if (!islower((unsigned char)net[0]))
        return 0;
    while (islower((unsigned char)net[k]) || isdigit((unsigned char)net[k]))
        k++;
    if (net[k] || k > 16 || strchr(buf, ':'))
        return 0;
    return cluster_host_valid(buf);
}

/* NIDs, then ":/fsname". */
int cluster_lustre_source_valid(const char *s)
{
    const char *fs = strstr(s, ":/");
    if (!fs)
        return 0;
    /* NIDs separated by ',' (one server's) or ':' (failover servers) */
    for (const char *p = s; p < fs;) {
        size_t n = strcspn(p, ",:");
        if (p + n > fs || !nid_valid(p, n))
            return 0;
        p += n + 1;
    }
    const char *name = fs + 2;
    size_t n = strlen(name);
    if (n < 1 || n > 8)
        return 0;
    for (const char *c = name; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-')
            return 0;
    return 1;
}

/* Options a spec may not pass to mount(8): they name programs or files mount
 * runs or opens as root, let a filesystem grant root (suid, dev), or let
 * users mount. mtc adds nosuid,nodev itself. */
static const char *const refused_opts[] = {"helper", "uhelper", "suid",      "dev",
                                          "owner",  "user",    "users",     "group",
                                          "loop",   "offset",  "sizelimit", "context",
                                          "fscontext", "defcontext", "rootcontext", NULL};

/* Each comma-separated option: safe characters, and not a refused one. */
int cluster_mount_options_bad(const char *s, char *why, size_t len)
{
    if (strlen(s) > 200) {
        snprintf(why, len, "must be at most 200 bytes");
        return 1;
    }
    const char *p = s;
    while (*p) {
        size_t n = strcspn(p, ",");
        char opt[210];
        snprintf(opt, sizeof(opt), "%.*s", (int)n, p);
        if (n == 0) {
            snprintf(why, len, "empty option (a comma list: \"vers=4.1,nconnect=8\")");
            return 1;
        }
        for (const char *c = opt; *c; c++)
            if (!isalnum((unsigned char)*c) && !strchr("_.=-", *c)) {
                snprintf(why, len, "option \"%s\": only [A-Za-z0-9_.=-]", opt);
                return 1;
            }
        char key[210];
        snprintf(key, sizeof(key), "%.*s", (int)strcspn(opt, "="), opt);
        for (const char *const *r = refused_opts; *r; r++)
            if (strcmp(key, *r) == 0 || strncmp(key, "x-", 2) == 0) {
                snprintf(why, len,
                         "option \"%s\" is refused (mtc mounts nosuid,nodev and passes no helper, "
                         "file or user option)",
                         key);
                return 1;
            }
        p += n;
        if (*p == ',' && !*++p) {
            snprintf(why, len, "empty option (a comma list: \"vers=4.1,nconnect=8\")");
            return 1;
        }
    }
    return 0;
}

/* ---- the rules of the spec's fields (spec.c: cluster_hook_storage) ---- */

const struct cluster_storage_rule
    cluster_rule_nfs = {.valid = cluster_nfs_source_valid,
                        .want = "an NFS export ADDRESS:/share (10.0.0.2:/home, "
                                "nfs.example.com:/vol1) or a Filestore instance name "
                                "(projects/P/locations/L/instances/I)"},
    cluster_rule_lustre = {.valid = cluster_lustre_source_valid,
                           .want = "a Lustre target MGS@NET:/fsname (10.0.0.5@tcp:/lfs, fsname up "
                                   "to 8 of [A-Za-z0-9_-]) or a Managed Lustre instance name"},
    cluster_rule_path = {.bad = cluster_mount_path_bad},
    cluster_rule_options = {.bad = cluster_mount_options_bad};

/* The spec tables' hook: the field's rule (.arg) on its string value. */
int cluster_hook_storage(const struct schema_field *f, json_t **v, const char *path,
                         mtc_error_t *err)
{
    const struct cluster_storage_rule *rule = f->arg;
    const char *s = json_string_value(*v);
    char why[400];
    if (rule->valid) /* a mount source; a cloud instance name is kept (hosts refuse it later) */
        return rule->valid(s) || cloud_name(s)
                   ? 0
                   : schema_error(err, path, "must be %s, got \"%.100s\"", rule->want, s);
    return rule->bad(s, why, sizeof(why)) ? schema_error(err, path, "%s", why) : 0;
}

/* ---- the mounts of a node ---- */

static int add_mount(json_t *out, const char *type, const char *src, const char *at,
                     const char *opts)
{
    char all[260];
    snprintf(all, sizeof(all), "nosuid,nodev%s%s", opts && *opts ? "," : "", opts ? opts : "");
    return json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s}", "type", type, "source", src,
                                                "path", at, "options", all));
}

/* A node pool's storage lists. */
static const struct kind {
    const char *list, *key, *type, *want;
    int (*valid)(const char *s);
} kinds[] = {
    {"filestores", "filestore", "nfs", "an NFS export ADDRESS:/share", cluster_nfs_source_valid},
    {"lustres", "lustre", "lustre", "a Lustre target MGS@NET:/fsname",
     cluster_lustre_source_valid},
};

typedef int (*entry_fn)(const struct kind *k, size_t j, const json_t *e, void *arg);

/* fn for every entry of the pool's lists, filestores first; the first
 * nonzero return ends the walk and is returned. */
static int each_entry(const json_t *pool, entry_fn fn, void *arg)
{
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        size_t j;
        json_t *e;
        json_array_foreach(json_object_get(pool, kinds[k].list), j, e)
        {
            int rc = fn(&kinds[k], j, e, arg);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* A string member of o, or NULL. */
static const char *sget(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* entry_fn: the entry as a mount, unless it names a cloud instance. */
static int mount_of(const struct kind *k, size_t j, const json_t *e, void *arg)
{
    (void)j;
    const char *src = sget(e, k->key), *at = sget(e, "mountPath");
    if (src && at && k->valid(src)) /* a cloud instance name is not mounted */
        add_mount(arg, k->type, src, at, sget(e, "mountOptions"));
    return 0;
}

/* Home first, then the pool's entries. */
json_t *cluster_spec_mounts(const json_t *spec, const char *pool_id)
{
    json_t *out = json_array();
    const json_t *ss = json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec");
    const char *home = sget(ss, "homeDirectoryStorage");
    if (home && cluster_nfs_source_valid(home))
        add_mount(out, "nfs", home, "/home", sget(ss, "homeDirectoryMountOptions"));
    each_entry(cluster_spec_pool(spec, pool_id), mount_of, out);
    return out;
}

/* ---- rules across the spec for clusters on hosts ---- */

struct pool_check {
    size_t pool;
    int on_hosts;
    const char *seen[64]; /* the pool's mount paths so far */
    size_t nseen;
    mtc_error_t *err;
};

/* entry_fn: a mount source on hosts, and a path not mounted twice. */
static int check_entry(const struct kind *k, size_t j, const json_t *e, void *arg)
{
    struct pool_check *pc = arg;
    char path[PATH_LEN];
    const char *src = sget(e, k->key), *at = sget(e, "mountPath");
    snprintf(path, sizeof(path), "nodePools[%zu].%s[%zu].", pc->pool, k->list, j);
    if (pc->on_hosts && src && !k->valid(src))
        return schema_error(pc->err, strcat(path, k->key),
                            "a cluster on hosts mounts %s; \"%.100s\" names a cloud instance",
                            k->want, src);
    for (size_t q = 0; at && q < pc->nseen; q++)
        if (strcmp(pc->seen[q], at) == 0)
            return schema_error(pc->err, strcat(path, "mountPath"),
                                "\"%s\" is mounted twice on the pool's nodes", at);
    if (at && pc->nseen < sizeof(pc->seen) / sizeof(pc->seen[0]))
        pc->seen[pc->nseen++] = at;
    return 0;
}

/* On hosts every storage entry is mounted: it must be a mount source, not a
 * cloud instance name; no two mounts of a node on one path. */
int cluster_spec_storage_check(const json_t *spec, mtc_error_t *err)
{
    const json_t *ss = json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec");
    const char *home = sget(ss, "homeDirectoryStorage");
    int on_hosts = cluster_spec_on_hosts(spec);
    if (on_hosts && home && !cluster_nfs_source_valid(home))
        return schema_error(err, "orchestratorSpec.slurmSpec.homeDirectoryStorage",
                            "a cluster on hosts mounts an NFS export ADDRESS:/share at /home; "
                            "\"%.100s\" names a cloud instance",
                            home);
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(spec, "nodePools"), i, p)
    {
        struct pool_check pc = {.pool = i, .on_hosts = on_hosts, .err = err};
        if (home)
            pc.seen[pc.nseen++] = "/home";
        if (each_entry(p, check_entry, &pc))
            return -1;
    }
    return 0;
}
