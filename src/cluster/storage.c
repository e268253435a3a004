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

/* 1 when path is dir or below it. */
static int under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int cluster_mount_path_bad(const char *s, char *why, size_t len)
{
    if (!clean_path(s)) {
        snprintf(why, len,
                 "must be an absolute path of up to 255 of [A-Za-z0-9/._+-] (no \"..\", no "
                 "trailing /)");
        return 1;
    }
    for (const char *const *r = reserved; *r; r++)
        if (under(s, *r) || (strcmp(s, "/var") == 0)) {
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

/* ---- hooks for the spec's tables (spec.c) ---- */

int cluster_hook_nfs(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (cluster_nfs_source_valid(s) || cloud_name(s))
        return 0;
    return schema_error(err, path,
                        "must be an NFS export ADDRESS:/share (10.0.0.2:/home, "
                        "nfs.example.com:/vol1) or a Filestore instance name (projects/P/"
                        "locations/L/instances/I), got \"%.100s\"",
                        s);
}

int cluster_hook_lustre(const struct schema_field *f, json_t **v, const char *path,
                        mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (cluster_lustre_source_valid(s) || cloud_name(s))
        return 0;
    return schema_error(err, path,
                        "must be a Lustre target MGS@NET:/fsname (10.0.0.5@tcp:/lfs, fsname up "
                        "to 8 of [A-Za-z0-9_-]) or a Managed Lustre instance name, got \"%.100s\"",
                        s);
}

int cluster_hook_mount_path(const struct schema_field *f, json_t **v, const char *path,
                            mtc_error_t *err)
{
    (void)f;
    char why[200];
    return cluster_mount_path_bad(json_string_value(*v), why, sizeof(why))
               ? schema_error(err, path, "%s", why)
               : 0;
}

int cluster_hook_mount_options(const struct schema_field *f, json_t **v, const char *path,
                               mtc_error_t *err)
{
    (void)f;
    char why[200];
    return cluster_mount_options_bad(json_string_value(*v), why, sizeof(why))
               ? schema_error(err, path, "%s", why)
               : 0;
}

int cluster_hook_experiment_root(const struct schema_field *f, json_t **v, const char *path,
                                 mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (!clean_path(s))
        return schema_error(err, path,
                            "must be an absolute path of up to 255 of [A-Za-z0-9/._+-] (no "
                            "\"..\", no trailing /)");
    for (const char *const *r = reserved; *r; r++)
        if (under(s, *r))
            return schema_error(err, path, "\"%s\" is a system directory (or mtc's own on a host)",
                                s);
    return 0;
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

json_t *cluster_spec_mounts(const json_t *spec, const char *pool_id)
{
    json_t *out = json_array();
    const json_t *ss = json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec");
    const char *home = json_string_value(json_object_get(ss, "homeDirectoryStorage"));
    if (home && cluster_nfs_source_valid(home))
        add_mount(out, "nfs", home, "/home",
                  json_string_value(json_object_get(ss, "homeDirectoryMountOptions")));
    static const char *const kinds[][3] = {{"filestores", "filestore", "nfs"},
                                           {"lustres", "lustre", "lustre"}};
    const json_t *pool = cluster_spec_pool(spec, pool_id);
    for (int k = 0; k < 2; k++) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(pool, kinds[k][0]), i, e)
        {
            const char *src = json_string_value(json_object_get(e, kinds[k][1]));
            const char *at = json_string_value(json_object_get(e, "mountPath"));
            if (src && at && (k ? cluster_lustre_source_valid(src) : cluster_nfs_source_valid(src)))
                add_mount(out, kinds[k][2], src, at,
                          json_string_value(json_object_get(e, "mountOptions")));
        }
    }
    return out;
}

/* ---- rules across the spec for clusters on hosts ---- */

/* On hosts every storage entry is mounted: it must be a mount source, not a
 * cloud instance name; no two mounts of a node on one path. */
int cluster_spec_storage_check(const json_t *spec, mtc_error_t *err)
{
    char path[PATH_LEN];
    const json_t *ss = json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec");
    const char *home = json_string_value(json_object_get(ss, "homeDirectoryStorage"));
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
        static const char *const kinds[][2] = {{"filestores", "filestore"}, {"lustres", "lustre"}};
        const char *seen[64];
        size_t nseen = 0;
        if (home)
            seen[nseen++] = "/home";
        for (int k = 0; k < 2; k++) {
            size_t j;
            json_t *e;
            json_array_foreach(json_object_get(p, kinds[k][0]), j, e)
            {
                const char *src = json_string_value(json_object_get(e, kinds[k][1]));
                const char *at = json_string_value(json_object_get(e, "mountPath"));
                snprintf(path, sizeof(path), "nodePools[%zu].%s[%zu]", i, kinds[k][0], j);
                if (on_hosts && src &&
                    !(k ? cluster_lustre_source_valid(src) : cluster_nfs_source_valid(src)))
                    return schema_error(err, strcat(path, k ? ".lustre" : ".filestore"),
                                        "a cluster on hosts mounts %s; \"%.100s\" names a "
                                        "cloud instance",
                                        k ? "a Lustre target MGS@NET:/fsname"
                                          : "an NFS export ADDRESS:/share",
                                        src);
                for (size_t q = 0; at && q < nseen; q++)
                    if (strcmp(seen[q], at) == 0)
                        return schema_error(err, strcat(path, ".mountPath"),
                                            "\"%s\" is mounted twice on the pool's nodes", at);
                if (at && nseen < 64)
                    seen[nseen++] = at;
            }
        }
    }
    return 0;
}
