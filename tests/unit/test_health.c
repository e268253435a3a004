/* test_health: every check PASSes and FAILs through real mechanisms — the
 * fake NVML library loaded by path with its state file changed between
 * passes, XID lines appended to a kernel-log file, a small tmpfs filled up,
 * lo vs a missing interface, the SDC probe under a faulty fma() (LD_PRELOAD),
 * real munged and pid files — plus healthPolicy validation messages. */
#include <errno.h>
#include <libgen.h>
#include <sched.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "health/health.h"

/* test paths are short; truncation warnings on fixed buffers are noise */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static char fakes[1024], tmp[1024], state[1100];

static void write_state(const char *text)
{
    mtc_write_file_atomic(state, text, strlen(text), 0644);
}

/* Run one check by name; returns its result. */
static struct health_result run1(const struct health_ctx *ctx, const char *name)
{
    struct health_result r[HEALTH_MAX_CHECKS];
    mtc_error_t err = {""};
    memset(r, 0, sizeof(r[0]));
    int n = health_run(ctx, name, r, HEALTH_MAX_CHECKS, &err);
    if (n != 1) {
        printf("# health_run(%s) = %d: %s\n", name, n, err.text);
        snprintf(r[0].reason, sizeof(r[0].reason), "health_run returned %d", n);
        r[0].status = -1;
    }
    return r[0];
}

#define EXPECT(ctx, name, st, sev, substr)                                                         \
    do {                                                                                           \
        struct health_result r_ = run1(ctx, name);                                                 \
        CHECK(r_.status == (st) && r_.severity == (sev) && strstr(r_.reason, substr),              \
              "%s: %s/%s \"%s\" (want %s/%s ~\"%s\")", name, health_status_name(r_.status),        \
              health_severity_name(r_.severity), r_.reason, health_status_name(st),                \
              health_severity_name(sev), substr);                                                  \
    } while (0)

static void test_policy(void)
{
    mtc_error_t err = {""};
    json_t *p = health_policy_normalize(NULL, &err);
    CHECK(p && json_number_value(json_object_get(p, "diskMinFreePercent")) == 5,
          "defaults: diskMinFreePercent 5");
    CHECK(p && json_array_size(json_object_get(p, "checks")) == 7, "defaults: seven families");
    CHECK(p && json_array_size(json_object_get(p, "xidFail")) == 8,
          "defaults: eight critical XIDs");
    CHECK(p && json_object_size(p) == 22, "defaults: every field present (%zu)",
          json_object_size(p));
    CHECK(p && json_integer_value(json_object_get(p, "maxConcurrentRemediations")) == 32 &&
              json_number_value(json_object_get(p, "maxDrainedFraction")) == 0.1,
          "defaults: 32 remediations at once, 10%% of a pool drained");
    struct health_policy lim;
    CHECK(health_policy_parse(p, &lim, &err) == 0 && lim.max_concurrent_remediations == 32 &&
              lim.max_drained_fraction == 0.1,
          "the remediation limits reach struct health_policy");
    json_decref(p);

    json_t *in = json_loads("{\"disk_min_free_percent\": 20, \"diskWarnFreePercent\": \"30\","
                            " \"checks\": [\"gpu\", \"disk\", \"sdc\"], \"gpu_temp_fail_c\": 90,"
                            " \"nic_interface\": \"eth0\"}",
                            0, NULL);
    p = health_policy_normalize(in, &err);
    CHECK(p && json_number_value(json_object_get(p, "diskMinFreePercent")) == 20,
          "snake_case key accepted and camelCased");
    CHECK(p && json_number_value(json_object_get(p, "diskWarnFreePercent")) == 30,
          "quoted number accepted");
    CHECK(p && !json_object_get(p, "disk_min_free_percent"), "output is camelCase only");
    struct health_policy hp;
    CHECK(health_policy_parse(in, &hp, &err) == 0 && hp.nchecks == 3 && hp.gpu_temp_fail_c == 90 &&
              !strcmp(hp.nic_interface, "eth0") && hp.speed_fail_fraction == 0.5,
          "policy parses into the struct");
    /* canonical form is a fixed point */
    json_t *p2 = health_policy_normalize(p, &err);
    CHECK(p2 && json_equal(p, p2), "normalize(normalize(x)) == normalize(x)");
    json_decref(p2);
    json_decref(p);
    json_decref(in);

    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"diskMinFreePercent\": 101}",
         "healthPolicy.diskMinFreePercent: must be a number from 0 to 100"},
        {"{\"diskMinFreePercent\": \"lots\"}",
         "healthPolicy.diskMinFreePercent: must be a number from 0 to 100"},
        {"{\"diskMinFreePercnt\": 5}", "healthPolicy.diskMinFreePercnt: unknown field"},
        {"{\"intervalSeconds\": 1.5}",
         "healthPolicy.intervalSeconds: must be an integer from 1 to 3600"},
        {"{\"checks\": [\"gpu\", \"gpuu\"]}",
         "healthPolicy.checks[1]: unknown check \"gpuu\" (see `mtc-agent checks`)"},
        {"{\"gpuTempWarnC\": 99}", "healthPolicy.gpuTempWarnC: must not be above gpuTempFailC"},
        {"{\"xidFail\": [79, 0]}", "healthPolicy.xidFail[1]: must be an integer from 1 to 1000"},
        {"{\"gpuThrottleFail\": 1}", "healthPolicy.gpuThrottleFail: must be true or false"},
        {"{\"nicInterface\": \"eth0; reboot\"}",
         "healthPolicy.nicInterface: must be a network interface name (up to 15 of "
         "[A-Za-z0-9-_.:@])"},
        {"{\"diskMinFreePercent\": 5, \"disk_min_free_percent\": 6}",
         "healthPolicy.diskMinFreePercent: field given twice (snake_case and camelCase)"},
        {"[1]", "healthPolicy: must be an object"},
        {"{\"maxConcurrentRemediations\": 0}",
         "healthPolicy.maxConcurrentRemediations: must be an integer from 1 to 1024"},
        {"{\"maxConcurrentRemediations\": 1025}",
         "healthPolicy.maxConcurrentRemediations: must be an integer from 1 to 1024"},
        {"{\"maxDrainedFraction\": 1.5}",
         "healthPolicy.maxDrainedFraction: must be a number from 0 to 1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        in = json_loads(bad[i].json, 0, NULL);
        err.text[0] = '\0';
        p = health_policy_normalize(in, &err);
        CHECK(!p && errno == EINVAL, "rejects %s", bad[i].json);
        CHECK_STR(err.text, bad[i].msg, "message for %s", bad[i].json);
        json_decref(p);
        json_decref(in);
    }
}

static void test_config(void)
{
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    json_t *c = json_loads("{\"node_id\": \"n3\", \"expectedGpus\": 8, \"clusterId\": \"c1\","
                           " \"healthPolicy\": {\"diskMinFreePercent\": 7}}",
                           0, NULL);
    CHECK(health_ctx_configure(&ctx, c, &err) == 0 && !strcmp(ctx.node, "n3") &&
              ctx.expected_gpus == 8 && ctx.policy.disk_min_free_percent == 7,
          "config: snake_case node_id, expectedGpus, healthPolicy applied");
    json_decref(c);
    c = json_loads("{\"nodeName\": \"x\"}", 0, NULL);
    CHECK(health_ctx_configure(&ctx, c, &err) < 0, "config: unknown field rejected");
    CHECK_STR(err.text, "config.nodeName: unknown field", "config: message names the field");
    json_decref(c);
    c = json_loads("{\"healthPolicy\": {\"speedFailFraction\": 2}}", 0, NULL);
    CHECK(health_ctx_configure(&ctx, c, &err) < 0, "config: bad policy rejected");
    CHECK_STR(err.text, "healthPolicy.speedFailFraction: must be a number from 0 to 1",
              "config: policy message");
    json_decref(c);
    struct health_result r[4];
    CHECK(health_run(&ctx, "disk,gpuu", r, 4, &err) < 0 &&
              !strcmp(err.text, "unknown check \"gpuu\" (see `mtc-agent checks`)"),
          "health_run rejects an unknown --only name: %s", err.text);
    health_ctx_release(&ctx);
}

static void test_gpu(void)
{
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    snprintf(ctx.nvml_library, sizeof(ctx.nvml_library), "%s/libnvml.so", fakes);
    setenv("FAKE_NVML_STATE", state, 1);
    ctx.expected_gpus = 2;

    write_state("count 2\n");
    EXPECT(&ctx, "gpu.count", HEALTH_PASS, HEALTH_SEV_NONE, "2 GPUs visible");
    EXPECT(&ctx, "gpu.ecc", HEALTH_PASS, HEALTH_SEV_NONE, "2 of 2 GPUs checked");
    EXPECT(&ctx, "gpu.remap", HEALTH_PASS, HEALTH_SEV_NONE, "2 of 2");
    EXPECT(&ctx, "gpu.temp", HEALTH_PASS, HEALTH_SEV_NONE, "2 of 2");
    EXPECT(&ctx, "gpu.throttle", HEALTH_PASS, HEALTH_SEV_NONE, "2 of 2");

    write_state("count 1\n");
    EXPECT(&ctx, "gpu.count", HEALTH_FAIL, HEALTH_SEV_REBOOT, "1 GPUs visible, expected 2");
    write_state("count 2\ngpu 1 ecc=3\n");
    EXPECT(&ctx, "gpu.ecc", HEALTH_FAIL, HEALTH_SEV_REBOOT,
           "GPU 1: 3 volatile uncorrected ECC errors (max 0)");
    ctx.policy.gpu_max_uncorrected_ecc = 3;
    EXPECT(&ctx, "gpu.ecc", HEALTH_PASS, HEALTH_SEV_NONE, "2 of 2");
    ctx.policy.gpu_max_uncorrected_ecc = 0;

    write_state("count 2\ngpu 0 remap_pending=1\n");
    EXPECT(&ctx, "gpu.remap", HEALTH_FAIL, HEALTH_SEV_REBOOT, "GPU 0: row remap pending");
    write_state("count 2\ngpu 0 remap_pending=1\ngpu 1 remap_failure=1 remap_unc=5\n");
    EXPECT(&ctx, "gpu.remap", HEALTH_FAIL, HEALTH_SEV_REPLACE, "GPU 1: row remapping failed");
    write_state("count 2\ngpu 0 no_remap=1 retired=70\ngpu 1 no_remap=1 retired=3\n");
    EXPECT(&ctx, "gpu.remap", HEALTH_FAIL, HEALTH_SEV_REPLACE, "GPU 0: 70 retired pages (max 60)");
    write_state("count 2\ngpu 0 no_remap=1 retired=3\n");
    EXPECT(&ctx, "gpu.remap", HEALTH_PASS, HEALTH_SEV_NONE, "2 of 2");

    write_state("count 2\ngpu 1 temp=90\n");
    EXPECT(&ctx, "gpu.temp", HEALTH_WARN, HEALTH_SEV_NONE, "GPU 1: 90 C (warn at 85 C)");
    write_state("count 2\ngpu 1 temp=90\ngpu 0 temp=97\n");
    EXPECT(&ctx, "gpu.temp", HEALTH_FAIL, HEALTH_SEV_REPLACE, "GPU 0: 97 C (fail at 95 C)");

    write_state("count 2\ngpu 0 throttle=0x1\ngpu 1 throttle=0x4\n");
    EXPECT(&ctx, "gpu.throttle", HEALTH_PASS, HEALTH_SEV_NONE, "2 of 2"); /* idle, power cap */
    write_state("count 2\ngpu 1 throttle=0x48\n");
    EXPECT(&ctx, "gpu.throttle", HEALTH_WARN, HEALTH_SEV_NONE,
           "GPU 1: clocks throttled: hw_slowdown,hw_thermal_slowdown");
    ctx.policy.gpu_throttle_fail = 1;
    EXPECT(&ctx, "gpu.throttle", HEALTH_FAIL, HEALTH_SEV_REPLACE, "hw_slowdown");
    ctx.policy.gpu_throttle_fail = 0;

    write_state("count 2\ngpu 1 lost=1\n");
    EXPECT(&ctx, "gpu.ecc", HEALTH_FAIL, HEALTH_SEV_REBOOT, "GPU 1: GPU is lost");
    EXPECT(&ctx, "gpu.temp", HEALTH_FAIL, HEALTH_SEV_REBOOT, "GPU 1: GPU is lost");

    write_state("count 2\nunreachable 1\n");
    EXPECT(&ctx, "gpu.count", HEALTH_FAIL, HEALTH_SEV_REBOOT,
           "NVML not reachable: nvmlInit: Driver Not Loaded");
    EXPECT(&ctx, "gpu.ecc", HEALTH_WARN, HEALTH_SEV_NONE, "not checked: NVML not reachable");
    write_state("count 2\n"); /* the driver comes back: the same process sees it */
    EXPECT(&ctx, "gpu.count", HEALTH_PASS, HEALTH_SEV_NONE, "2 GPUs visible");

    /* one pass over the whole family reads the state once per query */
    struct health_result r[16];
    write_state("count 2\ngpu 0 ecc=1\n");
    int n = health_run(&ctx, "gpu", r, 16, &err);
    int sev = -1;
    CHECK(n == 6 && health_worst(r, n, &sev) == HEALTH_FAIL && sev == HEALTH_SEV_REBOOT,
          "family run: 6 results (dcgm is prolog-only), worst FAIL/REBOOT");
    json_t *j = health_results_json(r, n);
    json_t *e = json_array_get(j, 1);
    CHECK_STR(json_string_value(json_object_get(e, "status")), "FAIL", "json status");
    CHECK_STR(json_string_value(json_object_get(e, "severity")), "REBOOT", "json severity");
    CHECK(json_number_value(json_object_get(e, "value")) == 1, "json value = ECC count");
    /* mtcd parses what the agent sent back into the same structs */
    struct health_result back[16];
    CHECK(health_results_parse(j, back, 16, &err) == n && back[1].status == HEALTH_FAIL &&
              back[1].severity == HEALTH_SEV_REBOOT && !strcmp(back[1].check, "gpu.ecc") &&
              back[1].value == 1 && !strcmp(back[1].reason, r[1].reason),
          "results JSON parses back: %s", err.text);
    json_decref(j);
    static const struct {
        const char *json, *msg;
    } badr[] = {
        {"[{\"check\": \"gpu.ecc\", \"status\": \"BAD\"}]",
         "results[0].status: must be one of PASS, WARN, FAIL"},
        {"[{\"check\": \"gpu.eccs\", \"status\": \"PASS\"}]",
         "results[0].check: unknown check \"gpu.eccs\""},
        {"[{\"check\": \"disk\", \"status\": \"FAIL\", \"severity\": \"NUKE\"}]",
         "results[0].severity: must be one of NONE, RESTART, REBOOT, REIMAGE, REPLACE"},
        {"[{\"check\": \"disk\", \"status\": \"PASS\", \"extra\": 1}]",
         "results[0].extra: unknown field"},
        {"{}", "results: must be an array"},
    };
    for (size_t i = 0; i < sizeof(badr) / sizeof(badr[0]); i++) {
        j = json_loads(badr[i].json, 0, NULL);
        CHECK(health_results_parse(j, back, 16, &err) < 0, "results rejected: %s", badr[i].json);
        CHECK_STR(err.text, badr[i].msg, "results message");
        json_decref(j);
    }
    CHECK_STR(health_fault_behavior("gpu.xid"), "UNRECOVERABLE_GPU_ERROR", "behavior gpu");
    CHECK_STR(health_fault_behavior("sdc"), "SILENT_DATA_CORRUPTION", "behavior sdc");
    CHECK_STR(health_fault_behavior("speed.membw"), "PERFORMANCE", "behavior speed");
    CHECK_STR(health_fault_behavior("disk"), "BEHAVIOR_UNSPECIFIED", "behavior other");

    /* GPU-less host: no library at all */
    snprintf(ctx.nvml_library, sizeof(ctx.nvml_library), "%s/libnvml-missing.so", tmp);
    ctx.expected_gpus = 0;
    EXPECT(&ctx, "gpu.count", HEALTH_PASS, HEALTH_SEV_NONE, "no GPUs expected");
    EXPECT(&ctx, "gpu.ecc", HEALTH_PASS, HEALTH_SEV_NONE, "skipped: no GPUs expected");
    ctx.expected_gpus = 8;
    EXPECT(&ctx, "gpu.count", HEALTH_FAIL, HEALTH_SEV_REBOOT, "NVML not reachable: cannot load");
    health_ctx_release(&ctx);
}

static void append(const char *path, const char *line)
{
    FILE *f = fopen(path, "a");
    fputs(line, f);
    fclose(f);
}

static void test_xid(void)
{
    char klog[PATH_MAX + 16], sdir[PATH_MAX + 16];
    snprintf(klog, sizeof(klog), "%s/kern.log", tmp);
    snprintf(sdir, sizeof(sdir), "%s/agent-state", tmp);
    mtc_mkdir_p(sdir, 0755);
    append(klog, "[  1.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n");
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    json_t *c = json_pack("{s:s, s:s}", "kernelLog", klog, "stateDir", sdir);
    CHECK(health_ctx_configure(&ctx, c, &err) == 0, "configure kernel log: %s", err.text);
    json_decref(c);
    EXPECT(&ctx, "gpu.xid", HEALTH_PASS, HEALTH_SEV_NONE, "no critical Xid"); /* before start */
    append(klog, "[  9.0] NVRM: Xid (PCI:0000:5d:00): 13, Graphics Exception\n");
    EXPECT(&ctx, "gpu.xid", HEALTH_WARN, HEALTH_SEV_NONE,
           "Xid 13 on PCI:0000:5d:00 (not critical)");
    EXPECT(&ctx, "gpu.xid", HEALTH_PASS, HEALTH_SEV_NONE, "no critical Xid"); /* warn is per pass */
    append(klog, "[ 10.0] usb 1-1: new device\n[ 11.0] NVRM: Xid (PCI:0000:3b:00): 79, "
                 "pid=1234, name=python, GPU has fallen off the bus.\n");
    EXPECT(&ctx, "gpu.xid", HEALTH_FAIL, HEALTH_SEV_REBOOT,
           "Xid 79 on PCI:0000:3b:00: GPU has fallen off the bus");
    EXPECT(&ctx, "gpu.xid", HEALTH_FAIL, HEALTH_SEV_REBOOT, "Xid 79"); /* latched */
    append(klog, "[ 12.0] NVRM: Xid (PCI:0000:3b:00): 64, ECC page retirement failure\n");
    struct health_result r = run1(&ctx, "gpu.xid");
    CHECK(r.status == HEALTH_FAIL && r.severity == HEALTH_SEV_REPLACE && r.value == 64,
          "a worse XID escalates the latch to REPLACE: %s", r.reason);
    health_ctx_release(&ctx);

    /* a new agent process with the same state dir resumes: latched, old lines not re-read */
    health_ctx_init(&ctx, &err);
    c = json_pack("{s:s, s:s}", "kernelLog", klog, "stateDir", sdir);
    health_ctx_configure(&ctx, c, &err);
    json_decref(c);
    EXPECT(&ctx, "gpu.xid", HEALTH_FAIL, HEALTH_SEV_REPLACE, "Xid 64");
    health_ctx_release(&ctx);

    /* a state file from another boot does not latch (the reboot was the repair) */
    char sfile[PATH_MAX + 32];
    snprintf(sfile, sizeof(sfile), "%s/kernel-log.state", sdir);
    char *saved = mtc_read_file(sfile, NULL);
    CHECK(saved && strstr(saved, " 64 4 "), "state file holds the latched XID: %s", saved);
    if (saved) {
        char *boot = strchr(strstr(saved, " 64 4 ") + 1, ' ');
        boot = strchr(boot + 1, ' ') + 1;
        boot[0] = boot[0] == '0' ? '1' : '0'; /* another boot id */
        mtc_write_file_atomic(sfile, saved, strlen(saved), 0644);
    }
    free(saved);
    health_ctx_init(&ctx, &err);
    c = json_pack("{s:s, s:s}", "kernelLog", klog, "stateDir", sdir);
    health_ctx_configure(&ctx, c, &err);
    json_decref(c);
    EXPECT(&ctx, "gpu.xid", HEALTH_PASS, HEALTH_SEV_NONE, "no critical Xid");
    health_ctx_release(&ctx);

    /* without a state dir, only lines after start count; a partial line waits */
    health_ctx_init(&ctx, &err);
    c = json_pack("{s:s}", "kernelLog", klog);
    health_ctx_configure(&ctx, c, &err);
    json_decref(c);
    EXPECT(&ctx, "gpu.xid", HEALTH_PASS, HEALTH_SEV_NONE, "no critical Xid");
    append(klog, "[ 13.0] NVRM: Xid (PCI:0000:3b:00): 4");
    EXPECT(&ctx, "gpu.xid", HEALTH_PASS, HEALTH_SEV_NONE, "no critical Xid");
    append(klog, "8, DBE (double bit error)\n");
    EXPECT(&ctx, "gpu.xid", HEALTH_FAIL, HEALTH_SEV_REBOOT, "Xid 48 on PCI:0000:3b:00");
    /* a rotated log (new file) is read from its start */
    health_ctx_release(&ctx);
    health_ctx_init(&ctx, &err);
    c = json_pack("{s:s}", "kernelLog", klog);
    health_ctx_configure(&ctx, c, &err);
    json_decref(c);
    char rotated[PATH_MAX + 32];
    snprintf(rotated, sizeof(rotated), "%s.1", klog);
    rename(klog, rotated);
    append(klog, "NVRM: Xid (PCI:0000:3b:00): 94, Contained ECC error\n");
    EXPECT(&ctx, "gpu.xid", HEALTH_FAIL, HEALTH_SEV_REBOOT, "Xid 94");
    health_ctx_release(&ctx);
}

static void test_disk(void)
{
    char mnt[PATH_MAX + 16], fill[PATH_MAX + 32];
    snprintf(mnt, sizeof(mnt), "%s/small", tmp);
    mtc_mkdir_p(mnt, 0755);
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    snprintf(ctx.local_dir, sizeof(ctx.local_dir), "%s", mnt);
    /* a private mount namespace: the tmpfs goes away with this process even
     * if it crashes */
    if (unshare(CLONE_NEWNS) == 0)
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m,nr_inodes=64") == 0) {
        EXPECT(&ctx, "disk", HEALTH_PASS, HEALTH_SEV_NONE, "all filesystems above 10% free");
        snprintf(fill, sizeof(fill), "%s/fill", mnt);
        char *buf = calloc(1, 1000 * 1024);
        mtc_write_file_atomic(fill, buf, 940 * 1024, 0644); /* ~92% used: warn */
        EXPECT(&ctx, "disk", HEALTH_WARN, HEALTH_SEV_NONE, "% space free (warn below 10%)");
        unlink(fill);
        mtc_write_file_atomic(fill, buf, 1000 * 1024, 0644); /* ~98% used: fail */
        struct health_result r = run1(&ctx, "disk");
        CHECK(r.status == HEALTH_FAIL && r.severity == HEALTH_SEV_REIMAGE &&
                  strstr(r.reason, mnt) && strstr(r.reason, "% space free (min 5%)") && r.value < 5,
              "full tmpfs FAILs naming the dir: %s", r.reason);
        unlink(fill);
        free(buf);
        for (int i = 0; i < 62; i++) { /* inodes: 64 on this mount */
            snprintf(fill, sizeof(fill), "%s/f%d", mnt, i);
            mtc_write_file_fmt(fill, 0644, "x");
        }
        EXPECT(&ctx, "disk", HEALTH_FAIL, HEALTH_SEV_REIMAGE, "% inodes free (min 5%)");
        umount2(mnt, MNT_DETACH);
    } else {
        /* no mount allowed here: a threshold no real filesystem meets */
        printf("# tmpfs mount failed (%s): threshold fallback\n", strerror(errno));
        ctx.policy.disk_min_free_percent = ctx.policy.disk_warn_free_percent = 100;
        EXPECT(&ctx, "disk", HEALTH_FAIL, HEALTH_SEV_REIMAGE, "% space free (min 100%)");
    }
    snprintf(ctx.checkpoint_dir, sizeof(ctx.checkpoint_dir), "%s/vanished", tmp);
    EXPECT(&ctx, "disk", HEALTH_FAIL, HEALTH_SEV_REBOOT, "vanished: No such file or directory");
    health_ctx_release(&ctx);
}

/* storage.shared through the agent's config: the marker decides, a mount
 * that is not one fails, the write+fsync latency is the value. */
static void test_storage(void)
{
    char root[PATH_MAX + 16], marker[PATH_MAX + 64], text[3 * PATH_MAX];
    snprintf(root, sizeof(root), "%s/exp", tmp);
    snprintf(marker, sizeof(marker), "%s/.mtc/c-u.marker", root);
    mtc_mkdir_p(root, 0755);
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    EXPECT(&ctx, "storage.shared", HEALTH_PASS, HEALTH_SEV_NONE, "skipped: no shared storage");
    snprintf(text, sizeof(text),
             "{\"nodeId\":\"n1\",\"mounts\":[\"/\"],\"experimentRoot\":\"%s\","
             "\"storageMarker\":\"%s\",\"storageMarkerContent\":\"0123abcd\"}",
             root, marker);
    json_t *c = json_loads(text, 0, NULL);
    CHECK(health_ctx_configure(&ctx, c, &err) == 0 && ctx.nmounts == 1,
          "configure storage: %s", err.text);
    json_decref(c);
    EXPECT(&ctx, "storage.shared", HEALTH_FAIL, HEALTH_SEV_RESTART, "marker");
    struct health_result r = run1(&ctx, "storage.shared");
    CHECK(strstr(r.reason, "is not the controller's shared storage here") &&
              strstr(r.reason, "missing"),
          "no marker: %s", r.reason);
    mtc_mkdir_p(strrchr(strcpy(text, marker), '/') ? dirname(text) : text, 0755);
    mtc_write_file_fmt(marker, 0644, "ffff\n");
    EXPECT(&ctx, "storage.shared", HEALTH_FAIL, HEALTH_SEV_RESTART, "holds other content");
    mtc_write_file_fmt(marker, 0644, "0123abcd\n");
    r = run1(&ctx, "storage.shared");
    CHECK(r.status == HEALTH_PASS && strstr(r.reason, "write+fsync") && r.value >= 0,
          "same marker: PASS with the write latency (%s, %g ms)", r.reason, r.value);
    /* the agent is root and users write the experiment root: a symlink
     * planted where the probe goes (its old, predictable name) is never
     * followed, a FIFO as the marker never waited on (issue 26) */
    char victim[PATH_MAX + 16], planted[PATH_MAX + 64];
    snprintf(victim, sizeof(victim), "%s/victim", tmp);
    mtc_write_file_fmt(victim, 0600, "root's file\n");
    snprintf(planted, sizeof(planted), "%s/.mtc/.probe-n1.%d", root, (int)getpid());
    CHECK(symlink(victim, planted) == 0, "a symlink planted at the probe's name");
    r = run1(&ctx, "storage.shared");
    char *v = mtc_read_file(victim, NULL);
    CHECK(r.status == HEALTH_PASS && v && strcmp(v, "root's file\n") == 0,
          "the probe wrote nothing through it (%s)", r.reason);
    free(v);
    unlink(marker);
    CHECK(mkfifo(marker, 0666) == 0, "a FIFO as the marker");
    EXPECT(&ctx, "storage.shared", HEALTH_FAIL, HEALTH_SEV_RESTART, "missing");
    unlink(marker);
    mtc_write_file_fmt(marker, 0644, "0123abcd\n");
    snprintf(ctx.mounts[1], sizeof(ctx.mounts[1]), "%s", root); /* a plain directory */
    ctx.nmounts = 2;
    EXPECT(&ctx, "storage.shared", HEALTH_FAIL, HEALTH_SEV_RESTART,
           "exp is gone (nothing mounted there)");
    health_ctx_release(&ctx);
}

static void test_nic(void)
{
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    snprintf(ctx.policy.nic_interface, sizeof(ctx.policy.nic_interface), "lo");
    EXPECT(&ctx, "nic", HEALTH_PASS, HEALTH_SEV_NONE, "lo up, 127.0.0.1");
    snprintf(ctx.policy.nic_interface, sizeof(ctx.policy.nic_interface), "mtcnope0");
    EXPECT(&ctx, "nic", HEALTH_FAIL, HEALTH_SEV_REBOOT, "mtcnope0: no such interface");
    health_ctx_release(&ctx);
}

/* The SDC probe in a child process running under the faulty fma(). */
static void test_sdc(const char *self)
{
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    EXPECT(&ctx, "sdc", HEALTH_PASS, HEALTH_SEV_NONE, "matches");
    health_ctx_release(&ctx);

    char pre[PATH_MAX + 32], *out = NULL;
    snprintf(pre, sizeof(pre), "LD_PRELOAD=%s/libbadfma.so", fakes);
    /* the sanitizer build wants its runtime first; the fake does not disturb it */
    char asan[512];
    const char *opts = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%sverify_asan_link_order=0", opts ? opts : "",
             opts && *opts ? ":" : "");
    char *env[] = {pre, asan, NULL};
    char *argv[] = {(char *)self, "sdc-child", NULL};
    int rc = mtc_run(argv, env, &out, 30000);
    CHECK(rc == 0 && out && strstr(out, "FAIL REPLACE silent data corruption: digest"),
          "sdc under a faulty fma() FAILs: rc %d, %s", rc, out ? out : "");
    free(out);
}

static int sdc_child(void)
{
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    struct health_result r = run1(&ctx, "sdc");
    printf("%s %s %s\n", health_status_name(r.status), health_severity_name(r.severity), r.reason);
    health_ctx_release(&ctx);
    return 0;
}

static void test_speed(void)
{
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    /* without a baseline the figure is only reported */
    struct health_result c1 = run1(&ctx, "speed.compute");
    CHECK(c1.status == HEALTH_PASS && c1.value > 0.01 && strstr(c1.reason, "GFLOP/s (no baseline)"),
          "compute measured: %s", c1.reason);
    struct health_result m1 = run1(&ctx, "speed.membw");
    CHECK(m1.status == HEALTH_PASS && m1.value > 0.1 && strstr(m1.reason, "GB/s (no baseline)"),
          "membw measured: %s", m1.reason);
    /* the default probeIntervalSeconds reuses a probe's result for 300 s */
    ctx.baseline_mem_gbps = 1e6;
    struct health_result m2 = run1(&ctx, "speed.membw");
    CHECK(m1.value == m2.value && m2.status == HEALTH_PASS,
          "a probe is not rerun within probeIntervalSeconds (%g == %g)", m1.value, m2.value);
    ctx.policy.probe_interval_seconds = 0;
    ctx.baseline_gflops = 1e6; /* a machine a million GFLOP/s fast: this one straggles */
    EXPECT(&ctx, "speed.compute", HEALTH_FAIL, HEALTH_SEV_REPLACE, "of baseline 1000000.00 (fail");
    EXPECT(&ctx, "speed.membw", HEALTH_FAIL, HEALTH_SEV_REPLACE, "(fail below 50%)");
    /* between the fractions: warn. Wide: the figure is measured again, and on
     * a shared host under load one sgemm probe was 6x the first (CI: 0.07
     * then 0.45 GFLOP/s) — WARN holds from 0.01x to 99x the first. */
    ctx.baseline_gflops = c1.value * 100;
    ctx.policy.speed_warn_fraction = 0.99;
    ctx.policy.speed_fail_fraction = 0.0001;
    EXPECT(&ctx, "speed.compute", HEALTH_WARN, HEALTH_SEV_NONE, "(warn below 99%)");
    ctx.baseline_mem_gbps = m1.value / 100;
    EXPECT(&ctx, "speed.membw", HEALTH_PASS, HEALTH_SEV_NONE, "of baseline");
    health_ctx_release(&ctx);
}

/* The probe file (stateDir/probes): a one-shot check (a job's Prolog, Slurm's
 * health check) reuses the agent loop's probe within probeIntervalSeconds —
 * an sgemm per job start is what it saves — but never a FAIL, and with
 * probeIntervalSeconds 0 nothing. */
static void test_probe_file(void)
{
    char dir[] = "/tmp/mtc-probes-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a state dir");
    struct health_ctx loop, check;
    mtc_error_t err = {""};
    health_ctx_init(&loop, &err);
    health_ctx_init(&check, &err);
    snprintf(loop.state_dir, sizeof(loop.state_dir), "%s", dir);
    snprintf(check.state_dir, sizeof(check.state_dir), "%s", dir);
    struct health_result a = run1(&loop, "speed.compute");
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/probes", dir);
    CHECK(a.status == HEALTH_PASS && access(path, F_OK) == 0, "the loop's probe saved in %s", path);
    check.baseline_gflops = 1e6; /* measured, this would FAIL */
    struct health_result b = run1(&check, "speed.compute");
    CHECK(b.status == HEALTH_PASS && b.value == a.value,
          "another process's check reuses it (%g == %g), no sgemm of its own", b.value, a.value);
    /* a FAIL is measured again by everyone: the node may be bad now */
    loop.baseline_gflops = 1e6;
    loop.policy.probe_interval_seconds = 0;
    CHECK(run1(&loop, "speed.compute").status == HEALTH_FAIL, "the loop measures a FAIL");
    health_ctx_release(&check);
    health_ctx_init(&check, &err);
    snprintf(check.state_dir, sizeof(check.state_dir), "%s", dir);
    check.baseline_gflops = 1e6;
    CHECK(run1(&check, "speed.compute").status == HEALTH_FAIL,
          "  a fresh check measures too: no reuse after a FAIL");
    /* probeIntervalSeconds 0: every check measures */
    loop.baseline_gflops = 0;
    CHECK(run1(&loop, "speed.compute").status == HEALTH_PASS, "the loop passes again");
    check.policy.probe_interval_seconds = 0;
    CHECK(run1(&check, "speed.compute").status == HEALTH_FAIL,
          "  probeIntervalSeconds 0: a check measures, whatever the file holds");
    health_ctx_release(&check);
    health_ctx_release(&loop);
    unlink(path);
    rmdir(dir);
}

static void test_daemons(void)
{
    struct health_ctx ctx;
    mtc_error_t err = {""};
    health_ctx_init(&ctx, &err);
    EXPECT(&ctx, "daemon.slurmd", HEALTH_PASS, HEALTH_SEV_NONE, "skipped");
    snprintf(ctx.slurmd_pid_file, sizeof(ctx.slurmd_pid_file), "%s/slurmd.pid", tmp);
    mtc_write_file_fmt(ctx.slurmd_pid_file, 0644, "%d\n", (int)getpid());
    EXPECT(&ctx, "daemon.slurmd", HEALTH_PASS, HEALTH_SEV_NONE, "alive");
    /* a listening port answers; a closed one does not */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    listen(fd, 4);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    ctx.slurmd_port = ntohs(sa.sin_port);
    EXPECT(&ctx, "daemon.slurmd", HEALTH_PASS, HEALTH_SEV_NONE, "alive");
    close(fd);
    EXPECT(&ctx, "daemon.slurmd", HEALTH_FAIL, HEALTH_SEV_RESTART, "not accepting on port");
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    mtc_write_file_fmt(ctx.slurmd_pid_file, 0644, "%d\n", (int)child);
    EXPECT(&ctx, "daemon.slurmd", HEALTH_FAIL, HEALTH_SEV_RESTART, "slurmd not running");

    /* munged: a private daemon, then gone */
    char dir[PATH_MAX + 16], a1[PATH_MAX + 32], a2[PATH_MAX + 32], a3[PATH_MAX + 32],
        a4[PATH_MAX + 32], a5[PATH_MAX + 32], key[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/munge", tmp);
    mtc_mkdir_p(dir, 0700);
    snprintf(key, sizeof(key), "%s/key", dir);
    char keybytes[1024];
    for (size_t i = 0; i < sizeof(keybytes); i++)
        keybytes[i] = (char)(rand() & 0xff);
    mtc_write_file_atomic(key, keybytes, sizeof(keybytes), 0600);
    snprintf(ctx.munge_socket, sizeof(ctx.munge_socket), "%s/sock", dir);
    snprintf(a1, sizeof(a1), "--socket=%s", ctx.munge_socket);
    snprintf(a2, sizeof(a2), "--key-file=%s", key);
    snprintf(a3, sizeof(a3), "--pid-file=%s/pid", dir);
    snprintf(a4, sizeof(a4), "--log-file=%s/log", dir);
    snprintf(a5, sizeof(a5), "--seed-file=%s/seed", dir);
    char *argv[] = {"munged", a1, a2, a3, a4, a5, "--force", NULL};
    if (mtc_run(argv, NULL, NULL, 10000) == 0) {
        EXPECT(&ctx, "daemon.munged", HEALTH_PASS, HEALTH_SEV_NONE, "munge round trip");
        snprintf(a3, sizeof(a3), "%s/pid", dir);
        pid_t mp = mtc_pid_read(a3);
        /* hung (stopped): the 5 s limit is said as such, not as a socket error */
        if (mp > 0 && kill(mp, SIGSTOP) == 0) {
            EXPECT(&ctx, "daemon.munged", HEALTH_FAIL, HEALTH_SEV_RESTART,
                   "munge round trip took longer than 5 s");
            kill(mp, SIGCONT);
        }
        CHECK(mp > 0 && mtc_pid_stop(mp, 3000) == 0, "munged stopped");
    } else {
        CHECK(0, "munged could not start");
    }
    EXPECT(&ctx, "daemon.munged", HEALTH_FAIL, HEALTH_SEV_RESTART, "munged not answering on");
    health_ctx_release(&ctx);
}

int main(int argc, char **argv)
{
    char self[PATH_MAX];
    if (argc > 1 && strcmp(argv[1], "sdc-child") == 0)
        return sdc_child();
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", self);
    snprintf(fakes, sizeof(fakes), "%s/../fakes", dirname(dir));
    snprintf(tmp, sizeof(tmp), "/tmp/mtc-test-health.XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    snprintf(state, sizeof(state), "%s/nvml.state", tmp);

    test_policy();
    test_config();
    test_gpu();
    test_xid();
    test_disk();
    test_storage();
    test_nic();
    test_sdc(self);
    test_speed();
    test_probe_file();
    test_daemons();
    mtc_rm_rf(tmp);
    return check_done();
}
