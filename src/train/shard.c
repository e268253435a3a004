/* shard: token shard files — our versioned format (uint16/uint32 tokens) and llm.c's
 * 20240520 (uint16) and 20240801 (uint32) shards. Layouts are documented in data.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data.h"

#define LLMC_MAGIC16 20240520u
#define LLMC_MAGIC32 20240801u

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int shard_write(const char *path, const int32_t *ids, size_t n, int width, mtc_error_t *err)
{
    if (width != 2 && width != 4)
        return errprintf(err, "%s: token width must be 2 or 4, not %d", path, width);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (width == 2 && ids[i] > 65535))
            return errprintf(err, "%s: token %d at %zu does not fit %d bytes", path, ids[i], i,
                             width);
    }
    size_t len;
    unsigned char *buf = NULL;
    if (mtc_size_mul(n, (size_t)width, &len) < 0 ||
        mtc_size_add(len, SHARD_HEADER_BYTES, &len) < 0 || !(buf = calloc(1, len)))
        return errprintf(err, "%s: out of memory", path);
    put_u32(buf, SHARD_MAGIC);
    put_u32(buf + 4, SHARD_VERSION);
    put_u32(buf + 8, (uint32_t)width);
    put_u32(buf + 16, (uint32_t)n);
    put_u32(buf + 20, (uint32_t)((uint64_t)n >> 32));
    unsigned char *p = buf + SHARD_HEADER_BYTES;
    for (size_t i = 0; i < n; i++, p += width) {
        uint32_t v = (uint32_t)ids[i];
        p[0] = (unsigned char)v;
        p[1] = (unsigned char)(v >> 8);
        if (width == 4) {
            p[2] = (unsigned char)(v >> 16);
            p[3] = (unsigned char)(v >> 24);
        }
    }
    int rc = mtc_write_file_atomic(path, buf, len, 0644);
    free(buf);
    if (rc < 0)
        return errprintf(err, "%s: %s", path, strerror(errno));
    return 0;
}

int shard_parse_header(const unsigned char *h, size_t fsize, const char *path, int *width,
                       uint64_t *count, mtc_error_t *err)
{
    if (fsize < SHARD_HEADER_BYTES)
        return errprintf(err, "%s: truncated shard header (%zu bytes)", path, fsize);
    uint32_t magic = get_u32(h), version = get_u32(h + 4);
    if (magic == SHARD_MAGIC) {
        if (version != SHARD_VERSION)
            return errprintf(err, "%s: unsupported shard version %u", path, version);
        *width = (int)get_u32(h + 8);
        *count = (uint64_t)get_u32(h + 16) | (uint64_t)get_u32(h + 20) << 32;
        if (*width != 2 && *width != 4)
            return errprintf(err, "%s: corrupt shard header (token width %d)", path, *width);
    } else if (magic == LLMC_MAGIC16 || magic == LLMC_MAGIC32) {
        uint32_t want = magic == LLMC_MAGIC16 ? 1 : 7;
        if (version != want)
            return errprintf(err, "%s: unsupported llm.c shard version %u", path, version);
        *width = magic == LLMC_MAGIC16 ? 2 : 4;
        *count = get_u32(h + 8);
    } else {
        return errprintf(err, "%s: not a token shard (bad magic 0x%08x)", path, magic);
    }
    // by division: 1024 + count * width wraps for a count near 2^63 (a 1 KiB file could
    // claim 2^63 tokens); within the file, the products below cannot
    size_t body = fsize - SHARD_HEADER_BYTES, have = body / (size_t)*width;
    if (*count > have)
        return errprintf(err, "%s: truncated shard: %zu bytes, header says %llu tokens of %d bytes",
                         path, fsize, (unsigned long long)*count, *width);
    if (*count < have || body % (size_t)*width)
        return errprintf(err, "%s: corrupt shard: %zu bytes, %llu expected", path, fsize,
                         (unsigned long long)(SHARD_HEADER_BYTES + *count * (uint64_t)*width));
    return 0;
}

int32_t *shard_read(const char *path, size_t *n, mtc_error_t *err)
{
    size_t len;
    unsigned char *buf = (unsigned char *)mtc_read_file(path, &len);
    if (!buf) {
        errprintf(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    int width;
    uint64_t count;
    if (shard_parse_header(buf, len, path, &width, &count, err) < 0) {
        free(buf);
        return NULL;
    }
    size_t bytes; // count <= the file's size / width: checked all the same
    int32_t *ids = NULL;
    if (mtc_size_mul(count ? count : 1, sizeof *ids, &bytes) == 0)
        ids = malloc(bytes);
    if (!ids) {
        free(buf);
        errprintf(err, "%s: out of memory", path);
        return NULL;
    }
    const unsigned char *p = buf + SHARD_HEADER_BYTES;
    for (uint64_t i = 0; i < count; i++, p += width)
        ids[i] = width == 2 ? (int32_t)(p[0] | p[1] << 8) : (int32_t)get_u32(p);
    free(buf);
    *n = count;
    return ids;
}
