/* import: `mtc image import` — an OCI layout, a docker-save archive or a root
 * directory into a squashfs image. Layers are applied in order with their
 * OCI/AUFS whiteouts, by tar (which also undoes their compression). */
#include "image/internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The listing of a tar archive: `tar -tv` with every name C-quoted (one
 * member a line; image_tar_entry_parse reads them). Caller frees. NULL with err. */
static char *tar_list(const char *file, const char *what, mtc_error_t *err)
{
    /* -P: names and link targets as stored (tar strips a leading "/" or "../"
     * when it extracts; the listing shows what the archive says) */
    char *argv[] = {"tar", "--quoting-style=c", "--numeric-owner", "-P", "-tvf", (char *)file,
                    NULL};
    char *out = NULL;
    char w[PATH_MAX + 64];
    snprintf(w, sizeof(w), "%s: not a tar archive", what);
    return image_tool(argv, w, &out, err) < 0 ? NULL : out;
}

/* The next member of a listing (strtok_r state in save), its name and link
 * target cleaned: NULL at the end; *bad set (and err filled) for a line that
 * does not parse or a name or target with "..". */
static struct image_tar_entry *next_member(char *listing, char **save, struct image_tar_entry *e,
                                           const char *what, int *bad, mtc_error_t *err)
{
    char *line = strtok_r(*save ? NULL : listing, "\n", save);
    if (!line)
        return NULL;
    if (image_tar_entry_parse(line, e) < 0) {
        *bad = errprintf(err, "%s: tar lists a member mtc cannot read: %.100s", what, line);
        return NULL;
    }
    if (image_member_clean(e->name) < 0) {
        *bad = errprintf(err, "%s: member \"%s\" leaves the image's root", what, e->name);
        return NULL;
    }
    if (e->type == 'h' && image_member_clean(e->link) < 0) {
        *bad = errprintf(err, "%s: member \"%s\" links to \"%s\", outside the image's root",
                         what, e->name, e->link);
        return NULL;
    }
    return e;
}

/* The first component of rel below root, up to and excluding its last, that
 * a write or a link would go through although it is not a directory: one the
 * lower layers hold as a symlink or file, unless this layer makes it a
 * directory (tar replaces it), or one this layer itself made a symlink or
 * file (kinds: this layer's members so far, name → type). Into at; 1 when
 * found, else 0. */
static int through_nondir(const char *root, const json_t *kinds, const char *rel, char *at,
                          size_t len)
{
    char path[PATH_MAX * 2], prefix[PATH_MAX];
    snprintf(prefix, sizeof(prefix), "%s", rel);
    for (char *p = prefix; (p = strchr(p, '/')); p++) {
        *p = '\0';
        const char *k = json_string_value(json_object_get(kinds, prefix));
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", root, prefix);
        int bad = k ? strcmp(k, "d") != 0 : lstat(path, &st) == 0 && !S_ISDIR(st.st_mode);
        if (bad) {
            snprintf(at, len, "%s", prefix);
            return 1;
        }
        *p = '/';
    }
    return 0;
}

/* Remove what a whiteout names, or empty a directory (opaque). Only inside
 * root: a target under a symlink of the lower layers is refused. */
static int whiteout_apply(const char *root, enum image_wh kind, const char *target,
                          mtc_error_t *err)
{
    char path[PATH_MAX * 2];
    if (snprintf(path, sizeof(path), "%s%s%s", root, *target ? "/" : "", target) >=
        (int)sizeof(path))
        return errprintf(err, "whiteout of /%s: name too long", target);
    if (*target && image_parent_unsafe(root, target))
        return errprintf(err, "whiteout of /%s goes through a symlink", target);
    if (kind == IMAGE_WH_FILE)
        return mtc_rm_rf(path) < 0 ? errprintf(err, "whiteout of /%s: %s", target, strerror(errno))
                                   : 0;
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0; /* nothing below it yet */
    DIR *d = opendir(path);
    if (!d)
        return errprintf(err, "opaque whiteout of /%s: %s", target, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        char child[PATH_MAX * 2 + 256];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
        if (mtc_rm_rf(child) < 0)
            rc = errprintf(err, "opaque whiteout of /%s: %s", target, strerror(errno));
    }
    closedir(d);
    return rc;
}

/* Check every member of a layer's listing, then apply its whiteouts: names
 * and hard links' targets stay inside the root and never go through a
 * symlink (of the lower layers or of this one), so tar never writes or links
 * outside the work directory. */
static int layer_prepare(const char *root, char *listing, const char *what, mtc_error_t *err)
{
    json_t *kinds = json_object();
    int rc = 0;
    char *save = NULL, at[PATH_MAX];
    struct image_tar_entry e;
    while (rc == 0 && next_member(listing, &save, &e, what, &rc, err)) {
        if (!*e.name)
            continue;
        char target[PATH_MAX];
        enum image_wh kind = image_whiteout(e.name, target, sizeof(target));
        if (kind != IMAGE_WH_NONE) {
            mtc_error_t we = {""};
            rc = whiteout_apply(root, kind, target, &we);
            if (rc < 0)
                errprintf(err, "%s: %s", what, we.text);
            continue;
        }
        if (strncmp(strrchr(e.name, '/') ? strrchr(e.name, '/') + 1 : e.name, ".wh.", 4) == 0) {
            rc = errprintf(err, "%s: bad whiteout \"%s\"", what, e.name);
            break;
        }
        if (through_nondir(root, kinds, e.name, at, sizeof(at)))
            rc = errprintf(err, "%s: member \"%s\" goes through the symlink /%s", what, e.name,
                           at);
        else if (e.type == 'h' && !*e.link)
            rc = errprintf(err, "%s: member \"%s\" is a hard link to the image's root", what,
                           e.name);
        else if (e.type == 'h' && through_nondir(root, kinds, e.link, at, sizeof(at)))
            rc = errprintf(err, "%s: member \"%s\" links to \"%s\" through the symlink /%s",
                           what, e.name, e.link, at);
        char t[2] = {e.type == 'd' ? 'd' : e.type == 'l' ? 'l' : 'f', '\0'};
        json_object_set_new(kinds, e.name, json_string(t));
    }
    json_decref(kinds);
    return rc;
}

static int layer_apply(const char *root, const char *file, const char *what, mtc_error_t *err)
{
    char *listing = tar_list(file, what, err);
    if (!listing)
        return -1;
    int rc = layer_prepare(root, listing, what, err);
    free(listing);
    if (rc < 0)
        return -1;
    char *argv[] = {
        "tar", "-xf", (char *)file, "-C", (char *)root, "--no-same-owner", "-p", "--exclude=.wh.*",
        NULL};
    return image_tool(argv, what, NULL, err);
}

static int blob_verify(const char *dir, const struct image_blob *b, const char *what,
                       mtc_error_t *err)
{
    char path[PATH_MAX * 2], got[72];
    snprintf(path, sizeof(path), "%s/%s", dir, b->path);
    if (!b->digest[0])
        return 0;
    if (mtc_sha256_file(path, got, err) < 0)
        return -1;
    if (strcmp(got, b->digest) != 0)
        return errprintf(err, "%s: digest mismatch: the manifest says %s, the blob is %s", what,
                         b->digest, got);
    return 0;
}

/* An OCI layout or docker-save directory into root; meta gets image.json. */
static int from_layout(const char *dir, const char *root, const char *source, json_t **meta,
                       mtc_error_t *err)
{
    struct image_plan *p = image_plan_read(dir, err);
    if (!p)
        return -1;
    char cfgpath[PATH_MAX * 2], what[128];
    json_t *cfg = NULL;
    int rc = -1;
    if (blob_verify(dir, &p->config, "the config", err) < 0)
        goto out;
    snprintf(cfgpath, sizeof(cfgpath), "%s/%s", dir, p->config.path);
    json_error_t je;
    if (!(cfg = json_load_file(cfgpath, 0, &je))) {
        errprintf(err, "the image config: %s", je.text);
        goto out;
    }
    if (!(*meta = image_meta_from_config(cfg, source, err)))
        goto out;
    for (size_t i = 0; i < p->nlayers; i++) {
        snprintf(what, sizeof(what), "layer %zu", i + 1);
        snprintf(cfgpath, sizeof(cfgpath), "%s/%s", dir, p->layers[i].path);
        if (blob_verify(dir, &p->layers[i], what, err) < 0 ||
            layer_apply(root, cfgpath, what, err) < 0)
            goto out;
    }
    rc = 0;
out:
    json_decref(cfg);
    image_plan_destroy(p);
    return rc;
}

/* A root directory: copied (the user's tree is not touched), its own
 * /etc/environment kept and recorded. */
static int from_rootfs(const char *dir, const char *root, const char *source, json_t **meta,
                       mtc_error_t *err)
{
    char src[PATH_MAX + 8], envpath[PATH_MAX * 2];
    snprintf(src, sizeof(src), "%s/.", dir);
    char *argv[] = {"cp", "-a", "--reflink=auto", src, (char *)root, NULL};
    if (image_tool(argv, "copying the root directory", NULL, err) < 0)
        return -1;
    snprintf(envpath, sizeof(envpath), "%s/etc/environment", root);
    struct stat st;
    char *text =
        lstat(envpath, &st) == 0 && S_ISREG(st.st_mode) ? mtc_read_file(envpath, NULL) : NULL;
    json_t *cfg = json_pack("{s:{s:o}}", "config", "Env", image_env_parse(text));
    free(text);
    *meta = image_meta_from_config(cfg, source, err);
    json_decref(cfg);
    return *meta ? 0 : -1;
}

static int has(const char *dir, const char *name)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return mtc_path_exists(p);
}

int image_import(const char *src, const char *out, mtc_error_t *err)
{
    return image_import_digest(src, out, NULL, err);
}

int image_import_digest(const char *src, const char *out, const char *digest, mtc_error_t *err)
{
    return image_import_procs(src, out, digest, 0, err);
}

int image_import_procs(const char *src, const char *out, const char *digest, unsigned procs,
                       mtc_error_t *err)
{
    char work[PATH_MAX], root[PATH_MAX + 8], unpack[PATH_MAX + 8], source[PATH_MAX];
    struct stat st;
    json_t *meta = NULL;
    if (stat(src, &st) < 0)
        return errprintf(err, "%s: %s", src, strerror(errno));
    if (image_out_check(out, err) < 0)
        return -1;
    if (!realpath(src, source))
        snprintf(source, sizeof(source), "%s", src);
    if (image_workdir(work, sizeof(work), err) < 0)
        return -1;
    snprintf(root, sizeof(root), "%s/root", work);
    snprintf(unpack, sizeof(unpack), "%s/src", work);
    int rc = -1;
    if (mkdir(root, 0755) < 0) {
        errprintf(err, "%s: %s", root, strerror(errno));
        goto out;
    }
    const char *layout = src;
    if (!S_ISDIR(st.st_mode)) {
        /* a tarball of a layout: checked like a layer (into the empty
         * directory it is unpacked into), then unpacked */
        char *listing = tar_list(src, src, err);
        if (!listing)
            goto out;
        int bad = mkdir(unpack, 0700) < 0 ? errprintf(err, "%s: %s", unpack, strerror(errno))
                                          : layer_prepare(unpack, listing, src, err);
        free(listing);
        char *argv[] = {"tar", "-xf", (char *)src, "-C", unpack, "--no-same-owner", NULL};
        if (bad < 0)
            goto out;
        if (image_tool(argv, src, NULL, err) < 0)
            goto out;
        layout = unpack;
    }
    int is_layout = has(layout, "index.json") || has(layout, "manifest.json");
    mtc_error_t e = {""};
    int r = digest && image_layout_is(layout, digest, &e) < 0 ? -1
            : is_layout ? from_layout(layout, root, source, &meta, &e)
            : S_ISDIR(st.st_mode) ? from_rootfs(src, root, source, &meta, &e)
                                  : errprintf(&e, "not an OCI image layout or docker-save archive "
                                                  "(no index.json or manifest.json)");
    if (r < 0) {
        errprintf(err, "%s: %s", src, e.text);
        goto out;
    }
    if (image_write_config(root, meta, !is_layout, err) < 0 || image_squash(root, out, procs, err) < 0)
        goto out;
    rc = 0;
out:
    json_decref(meta);
    mtc_rm_rf(work);
    return rc;
}
