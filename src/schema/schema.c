/* schema: the field-table engine (kinds, bounds, defaults, enums, names,
 * hooks, canonical order, struct filling) and the enum name-table helpers.
 * One function per kind, chosen through a table. */
#include "schema/schema.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Paths go into fixed buffers; a truncated path only shortens a message. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define PATH_LEN 512

/* ---- enums ---- */

int schema_enum_parse(const struct schema_enum *e, const char *s, int flags)
{
    int nocase = flags & SCHEMA_ENUM_ANYCASE;
    size_t plen = e->prefix ? strlen(e->prefix) : 0;
    for (int pass = 0; s && pass < 2; pass++) {
        if (pass == 1) { /* the prefixed proto spelling, once */
            if (!plen || (nocase ? strncasecmp : strncmp)(s, e->prefix, plen) != 0)
                break;
            s += plen;
        }
        for (int i = 0; i < e->n; i++) {
            const char *n = e->names[i];
            if (n && (nocase ? strcasecmp : strcmp)(n, s) == 0)
                return i;
        }
    }
    errno = EINVAL;
    return -1;
}

const char *schema_enum_name(const struct schema_enum *e, int v)
{
    return v >= 0 && v < e->n ? e->names[v] : NULL;
}

const char *schema_enum_list(const struct schema_enum *e, char *buf, size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 0; i < e->n && used < len; i++)
        if (e->names[i])
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", e->names[i]);
    return buf;
}

/* ---- paths and errors ---- */

const char *schema_join(char *buf, size_t len, const char *path, const char *name)
{
    if (!path || !*path)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "%s.%s", path, name);
    return buf;
}

int schema_map(json_t **v, const char *path, const char *what,
               int (*each)(json_t *out, const char *key, const json_t *val, const char *path,
                           const void *arg, mtc_error_t *err),
               const void *arg, mtc_error_t *err)
{
    const char *k;
    json_t *e;
    if (!json_is_object(*v))
        return schema_error(err, path, "must be an object of %s", what);
    json_t *out = json_object();
    json_object_foreach(*v, k, e)
    {
        if (each(out, k, e, path, arg, err) < 0) {
            json_decref(out);
            return -1;
        }
    }
    json_decref(*v);
    *v = out;
    return 0;
}

int schema_error(mtc_error_t *err, const char *path, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    errno = EINVAL;
    if (path && *path)
        return errprintf(err, "%s: %s", path, msg);
    return errprintf(err, "%s", msg);
}

/* ---- numbers ---- */

/* A quoted number as proto3 JSON writes it: decimal, no blanks, no hex. */
static int quoted_number(const char *s, double *out)
{
    char *end;
    if (!*s || strspn(s, "0123456789+-.eE") != strlen(s))
        return -1;
    errno = 0;
    *out = strtod(s, &end);
    return !*end && !errno && isfinite(*out) ? 0 : -1;
}

static int number_of(const json_t *v, unsigned tflags, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 0;
    }
    if ((tflags & SCHEMA_PROTO3) && json_is_string(v))
        return quoted_number(json_string_value(v), out);
    return -1;
}

/* An integer: a JSON integer; in proto3 tables also an integral real or a
 * quoted integer. */
static int integer_of(const json_t *v, unsigned tflags, double *out)
{
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return 0;
    }
    if (!(tflags & SCHEMA_PROTO3) || number_of(v, tflags, out) < 0)
        return -1;
    return *out == floor(*out) ? 0 : -1;
}

/* ---- one function per kind ---- */

typedef json_t *(*kind_fn)(const json_t *v, const struct schema_field *f, unsigned tflags,
                           const char *path, mtc_error_t *err);

static json_t *norm_obj(const json_t *in, const struct schema *s, const char *path,
                        mtc_error_t *err);

static json_t *fail(mtc_error_t *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static json_t *fail(mtc_error_t *err, const char *path, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    schema_error(err, path, "%s", msg);
    return NULL;
}

static json_t *k_str(const json_t *v, const struct schema_field *f, unsigned tflags,
                     const char *path, mtc_error_t *err)
{
    (void)tflags;
    const char *s = json_string_value(v);
    size_t cap = (f->flags & SCHEMA_REF) ? 0 : f->size; /* a char[] member bounds the length */
    if (f->kind == SCHEMA_STRS && f->max_items)
        cap = f->size / (size_t)f->max_items;
    if (!s || ((f->flags & SCHEMA_NONEMPTY) && !*s))
        return fail(err, path, "must be a %sstring",
                    f->flags & SCHEMA_NONEMPTY ? "non-empty " : "");
    if ((f->flags & SCHEMA_ONELINE) && strpbrk(s, "\r\n"))
        return fail(err, path, "must not contain a newline");
    if (cap && strlen(s) >= cap)
        return fail(err, path, "must be a string of at most %zu bytes", cap - 1);
    return json_string(s);
}

static json_t *k_int(const json_t *v, const struct schema_field *f, unsigned tflags,
                     const char *path, mtc_error_t *err)
{
    double d = 0;
    int typed = integer_of(v, tflags, &d) == 0;
    double lo = (f->flags & SCHEMA_LO) ? f->lo : INT_MIN,
           hi = (f->flags & SCHEMA_HI) ? f->hi : INT_MAX;
    if (typed && d >= lo && d <= hi && d >= INT_MIN && d <= INT_MAX)
        return json_integer((json_int_t)d);
    if ((f->flags & SCHEMA_RANGE) == SCHEMA_RANGE)
        return fail(err, path, "must be an integer from %.0f to %.0f", f->lo, f->hi);
    if (!typed)
        return fail(err, path, "must be an integer");
    if ((f->flags & SCHEMA_LO) && d < lo)
        return fail(err, path, "must be >= %.0f", lo);
    if ((f->flags & SCHEMA_HI) && d > hi)
        return fail(err, path, "must be <= %.0f", hi);
    return fail(err, path, "integer out of range");
}

static json_t *k_num(const json_t *v, const struct schema_field *f, unsigned tflags,
                     const char *path, mtc_error_t *err)
{
    double d = 0;
    int typed = number_of(v, tflags, &d) == 0;
    int lo_ok = !(f->flags & SCHEMA_LO) || d >= f->lo,
        hi_ok = !(f->flags & SCHEMA_HI) || d <= f->hi;
    if (typed && lo_ok && hi_ok)
        return json_real(d);
    if ((f->flags & SCHEMA_RANGE) == SCHEMA_RANGE)
        return fail(err, path, "must be a number from %g to %g", f->lo, f->hi);
    if (!typed)
        return fail(err, path, "must be a number");
    if (!lo_ok)
        return fail(err, path, "must be >= %g", f->lo);
    return fail(err, path, "must be <= %g", f->hi);
}

static json_t *k_bool(const json_t *v, const struct schema_field *f, unsigned tflags,
                      const char *path, mtc_error_t *err)
{
    (void)f, (void)tflags;
    if (!json_is_boolean(v))
        return fail(err, path, "must be true or false");
    return json_boolean(json_is_true(v));
}

static json_t *k_enum(const json_t *v, const struct schema_field *f, unsigned tflags,
                      const char *path, mtc_error_t *err)
{
    char list[200];
    int i = schema_enum_parse(f->enm, json_string_value(v), 0);
    if (i >= 0)
        return json_string(f->enm->names[i]);
    schema_enum_list(f->enm, list, sizeof(list));
    if (!(tflags & SCHEMA_QUOTING))
        return fail(err, path, "must be one of %s", list);
    if (!json_is_string(v))
        return fail(err, path, "must be a string");
    return fail(err, path, "invalid value \"%.60s\" (one of %s)", json_string_value(v), list);
}

static json_t *k_obj(const json_t *v, const struct schema_field *f, unsigned tflags,
                     const char *path, mtc_error_t *err)
{
    (void)tflags;
    if (f->obj)
        return norm_obj(v, f->obj, path, err);
    if (!json_is_object(v))
        return fail(err, path, "must be an object");
    return json_deep_copy(v);
}

static json_t *k_array(const json_t *v, const struct schema_field *f, unsigned tflags,
                       const char *path, mtc_error_t *err)
{
    static const kind_fn elem_kind[] = {
        [SCHEMA_OBJS] = k_obj, [SCHEMA_STRS] = k_str, [SCHEMA_INTS] = k_int};
    char sub[PATH_LEN];
    size_t i;
    json_t *e;
    if (!json_is_array(v))
        return fail(err, path, "must be an array");
    if (f->max_items && json_array_size(v) > (size_t)f->max_items)
        return fail(err, path, "at most %d entries", f->max_items);
    json_t *out = json_array();
    json_array_foreach(v, i, e)
    {
        snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
        json_t *n = elem_kind[f->kind](e, f, tflags, sub, err);
        if (!n) {
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, n);
    }
    return out;
}

static int label_ok(const char *s, int key)
{
    size_t n = strlen(s);
    if (n > 63 || (key && (n == 0 || !islower((unsigned char)s[0]))))
        return 0;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_' && *s != '-')
            return 0;
    return 1;
}

static int label_entry(json_t *out, const char *k, const json_t *e, const char *path,
                       const void *arg, mtc_error_t *err)
{
    (void)arg;
    char sub[PATH_LEN];
    schema_join(sub, sizeof(sub), path, k);
    if (!label_ok(k, 1))
        return schema_error(err, sub, "invalid label key (want ^[a-z][a-z0-9_-]{0,62}$)");
    if (!json_is_string(e) || !label_ok(json_string_value(e), 0))
        return schema_error(err, sub, "invalid label value (want ^[a-z0-9_-]{0,63}$)");
    return json_object_set_new(out, k, json_string(json_string_value(e)));
}

static json_t *k_labels(const json_t *v, const struct schema_field *f, unsigned tflags,
                        const char *path, mtc_error_t *err)
{
    (void)f, (void)tflags;
    json_t *out = json_deep_copy(v);
    if (schema_map(&out, path, "labels", label_entry, NULL, err) < 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *k_custom(const json_t *v, const struct schema_field *f, unsigned tflags,
                        const char *path, mtc_error_t *err)
{
    (void)f, (void)tflags, (void)path, (void)err;
    return json_deep_copy(v); /* the hook does the rest */
}

static const kind_fn kinds[] = {
    [SCHEMA_STR] = k_str,       [SCHEMA_INT] = k_int,       [SCHEMA_NUM] = k_num,
    [SCHEMA_BOOL] = k_bool,     [SCHEMA_ENUM] = k_enum,     [SCHEMA_OBJ] = k_obj,
    [SCHEMA_OBJS] = k_array,    [SCHEMA_STRS] = k_array,    [SCHEMA_INTS] = k_array,
    [SCHEMA_LABELS] = k_labels, [SCHEMA_CUSTOM] = k_custom,
};

/* The kind's checks, then the field's hook. New reference or NULL + err. */
static json_t *norm_value(const json_t *v, const struct schema_field *f, unsigned tflags,
                          const char *path, mtc_error_t *err)
{
    json_t *out = kinds[f->kind](v, f, tflags, path, err);
    if (out && f->check && f->check(f, &out, path, err) < 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* ---- objects ---- */

/* "globalBatch", "global_batch" and "GLOBAL_BATCH" name the same field. */
static int loose_eq(const char *key, const char *name)
{
    for (;; key++, name++) {
        while (*key == '_')
            key++;
        while (*name == '_')
            name++;
        if (tolower((unsigned char)*key) != tolower((unsigned char)*name))
            return 0;
        if (!*key)
            return 1;
    }
}

/* key (already camelCased unless the table is EXACT or ANYNAME) names name? */
static int name_eq(const char *key, const char *name, unsigned tflags)
{
    return (tflags & SCHEMA_ANYNAME) ? loose_eq(key, name) : strcmp(key, name) == 0;
}

static const struct schema_field *lookup(const struct schema *s, const char *key)
{
    for (const struct schema_field *f = s->fields; f->name; f++) {
        if (name_eq(key, f->name, s->flags))
            return f;
        for (const char *const *a = f->aliases; a && *a; a++)
            if (name_eq(key, *a, s->flags))
                return f;
    }
    return NULL;
}

static int ignored(const struct schema *s, const char *key)
{
    for (const char *const *i = s->ignore; i && *i; i++)
        if (name_eq(key, *i, s->flags))
            return 1;
    return 0;
}

/* Phase 1: one given member k: v into tmp under its canonical name. */
static int put_given(json_t *tmp, const struct schema *s, const char *k, const json_t *v,
                     const char *path, mtc_error_t *err)
{
    char key[128], sub[PATH_LEN];
    if (s->flags & (SCHEMA_EXACT | SCHEMA_ANYNAME))
        snprintf(key, sizeof(key), "%s", k);
    else
        mtc_camel_case(k, key, sizeof(key));
    const struct schema_field *f = lookup(s, key);
    if (!f) {
        if (ignored(s, key))
            return 0;
        if (s->flags & SCHEMA_QUOTING)
            return schema_error(err, path, "unknown field \"%.60s\"", k);
        char name[64];
        snprintf(name, sizeof(name), "%.60s", k);
        return schema_error(err, schema_join(sub, sizeof(sub), path, name), "unknown field");
    }
    schema_join(sub, sizeof(sub), path, f->name);
    if (f->flags & SCHEMA_NOINPUT)
        return schema_error(err, sub, "set by the server, not by a request");
    json_t *prev = json_object_get(tmp, f->name);
    if (prev && !f->aliases)
        return schema_error(err, sub, "field given twice (snake_case and camelCase)");
    if (json_is_null(v) && (s->flags & SCHEMA_PROTO3))
        return 0; /* proto3: null means "not set" */
    json_t *n = norm_value(v, f, s->flags, sub, err);
    if (!n)
        return -1;
    if (prev && !json_equal(prev, n)) {
        json_decref(n);
        return schema_error(err, sub, "given twice with different values (as \"%.60s\" too)", k);
    }
    json_object_set_new(tmp, f->name, n);
    return 0;
}

/* Phase 2: defaults for the absent fields; absent required ones are errors. */
static int put_absent(json_t *tmp, const struct schema *s, const char *path, mtc_error_t *err)
{
    char sub[PATH_LEN];
    for (const struct schema_field *f = s->fields; f->name; f++) {
        if (json_object_get(tmp, f->name))
            continue;
        schema_join(sub, sizeof(sub), path, f->name);
        if (f->flags & SCHEMA_REQUIRED)
            return schema_error(err, sub, "required field missing");
        if (!f->dflt)
            continue;
        json_t *d = json_loads(f->dflt, JSON_DECODE_ANY, NULL);
        json_t *n = d ? norm_value(d, f, s->flags, sub, err) : NULL;
        json_decref(d);
        if (!n)
            return d ? -1 : schema_error(err, sub, "default is not JSON");
        json_object_set_new(tmp, f->name, n);
    }
    return 0;
}

static json_t *norm_obj(const json_t *in, const struct schema *s, const char *path,
                        mtc_error_t *err)
{
    const char *k;
    json_t *v;
    if (!json_is_object(in))
        return fail(err, path, "must be an object");
    json_t *tmp = json_object(); /* canonical name -> canonical value */
    json_object_foreach((json_t *)in, k, v)
    {
        if (put_given(tmp, s, k, v, path, err) < 0)
            goto error;
    }
    if (put_absent(tmp, s, path, err) < 0 || (s->check && s->check(tmp, path, err) < 0))
        goto error;
    /* Phase 4: table order, so the canonical form is stable */
    json_t *out = json_object();
    for (const struct schema_field *f = s->fields; f->name; f++)
        if ((v = json_object_get(tmp, f->name)))
            json_object_set(out, f->name, v);
    json_decref(tmp);
    return out;
error:
    json_decref(tmp);
    errno = EINVAL;
    return NULL;
}

json_t *schema_normalize(const json_t *in, const struct schema *s, const char *path,
                         mtc_error_t *err)
{
    json_t *out = norm_obj(in, s, path ? path : "", err);
    if (!out)
        errno = EINVAL;
    return out;
}

/* ---- filling a C struct ---- */

static int fill_scalar(const json_t *v, const struct schema_field *f, char *dst)
{
    if (json_is_string(v) && (f->flags & SCHEMA_REF)) {
        if (f->size != sizeof(const char *))
            return -1;
        *(const char **)dst = json_string_value(v);
    } else if (json_is_string(v) && f->kind == SCHEMA_ENUM) {
        if (f->size != sizeof(int))
            return -1;
        *(int *)dst = schema_enum_parse(f->enm, json_string_value(v), 0);
    } else if (json_is_string(v)) {
        snprintf(dst, f->size, "%s", json_string_value(v));
    } else if (json_is_integer(v) && f->size == sizeof(int64_t)) {
        *(int64_t *)dst = json_integer_value(v);
    } else if (json_is_boolean(v) || json_is_integer(v)) {
        if (f->size != sizeof(int))
            return -1;
        *(int *)dst = json_is_boolean(v) ? json_is_true(v) : (int)json_integer_value(v);
    } else if (json_is_real(v) && f->size == sizeof(float)) {
        *(float *)dst = (float)json_real_value(v);
    } else if (json_is_real(v) && f->size == sizeof(double)) {
        *(double *)dst = json_real_value(v);
    } else {
        return -1;
    }
    return 0;
}

static int fill_array(const json_t *v, const struct schema_field *f, char *dst, char *base)
{
    size_t i, n = json_array_size(v);
    json_t *e;
    if (!f->max_items || n > (size_t)f->max_items)
        return -1;
    size_t elem = f->size / (size_t)f->max_items;
    json_array_foreach(v, i, e)
    {
        if (f->kind == SCHEMA_STRS)
            snprintf(dst + i * elem, elem, "%s", json_string_value(e));
        else if (elem == sizeof(int))
            ((int *)(void *)dst)[i] = (int)json_integer_value(e);
        else
            return -1;
    }
    *(int *)(void *)(base + f->count_off) = (int)n;
    return 0;
}

int schema_fill(const json_t *canon, const struct schema *s, void *base)
{
    for (const struct schema_field *f = s->fields; f->name; f++) {
        json_t *v = json_object_get(canon, f->name);
        char *dst = (char *)base + f->off;
        int rc = 0;
        if (!v || !f->size)
            continue;
        if (f->obj && json_is_object(v))
            rc = schema_fill(v, f->obj, dst);
        else if (f->kind == SCHEMA_STRS || f->kind == SCHEMA_INTS)
            rc = fill_array(v, f, dst, base);
        else if (f->kind != SCHEMA_OBJS && f->kind != SCHEMA_LABELS)
            rc = fill_scalar(v, f, dst);
        if (rc < 0) {
            errno = EINVAL;
            return -1;
        }
    }
    return 0;
}

/* One scalar member as JSON, or NULL when it is not set. */
static json_t *dump_scalar(const struct schema_field *f, const char *src)
{
    if (f->flags & SCHEMA_REF) { /* a STR (or a CUSTOM that may be one) */
        const char *p = *(const char *const *)src;
        return p ? json_string(p) : NULL;
    }
    switch (f->kind) {
    case SCHEMA_STR:
    case SCHEMA_ENUM:
        if (f->kind == SCHEMA_ENUM && f->size == sizeof(int))
            return *(const int *)src >= 0 ? json_string(schema_enum_name(f->enm, *(const int *)src))
                                          : NULL;
        return *src ? json_stringn(src, strnlen(src, f->size)) : NULL;
    case SCHEMA_INT:
        if (f->size == sizeof(int64_t))
            return *(const int64_t *)src ? json_integer(*(const int64_t *)src) : NULL;
        return *(const int *)src ? json_integer(*(const int *)src) : NULL;
    case SCHEMA_NUM:
        return f->size == sizeof(double) && *(const double *)src != 0.0
                   ? json_real(*(const double *)src)
                   : NULL;
    case SCHEMA_BOOL:
        return *(const int *)src ? json_true() : NULL;
    default:
        return NULL;
    }
}

json_t *schema_dump(const struct schema *s, const void *base)
{
    json_t *out = json_object();
    for (const struct schema_field *f = s->fields; f->name; f++) {
        if (!f->size || (f->flags & SCHEMA_NOINPUT))
            continue;
        json_t *v = dump_scalar(f, (const char *)base + f->off);
        if (v)
            json_object_set_new(out, f->name, v);
    }
    return out;
}

/* ---- walking the tables ---- */

static int walk(const struct schema *s, const char *path, unsigned flags,
                void (*fn)(const char *path, const struct schema_field *f, void *arg), void *arg)
{
    int n = 0;
    char sub[PATH_LEN], deeper[PATH_LEN + 2];
    for (const struct schema_field *f = s->fields; f->name; f++) {
        schema_join(sub, sizeof(sub), path, f->name);
        if ((f->flags & flags) == flags) {
            if (fn)
                fn(sub, f, arg);
            n++;
        }
        if (f->obj) { /* the tables are not recursive: this ends */
            snprintf(deeper, sizeof(deeper), "%s%s", sub, f->kind == SCHEMA_OBJS ? "[]" : "");
            n += walk(f->obj, deeper, flags, fn, arg);
        }
    }
    return n;
}

int schema_walk(const struct schema *s, unsigned flags,
                void (*fn)(const char *path, const struct schema_field *f, void *arg), void *arg)
{
    return walk(s, "", flags, fn, arg);
}
