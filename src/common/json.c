/* json: the few jansson accessors every module wants — a key's string, with or
 * without a default, and whether an array holds a string — so no file keeps a
 * private copy. Each is NULL-safe: a missing object, key or non-string value
 * reads as absent. */
#include "common/common.h"

#include <jansson.h>
#include <string.h>

const char *mtc_json_str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

const char *mtc_json_str_or(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

int mtc_json_array_has(const json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *e = json_string_value(v);
        if (e && s && strcmp(e, s) == 0)
            return 1;
    }
    return 0;
}
