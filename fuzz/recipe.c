/* Fuzz harness: a recipe from bytes — JSON parse, validate and normalize —
 * the canonical form must normalize again to itself, and recipe_validate
 * must agree with recipe_normalize. */
#include "normalize.h"
#include "recipes/recipes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mtc_error_t err;
    json_t *out, *in = fuzz_normalize(data, size, recipe_normalize, &out);
    if (in && (recipe_validate(in, &err) == 0) != (out != NULL))
        abort(); /* validate and normalize agree */
    json_decref(out);
    json_decref(in);
    return 0;
}
