/* uri: enroot/pyxis image references — [docker://][USER@][REGISTRY#]IMAGE
 * [:TAG|@sha256:DIGEST] — told apart from file paths and split into the
 * registry, repository and tag or digest skopeo is given. Pure. */
#include "image/image.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int image_ref_is_path(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0)
        return 1;
    if (strncmp(s, "docker://", 9) == 0 || strncmp(s, "dockerd://", 10) == 0)
        return 0;
    return s[0] == '/' || strncmp(s, "./", 2) == 0 || strncmp(s, "../", 3) == 0 ||
           (n > 5 && strcmp(s + n - 5, ".sqsh") == 0) || (n > 9 && strcmp(s + n - 9, ".squashfs") == 0);
}

static int repo_char(int c)
{
    return islower(c) || isdigit(c) || c == '.' || c == '_' || c == '-' || c == '/';
}

static int host_char(int c)
{
    return isalnum(c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
}

/* s with control characters shown as '?', into buf (for one-line messages). */
static const char *printable(const char *s, char *buf, size_t len)
{
    size_t i = 0;
    for (; s[i] && i + 1 < len; i++)
        buf[i] = iscntrl((unsigned char)s[i]) || (unsigned char)s[i] >= 0x7f ? '?' : s[i];
    buf[i] = '\0';
    return buf;
}

int image_ref_parse(const char *s, struct image_ref *r, mtc_error_t *err)
{
    char pb[201];
    memset(r, 0, sizeof(*r));
    const char *shown = s ? s : "";
    size_t n = strlen(shown);
    if (n == 0)
        return errprintf(err, "empty image reference");
    if (n >= 512)
        return errprintf(err, "image %.60s...: reference too long", shown);
    for (size_t i = 0; i < n; i++)
        if (iscntrl((unsigned char)shown[i]) || shown[i] == ' ' || (unsigned char)shown[i] >= 0x7f)
            return errprintf(err, "image %.200s: a space or control character in the reference",
                             printable(shown, pb, sizeof(pb)));
    if (strstr(shown, ".."))
        return errprintf(err, "image %.200s: '..' in the reference", shown);
    const char *p = shown;
    if (strncmp(p, "docker://", 9) == 0)
        p += 9;
    else if (strstr(p, "://"))
        return errprintf(err, "image %.200s: unsupported scheme (docker:// only)", shown);
    const char *at = strchr(p, '@'), *hash = strchr(p, '#');
    /* USER@ comes before the registry's '#' (or the image); @sha256: is a digest */
    if (at && strncmp(at, "@sha256:", 8) != 0 && (!hash || at < hash)) {
        size_t u = (size_t)(at - p);
        if (u == 0 || u >= sizeof(r->user))
            return errprintf(err, "image %.200s: bad user before '@'", shown);
        memcpy(r->user, p, u);
        for (size_t i = 0; i < u; i++)
            if (!isalnum((unsigned char)r->user[i]) && !strchr("._-", r->user[i]))
                return errprintf(err, "image %.200s: bad user '%s'", shown, r->user);
        p = at + 1;
    }
    hash = strchr(p, '#');
    if (hash) {
        size_t h = (size_t)(hash - p);
        if (h == 0 || h >= sizeof(r->registry))
            return errprintf(err, "image %.200s: bad registry before '#'", shown);
        memcpy(r->registry, p, h);
        for (size_t i = 0; i < h; i++)
            if (!host_char((unsigned char)r->registry[i]))
                return errprintf(err, "image %.200s: bad registry '%s'", shown, r->registry);
        if (r->registry[0] == '-' || r->registry[0] == '.' || r->registry[0] == ':')
            return errprintf(err, "image %.200s: bad registry '%s'", shown, r->registry);
        p = hash + 1;
    } else {
        snprintf(r->registry, sizeof(r->registry), "%s", IMAGE_DOCKER_HUB);
    }
    const char *dig = strstr(p, "@sha256:");
    size_t end = dig ? (size_t)(dig - p) : strlen(p);
    if (dig) {
        if (!image_digest_valid(dig + 1))
            return errprintf(err, "image %.200s: bad digest (want @sha256: and 64 hex digits)",
                             shown);
        snprintf(r->digest, sizeof(r->digest), "%s", dig + 1);
    }
    /* the tag: after the last ':' that follows the last '/' */
    const char *slash = memrchr(p, '/', end);
    const char *colon = memchr(slash ? slash : p, ':', end - (size_t)((slash ? slash : p) - p));
    size_t rlen = colon ? (size_t)(colon - p) : end;
    if (colon) {
        size_t t = end - rlen - 1;
        if (t == 0 || t > 128)
            return errprintf(err, "image %.200s: bad tag", shown);
        memcpy(r->tag, colon + 1, t);
        r->tag[t] = '\0';
        for (size_t i = 0; i < t; i++)
            if (!isalnum((unsigned char)r->tag[i]) && !strchr("._-", r->tag[i]))
                return errprintf(err, "image %.200s: bad tag '%s'", shown, r->tag);
        if (r->tag[0] == '.' || r->tag[0] == '-')
            return errprintf(err, "image %.200s: bad tag '%s'", shown, r->tag);
    } else if (!dig) {
        snprintf(r->tag, sizeof(r->tag), "latest");
    }
    if (rlen == 0 || rlen + 10 >= sizeof(r->repo))
        return errprintf(err, "image %.200s: no image name", shown);
    char repo[sizeof(r->repo)];
    memcpy(repo, p, rlen);
    repo[rlen] = '\0';
    for (size_t i = 0; i < rlen; i++)
        if (!repo_char((unsigned char)repo[i]))
            return errprintf(err, "image %.200s: bad image name '%s' (lowercase, digits, ._-/)",
                             shown, repo);
    if (repo[0] == '/' || repo[rlen - 1] == '/' || strstr(repo, "//"))
        return errprintf(err, "image %.200s: bad image name '%s'", shown, repo);
    /* Docker Hub's official images live under library/ */
    if (strcmp(r->registry, IMAGE_DOCKER_HUB) == 0 && !strchr(repo, '/'))
        snprintf(r->repo, sizeof(r->repo), "library/%.240s", repo);
    else
        snprintf(r->repo, sizeof(r->repo), "%s", repo);
    return 0;
}

int image_ref_format(const struct image_ref *r, const char *digest, char *out, size_t len)
{
    /* skopeo's name for Docker Hub is docker.io */
    const char *reg = strcmp(r->registry, IMAGE_DOCKER_HUB) == 0 ? "docker.io" : r->registry;
    const char *d = digest ? digest : r->digest;
    int n = d && d[0] ? snprintf(out, len, "docker://%s/%s@%s", reg, r->repo, d)
                      : snprintf(out, len, "docker://%s/%s:%s", reg, r->repo, r->tag);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}
