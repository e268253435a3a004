/* checks: the check table — every check mtc-agent runs, its family, the
 * severity of its FAIL, whether it is on by default and costly, and what it
 * checks (`mtc-agent checks` prints it). The functions it names are the
 * check files' (gpu.c, node.c, storage.c, probe.c, xid.c); the runner
 * (health.c) and the policy (policy.c) read it. */
#include "health/health.h"

const struct health_check health_checks[] = {
    {"gpu.count", "gpu", health_gpu_count, HEALTH_SEV_REBOOT, 0, 0,
     "NVML reachable and the expected number of GPUs visible"},
    {"gpu.ecc", "gpu", health_gpu_ecc, HEALTH_SEV_REBOOT, 0, 0,
     "volatile uncorrected ECC errors at most gpuMaxUncorrectedEcc"},
    {"gpu.remap", "gpu", health_gpu_remap, HEALTH_SEV_REPLACE, 0, 0,
     "no row-remapping failure or pending remap; retired pages at most gpuMaxRetiredPages"},
    {"gpu.temp", "gpu", health_gpu_temp, HEALTH_SEV_REPLACE, 0, 0,
     "GPU temperature below gpuTempWarnC / gpuTempFailC"},
    {"gpu.throttle", "gpu", health_gpu_throttle, HEALTH_SEV_REPLACE, 0, 0,
     "no hardware or thermal clock slowdown"},
    {"gpu.xid", "gpu", health_xid, HEALTH_SEV_REBOOT, 0, 0,
     "no critical NVRM Xid in the kernel log since the agent started"},
    {"gpu.dcgm", "gpu", health_gpu_dcgm, HEALTH_SEV_REPLACE, 1, 0,
     "dcgmi diag -r dcgmDiagLevel passes (prolog only; skipped without DCGM)"},
    {"disk", "disk", health_disk, HEALTH_SEV_REIMAGE, 0, 0,
     "free space and inodes on /, shared, local and checkpoint dirs"},
    {"nic", "nic", health_nic, HEALTH_SEV_REBOOT, 0, 0,
     "primary interface up with an IPv4 address"},
    {"speed.compute", "speed", health_speed_compute, HEALTH_SEV_REPLACE, 0, 1,
     "sgemm-like probe GFLOP/s against the machine type's baseline"},
    {"speed.membw", "speed", health_speed_membw, HEALTH_SEV_REPLACE, 0, 1,
     "memory-copy GB/s against the machine type's baseline"},
    {"sdc", "sdc", health_sdc, HEALTH_SEV_REPLACE, 0, 0,
     "deterministic integer+FMA computation matches the known answer bit for bit"},
    {"daemon.slurmd", "daemon", health_daemon_slurmd, HEALTH_SEV_RESTART, 0, 0,
     "slurmd alive (pid file) and accepting connections on its port"},
    {"daemon.munged", "daemon", health_daemon_munged, HEALTH_SEV_RESTART, 0, 0,
     "munged answers: munge -n | unmunge round trip on its socket"},
    /* a restart remounts what vanished (mtc-host up); a node that still does
     * not see the experiment root escalates */
    {"storage.shared", "storage", health_storage_shared, HEALTH_SEV_RESTART, 0, 0,
     "shared mounts in place; the experiment root holds the controller's marker and takes a "
     "small write+fsync (value: ms)"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};
