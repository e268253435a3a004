/* sizing: Slurm's timeouts and fan-out for the number of slurmds sharing one
 * host. An emulated node costs the host CPU at every step launch (slurmd
 * forks a slurmstepd, runs the prolog: mtc-agent's checks) and at every job
 * end (the epilog), so launching a step on n nodes of one host takes time in
 * proportion to n per core, and Slurm's fixed 10 s MessageTimeout fails it
 * (measured: `srun -N64 true` on 2 cores, prologs of 24-32 s). The formula
 * is documented in docs/clusters.md ("Emulated nodes: sizing"). */
#include "slurm/slurm.h"

void slurm_sizing_for(int nodes_on_host, int host_cores, struct slurm_sizing *s)
{
    int n = nodes_on_host > 0 ? nodes_on_host : 1;
    int c = host_cores > 0 ? host_cores : 1;
    /* 2 s per emulated node per core: the launch measured ~0.5 CPU-s a node
     * (prolog + slurmstepd), and the host is shared (x4 margin) */
    int per_core = (2 * n + c - 1) / c;
    s->message_timeout = per_core < SLURM_MSG_TIMEOUT ? SLURM_MSG_TIMEOUT
                         : per_core > SLURM_MSG_TIMEOUT_MAX ? SLURM_MSG_TIMEOUT_MAX
                                                            : per_core;
    /* a node is declared dead after two unanswered pings' worth, never less
     * than the usual 60 s */
    s->slurmd_timeout = 2 * s->message_timeout > SLURM_SLURMD_TIMEOUT ? 2 * s->message_timeout
                                                                      : SLURM_SLURMD_TIMEOUT;
    /* one host: no relaying through other slurmds (each tree level adds a
     * MessageTimeout and a slurmd doing the relaying); srun and slurmctld
     * talk to every slurmd themselves. 0: Slurm's default */
    s->tree_width = n > 1 ? (n > SLURM_TREE_WIDTH_MAX ? SLURM_TREE_WIDTH_MAX : n) : 0;
    /* many nodes a core: spread the health checks over the interval instead
     * of running them all at once */
    s->health_cycle = n > 4 * c;
}
