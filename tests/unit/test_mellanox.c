/* test_mellanox: the pure part of InfiniBand in containers — the HCAs'
 * order, MELLANOX_VISIBLE_DEVICES (all, none, void, unset, indices, and
 * values that name no HCA), and which /dev/infiniband names an HCA brings. */
#include "check.h"
#include "nvidia/mellanox.h"

#include <errno.h>
#include <string.h>

static void test_sort(void)
{
    mlx_name_t n[] = {"mlx5_10", "mlx5_2", "mlx4_0", "mlx5_0"};
    mlx_sort(n, 4);
    CHECK(strcmp(n[0], "mlx4_0") == 0 && strcmp(n[1], "mlx5_0") == 0 &&
              strcmp(n[2], "mlx5_2") == 0 && strcmp(n[3], "mlx5_10") == 0,
          "sorted by name, numbers as numbers (%s %s %s %s)", n[0], n[1], n[2], n[3]);
}

static void test_visible(void)
{
    unsigned char sel[4];
    mtc_error_t err;
    CHECK(mlx_visible(NULL, 3, sel, &err) == 0 && !sel[0] && !sel[1] && !sel[2],
          "unset: no HCA (enroot's default, void)");
    CHECK(mlx_visible("", 3, sel, &err) == 0, "empty: none");
    CHECK(mlx_visible("void", 3, sel, &err) == 0, "void: none");
    CHECK(mlx_visible("none", 3, sel, &err) == 0, "none: none");
    CHECK(mlx_visible("all", 3, sel, &err) == 3 && sel[0] && sel[1] && sel[2], "all: every HCA");
    CHECK(mlx_visible("all", 0, sel, &err) == 0, "all on a node without HCAs: none, no error");
    CHECK(mlx_visible("1", 3, sel, &err) == 1 && !sel[0] && sel[1] && !sel[2],
          "1: the second only");
    CHECK(mlx_visible("2,0,2", 3, sel, &err) == 2 && sel[0] && !sel[1] && sel[2],
          "a list, a repeat counted once");
    CHECK(mlx_visible("3", 3, sel, &err) < 0 && errno == ENOENT && strstr(err.text, "'3'") &&
              strstr(err.text, "0-2") && !strchr(err.text, '\n'),
          "an index past the last HCA is named, with the node's range (%s)", err.text);
    CHECK(mlx_visible("0", 0, sel, &err) < 0 && strstr(err.text, "has none"),
          "any index on a node without HCAs (%s)", err.text);
    static const char *const bad[] = {"mlx5_0", "-1",  "1,", ",1",
                                      "1,,2",   "0x1", " 1", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(mlx_visible(bad[i], 3, sel, &err) < 0 && strstr(err.text, "MELLANOX_VISIBLE_DEVICES"),
              "'%s' refused in one line (%s)", bad[i], err.text);
}

static void test_devnames(void)
{
    static const char *const good[] = {"uverbs0", "uverbs12", "umad1", "issm0"};
    static const char *const bad[] = {"rdma_cm", "uverbs", "uverbs0x", "../null",
                                      "umad-1",  "uevent", "ucm0x"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        CHECK(mlx_hca_devname(good[i]), "%s is an HCA's device", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(!mlx_hca_devname(bad[i]), "%s is not", bad[i]);
}

int main(void)
{
    test_sort();
    test_visible();
    test_devnames();
    return check_done();
}
