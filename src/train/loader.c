/* loader: deterministic data loader over token shards — windows of T+1 tokens, global batch
 * split across MPI ranks, optional per-epoch seeded window shuffle, exact resumable position. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/data.h"
#include "train/rng.h"

struct shard_info {
    char *path;
    int width;
    uint64_t count;
    uint64_t nwin; /* windows of T+1 tokens at stride T */
    uint64_t nb;   /* global batches */
};

struct loader {
    struct shard_info *s;
    int ns;
    int B, T, rank, nranks, shuffle;
    uint64_t seed;
    struct loader_pos pos;
    /* current shard, mapped */
    int cur;
    unsigned char *map;
    size_t map_len;
    uint64_t *perm; /* window order for (epoch, cur); NULL when not shuffling */
};

/* Does name look like a shard of split: "<split>_*.bin", "*_<split>.bin" or "*_<split>_*.bin"? */
static int shard_name_matches(const char *name, const char *split)
{
    size_t n = strlen(name), k = strlen(split);
    if (n < 4 || strcmp(name + n - 4, ".bin") != 0)
        return 0;
    if (strncmp(name, split, k) == 0 && name[k] == '_')
        return 1;
    char pat[80];
    snprintf(pat, sizeof pat, "_%s.bin", split);
    if (n >= strlen(pat) && strcmp(name + n - strlen(pat), pat) == 0)
        return 1;
    snprintf(pat, sizeof pat, "_%s_", split);
    return strstr(name, pat) != NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void unmap_cur(struct loader *l)
{
    if (l->map)
        munmap(l->map, l->map_len);
    l->map = NULL;
    free(l->perm);
    l->perm = NULL;
    l->cur = -1;
}

/* Map shard pos.shard and build its window permutation for pos.epoch. */
static int map_cur(struct loader *l, mtc_error_t *err)
{
    int i = (int)l->pos.shard;
    if (l->cur == i && (!l->shuffle || l->perm))
        return 0;
    unmap_cur(l);
    struct shard_info *s = &l->s[i];
    int fd = open(s->path, O_RDONLY);
    if (fd < 0)
        return errprintf(err, "%s: %s", s->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || (size_t)st.st_size < SHARD_HEADER_BYTES) {
        close(fd);
        return errprintf(err, "%s: truncated shard", s->path);
    }
    l->map_len = (size_t)st.st_size;
    l->map = mmap(NULL, l->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (l->map == MAP_FAILED) {
        l->map = NULL;
        return errprintf(err, "%s: mmap: %s", s->path, strerror(errno));
    }
    int width;
    uint64_t count;
    if (shard_parse_header(l->map, l->map_len, s->path, &width, &count, err) < 0 ||
        width != s->width || count != s->count) {
        unmap_cur(l);
        return errprintf(err, "%s: shard changed while in use", s->path);
    }
    l->cur = i;
    /* The seed of this shard's permutation depends only on (seed, epoch, shard), so every rank
     * and every resumed run derives the same order. */
    uint64_t x = l->seed ^ (l->pos.epoch * 0x100000001b3ull) ^ ((uint64_t)i << 40);
    l->pos.rng = train_splitmix64(&x);
    if (l->shuffle) {
        size_t bytes; // nwin < count <= the file's size / width, checked all the same
        if (mtc_size_mul(s->nwin ? s->nwin : 1, sizeof *l->perm, &bytes) == 0)
            l->perm = malloc(bytes);
        if (!l->perm) {
            unmap_cur(l);
            return errprintf(err, "%s: out of memory for window order", s->path);
        }
        for (uint64_t w = 0; w < s->nwin; w++)
            l->perm[w] = w;
        uint64_t r = l->pos.rng;
        for (uint64_t w = s->nwin; w > 1; w--) {
            uint64_t j = train_splitmix64(&r) % w;
            uint64_t tmp = l->perm[w - 1];
            l->perm[w - 1] = l->perm[j];
            l->perm[j] = tmp;
        }
    }
    return 0;
}

void loader_destroy(struct loader *l)
{
    if (!l)
        return;
    int e = errno;
    unmap_cur(l);
    for (int i = 0; i < l->ns; i++)
        free(l->s[i].path);
    free(l->s);
    free(l);
    errno = e;
}

/* Read a shard's header to learn its size; the whole file is validated against it. */
static int probe_shard(struct shard_info *s, int B, int T, int nranks, mtc_error_t *err)
{
    unsigned char h[SHARD_HEADER_BYTES];
    int fd = open(s->path, O_RDONLY);
    if (fd < 0)
        return errprintf(err, "%s: %s", s->path, strerror(errno));
    struct stat st;
    ssize_t got = fstat(fd, &st) == 0 ? read(fd, h, sizeof h) : -1;
    close(fd);
    if (got < 0)
        return errprintf(err, "%s: %s", s->path, strerror(errno));
    if (shard_parse_header(h, got < (ssize_t)sizeof h ? (size_t)got : (size_t)st.st_size, s->path,
                           &s->width, &s->count, err) < 0)
        return -1;
    s->nwin = s->count > 0 ? (s->count - 1) / (uint64_t)T : 0;
    s->nb = s->nwin / ((uint64_t)B * (uint64_t)nranks);
    return 0;
}

struct loader *loader_create(const char *dir, const char *split, int B, int T, int rank,
                             int nranks, uint64_t seed, int shuffle, mtc_error_t *err)
{
    if (B <= 0 || T <= 0 || nranks <= 0 || rank < 0 || rank >= nranks) {
        errprintf(err, "loader: bad shape B=%d T=%d rank=%d/%d", B, T, rank, nranks);
        return NULL;
    }
    if (strlen(split) > 32) {
        errprintf(err, "loader: split name too long");
        return NULL;
    }
    DIR *d = opendir(dir);
    if (!d) {
        errprintf(err, "%s: %s", dir, strerror(errno));
        return NULL;
    }
    struct loader *l = calloc(1, sizeof *l);
    char **names = NULL;
    int nn = 0;
    if (!l)
        goto oom;
    l->cur = -1;
    l->B = B, l->T = T, l->rank = rank, l->nranks = nranks;
    l->seed = seed, l->shuffle = shuffle;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!shard_name_matches(de->d_name, split))
            continue;
        char **nn2 = realloc(names, (size_t)(nn + 1) * sizeof *names);
        if (!nn2)
            goto oom;
        names = nn2;
        if (!(names[nn] = strdup(de->d_name)))
            goto oom;
        nn++;
    }
    closedir(d);
    d = NULL;
    if (nn == 0) {
        errprintf(err, "%s: no %s shards (%s_*.bin)", dir, split, split);
        goto error;
    }
    qsort(names, (size_t)nn, sizeof *names, cmp_str);
    if (!(l->s = calloc((size_t)nn, sizeof *l->s)))
        goto oom;
    uint64_t total = 0;
    for (int i = 0; i < nn; i++) {
        if (asprintf(&l->s[i].path, "%s/%s", dir, names[i]) < 0) {
            l->s[i].path = NULL;
            goto oom;
        }
        l->ns = i + 1;
        if (probe_shard(&l->s[i], B, T, nranks, err) < 0)
            goto error;
        total += l->s[i].nb;
    }
    if (total == 0) {
        errprintf(err, "%s: %s shards hold too few tokens for one batch of %d x %d x %d ranks", dir,
                  split, B, T, nranks);
        goto error;
    }
    for (int i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    return l;
oom:
    errprintf(err, "loader: out of memory");
error:
    if (d)
        closedir(d);
    for (int i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    loader_destroy(l);
    return NULL;
}

int loader_next(struct loader *l, int32_t *x, int32_t *y, mtc_error_t *err)
{
    /* Skip to the next shard that still has a batch; wrap into the next epoch. */
    for (int guard = 0; l->pos.offset >= l->s[l->pos.shard].nb; guard++) {
        if (guard > l->ns)
            return errprintf(err, "loader: no batches");
        l->pos.offset = 0;
        if (++l->pos.shard >= (uint64_t)l->ns) {
            l->pos.shard = 0;
            l->pos.epoch++;
        }
        unmap_cur(l);
    }
    if (map_cur(l, err) < 0)
        return -1;
    const struct shard_info *s = &l->s[l->pos.shard];
    const unsigned char *tok = l->map + SHARD_HEADER_BYTES;
    int B = l->B, T = l->T;
    uint64_t first = l->pos.offset * (uint64_t)B * (uint64_t)l->nranks + (uint64_t)l->rank * B;
    for (int b = 0; b < B; b++) {
        uint64_t w = l->perm ? l->perm[first + b] : first + b;
        uint64_t start = w * (uint64_t)T;
        for (int t = 0; t <= T; t++) {
            const unsigned char *p = tok + (start + t) * (uint64_t)s->width;
            int32_t v = s->width == 2 ? (int32_t)(p[0] | p[1] << 8)
                                      : (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                                  (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
            if (t < T)
                x[b * T + t] = v; // x (B,T)
            if (t > 0)
                y[b * T + t - 1] = v; // y (B,T)
        }
    }
    l->pos.offset++;
    return 0;
}

void loader_get_pos(const struct loader *l, struct loader_pos *pos)
{
    *pos = l->pos;
}

int loader_set_pos(struct loader *l, const struct loader_pos *pos, mtc_error_t *err)
{
    if (pos->shard >= (uint64_t)l->ns || pos->offset > l->s[pos->shard].nb)
        return errprintf(err, "loader: position shard %llu offset %llu is outside the data",
                         (unsigned long long)pos->shard, (unsigned long long)pos->offset);
    unmap_cur(l);
    l->pos = *pos;
    if (pos->offset < l->s[pos->shard].nb && map_cur(l, err) < 0)
        return -1;
    return 0;
}

uint64_t loader_batches_per_epoch(const struct loader *l)
{
    uint64_t n = 0;
    for (int i = 0; i < l->ns; i++)
        n += l->s[i].nb;
    return n;
}

uint64_t loader_ntokens(const struct loader *l)
{
    uint64_t n = 0;
    for (int i = 0; i < l->ns; i++)
        n += l->s[i].count;
    return n;
}
