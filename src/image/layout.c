/* layout: reading image layouts (OCI index → manifest → blobs, docker save's
 * manifest.json), tar member names and whiteouts, and an image's config as
 * image.json and /etc/environment. No subprocesses here. */
#include "image/image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

int image_digest_valid(const char *d)
{
    if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
        return 0;
    for (const char *p = d + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

int image_tar_unescape(char *s)
{
    static const char from[] = "abfnrtv\\\"'?", to[] = "\a\b\f\n\r\t\v\\\"'?";
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (*r != '\\') {
            *w++ = *r;
            continue;
        }
        r++;
        const char *k = *r ? strchr(from, *r) : NULL;
        if (k) {
            *w++ = to[k - from];
        } else if (r[0] >= '0' && r[0] <= '7' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' &&
                   r[2] <= '7') {
            *w++ = (char)((r[0] - '0') * 64 + (r[1] - '0') * 8 + (r[2] - '0'));
            r += 2;
        } else {
            errno = EINVAL;
            return -1;
        }
    }
    *w = '\0';
    return 0;
}

/* A C-quoted string at *p ("..." with escapes) unquoted in place; *p moves
 * past its closing quote. The string, or NULL. */
static char *c_string(char **p)
{
    char *s = *p;
    if (*s != '"')
        return NULL;
    char *r = s + 1, *end = r;
    for (; *end && *end != '"'; end++)
        if (*end == '\\' && end[1])
            end++;
    if (*end != '"')
        return NULL;
    *end = '\0';
    *p = end + 1;
    return image_tar_unescape(r) < 0 ? NULL : r;
}

int image_tar_entry_parse(char *line, struct image_tar_entry *e)
{
    /* mode, owner/group, size, date, time: no quote before the name */
    char *q = strchr(line, '"');
    memset(e, 0, sizeof(*e));
    e->type = line[0];
    if (!q || !strchr("-dlhcbpC", e->type) || !(e->name = c_string(&q)))
        goto bad;
    static const char *const arrows[] = {" -> ", " link to "};
    int want = e->type == 'l' ? 0 : e->type == 'h' ? 1 : -1;
    if (want < 0)
        return *q ? (errno = EINVAL, -1) : 0;
    size_t n = strlen(arrows[want]);
    if (strncmp(q, arrows[want], n) != 0)
        goto bad;
    q += n;
    if (!(e->link = c_string(&q)) || *q)
        goto bad;
    return 0;
bad:
    errno = EINVAL;
    return -1;
}

int image_member_clean(char *name)
{
    char *w = name;
    const char *r = name;
    while (*r) {
        while (*r == '/')
            r++;
        const char *end = strchrnul(r, '/');
        size_t n = (size_t)(end - r);
        if (n == 2 && r[0] == '.' && r[1] == '.') {
            errno = EINVAL;
            return -1;
        }
        if (n > 0 && !(n == 1 && r[0] == '.')) {
            if (w != name)
                *w++ = '/';
            memmove(w, r, n);
            w += n;
        }
        r = end;
    }
    *w = '\0';
    return 0;
}

enum image_wh image_whiteout(const char *name, char *target, size_t len)
{
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    int dlen = slash ? (int)(slash - name) : 0;
    if (target && len)
        target[0] = '\0';
    if (strncmp(base, ".wh.", 4) != 0)
        return IMAGE_WH_NONE;
    if (strcmp(base, ".wh..wh..opq") == 0) {
        snprintf(target, len, "%.*s", dlen, name);
        return IMAGE_WH_OPAQUE;
    }
    const char *victim = base + 4;
    if (!*victim || strcmp(victim, ".") == 0 || strcmp(victim, "..") == 0)
        return IMAGE_WH_NONE;
    snprintf(target, len, "%.*s%s%s", dlen, name, slash ? "/" : "", victim);
    return IMAGE_WH_FILE;
}

/* --- layouts ------------------------------------------------------------- */

void image_plan_destroy(struct image_plan *p)
{
    if (!p)
        return;
    int e = errno;
    free(p->config.path);
    for (size_t i = 0; i < p->nlayers; i++)
        free(p->layers[i].path);
    free(p->layers);
    free(p);
    errno = e;
}

/* A path named by a layout must stay inside it and be a regular file there. */
static int blob_check(const char *dir, struct image_blob *b, const char *what, mtc_error_t *err)
{
    char clean[PATH_MAX], full[PATH_MAX * 2];
    snprintf(clean, sizeof(clean), "%s", b->path);
    if (b->path[0] == '/' || image_member_clean(clean) < 0 || !clean[0])
        return errprintf(err, "the manifest names %s \"%s\", which is not a path inside the image",
                         what, b->path);
    snprintf(full, sizeof(full), "%s/%s", dir, clean);
    /* docker save links a repeated layer to its first copy: links are fine
     * while they stay inside the layout */
    char real[PATH_MAX], top[PATH_MAX];
    struct stat st;
    if (stat(full, &st) < 0 || !S_ISREG(st.st_mode) || !realpath(full, real) || !realpath(dir, top))
        return errprintf(err, "the manifest names %s %s, which is not in the image", what,
                         b->digest[0] ? b->digest : b->path);
    size_t tl = strlen(top);
    if (strncmp(real, top, tl) != 0 || real[tl] != '/')
        return errprintf(err, "the manifest names %s \"%s\", which leads out of the image", what,
                         b->path);
    return 0;
}

/* blobs/sha256/<hex> of a digest, refusing anything else. */
static int blob_from_digest(struct image_blob *b, const char *digest, const char *what,
                            mtc_error_t *err)
{
    if (!image_digest_valid(digest))
        return errprintf(err, "%s: digest \"%s\" is not sha256:<64 hex digits>", what,
                         digest ? digest : "(none)");
    snprintf(b->digest, sizeof(b->digest), "%s", digest);
    if (asprintf(&b->path, "blobs/sha256/%s", digest + 7) < 0) {
        b->path = NULL;
        return errprintf(err, "out of memory");
    }
    return 0;
}

/* The digest a docker-save path carries: "<hex>.json", "<hex>/layer.tar" or
 * "blobs/sha256/<hex>". */
static void digest_of_path(const char *path, char out[72])
{
    const char *p = strncmp(path, "blobs/sha256/", 13) == 0 ? path + 13 : path;
    size_t n = strspn(p, "0123456789abcdef");
    const char *rest = p + n;
    out[0] = '\0';
    if (n == 64 && (!*rest || strcmp(rest, ".json") == 0 || strcmp(rest, "/layer.tar") == 0)) {
        memcpy(out, "sha256:", 7);
        memcpy(out + 7, p, 64);
        out[71] = '\0';
    }
}

/* A JSON file of the layout: a regular file that stays inside dir (a link
 * in an archive that root unpacks must not make it read, and quote in an
 * error, a file outside: /etc/shadow as index.json). */
static json_t *load_json(const char *dir, const char *name, mtc_error_t *err)
{
    char path[PATH_MAX * 2], real[PATH_MAX], top[PATH_MAX];
    json_error_t je;
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    size_t tl = realpath(dir, top) ? strlen(top) : 0;
    if (!tl || !realpath(path, real) || strncmp(real, top, tl) != 0 || real[tl] != '/') {
        errprintf(err, "%s: not a file inside the image", name);
        return NULL;
    }
    int fd = open(real, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        errprintf(err, "%s: not a regular file", name);
        return NULL;
    }
    json_t *j = json_loadfd(fd, 0, &je);
    close(fd);
    if (!j)
        errprintf(err, "%s: %s", name, je.text);
    return j;
}

static struct image_plan *plan_docker(const char *dir, mtc_error_t *err)
{
    json_t *m = load_json(dir, "manifest.json", err), *cfg = NULL;
    struct image_plan *p = calloc(1, sizeof(*p));
    if (!m || !p)
        goto error;
    json_t *img = json_array_get(m, 0);
    const char *config = json_string_value(json_object_get(img, "Config"));
    json_t *layers = json_object_get(img, "Layers");
    if (!config || !json_is_array(layers)) {
        errprintf(err, "manifest.json: not a docker-save manifest (no Config and Layers)");
        goto error;
    }
    p->config.path = strdup(config);
    digest_of_path(config, p->config.digest);
    if (!p->config.path || blob_check(dir, &p->config, "the config", err) < 0)
        goto error;
    p->nlayers = json_array_size(layers);
    p->layers = calloc(p->nlayers ? p->nlayers : 1, sizeof(*p->layers));
    if (!p->layers || !(cfg = load_json(dir, p->config.path, err)))
        goto error;
    json_t *diff_ids = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
    for (size_t i = 0; i < p->nlayers; i++) {
        struct image_blob *b = &p->layers[i];
        const char *path = json_string_value(json_array_get(layers, i));
        if (!path) {
            errprintf(err, "manifest.json: Layers[%zu] is not a string", i);
            goto error;
        }
        b->path = strdup(path);
        digest_of_path(path, b->digest);
        if (!b->digest[0] && image_digest_valid(json_string_value(json_array_get(diff_ids, i))))
            snprintf(b->digest, sizeof(b->digest), "%s",
                     json_string_value(json_array_get(diff_ids, i)));
        if (!b->path || blob_check(dir, b, "the layer", err) < 0)
            goto error;
    }
    json_decref(cfg);
    json_decref(m);
    return p;
error:
    json_decref(cfg);
    json_decref(m);
    image_plan_destroy(p);
    return NULL;
}

static int is_index_type(const json_t *mt)
{
    const char *s = json_string_value(mt);
    return s && (strcmp(s, OCI_INDEX) == 0 || strcmp(s, DOCKER_LIST) == 0);
}

/* The image manifest an index leads to: the linux/amd64 entry when entries
 * name platforms, else the first; nested indexes followed. */
static json_t *oci_manifest(const char *dir, mtc_error_t *err)
{
    json_t *idx = load_json(dir, "index.json", err);
    for (int depth = 0; idx && depth < 4; depth++) {
        json_t *ms = json_object_get(idx, "manifests"), *d, *pick = json_array_get(ms, 0);
        size_t i;
        json_array_foreach(ms, i, d)
        {
            json_t *pl = json_object_get(d, "platform");
            const char *os = json_string_value(json_object_get(pl, "os"));
            const char *arch = json_string_value(json_object_get(pl, "architecture"));
            if (os && arch && strcmp(os, "linux") == 0 && strcmp(arch, "amd64") == 0) {
                pick = d;
                break;
            }
        }
        if (!pick) {
            errprintf(err, "index.json: no manifests");
            break;
        }
        struct image_blob b = {0};
        if (blob_from_digest(&b, json_string_value(json_object_get(pick, "digest")), "index.json",
                             err) < 0 ||
            blob_check(dir, &b, "the manifest", err) < 0) {
            free(b.path);
            break;
        }
        int is_index = is_index_type(json_object_get(pick, "mediaType"));
        json_t *next = load_json(dir, b.path, err);
        free(b.path);
        json_decref(idx);
        idx = next;
        if (!idx)
            return NULL;
        if (!is_index && !is_index_type(json_object_get(idx, "mediaType")))
            return idx;
    }
    if (idx)
        errprintf(err, "index.json: no image manifest (indexes nested too deep)");
    json_decref(idx);
    return NULL;
}

static struct image_plan *plan_oci(const char *dir, mtc_error_t *err)
{
    json_t *m = oci_manifest(dir, err);
    struct image_plan *p = calloc(1, sizeof(*p));
    if (!m || !p)
        goto error;
    p->oci = 1;
    json_t *layers = json_object_get(m, "layers"), *l;
    if (!json_is_object(json_object_get(m, "config")) || !json_is_array(layers)) {
        errprintf(err, "the image manifest has no config and layers");
        goto error;
    }
    if (blob_from_digest(&p->config,
                         json_string_value(json_object_get(json_object_get(m, "config"), "digest")),
                         "the manifest's config", err) < 0 ||
        blob_check(dir, &p->config, "the config", err) < 0)
        goto error;
    p->nlayers = json_array_size(layers);
    p->layers = calloc(p->nlayers ? p->nlayers : 1, sizeof(*p->layers));
    if (!p->layers)
        goto error;
    size_t i;
    json_array_foreach(layers, i, l)
    {
        char what[64];
        snprintf(what, sizeof(what), "layer %zu", i + 1);
        if (blob_from_digest(&p->layers[i], json_string_value(json_object_get(l, "digest")), what,
                             err) < 0 ||
            blob_check(dir, &p->layers[i], "the layer", err) < 0)
            goto error;
    }
    json_decref(m);
    return p;
error:
    json_decref(m);
    image_plan_destroy(p);
    return NULL;
}

struct image_plan *image_plan_read(const char *dir, mtc_error_t *err)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/index.json", dir);
    if (mtc_path_exists(path))
        return plan_oci(dir, err);
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    if (mtc_path_exists(path))
        return plan_docker(dir, err);
    errprintf(err,
              "not an OCI image layout or docker-save archive (no index.json or manifest.json)");
    return NULL;
}

/* --- config -------------------------------------------------------------- */

char *image_env_format(const json_t *env, mtc_error_t *err)
{
    size_t cap = 1, i;
    json_t *v;
    json_array_foreach(env, i, v)
    {
        const char *s = json_string_value(v);
        if (!s || !strchr(s, '=') || s[0] == '=')
            return errprintf(err, "Env[%zu] is not KEY=VALUE", i), NULL;
        if (strchr(s, '\n'))
            return errprintf(err,
                             "Env %.*s: the value holds a newline, which /etc/environment "
                             "cannot keep",
                             (int)(strchr(s, '=') - s), s),
                   NULL;
        cap += strlen(s) + 1;
    }
    char *out = malloc(cap), *w = out;
    if (!out)
        return errprintf(err, "out of memory"), NULL;
    json_array_foreach(env, i, v) w += sprintf(w, "%s\n", json_string_value(v));
    *w = '\0';
    return out;
}

json_t *image_env_parse(const char *text)
{
    json_t *a = json_array();
    const char *p = text ? text : "";
    while (*p) {
        const char *end = strchrnul(p, '\n');
        char line[8192];
        snprintf(line, sizeof(line), "%.*s", (int)(end - p), p);
        p = *end ? end + 1 : end;
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (strncmp(s, "export ", 7) == 0)
            s += 7;
        char *eq = strchr(s, '=');
        if (!*s || *s == '#' || !eq || eq == s)
            continue;
        size_t vl = strlen(eq + 1);
        if (vl >= 2 && (eq[1] == '"' || eq[1] == '\'') && eq[vl] == eq[1]) {
            memmove(eq + 1, eq + 2, vl - 2);
            eq[vl - 1] = '\0';
        }
        json_array_append_new(a, json_string(s));
    }
    return a;
}

/* A string array member of the config, or [] when absent or null. */
static int str_array(const json_t *c, const char *key, json_t *meta, const char *as,
                     mtc_error_t *err)
{
    json_t *v = json_object_get(c, key), *e;
    size_t i;
    if (v && !json_is_null(v) && !json_is_array(v))
        return errprintf(err, "the image config's %s is not a list of strings", key);
    json_array_foreach(v, i, e) if (!json_is_string(e)) return errprintf(
        err, "the image config's %s is not a list of strings", key);
    json_object_set_new(meta, as, json_is_array(v) ? json_deep_copy(v) : json_array());
    return 0;
}

json_t *image_meta_from_config(const json_t *config, const char *source, mtc_error_t *err)
{
    const json_t *c = json_object_get(config, "config");
    if (!c || json_is_null(c))
        c = json_object_get(config, "container_config");
    json_t *meta = json_object();
    char now[40];
    if (str_array(c, "Env", meta, "env", err) < 0 ||
        str_array(c, "Entrypoint", meta, "entrypoint", err) < 0 ||
        str_array(c, "Cmd", meta, "cmd", err) < 0)
        goto error;
    char *envtext = image_env_format(json_object_get(meta, "env"), err);
    if (!envtext)
        goto error;
    free(envtext);
    json_t *wd = json_object_get(c, "WorkingDir");
    if (wd && !json_is_string(wd) && !json_is_null(wd)) {
        errprintf(err, "the image config's WorkingDir is not a string");
        goto error;
    }
    const char *w = json_string_value(wd);
    json_object_set_new(meta, "workingDir", json_string(w && *w ? w : "/"));
    json_object_set_new(meta, "source", json_string(source ? source : ""));
    json_object_set_new(meta, "created",
                        json_string(mtc_time_rfc3339(mtc_now_ms(), now, sizeof(now))));
    return meta;
error:
    json_decref(meta);
    return NULL;
}

int image_layout_is(const char *dir, const char *digest, mtc_error_t *err)
{
    mtc_error_t e;
    json_t *idx = load_json(dir, "index.json", &e);
    json_t *ms = json_object_get(idx, "manifests");
    const char *d = json_string_value(json_object_get(json_array_get(ms, 0), "digest"));
    int ok = json_array_size(ms) == 1 && d && strcmp(d, digest) == 0;
    json_decref(idx);
    if (!ok)
        return errprintf(err, "the layout does not name %s", digest);
    char path[PATH_MAX * 2], got[72];
    snprintf(path, sizeof(path), "%s/blobs/sha256/%s", dir, digest + 7);
    struct stat st;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && mtc_sha256_fd(fd, got) == 0 &&
         strcmp(got, digest) == 0;
    if (fd >= 0)
        close(fd);
    return ok ? 0 : errprintf(err, "the manifest's digest does not match %s", digest);
}
