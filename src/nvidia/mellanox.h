/* mellanox: which InfiniBand HCAs a container gets, decided the way enroot's
 * 99-mellanox.sh hook decides it — pure logic, no mounts: the node's HCAs
 * numbered in their sorted order, MELLANOX_VISIBLE_DEVICES read against
 * them, and the /dev/infiniband files an HCA brings. The container plugin
 * (src/spank/ib.c) reads the node's tree and does the mounting. */
#ifndef MTC_MELLANOX_H
#define MTC_MELLANOX_H

#include <stddef.h>

#include "common/common.h"

/* The most HCAs a node is read for. */
#define MLX_MAX_HCAS 64

/* An HCA's name as /sys/class/infiniband lists it ("mlx5_0"). */
typedef char mlx_name_t[64];

/* names[0..n) sorted in the order the container numbers them: by name, a
 * number inside a name compared as a number ("mlx5_2" before "mlx5_10"). */
void mlx_sort(mlx_name_t *names, size_t n);

/* MELLANOX_VISIBLE_DEVICES (mvd) against a node of nhca HCAs: NULL, "",
 * "void" or "none": none; "all": every one; else a comma list of indices
 * into the sorted list. sel[0..nhca) set to 1 for each chosen HCA, 0 else.
 * The number chosen, or -1 + err naming the entry that is no HCA's index. */
int mlx_visible(const char *mvd, size_t nhca, unsigned char *sel, mtc_error_t *err);

/* 1 when name is one of an HCA's device files under /dev/infiniband:
 * uverbsN (verbs), umadN and issmN (management datagrams, per port). */
int mlx_hca_devname(const char *name);

#endif
