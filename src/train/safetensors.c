/* safetensors: write (sorted, space-padded header, contiguous offsets) and mmap-read with
 * validation of the Hugging Face safetensors format (formats.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/data.h"

#define ST_MAX_HEADER (100u << 20) /* same cap as the reference implementation */

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},
    {"I16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"U16", 2}, {"U32", 4},
    {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

size_t st_dtype_size(const char *dtype)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, dtype) == 0)
            return dtypes[i].size;
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const struct st_tensor *const *)a)->name,
                  (*(const struct st_tensor *const *)b)->name);
}

/* Bytes of t's shape at es bytes an element into *bytes (elements into *n when non-NULL);
 * -1 when the product does not fit a size_t (a shape of 2^62 F32 wraps to 0 bytes). */
static int shape_bytes(const struct st_tensor *t, size_t es, size_t *n, size_t *bytes)
{
    size_t e = 1;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0 || mtc_size_mul(e, (size_t)t->shape[d], &e) < 0)
            return -1;
    if (n)
        *n = e;
    return mtc_size_mul(e, es, bytes);
}

int st_write(const char *path, const struct st_tensor *t, int n, mtc_error_t *err)
{
    const struct st_tensor **s = malloc((size_t)(n ? n : 1) * sizeof *s);
    json_t *h = json_object();
    char *hdr = NULL, *tmp = NULL;
    FILE *f = NULL;
    int rc = -1;
    if (!s || !h) {
        errprintf(err, "%s: out of memory", path);
        goto out;
    }
    for (int i = 0; i < n; i++)
        s[i] = &t[i];
    qsort(s, (size_t)n, sizeof *s, cmp_name);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const char *dt = s[i]->dtype[0] ? s[i]->dtype : "F32";
        size_t es = st_dtype_size(dt);
        if (!es || s[i]->ndim < 0 || s[i]->ndim > 8) {
            errprintf(err, "%s: tensor %s: bad dtype %s or ndim %d", path, s[i]->name, dt,
                      s[i]->ndim);
            goto out;
        }
        size_t bytes;
        if (shape_bytes(s[i], es, NULL, &bytes) < 0 || bytes != s[i]->nbytes ||
            (i > 0 && !strcmp(s[i]->name, s[i - 1]->name)) || !strcmp(s[i]->name, "__metadata__")) {
            errprintf(err, "%s: tensor %s: size %zu does not match its shape, or duplicate name",
                      path, s[i]->name, s[i]->nbytes);
            goto out;
        }
        json_t *shape = json_array();
        for (int d = 0; d < s[i]->ndim; d++)
            json_array_append_new(shape, json_integer(s[i]->shape[d]));
        json_object_set_new(h, s[i]->name,
                            json_pack("{s:s, s:o, s:[I,I]}", "dtype", dt, "shape", shape,
                                      "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + s[i]->nbytes)));
        off += s[i]->nbytes;
    }
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
    hdr = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
    if (!hdr || asprintf(&tmp, "%s.tmp", path) < 0) {
        tmp = NULL;
        errprintf(err, "%s: out of memory", path);
        goto out;
    }
    size_t hl = strlen(hdr), padded = (hl + 7) & ~(size_t)7;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    if (!(f = fopen(tmp, "wb")))
        goto ioerr;
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(hdr, 1, hl, f) != hl)
        goto ioerr;
    for (size_t i = hl; i < padded; i++)
        if (fputc(' ', f) == EOF)
            goto ioerr;
    for (int i = 0; i < n; i++)
        if (s[i]->nbytes && fwrite(s[i]->data, 1, s[i]->nbytes, f) != s[i]->nbytes)
            goto ioerr;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        goto ioerr;
    if (fclose(f) != 0) {
        f = NULL;
        goto ioerr;
    }
    f = NULL;
    if (rename(tmp, path) < 0)
        goto ioerr;
    rc = 0;
    goto out;
ioerr:
    errprintf(err, "%s: %s", path, strerror(errno));
    if (f)
        fclose(f);
    f = NULL;
    unlink(tmp);
out:
    free(tmp);
    free(hdr);
    json_decref(h);
    free(s);
    return rc;
}

static int cmp_offset(const void *a, const void *b)
{
    const struct st_tensor *x = a, *y = b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/* Parse one header entry into t; data offsets are checked against datalen. */
static int parse_entry(const char *path, const char *key, json_t *v, unsigned char *data,
                       size_t datalen, struct st_tensor *t, mtc_error_t *err)
{
    const char *dt;
    json_t *shape, *offs;
    json_error_t je;
    if (json_unpack_ex(v, &je, JSON_STRICT, "{s:s, s:o, s:o}", "dtype", &dt, "shape", &shape,
                       "data_offsets", &offs) < 0)
        return errprintf(err, "%s: tensor %s: %s", path, key, je.text);
    size_t es = st_dtype_size(dt);
    if (!es || strlen(dt) >= sizeof t->dtype)
        return errprintf(err, "%s: tensor %s: unknown dtype %s", path, key, dt);
    if (!json_is_array(shape) || json_array_size(shape) > 8)
        return errprintf(err, "%s: tensor %s: bad shape", path, key);
    strcpy(t->dtype, dt);
    t->ndim = (int)json_array_size(shape);
    for (int d = 0; d < t->ndim; d++) {
        json_t *e = json_array_get(shape, (size_t)d);
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return errprintf(err, "%s: tensor %s: bad shape", path, key);
        t->shape[d] = json_integer_value(e);
    }
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(b) ||
        !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b) || (size_t)json_integer_value(e) > datalen)
        return errprintf(err, "%s: tensor %s: data_offsets outside the data (%zu bytes)", path, key,
                         datalen);
    t->nbytes = (size_t)(json_integer_value(e) - json_integer_value(b));
    size_t n, bytes;
    if (shape_bytes(t, es, &n, &bytes) < 0)
        return errprintf(err, "%s: tensor %s: shape too large (its size overflows)", path, key);
    if (bytes != t->nbytes)
        return errprintf(err, "%s: tensor %s: %zu bytes for shape of %zu %s elements", path, key,
                         t->nbytes, n, dt);
    t->data = data + json_integer_value(b);
    if (!(t->name = strdup(key)))
        return errprintf(err, "%s: out of memory", path);
    return 0;
}

struct st_file *st_open(const char *path, mtc_error_t *err)
{
    struct st_file *f = calloc(1, sizeof *f);
    json_t *h = NULL;
    if (!f) {
        errprintf(err, "%s: out of memory", path);
        return NULL;
    }
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        errprintf(err, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        goto error;
    }
    if (st.st_size < 8) {
        close(fd);
        errprintf(err, "%s: too short for a safetensors file", path);
        goto error;
    }
    f->map_len = (size_t)st.st_size;
    f->map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        errprintf(err, "%s: mmap: %s", path, strerror(errno));
        goto error;
    }
    const unsigned char *p = f->map;
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
        hl |= (uint64_t)p[i] << (8 * i);
    if (hl > ST_MAX_HEADER || 8 + hl > f->map_len) {
        errprintf(err, "%s: header size %llu exceeds the file (%zu bytes)", path,
                  (unsigned long long)hl, f->map_len);
        goto error;
    }
    json_error_t je;
    if (!(h = json_loadb((const char *)p + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &je)) ||
        !json_is_object(h)) {
        errprintf(err, "%s: bad header JSON: %s", path, h ? "not an object" : je.text);
        goto error;
    }
    unsigned char *data = (unsigned char *)f->map + 8 + hl;
    size_t datalen = f->map_len - 8 - (size_t)hl;
    if (!(f->t = calloc(json_object_size(h) + 1, sizeof *f->t))) {
        errprintf(err, "%s: out of memory", path);
        goto error;
    }
    const char *key;
    json_t *v;
    json_object_foreach(h, key, v)
    {
        if (!strcmp(key, "__metadata__")) {
            f->metadata = json_incref(v);
            continue;
        }
        if (parse_entry(path, key, v, data, datalen, &f->t[f->n], err) < 0)
            goto error;
        f->n++;
    }
    /* Tensors must tile the data region exactly: contiguous from 0, no gaps or overlap. */
    qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_offset);
    unsigned char *at = data;
    for (int i = 0; i < f->n; i++) {
        if ((unsigned char *)f->t[i].data != at) {
            errprintf(err, "%s: tensor %s: data_offsets leave a gap or overlap", path,
                      f->t[i].name);
            goto error;
        }
        at += f->t[i].nbytes;
    }
    if (at != data + datalen) {
        errprintf(err, "%s: %zu bytes of data after the last tensor", path,
                  (size_t)(data + datalen - at));
        goto error;
    }
    json_decref(h);
    return f;
error:
    json_decref(h);
    st_close(f);
    return NULL;
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}

void st_close(struct st_file *f)
{
    if (!f)
        return;
    int e = errno;
    for (int i = 0; i < f->n; i++)
        free(f->t[i].name);
    /* entries parsed before a failure also own their names */
    if (f->t && f->t[f->n].name)
        free(f->t[f->n].name);
    free(f->t);
    json_decref(f->metadata);
    if (f->map)
        munmap(f->map, f->map_len);
    free(f);
    errno = e;
}
