/* mellanox: MELLANOX_VISIBLE_DEVICES and the HCAs' order, as enroot's
 * 99-mellanox.sh reads them (mellanox.h). */
#include "nvidia/mellanox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int name_cmp(const void *a, const void *b)
{
    return strverscmp((const char *)a, (const char *)b);
}

void mlx_sort(mlx_name_t *names, size_t n)
{
    if (n > 1)
        qsort(names, n, sizeof(names[0]), name_cmp);
}

int mlx_visible(const char *mvd, size_t nhca, unsigned char *sel, mtc_error_t *err)
{
    memset(sel, 0, nhca);
    if (!mvd || !*mvd || strcmp(mvd, "void") == 0 || strcmp(mvd, "none") == 0)
        return 0;
    if (strcmp(mvd, "all") == 0) {
        memset(sel, 1, nhca);
        return (int)nhca;
    }
    int n = 0;
    for (const char *p = mvd;;) {
        size_t l = strcspn(p, ",");
        char *end = NULL;
        errno = 0;
        unsigned long id = l && p[0] >= '0' && p[0] <= '9' ? strtoul(p, &end, 10) : 0;
        if (!end || end != p + l || errno) {
            errno = EINVAL;
            return errprintf(err,
                             "MELLANOX_VISIBLE_DEVICES: '%.*s' is not an HCA index (all, none, "
                             "void or a comma list of indices)",
                             (int)(l > 64 ? 64 : l), p);
        }
        if (id >= nhca) {
            errno = ENOENT;
            if (nhca == 0)
                return errprintf(
                    err, "MELLANOX_VISIBLE_DEVICES: '%lu' names no HCA: this node has none", id);
            return errprintf(
                err,
                "MELLANOX_VISIBLE_DEVICES: '%lu' names no HCA of this node (it has %zu: 0-%zu)", id,
                nhca, nhca - 1);
        }
        if (!sel[id])
            n++;
        sel[id] = 1;
        if (!p[l])
            break;
        p += l + 1;
    }
    return n;
}

int mlx_hca_devname(const char *name)
{
    static const char *const prefix[] = {"uverbs", "umad", "issm"};
    for (size_t i = 0; i < sizeof(prefix) / sizeof(prefix[0]); i++) {
        size_t pl = strlen(prefix[i]);
        if (strncmp(name, prefix[i], pl) == 0 && name[pl] &&
            strspn(name + pl, "0123456789") == strlen(name + pl) && strlen(name + pl) <= 6)
            return 1;
    }
    return 0;
}
