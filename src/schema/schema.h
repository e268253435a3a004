/* schema: the one field-table engine behind every JSON input mtc validates —
 * cluster spec, healthPolicy, mtc-agent config, health results, recipes, model
 * configs — and the name tables of mtc's enums. A table names each field's
 * kind, bounds, default, enum, aliases, hook and C struct member; the engine
 * checks an object against it with errors "path.field: message", returns the
 * canonical form (table names, table order, defaults filled: normalizing it
 * again gives it back) and fills a C struct from it. */
#ifndef MTC_SCHEMA_H
#define MTC_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "common/common.h"

/* ---- enums: a C enum's names, declared once next to the enum ---- */

struct schema_enum {
    const char *const *names; /* names[value]; a NULL entry is a value without a name */
    int n;                    /* the values are 0..n-1 */
    const char *prefix;       /* also accepted before a name on input: the cloud API's
                               * proto form ("PROVISIONING_MODEL_" + "SPOT"); NULL = none */
};

/* The enum descriptor of a names[] array: SCHEMA_ENUM(names, NULL); or with
 * the names in place: SCHEMA_NAMES(NULL, [RED] = "RED", [BLUE] = "BLUE"). */
// clang-format off
#define SCHEMA_ENUM(names_, prefix_) {names_, (int)(sizeof(names_) / sizeof(names_[0])), prefix_}
#define SCHEMA_NAMES(prefix_, ...) SCHEMA_ENUM(((const char *const[]){__VA_ARGS__}), prefix_)
// clang-format on

/* schema_enum_parse flags */
#define SCHEMA_ENUM_ANYCASE 1 /* "prolog" names PROLOG (command-line spellings) */

/* The value named s (a name, or prefix + name), or -1 with errno EINVAL. */
int schema_enum_parse(const struct schema_enum *e, const char *s, int flags);
/* The name of value v (borrowed), or NULL when v has none. */
const char *schema_enum_name(const struct schema_enum *e, int v);
/* "A, B, C" (every named value) into buf; returns buf. */
const char *schema_enum_list(const struct schema_enum *e, char *buf, size_t len);

/* ---- field tables ---- */

enum schema_kind {
    SCHEMA_STR,    /* string */
    SCHEMA_INT,    /* integer, int32 unless bounded tighter */
    SCHEMA_NUM,    /* number; canonical form is a real */
    SCHEMA_BOOL,   /* true or false */
    SCHEMA_ENUM,   /* a name of .enm; canonical form is the name (never the prefixed one) */
    SCHEMA_OBJ,    /* object checked against .obj; any object when .obj is NULL */
    SCHEMA_OBJS,   /* array of objects checked against .obj */
    SCHEMA_STRS,   /* array of strings (string flags apply to each) */
    SCHEMA_INTS,   /* array of integers (bounds apply to each) */
    SCHEMA_LABELS, /* map of labels: keys ^[a-z][a-z0-9_-]{0,62}$, values ^[a-z0-9_-]{0,63}$ */
    SCHEMA_CUSTOM, /* the hook alone checks and normalizes the value */
};

/* Field flags. */
#define SCHEMA_REQUIRED 0x01 /* absent: "path.field: required field missing" */
#define SCHEMA_LO 0x02       /* INT, NUM, INTS: value >= lo */
#define SCHEMA_HI 0x04       /* INT, NUM, INTS: value <= hi */
#define SCHEMA_RANGE (SCHEMA_LO | SCHEMA_HI)
#define SCHEMA_NONEMPTY 0x08 /* STR, STRS: not "" */
#define SCHEMA_ONELINE 0x10  /* STR, STRS: no line break */
#define SCHEMA_ROOT_EXEC                                                                           \
    0x20 /* the value makes mtc or Slurm act as root: execute or read something                 \
          * (a script, a library it loads, a file it reads, a credential) or                       \
          * connect to a machine (hosts, ssh): admin-only; see schema_walk */
#define SCHEMA_REF 0x40     /* STR: the member is a `const char *` that schema_fill points
                             * into the canonical object (borrowed: valid while it lives) */
#define SCHEMA_NOINPUT 0x80 /* set by the program, never by input: given, it is an error
                             * ("path.field: set by the server, not by a request");
                             * schema_dump leaves it out */

struct schema;
struct schema_field;

/* A field's hook, for the rules a kind cannot say (references, catalogs, name
 * patterns). *v is the canonical value, owned by the engine: the hook may
 * change it or replace it (json_decref the old one). For SCHEMA_CUSTOM, *v is
 * a deep copy of the input. path names the field. 0, or -1 with err (set it
 * with schema_error). */
typedef int (*schema_hook)(const struct schema_field *f, json_t **v, const char *path,
                           mtc_error_t *err);

struct schema_field {
    const char *name; /* canonical name; NULL ends the table */
    enum schema_kind kind;
    unsigned flags;
    double lo, hi;                 /* bounds, with SCHEMA_LO / SCHEMA_HI */
    int max_items;                 /* arrays: at most this many elements; 0 = any */
    const char *dflt;              /* JSON text of the value when absent (normalized like
                                    * input, so it has the field's canonical type); NULL = none */
    const struct schema_enum *enm; /* SCHEMA_ENUM */
    const struct schema *obj;      /* SCHEMA_OBJ, SCHEMA_OBJS (a hook may use it too) */
    const char *const *aliases;    /* other names of the field (NULL-terminated): Hugging Face
                                    * config.json names. Given more than once, they must agree */
    schema_hook check;             /* after the kind's checks; SCHEMA_CUSTOM: instead of them */
    const void *arg;               /* the hook's data */
    size_t off, size;              /* the C struct member schema_fill writes; size 0 = none.
                                    * STRS: char[max_items][size / max_items]; INTS: int[] */
    size_t count_off;              /* STRS, INTS: the int member that gets the element count */
};

/* A struct member for schema_fill: SCHEMA_MEMBER(struct health_policy, gpu_temp_warn_c). */
#define SCHEMA_MEMBER(type, m) .off = offsetof(type, m), .size = sizeof(((type *)0)->m)

/* Table flags. */
#define SCHEMA_PROTO3                                                                              \
    0x01                    /* proto3 JSON: integers and numbers may be quoted, an integral        \
                             * real is an integer, null means "not set" */
#define SCHEMA_ANYNAME 0x02 /* names match ignoring case and '_' (GLOBAL_BATCH = global_batch) */
#define SCHEMA_EXACT                                                                               \
    0x04 /* names match exactly; otherwise snake_case input matches a                              \
          * camelCase name ("machine_type" = "machineType") */
#define SCHEMA_QUOTING                                                                             \
    0x08 /* the cluster API's wording: `path: unknown field "k"`,                                  \
          * `invalid value "v" (one of A, B)`; otherwise the terser                                \
          * `path.k: unknown field`, `must be one of A, B` */

struct schema {
    const struct schema_field *fields; /* ends with a row whose name is NULL */
    unsigned flags;
    const char *const *ignore; /* names accepted and dropped (output-only fields, another
                                * reader's fields); NULL-terminated, may be NULL */
    /* Cross-field rules and computed defaults, on the object with every field
     * canonical (before it is put in table order); may add table fields. 0/-1+err. */
    int (*check)(json_t *obj, const char *path, mtc_error_t *err);
};

/* Check object in against s and return its canonical form (caller owns it):
 * the table's names in table order, defaults filled, ignored names dropped.
 * path names the object in messages ("" at the top). NULL + errno EINVAL and
 * a one-line err: "nodePools[1].machineSpec.machineType: unknown machine type
 * \"x\"", "healthPolicy.colour: unknown field", ... */
json_t *schema_normalize(const json_t *in, const struct schema *s, const char *path,
                         mtc_error_t *err);

/* Write a canonical object's fields into the C struct at base through the
 * fields' members (absent fields and fields without a member are left alone;
 * SCHEMA_OBJ and hooks with .obj fill their table at base + off). 0, or -1 with
 * errno EINVAL when a member's size does not fit its kind (a table bug). */
int schema_fill(const json_t *canon, const struct schema *s, void *base);

/* The canonical object of the C struct at base, from the members of s's
 * scalar rows (STR: a char[] or, with SCHEMA_REF, a const char *; INT: int or
 * int64_t; NUM: double; BOOL: int): an empty string, a NULL string and a zero
 * number are "not set" and left out, and so are SCHEMA_NOINPUT rows. The
 * inverse of schema_fill for such tables. Caller owns the result. */
json_t *schema_dump(const struct schema *s, const void *base);

/* Call fn for every field of s (nested tables included) that has all the
 * given flags, with its path from the top: "healthPolicy.nvmlLibrary",
 * "nodePools[].startupScript". Returns how many fields matched. */
int schema_walk(const struct schema *s, unsigned flags,
                void (*fn)(const char *path, const struct schema_field *f, void *arg), void *arg);

/* For a hook over a map (an object of free keys: env, config{}, per-type
 * overrides): *v must be an object ("path: must be an object of <what>");
 * each member goes through each(out, key, value, path, arg, err), which
 * puts what it accepts into out (under any key) or returns -1 with err; out
 * then replaces *v. 0/-1. */
int schema_map(json_t **v, const char *path, const char *what,
               int (*each)(json_t *out, const char *key, const json_t *val, const char *path,
                           const void *arg, mtc_error_t *err),
               const void *arg, mtc_error_t *err);

/* "path.name", or "name" when path is "", into buf; returns buf. */
const char *schema_join(char *buf, size_t len, const char *path, const char *name);
/* "path: message" (or "message" when path is "") into err; errno EINVAL; returns -1. */
int schema_error(mtc_error_t *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
