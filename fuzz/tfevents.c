/* Fuzz harness: TensorBoard event file bytes — the TFRecord framing, its
 * masked CRC-32C checks and the Event/Summary/TensorProto decoding
 * (common/tfevents.c): whatever the bytes, the parse stays inside them and
 * never claims more than it was given. The CRCs make random frames fail
 * early, so the harness also frames the input itself with valid CRCs to
 * reach the protobuf decoding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

static void take(void *arg, const struct mtc_scalar *s)
{
    size_t *n = arg;
    *n += s->tag[sizeof(s->tag) - 1] == '\0'; /* tags stay terminated */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t used = 0, seen = 0;
    int corrupt = 0;
    mtc_tfevents_parse(data, size, &used, &corrupt, take, &seen);
    if (used > size)
        abort();
    /* the input as one record's data, correctly framed */
    unsigned char *rec = malloc(size + 16);
    if (!rec)
        return 0;
    for (int i = 0; i < 8; i++)
        rec[i] = (unsigned char)((uint64_t)size >> (8 * i));
    uint32_t c = mtc_crc32c_masked(rec, 8);
    memcpy(rec + 8, &c, 4);
    memcpy(rec + 12, data, size);
    c = mtc_crc32c_masked(data, size);
    memcpy(rec + 12 + size, &c, 4);
    long n = mtc_tfevents_parse(rec, size + 16, &used, &corrupt, take, &seen);
    if (n < 0 || n > 1 || (n == 1 && used != size + 16) || (n == 0 && !corrupt))
        abort(); /* a framed record is read whole, or its protobuf is called corrupt */
    free(rec);
    return 0;
}
