/* file: directories, whole-file reads, atomic writes, data-file lookup. */
#include "common/common.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mtc_mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

int mtc_path_clean(const char *path, int fold, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (!fold) {
                errno = EINVAL;
                return -1;
            }
            while (o > 0 && out[--o] != '/')
                ;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o + 1 + n + 1 > len) {
                errno = ENAMETOOLONG;
                return -1;
            }
            out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return 0;
}

int mtc_path_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int mtc_path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

char *mtc_read_fd(int fd, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return NULL;
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                goto error;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            goto error;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
error : {
    int saved = errno;
    free(buf);
    errno = saved;
    return NULL;
}
}

char *mtc_read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = mtc_read_fd(fd, len);
    int saved = errno;
    close(fd);
    errno = saved;
    return buf;
}

int mtc_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int mtc_fsync_parent(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int mtc_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    return mtc_write_file_atomic_opt(path, data, len, mode, 0);
}

int mtc_write_file_atomic_opt(const char *path, const void *data, size_t len, mode_t mode,
                              int flags)
{
    char tmp[PATH_MAX];
    /* a unique temporary name (mkostemp: O_EXCL, mode 0600 until the
     * fchmod below): threads of one process may write the same file */
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (mtc_write_all(fd, data, len) < 0 || fchmod(fd, mode) < 0 ||
        ((flags & MTC_WRITE_NO_FSYNC) != MTC_WRITE_NO_FSYNC && fsync(fd) < 0))
        goto error;
    if (close(fd) < 0) {
        fd = -1;
        goto error;
    }
    fd = -1;
    if (rename(tmp, path) < 0)
        goto error;
    return flags & MTC_WRITE_NO_DIRSYNC ? 0 : mtc_fsync_parent(path);
error : {
    int saved = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    errno = saved;
    return -1;
}
}

int mtc_copy_file(const char *from, const char *to, mode_t mode, mtc_error_t *err)
{
    size_t len;
    char *s = mtc_read_file(from, &len);
    if (!s)
        return errprintf(err, "%s: %s", from, strerror(errno));
    int rc = mtc_write_file_atomic(to, s, len, mode);
    int e = errno;
    free(s);
    errno = e;
    return rc < 0 ? errprintf(err, "%s: %s", to, strerror(e)) : 0;
}

int mtc_write_file_fmt(const char *path, mode_t mode, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    int rc = mtc_write_file_atomic(path, s, (size_t)n, mode);
    int saved = errno;
    free(s);
    errno = saved;
    return rc;
}

int mtc_name_valid(const char *s, size_t maxlen)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > maxlen || s[0] < 'a' || s[0] > 'z' || s[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return 0;
    }
    return 1;
}

void mtc_camel_case(const char *in, char *out, size_t len)
{
    size_t j = 0;
    int up = 0;
    for (; *in && j + 1 < len; in++) {
        if (*in == '_' && j > 0) {
            up = 1;
            continue;
        }
        out[j++] = up ? (char)toupper((unsigned char)*in) : *in;
        up = 0;
    }
    out[j] = '\0';
}

int mtc_exe_dir(char *buf, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) {
        errno = ENOENT;
        return -1;
    }
    *slash = '\0';
    if (snprintf(buf, len, "%s", exe) >= (int)len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

char *mtc_data_path(const char *name)
{
    char exe[PATH_MAX], *out = NULL;
    const char *env = getenv("MTC_DATA_DIR");
    if (env && *env) {
        if (asprintf(&out, "%s/%s", env, name) < 0)
            return NULL;
        if (mtc_path_exists(out))
            return out;
        free(out);
        out = NULL;
    }
    if (mtc_exe_dir(exe, sizeof(exe)) < 0)
        return NULL;
    /* installed: PREFIX/bin -> PREFIX/share/mtc; source tree: build/bin -> data */
    const char *rel[] = {"../share/mtc", "../../data", "../.."};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        if (asprintf(&out, "%s/%s/%s", exe, rel[i], name) < 0)
            return NULL;
        if (mtc_path_exists(out))
            return out;
        free(out);
        out = NULL;
    }
    errno = ENOENT;
    return NULL;
}

int mtc_sha256_fd(int fd, char out[72])
{
    return mtc_sha256_fd_from(fd, 0, out);
}

int mtc_sha256_fd_from(int fd, off_t at, char out[72])
{
    enum { BUF = 1 << 20 };
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char *buf = malloc(BUF), md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    ssize_t r = 0;
    int ok = ctx && buf && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    while (ok && (r = pread(fd, buf, BUF, at)) > 0) {
        ok = EVP_DigestUpdate(ctx, buf, (size_t)r);
        at += r;
    }
    ok = ok && r == 0 && EVP_DigestFinal_ex(ctx, md, &n) && n == 32;
    int e = errno;
    EVP_MD_CTX_free(ctx);
    free(buf);
    if (!ok) {
        errno = r < 0 ? e : EIO;
        return -1;
    }
    memcpy(out, "sha256:", 7);
    for (unsigned int i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
    return 0;
}

int mtc_sha256_file(const char *path, char out[72], mtc_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errprintf(err, "%s: %s", path, strerror(errno));
    int rc = mtc_sha256_fd(fd, out);
    close(fd);
    return rc < 0 ? errprintf(err, "%s: cannot read or hash it", path) : 0;
}

int mtc_is_squashfs(const char *path)
{
    /* non-blocking: a FIFO named as an image must not hang the caller */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    char magic[4];
    int yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, magic, 4, 0) == 4 &&
              memcmp(magic, "hsqs", 4) == 0;
    close(fd);
    return yes;
}

/* Write path when its content differs (common.h). */
int mtc_write_if_changed(const char *path, const char *text, mtc_error_t *err)
{
    char *old = mtc_read_file(path, NULL);
    int same = old && strcmp(old, text) == 0;
    free(old);
    if (same)
        return 0;
    if (mtc_write_file_atomic(path, text, strlen(text), 0644) < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    return 1;
}
