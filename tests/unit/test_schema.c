/* test_schema: the field-table engine on its own tables — each kind with its
 * messages, proto3 numbers, names (camel, any case, exact, aliases), defaults,
 * required fields, hooks, table order and idempotence, filling a C struct,
 * walking flagged fields — and the enum name tables. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "schema/schema.h"

enum colour { RED, GREEN, BLUE };
static const char *const colour_names[] = {[RED] = "RED", [GREEN] = "GREEN", [BLUE] = "BLUE"};
static const struct schema_enum colours = SCHEMA_ENUM(colour_names, "COLOUR_");

struct thing {
    char name[8];
    int count;
    double ratio;
    float scale;
    int on;
    enum colour colour;
    char tags[3][6];
    int ntags;
    int ids[4];
    int nids;
    struct {
        int depth;
    } inner;
};

#define T(m) SCHEMA_MEMBER(struct thing, m)

static int no_x(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    if (strchr(json_string_value(*v), 'x'))
        return schema_error(err, path, "no x please");
    return 0;
}

static int upper(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    if (!json_is_string(*v))
        return schema_error(err, path, "must be text");
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", json_string_value(*v));
    for (char *p = buf; *p; p++)
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    json_decref(*v);
    *v = json_string(buf);
    return 0;
}

static const struct schema_field inner_fields[] = {
    {.name = "depth",
     .kind = SCHEMA_INT,
     .dflt = "2",
     .off = offsetof(struct thing, inner.depth) - offsetof(struct thing, inner),
     .size = sizeof(int)},
    {.name = NULL},
};
static const struct schema inner = {inner_fields, SCHEMA_PROTO3, NULL, NULL};

static int cross(json_t *o, const char *path, mtc_error_t *err)
{
    char q[128];
    if (json_integer_value(json_object_get(o, "count")) == 13)
        return schema_error(err, schema_join(q, sizeof(q), path, "count"), "unlucky");
    return 0;
}

static const struct schema_field thing_fields[] = {
    {.name = "name",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY,
     .check = no_x,
     T(name)},
    {.name = "count",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = 1,
     .hi = 20,
     .dflt = "3",
     T(count)},
    {.name = "ratio", .kind = SCHEMA_NUM, .flags = SCHEMA_LO, .lo = 0, T(ratio)},
    {.name = "scale", .kind = SCHEMA_NUM, .dflt = "1.5", T(scale)},
    {.name = "on", .kind = SCHEMA_BOOL, T(on)},
    {.name = "colour", .kind = SCHEMA_ENUM, .enm = &colours, .dflt = "\"GREEN\"", T(colour)},
    {.name = "tags",
     .kind = SCHEMA_STRS,
     .flags = SCHEMA_ONELINE,
     .max_items = 3,
     T(tags),
     .count_off = offsetof(struct thing, ntags)},
    {.name = "ids",
     .kind = SCHEMA_INTS,
     .flags = SCHEMA_LO,
     .lo = 0,
     .max_items = 4,
     T(ids),
     .count_off = offsetof(struct thing, nids)},
    {.name = "inner", .kind = SCHEMA_OBJ, .obj = &inner, T(inner)},
    {.name = "labels", .kind = SCHEMA_LABELS},
    {.name = "shout", .kind = SCHEMA_CUSTOM, .check = upper, .flags = SCHEMA_ROOT_EXEC},
    {.name = "kids", .kind = SCHEMA_OBJS, .obj = &inner},
    {.name = NULL},
};
static const char *const dropped[] = {"createTime", NULL};
static const struct schema proto = {thing_fields, SCHEMA_PROTO3 | SCHEMA_QUOTING, dropped, cross};
static const struct schema terse = {thing_fields, 0, NULL, NULL};

/* Normalize text against s; the canonical JSON text or "error: <message>". */
static const char *norm(const struct schema *s, const char *text)
{
    static char out[1024];
    mtc_error_t err = {""};
    json_t *in = json_loads(text, 0, NULL);
    json_t *c = schema_normalize(in, s, "t", &err);
    char *dump = c ? json_dumps(c, JSON_COMPACT) : NULL;
    snprintf(out, sizeof(out), "%s%s", c ? "" : "error: ", c ? dump : err.text);
    free(dump);
    json_decref(c);
    json_decref(in);
    return out;
}

static void test_enums(void)
{
    char list[64];
    CHECK(schema_enum_parse(&colours, "BLUE", 0) == BLUE, "name parses");
    CHECK(schema_enum_parse(&colours, "COLOUR_BLUE", 0) == BLUE, "prefixed proto name parses");
    CHECK(schema_enum_parse(&colours, "COLOUR_COLOUR_BLUE", 0) < 0, "prefix counts once");
    CHECK(schema_enum_parse(&colours, "blue", 0) < 0, "case matters by default");
    CHECK(schema_enum_parse(&colours, "blue", SCHEMA_ENUM_ANYCASE) == BLUE, "unless asked");
    CHECK(schema_enum_parse(&colours, "colour_blue", SCHEMA_ENUM_ANYCASE) == BLUE,
          "prefix too, when asked");
    CHECK(schema_enum_parse(&colours, NULL, 0) < 0, "NULL is no name");
    CHECK_STR(schema_enum_name(&colours, GREEN), "GREEN", "name of a value");
    CHECK(schema_enum_name(&colours, 7) == NULL && schema_enum_name(&colours, -1) == NULL,
          "no name out of range");
    CHECK_STR(schema_enum_list(&colours, list, sizeof(list)), "RED, GREEN, BLUE", "list");
    CHECK_STR(schema_enum_list(&colours, list, 9), "RED, GRE", "list truncates safely");
}

static void test_kinds(void)
{
    CHECK_STR(norm(&proto, "{\"name\":\"a\"}"),
              "{\"name\":\"a\",\"count\":3,\"scale\":1.5,\"colour\":\"GREEN\"}",
              "defaults filled, in table order");
    static const struct {
        const struct schema *s;
        const char *in, *want;
    } cases[] = {
        /* names */
        {&proto, "{\"name\":\"a\",\"colour_x\":1}", "error: t: unknown field \"colour_x\""},
        {&terse, "{\"name\":\"a\",\"colour_x\":1}", "error: t.colour_x: unknown field"},
        {&proto, "{\"name\":\"a\",\"created_time\":1,\"createTime\":2}",
         "error: t: unknown field \"created_time\""},
        {&proto, "{\"name\":\"a\",\"count\":4,\"count\":5}", ""},
        {&proto, "{\"name\":\"a\",\"ratio\":1,\"ratio\":null}", ""},
        {&proto, "{\"name\":\"a\",\"shout\":\"x\",\"SHOUT\":\"y\"}",
         "error: t: unknown field \"SHOUT\""},
        /* required, strings, hooks */
        {&proto, "{}", "error: t.name: required field missing"},
        {&proto, "{\"name\":\"\"}", "error: t.name: must be a non-empty string"},
        {&proto, "{\"name\":\"toolongname\"}",
         "error: t.name: must be a string of at most 7 bytes"},
        {&proto, "{\"name\":\"x\"}", "error: t.name: no x please"},
        {&proto, "{\"name\":null}", "error: t.name: required field missing"},
        {&terse, "{\"name\":null}", "error: t.name: must be a non-empty string"},
        /* integers: bounded, proto3 quoting */
        {&proto, "{\"name\":\"a\",\"count\":21}",
         "error: t.count: must be an integer from 1 to 20"},
        {&proto, "{\"name\":\"a\",\"count\":2.5}",
         "error: t.count: must be an integer from 1 to 20"},
        {&proto, "{\"name\":\"a\",\"count\":\"0x5\"}",
         "error: t.count: must be an integer from 1 to 20"},
        {&terse, "{\"name\":\"a\",\"count\":\"5\"}",
         "error: t.count: must be an integer from 1 to 20"},
        {&proto, "{\"name\":\"a\",\"count\":13}", "error: t.count: unlucky"},
        {&proto, "{\"name\":\"a\",\"ids\":[1,-1]}", "error: t.ids[1]: must be >= 0"},
        {&proto, "{\"name\":\"a\",\"ids\":[1,2,3,4,5]}", "error: t.ids: at most 4 entries"},
        {&proto, "{\"name\":\"a\",\"ids\":[\"x\"]}", "error: t.ids[0]: must be an integer"},
        {&proto, "{\"name\":\"a\",\"ids\":[3000000000]}", "error: t.ids[0]: integer out of range"},
        {&proto, "{\"name\":\"a\",\"ids\":7}", "error: t.ids: must be an array"},
        /* numbers */
        {&proto, "{\"name\":\"a\",\"ratio\":-1}", "error: t.ratio: must be >= 0"},
        {&proto, "{\"name\":\"a\",\"ratio\":\"nan\"}", "error: t.ratio: must be a number"},
        {&proto, "{\"name\":\"a\",\"ratio\":\"1e999\"}", "error: t.ratio: must be a number"},
        {&terse, "{\"name\":\"a\",\"ratio\":\"1\"}", "error: t.ratio: must be a number"},
        /* booleans, enums */
        {&proto, "{\"name\":\"a\",\"on\":1}", "error: t.on: must be true or false"},
        {&proto, "{\"name\":\"a\",\"colour\":\"PINK\"}",
         "error: t.colour: invalid value \"PINK\" (one of RED, GREEN, BLUE)"},
        {&proto, "{\"name\":\"a\",\"colour\":3}", "error: t.colour: must be a string"},
        {&terse, "{\"name\":\"a\",\"colour\":\"PINK\"}",
         "error: t.colour: must be one of RED, GREEN, BLUE"},
        /* arrays of strings, objects, labels, custom */
        {&proto, "{\"name\":\"a\",\"tags\":[\"a\\nb\"]}",
         "error: t.tags[0]: must not contain a newline"},
        {&proto, "{\"name\":\"a\",\"tags\":[\"abcdef\"]}",
         "error: t.tags[0]: must be a string of at most 5 bytes"},
        {&proto, "{\"name\":\"a\",\"inner\":[]}", "error: t.inner: must be an object"},
        {&proto, "{\"name\":\"a\",\"kids\":[{},{\"deep\":1}]}",
         "error: t.kids[1].deep: unknown field"},
        {&proto, "{\"name\":\"a\",\"labels\":{\"A\":\"b\"}}",
         "error: t.labels.A: invalid label key (want ^[a-z][a-z0-9_-]{0,62}$)"},
        {&proto, "{\"name\":\"a\",\"labels\":{\"a\":\"B\"}}",
         "error: t.labels.a: invalid label value (want ^[a-z0-9_-]{0,63}$)"},
        {&proto, "{\"name\":\"a\",\"shout\":5}", "error: t.shout: must be text"},
        {&proto, "[]", "error: t: must be an object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = norm(cases[i].s, cases[i].in);
        if (!*cases[i].want)
            CHECK(strncmp(got, "error:", 6) != 0, "%s accepted: %s", cases[i].in, got);
        else
            CHECK_STR(got, cases[i].want, "%s", cases[i].in);
    }
}

static void test_canonical(void)
{
    const char *in = "{\"createTime\":\"x\",\"kids\":[{\"depth\":\"4\"}],\"shout\":\"hey\","
                     "\"colour\":\"COLOUR_RED\",\"ids\":[\"7\",8.0],\"ratio\":\"0.25\","
                     "\"name\":\"ab\",\"on\":true,\"tags\":[\"p\",\"q\"],\"inner\":{},"
                     "\"labels\":{\"env\":\"prod\"}}";
    const char *want = "{\"name\":\"ab\",\"count\":3,\"ratio\":0.25,\"scale\":1.5,\"on\":true,"
                       "\"colour\":\"RED\",\"tags\":[\"p\",\"q\"],\"ids\":[7,8],"
                       "\"inner\":{\"depth\":2},\"labels\":{\"env\":\"prod\"},\"shout\":\"HEY\","
                       "\"kids\":[{\"depth\":4}]}";
    CHECK_STR(norm(&proto, in), want,
              "canonical: table order, defaults, output-only dropped, quoted numbers, short enum "
              "names, hooks applied");
    CHECK_STR(norm(&proto, want), want, "normalizing the canonical form gives it back");

    /* the struct, through the members */
    mtc_error_t err = {""};
    json_t *j = json_loads(want, 0, NULL);
    json_t *c = schema_normalize(j, &proto, "", &err);
    struct thing t;
    memset(&t, 0, sizeof(t));
    CHECK(c && schema_fill(c, &proto, &t) == 0, "fill: %s", err.text);
    CHECK(!strcmp(t.name, "ab") && t.count == 3 && t.ratio == 0.25 && t.scale == 1.5f && t.on &&
              t.colour == RED,
          "fill: scalars (string, int, double, float, bool, enum)");
    CHECK(t.ntags == 2 && !strcmp(t.tags[0], "p") && !strcmp(t.tags[1], "q") && t.nids == 2 &&
              t.ids[0] == 7 && t.ids[1] == 8,
          "fill: arrays with their counts");
    CHECK(t.inner.depth == 2, "fill: nested table at its member");
    json_decref(c);
    json_decref(j);

    /* a member that does not fit its kind is a table bug, reported */
    static const struct schema_field bad_fields[] = {
        {.name = "n", .kind = SCHEMA_INT, .off = 0, .size = 2},
        {.name = NULL},
    };
    static const struct schema bad = {bad_fields, 0, NULL, NULL};
    j = json_pack("{s:i}", "n", 1);
    c = schema_normalize(j, &bad, "", &err);
    short s2 = 0;
    CHECK(c && schema_fill(c, &bad, &s2) < 0, "fill refuses a member of the wrong size");
    json_decref(c);
    json_decref(j);
}

static const char *const seq_aliases[] = {"n_ctx", "n_positions", NULL};

static void test_names(void)
{
    static const struct schema_field f[] = {
        {.name = "global_batch", .kind = SCHEMA_INT},
        {.name = "max_seq", .kind = SCHEMA_INT, .aliases = seq_aliases},
        {.name = NULL},
    };
    static const struct schema anyname = {f, SCHEMA_ANYNAME, NULL, NULL};
    static const struct schema exact = {f, SCHEMA_EXACT, NULL, NULL};
    static const struct schema camel = {f, 0, NULL, NULL};
    CHECK_STR(norm(&anyname, "{\"GLOBAL_BATCH\":1}"), "{\"global_batch\":1}", "any case, any _");
    CHECK_STR(norm(&anyname, "{\"globalBatch\":1,\"global_batch\":2}"),
              "error: t.global_batch: field given twice (snake_case and camelCase)",
              "both spellings at once");
    CHECK_STR(norm(&exact, "{\"globalBatch\":1}"), "error: t.globalBatch: unknown field",
              "exact names");
    CHECK_STR(norm(&exact, "{\"n_ctx\":64,\"n_positions\":64}"), "{\"max_seq\":64}",
              "aliases that agree");
    CHECK_STR(norm(&exact, "{\"n_ctx\":64,\"n_positions\":32}"),
              "error: t.max_seq: given twice with different values (as \"n_positions\" too)",
              "aliases that disagree");
    CHECK_STR(norm(&camel, "{\"globalBatch\":1}"), "error: t.globalBatch: unknown field",
              "camelCase input names a camelCase table name only");
}

static void collect(const char *path, const struct schema_field *f, void *arg)
{
    (void)f;
    char *buf = arg;
    snprintf(buf + strlen(buf), 256 - strlen(buf), "%s%s", *buf ? " " : "", path);
}

static void test_walk(void)
{
    static const struct schema_field outer_fields[] = {
        {.name = "things", .kind = SCHEMA_OBJS, .obj = &proto},
        {.name = "one", .kind = SCHEMA_OBJ, .obj = &proto},
        {.name = NULL},
    };
    static const struct schema outer = {outer_fields, 0, NULL, NULL};
    char buf[256] = "";
    CHECK(schema_walk(&outer, SCHEMA_ROOT_EXEC, collect, buf) == 2, "two flagged fields");
    CHECK_STR(buf, "things[].shout one.shout", "their paths, arrays marked []");
}

int main(void)
{
    test_enums();
    test_kinds();
    test_canonical();
    test_names();
    test_walk();
    return check_done();
}
