/* Fuzz harness: a cluster spec from bytes — JSON parse, normalize, validate —
 * and the canonical form must normalize again to itself. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *in = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!in)
        return 0;
    mtc_error_t err;
    json_t *out = cluster_spec_normalize(in, &err);
    if (out) {
        json_t *again = cluster_spec_normalize(out, &err);
        if (!again || !json_equal(again, out))
            abort(); /* normalizing is idempotent */
        json_decref(again);
    }
    json_decref(out);
    json_decref(in);
    return 0;
}
