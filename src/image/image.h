/* image: squashfs container images for the container plugin — import from an
 * OCI image layout, a docker-save archive or a root directory, the trainer
 * image, and inspection. An image keeps its config in /etc/environment
 * (KEY=VALUE lines) and /.mtc/image.json. */
#ifndef MTC_IMAGE_H
#define MTC_IMAGE_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/common.h"

/* Import src — an OCI image layout (directory or tarball), a docker-save
 * archive, or a root filesystem directory — into the squashfs image out.
 * Work happens in a temporary directory under $TMPDIR, removed before return;
 * out is written as out.tmp and renamed, so a failure leaves neither.
 * 0, or -1 with err (one line naming what was wrong). */
int image_import(const char *src, const char *out, mtc_error_t *err);

/* image_import of an OCI layout that must be the image of digest: its
 * index.json names that one manifest and the manifest's bytes hash to it
 * (checked on what was unpacked, before anything is applied); digest NULL:
 * image_import. 0, or -1 with err. */
int image_import_digest(const char *src, const char *out, const char *digest, mtc_error_t *err);
/* image_import_digest with mksquashfs limited to procs processors
 * (`-processors N`; 0: mksquashfs's default, every core). */
int image_import_procs(const char *src, const char *out, const char *digest, unsigned procs,
                       mtc_error_t *err);
/* ENROOT_MAX_PROCESSORS of the environment list env (NULL-terminated
 * NAME=VALUE entries) into *procs, as enroot reads it: a positive integer
 * limits the import's parallel tools to that many processors; unset, empty or
 * 0 is no limit (*procs 0). 0, or -1 + err naming the variable and its value. */
int image_max_processors(char *const env[], unsigned *procs, mtc_error_t *err);
/* The layout in dir is the image of digest (as above). 0, or -1 with err. */
int image_layout_is(const char *dir, const char *digest, mtc_error_t *err);

/* The trainer image: trainer (the mtc-train binary) as /usr/bin/mtc-train with
 * its shared libraries and the loader, Open MPI's and PMIx's plugins, config and
 * help files, and a minimal userland (dash as /bin/sh, coreutils). version (may
 * be NULL) goes into /etc/os-release. 0, or -1 with err; out as image_import. */
int image_build_trainer(const char *trainer, const char *version, const char *out,
                        mtc_error_t *err);

/* What an image file holds: {"path", "size", "digest" ("sha256:<hex>" of the
 * whole file), "env", "workingDir", "entrypoint", "cmd", "source", "created"}
 * (the last six from /.mtc/image.json and /etc/environment; null or [] when the
 * image has none). Caller decrefs. NULL with err when path is not a readable
 * squashfs image. */
json_t *image_inspect(const char *path, mtc_error_t *err);

/* --- registry images (uri.c, pull.c, cache.c) ---------------------------- */

#define IMAGE_DOCKER_HUB "registry-1.docker.io"
/* An enroot/pyxis reference [docker://][USER@][REGISTRY#]IMAGE[:TAG|@sha256:D]. */
struct image_ref {
    char user[64];      /* USER@ ("" when none) */
    char registry[256]; /* host[:port]; IMAGE_DOCKER_HUB when none was given */
    char repo[256];     /* "library/ubuntu" for Docker Hub's one-word names */
    char tag[130];      /* "latest" when neither tag nor digest; "" with a digest alone */
    char digest[72];    /* "sha256:<hex>" when pinned, else "" */
};
/* 1 when s names a file, as pyxis tells them (absolute, ./ or ../, or ending
 * in .sqsh/.squashfs; "docker://" is never a path), 0 when a reference. Pure. */
int image_ref_is_path(const char *s);
/* Parse s into r. 0, or -1 with err (one line naming s) for a space, a
 * control character or "..", a scheme other than docker://, a bad user,
 * registry, name, tag or digest. Pure. */
int image_ref_parse(const char *s, struct image_ref *r, mtc_error_t *err);
/* skopeo's form of r: docker://HOST/REPO:TAG, or docker://HOST/REPO@DIGEST
 * with digest (NULL: r's own). 0, or -1 (ENAMETOOLONG). */
int image_ref_format(const struct image_ref *r, const char *digest, char *out, size_t len);

/* How a pull runs. The registry is reached by a child process with the
 * user's ids (uid/gid when the caller is root; (uid_t)-1: the caller's own),
 * home and environment list env ("NAME=VALUE", NULL-terminated; only
 * ENROOT_CONFIG_PATH, ENROOT_ALLOW_HTTP, TMPDIR, SSL_CERT_FILE/_DIR and the
 * proxies are taken): enroot's credentials are read and evaluated there. */
struct image_pull_opts {
    uid_t uid;
    gid_t gid;
    const char *home;
    char *const *env;
    const char *arch; /* NULL: the node's (image_pull_arch) */
    long long max_bytes; /* what the user's side may send at most (0: no limit) */
};
/* "amd64", "arm64"... for this machine. */
const char *image_pull_arch(void);
/* The digest of r's image manifest for linux/<arch> (one `skopeo inspect
 * --raw`: a manifest list is resolved here). shown names the image in
 * messages. 0, or -1 + err (one line: unreachable registry, 401/403 and
 * whether credentials were used, no such tag, no linux/<arch> entry...). */
int image_pull_resolve(const struct image_ref *r, const struct image_pull_opts *o,
                       const char *shown, char digest[72], mtc_error_t *err);
/* Pull digest of r (skopeo copy, as the user) into the new file tar (created
 * here, O_EXCL), check it is the layout of that digest, import it into the
 * squashfs out (written as out.tmp, renamed). tar is removed. 0, or -1 + err. */
int image_pull_fetch(const struct image_ref *r, const struct image_pull_opts *o, const char *shown,
                     const char *digest, const char *tar, const char *out, mtc_error_t *err);

/* The entry of enroot's credentials text (.credentials) for r, read as
 * enroot reads it: one a line, "machine HOST login L password P" by position;
 * HOST is r's registry with or without its port (Docker Hub: also docker.io,
 * index.docker.io, auth.docker.io); r's USER@ picks the line with that login.
 * *login and *password point into text (modified); *eval is 1 when the
 * password starts with '$': then it is the rest of the line, for the shell to
 * evaluate as the user. 1 found, 0 not. Pure. */
int image_creds_lookup(char *text, const struct image_ref *r, char **login, char **password,
                       int *eval);

/* The image cache (cache.c) in dir — a directory only root can change (a
 * trusted walk; made when missing): ref resolved to its digest (one inspect,
 * as the user of o), then the cached squashfs reused, or pulled once under the
 * digest's lock (every node sharing dir waits for the one pull), imported,
 * and stored by rename; least recently used images no step holds (a shared
 * flock on the file marks one in use) are evicted to keep dir under max_gb
 * (0: no limit). path gets dir/images/HEX.sqsh; *pulled (may be NULL) 1 when
 * this call pulled. 0, or -1 + err (one line naming the image; nothing is
 * left in the cache but work under dir/tmp that a kill interrupted). */
int image_cache_get(const char *dir, double max_gb, const char *ref, const struct image_pull_opts *o,
                    char *path, size_t len, int *pulled, mtc_error_t *err);
/* The cached images, most recently used first: [{digest, reference, path,
 * size, lastUsed, inUse}]. Caller decrefs; NULL + err. */
json_t *image_cache_list(const char *dir, mtc_error_t *err);
/* Evict least recently used images not in use until at most keep_gb remain
 * (0: all such), and a killed pull's work older than a day. 0/-1 + err. */
int image_cache_prune(const char *dir, double keep_gb, size_t *removed, mtc_error_t *err);

/* --- the pieces, exposed for the unit tests ----------------------------- */

/* A blob of an image layout: its path relative to the layout's root, and its
 * digest ("sha256:<hex>"; "" when the layout does not say it). */
struct image_blob {
    char *path;
    char digest[72];
};
/* What to apply: the config and the layers, bottom first. */
struct image_plan {
    struct image_blob config;
    struct image_blob *layers;
    size_t nlayers;
    int oci; /* 1: OCI layout (index.json), 0: docker save (manifest.json) */
};
/* Read the plan of the layout in dir: index.json → manifest → config + layers
 * (OCI), else manifest.json (docker save; layer digests from the config's
 * rootfs.diff_ids where the paths do not carry them). Every blob named must be
 * a file in dir. Caller destroys. NULL with err. */
struct image_plan *image_plan_read(const char *dir, mtc_error_t *err);
void image_plan_destroy(struct image_plan *p);

/* 1 when d is "sha256:" and 64 lowercase hex digits, else 0. */
int image_digest_valid(const char *d);

/* Undo GNU tar's escape quoting (--quoting-style=escape) of a listed member
 * name, in place. 0, or -1 (EINVAL) on a malformed escape. */
int image_tar_unescape(char *s);
/* One line of `tar --quoting-style=c --numeric-owner -tv`: the member's type
 * (the mode's first letter: '-' file, 'd', 'l' symlink, 'h' hard link, 'c',
 * 'b', 'p'...), its name and, for a link, its target — both unquoted (and
 * pointing into line, which is modified). 0, or -1 (EINVAL) when the line is
 * not of that shape. */
struct image_tar_entry {
    char type;
    char *name, *link; /* link: NULL unless 'l' or 'h' */
};
int image_tar_entry_parse(char *line, struct image_tar_entry *e);
/* A member name made relative and canonical, in place: leading "/" and "./"
 * dropped, "//" and "/./" collapsed, trailing "/" dropped ("" is the root).
 * -1 (EINVAL) when a component is "..". */
int image_member_clean(char *name);

enum image_wh { IMAGE_WH_NONE, IMAGE_WH_FILE, IMAGE_WH_OPAQUE };
/* Classify a cleaned member name: IMAGE_WH_FILE for "D/.wh.NAME" (target gets
 * "D/NAME": remove it), IMAGE_WH_OPAQUE for "D/.wh..wh..opq" (target gets "D",
 * "" for the root: empty it), else IMAGE_WH_NONE. A whiteout of "." or ".." is
 * IMAGE_WH_NONE with target "" (refused by the caller). */
enum image_wh image_whiteout(const char *name, char *target, size_t len);

/* The image.json object for a config (OCI or docker: its "config" member's
 * Env, WorkingDir, Entrypoint, Cmd) and source. Caller decrefs. NULL with err
 * when a field has the wrong type or an Env value holds a newline. */
json_t *image_meta_from_config(const json_t *config, const char *source, mtc_error_t *err);
/* /etc/environment text (KEY=VALUE lines) from a JSON array of "KEY=VALUE".
 * Caller frees. NULL with err for a value with a newline or an entry with no KEY. */
char *image_env_format(const json_t *env, mtc_error_t *err);
/* The KEY=VALUE lines of /etc/environment text (blank lines and # comments
 * skipped; "export " and one level of quotes dropped) as a JSON array. Caller decrefs. */
json_t *image_env_parse(const char *text);

#endif
