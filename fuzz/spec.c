/* Fuzz harness: a cluster spec from bytes — JSON parse, normalize, validate —
 * and the canonical form must normalize again to itself. */
#include "cluster/cluster.h"
#include "normalize.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *out, *in = fuzz_normalize(data, size, cluster_spec_normalize, &out);
    json_decref(out);
    json_decref(in);
    return 0;
}
