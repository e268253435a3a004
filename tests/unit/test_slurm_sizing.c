/* test_slurm_sizing: Slurm's timeouts and fan-out for the slurmds sharing one
 * host (slurm_sizing_for) and how slurm.conf renders them. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "slurm/slurm.h"

static int count_lines(const char *text, const char *prefix)
{
    int n = 0;
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        n += strncmp(p, prefix, strlen(prefix)) == 0;
    return n;
}

int main(void)
{
    struct slurm_sizing z;
    slurm_sizing_for(1, 2, &z);
    CHECK(z.message_timeout == 10 && z.slurmd_timeout == 60 && z.tree_width == 0 &&
              !z.health_cycle,
          "one node: Slurm's usual 10 s / 60 s, default TreeWidth, no cycling (got %d %d %d %d)",
          z.message_timeout, z.slurmd_timeout, z.tree_width, z.health_cycle);
    slurm_sizing_for(4, 2, &z);
    CHECK(z.message_timeout == 10 && z.slurmd_timeout == 60 && z.tree_width == 4 &&
              !z.health_cycle,
          "4 nodes on 2 cores: still 10 s, flat tree of 4 (got %d %d %d)", z.message_timeout,
          z.slurmd_timeout, z.tree_width);
    slurm_sizing_for(16, 2, &z);
    CHECK(z.message_timeout == 16 && z.tree_width == 16 && z.health_cycle,
          "16 nodes on 2 cores: 16 s, flat, health checks cycled (got %d %d %d)",
          z.message_timeout, z.tree_width, z.health_cycle);
    slurm_sizing_for(64, 2, &z);
    CHECK(z.message_timeout == 64 && z.slurmd_timeout == 128 && z.tree_width == 64,
          "64 nodes on 2 cores: 64 s, SlurmdTimeout 128 s, flat (got %d %d %d)",
          z.message_timeout, z.slurmd_timeout, z.tree_width);
    slurm_sizing_for(64, 64, &z);
    CHECK(z.message_timeout == 10 && !z.health_cycle,
          "64 nodes on 64 cores: 10 s, no cycling (got %d)", z.message_timeout);
    slurm_sizing_for(65, 2, &z);
    CHECK(z.message_timeout == 65, "rounded up: 65 nodes on 2 cores → 65 s (got %d)",
          z.message_timeout);
    slurm_sizing_for(256, 2, &z);
    CHECK(z.message_timeout == 100 && z.slurmd_timeout == 200,
          "capped at 100 s (Slurm warns above) (got %d %d)", z.message_timeout,
          z.slurmd_timeout);
    slurm_sizing_for(70000, 1, &z);
    CHECK(z.tree_width == 65533, "TreeWidth capped at Slurm's maximum (got %d)", z.tree_width);
    slurm_sizing_for(0, 0, &z);
    CHECK(z.message_timeout == 10 && z.tree_width == 0, "nonsense input: the usual values");

    /* rendering */
    json_t *spec = json_pack("{s:[], s:{s:{s:[]}}}", "nodePools", "orchestratorSpec", "slurmSpec",
                             "partitions");
    struct slurm_layout l = {.cluster = "c1",
                             .dir = "/tmp/c1",
                             .hostname = "h",
                             .ctld_port = 20000,
                             .slurmd_port = 20001,
                             .health_interval = 30};
    mtc_error_t err = {{0}};
    char *text = slurm_conf_render(spec, &l, &err);
    CHECK(text && strstr(text, "\nMessageTimeout=10\n") && strstr(text, "\nSlurmdTimeout=60\n") &&
              !strstr(text, "TreeWidth") && strstr(text, "\nHealthCheckNodeState=ANY\n"),
          "zero sizing renders the usual values");
    free(text);
    slurm_sizing_for(64, 2, &l.sizing);
    text = slurm_conf_render(spec, &l, &err);
    CHECK(text && strstr(text, "\nMessageTimeout=64\n") && strstr(text, "\nSlurmdTimeout=128\n") &&
              strstr(text, "\nTreeWidth=64\n") &&
              strstr(text, "\nHealthCheckNodeState=ANY,CYCLE\n"),
          "64 nodes on 2 cores rendered");
    CHECK(text && count_lines(text, "MessageTimeout=") == 1 &&
              count_lines(text, "SlurmdTimeout=") == 1,
          "each key once");
    free(text);
    json_decref(spec);
    return check_done();
}
