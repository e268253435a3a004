/* ib: the node's InfiniBand HCAs inside a container, what enroot's
 * 99-mellanox.sh hook does: MELLANOX_VISIBLE_DEVICES picks HCAs by index in
 * the sorted /sys/class/infiniband, and the container's /dev/infiniband gets
 * rdma_cm and each chosen HCA's uverbsN, umadN and issmN — nothing else of
 * the host's /dev. The tree is "/" on a real node, plugstack.conf's ib=DIR
 * for emulated HCAs (DIR/sys/class/infiniband, DIR/dev/infiniband); the
 * decisions are src/nvidia/mellanox.c's. */
#include "spank/container.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* ROOT + rel into out. */
static void in_tree(const struct container_ib *ib, const char *rel, char *out, size_t len)
{
    snprintf(out, len, "%.511s%.180s", strcmp(ib->root, "/") == 0 ? "" : ib->root, rel);
}

/* The HCAs under ROOT/sys/class/infiniband, sorted (none: no error). */
static void probe_hcas(struct container_ib *ib)
{
    char p[700];
    in_tree(ib, "/sys/class/infiniband", p, sizeof(p));
    DIR *dir = opendir(p);
    struct dirent *e;
    while (dir && (e = readdir(dir)) && ib->nhcas < MLX_MAX_HCAS)
        if (e->d_name[0] != '.' && strlen(e->d_name) < sizeof(ib->hcas[0]))
            snprintf(ib->hcas[ib->nhcas++], sizeof(ib->hcas[0]), "%.63s", e->d_name);
    if (dir)
        closedir(dir);
    mlx_sort(ib->hcas, ib->nhcas);
}

/* name into the plan, once, after checking ROOT/dev/infiniband/name is a
 * character device. 0/-1 + err. */
static int add_dev(struct container_ib *ib, const char *name, mtc_error_t *err)
{
    for (size_t i = 0; i < ib->ndevs; i++)
        if (strcmp(ib->devs[i], name) == 0)
            return 0;
    char rel[64], p[700];
    struct stat st;
    snprintf(rel, sizeof(rel), "/dev/infiniband/%s", name);
    in_tree(ib, rel, p, sizeof(p));
    if (stat(p, &st) < 0)
        return errprintf(err, "InfiniBand: %.600s: %s", p, strerror(errno));
    if (!S_ISCHR(st.st_mode))
        return errprintf(err, "InfiniBand: %.600s: not a character device", p);
    if (ib->ndevs >= CONTAINER_MAX_IB_DEVS || strlen(name) >= sizeof(ib->devs[0]))
        return errprintf(err, "InfiniBand: too many device files");
    snprintf(ib->devs[ib->ndevs++], sizeof(ib->devs[0]), "%s", name);
    return 0;
}

/* Each device of HCA h under its sysfs device's infiniband_verbs/ and
 * infiniband_mad/, into the plan. */
static int add_hca(struct container_ib *ib, size_t h, mtc_error_t *err)
{
    static const char *const classes[] = {"infiniband_verbs", "infiniband_mad"};
    int found = 0;
    for (size_t c = 0; c < 2; c++) {
        char rel[200], p[700];
        snprintf(rel, sizeof(rel), "/sys/class/infiniband/%s/device/%s", ib->hcas[h], classes[c]);
        in_tree(ib, rel, p, sizeof(p));
        DIR *dir = opendir(p);
        struct dirent *e;
        mlx_name_t names[16];
        size_t n = 0;
        while (dir && (e = readdir(dir)) && n < 16)
            if (mlx_hca_devname(e->d_name))
                snprintf(names[n++], sizeof(names[0]), "%.63s", e->d_name);
        if (dir)
            closedir(dir);
        mlx_sort(names, n);
        for (size_t i = 0; i < n; i++) {
            if (add_dev(ib, names[i], err) < 0)
                return -1;
            found += strncmp(names[i], "uverbs", 6) == 0;
        }
    }
    if (!found)
        return errprintf(err, "InfiniBand: HCA %zu (%s) has no uverbs device in sysfs", h,
                         ib->hcas[h]);
    return 0;
}

int container_ib_plan(struct container_ib *ib, const char *root, const struct container_step *s,
                      char **job_env, mtc_error_t *err)
{
    memset(ib, 0, sizeof(*ib));
    snprintf(ib->root, sizeof(ib->root), "%s", root && *root ? root : "/");
    /* the job's value wins over the image's (enroot's ENROOT_ENVIRON order) */
    char mvd[256] = "";
    const char *v = container_job_var(job_env, "MELLANOX_VISIBLE_DEVICES");
    if (v) {
        snprintf(mvd, sizeof(mvd), "%s", v);
    } else {
        char *img = NULL;
        if (container_image_environ(s, &img, err) < 0)
            return -1;
        container_image_var(img, "MELLANOX_VISIBLE_DEVICES", mvd, sizeof(mvd));
        free(img);
    }
    if (!mvd[0] || strcmp(mvd, "void") == 0 || strcmp(mvd, "none") == 0)
        return 0;
    probe_hcas(ib);
    unsigned char sel[MLX_MAX_HCAS];
    int n = mlx_visible(mvd, ib->nhcas, sel, err);
    if (n <= 0)
        return n;
    /* the connection manager's device, shared by every HCA */
    char p[700];
    in_tree(ib, "/dev/infiniband/rdma_cm", p, sizeof(p));
    if (access(p, F_OK) == 0 && add_dev(ib, "rdma_cm", err) < 0)
        return -1;
    for (size_t h = 0; h < ib->nhcas; h++)
        if (sel[h] && add_hca(ib, h, err) < 0)
            return -1;
    return 0;
}

int container_ib_dev(const struct container_ib *ib, int rootfd, mtc_error_t *err)
{
    for (size_t i = 0; i < ib->ndevs; i++) {
        char rel[64], src[700];
        snprintf(rel, sizeof(rel), "/dev/infiniband/%s", ib->devs[i]);
        in_tree(ib, rel, src, sizeof(src));
        /* as enroot's hook: read-only, nosuid, noexec (a device still opens
         * for writing), keeping the source's nodev */
        if (container_bind_in(rootfd, src, rel, 1, MS_RDONLY | MS_NOSUID | MS_NOEXEC, 1, "",
                              err) < 0)
            return -1;
    }
    return 0;
}
