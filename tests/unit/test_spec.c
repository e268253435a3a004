/* test_spec: cluster spec validation (each rule, good and bad, with the exact
 * one-line message naming the field), snake_case input, camelCase output,
 * defaults, slurm.conf values, the fields that run something as root, the
 * catalog and the example specs. Node pools on hosts, shared storage,
 * elastic pools, the sim section and the node index: test_spec_nodes.c. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cluster/cluster.h"
#include "spec_fixture.h"

/* BASE with one JSON pointer-ish edit done through jansson. */
static const char *edit_err(void (*fn)(json_t *))
{
    json_t *in = parse(BASE);
    fn(in);
    return normalize_err(in);
}

static json_t *slurm(json_t *s)
{
    return json_object_get(json_object_get(s, "orchestratorSpec"), "slurmSpec");
}
static json_t *part(json_t *s, size_t i)
{
    return json_array_get(json_object_get(slurm(s), "partitions"), i);
}

static void e_dup_pool(json_t *s)
{
    json_object_set_new(pool(s, 1), "id", json_string("gpu"));
}
static void e_bad_pool(json_t *s)
{
    json_object_set_new(pool(s, 0), "id", json_string("GPU"));
}
static void e_unknown_top(json_t *s)
{
    json_object_set_new(s, "colour", json_string("red"));
}
static void e_unknown_deep(json_t *s)
{
    json_object_set_new(json_object_get(pool(s, 0), "machineSpec"), "gpuCount", json_integer(8));
}
static void e_min_gt_max(json_t *s)
{
    json_object_set_new(json_object_get(pool(s, 0), "scalingSpec"), "minNodeCount",
                        json_integer(5));
}
static void e_min_neg(json_t *s)
{
    json_object_set_new(json_object_get(pool(s, 0), "scalingSpec"), "minNodeCount",
                        json_integer(-1));
}
static void e_machine(json_t *s)
{
    json_object_set_new(json_object_get(pool(s, 0), "machineSpec"), "machineType",
                        json_string("a9-fantasy"));
}
static void e_accel(json_t *s)
{
    json_object_set_new(json_object_get(pool(s, 0), "machineSpec"), "acceleratorType",
                        json_string("NVIDIA_B200"));
}
static void e_part_pool(json_t *s)
{
    json_array_append_new(json_object_get(part(s, 0), "nodePoolIds"), json_string("nope"));
}
static void e_part_login(json_t *s)
{
    json_array_append_new(json_object_get(part(s, 0), "nodePoolIds"), json_string("login"));
}
static void e_part_dup(json_t *s)
{
    json_array_append_new(json_object_get(slurm(s), "partitions"),
                          json_pack("{s:s,s:[s]}", "id", "a3m", "nodePoolIds", "gpu"));
}
static void e_part_bad(json_t *s)
{
    json_object_set_new(part(s, 0), "id", json_string("a3m_x"));
}
static void e_default(json_t *s)
{
    json_object_set_new(slurm(s), "defaultPartitionId", json_string("general"));
}
static void e_login(json_t *s)
{
    json_object_set_new(slurm(s), "loginNodePoolId", json_string("head"));
}
static void e_conf_key(json_t *s)
{
    json_object_set_new(part(s, 0), "config", json_pack("{s:s}", "Foo", "1"));
}
static void e_conf_node_key_in_part(json_t *s)
{
    json_object_set_new(part(s, 0), "config", json_pack("{s:s}", "Weight", "1"));
}
static void e_conf_managed(json_t *s)
{
    json_object_set_new(part(s, 0), "config", json_pack("{s:s}", "Nodes", "x"));
}
static void e_conf_nl(json_t *s)
{
    json_object_set_new(part(s, 0), "config", json_pack("{s:s}", "MaxTime", "1\nNodeName=evil"));
}
static void e_conf_hash(json_t *s)
{
    json_object_set_new(part(s, 0), "config", json_pack("{s:s}", "MaxTime", "1 #x"));
}
static void e_nodeset_key(json_t *s)
{
    json_object_set_new(
        slurm(s), "nodeSets",
        json_pack("[{s:s,s:{s:s}}]", "nodePoolId", "gpu", "config", "MaxTime", "1"));
}
static void e_nodeset_pool(json_t *s)
{
    json_object_set_new(slurm(s), "nodeSets",
                        json_pack("[{s:s,s:{s:s}}]", "nodePoolId", "cpu", "config", "Weight", "1"));
}
static void e_enum(json_t *s)
{
    json_object_set_new(pool(s, 0), "provisioningModel", json_string("CHEAP"));
}
static void e_type(json_t *s)
{
    json_object_set_new(json_object_get(pool(s, 0), "scalingSpec"), "maxNodeCount",
                        json_string("four"));
}
static void e_no_pools(json_t *s)
{
    json_object_set_new(s, "nodePools", json_array());
}
static void e_preempt(json_t *s)
{
    json_object_set_new(slurm(s), "scheduling", json_pack("{s:s}", "preemptMode", "REQUEUE,NOPE"));
}
static void e_label(json_t *s)
{
    json_object_set_new(s, "labels", json_pack("{s:s}", "Env", "x"));
}

static void e_health_value(json_t *s)
{
    json_object_set_new(s, "healthPolicy", json_pack("{s:i}", "diskMinFreePercent", 250));
}

static void e_health_field(json_t *s)
{
    json_object_set_new(s, "health_policy", json_pack("{s:i}", "gpuMaxEcc", 1));
}

static void e_health_nvml(json_t *s)
{
    json_object_set_new(s, "healthPolicy", json_pack("{s:s}", "nvmlLibrary", "lib nvml.so"));
}

static void e_health_klog(json_t *s)
{
    json_object_set_new(s, "healthPolicy", json_pack("{s:s}", "kernelLog", "kmsg"));
}

static void e_health_type(json_t *s)
{
    json_object_set_new(s, "healthPolicy", json_pack("[i]", 1));
}

static void test_rules(void)
{
    CHECK_STR(norm_err(BASE), "", "the base spec is valid");
    struct {
        void (*fn)(json_t *);
        const char *want;
    } cases[] = {
        {e_dup_pool, "nodePools[1].id: duplicate node pool id \"gpu\""},
        {e_bad_pool, "nodePools[0].id: invalid node pool id \"GPU\" (want ^[a-z][a-z0-9-]{0,15}, "
                     "no trailing '-')"},
        {e_unknown_top, "unknown field \"colour\""},
        {e_unknown_deep, "nodePools[0].machineSpec: unknown field \"gpuCount\""},
        {e_min_gt_max, "nodePools[0].scalingSpec: minNodeCount 5 > maxNodeCount 4"},
        {e_min_neg, "nodePools[0].scalingSpec: minNodeCount must be >= 0"},
        {e_machine, "nodePools[0].machineSpec.machineType: unknown machine type \"a9-fantasy\""},
        {e_accel, "nodePools[0].machineSpec.acceleratorType: machine type a3-megagpu-8g has "
                  "NVIDIA_H100_MEGA_80GB, not \"NVIDIA_B200\""},
        {e_part_pool,
         "orchestratorSpec.slurmSpec.partitions[0].nodePoolIds[1]: no node pool \"nope\""},
        {e_part_login, "orchestratorSpec.slurmSpec.partitions[0].nodePoolIds[1]: node pool "
                       "\"login\" is the login pool and cannot be in a partition"},
        {e_part_dup, "orchestratorSpec.slurmSpec.partitions[1].id: duplicate partition id \"a3m\""},
        {e_part_bad, "orchestratorSpec.slurmSpec.partitions[0].id: invalid partition id \"a3m_x\" "
                     "(want ^[a-z][a-z0-9-]{0,31}, no trailing '-')"},
        {e_default, "orchestratorSpec.slurmSpec.defaultPartitionId: no partition \"general\""},
        {e_login, "orchestratorSpec.slurmSpec.loginNodePoolId: no node pool \"head\""},
        {e_conf_key, "orchestratorSpec.slurmSpec.partitions[0].config: unknown slurm.conf "
                     "partition key \"Foo\""},
        {e_conf_node_key_in_part, "orchestratorSpec.slurmSpec.partitions[0].config: unknown "
                                  "slurm.conf partition key \"Weight\""},
        {e_conf_managed, "orchestratorSpec.slurmSpec.partitions[0].config: slurm.conf partition "
                         "key \"Nodes\" is set by mtc"},
        {e_conf_nl, "orchestratorSpec.slurmSpec.partitions[0].config.MaxTime: value must be "
                    "non-empty, one line, without '#' or '\"'"},
        {e_conf_hash, "orchestratorSpec.slurmSpec.partitions[0].config.MaxTime: value must be "
                      "non-empty, one line, without '#' or '\"'"},
        {e_nodeset_key,
         "orchestratorSpec.slurmSpec.nodeSets[0].config: unknown slurm.conf node key \"MaxTime\""},
        {e_nodeset_pool, "orchestratorSpec.slurmSpec.nodeSets[0].nodePoolId: no node pool \"cpu\""},
        {e_enum, "nodePools[0].provisioningModel: invalid value \"CHEAP\" (one of ON_DEMAND, "
                 "RESERVATION, SPOT, FLEX_START)"},
        {e_type, "nodePools[0].scalingSpec.maxNodeCount: must be an integer"},
        {e_no_pools, "nodePools: at least one node pool is required"},
        {e_preempt,
         "orchestratorSpec.slurmSpec.scheduling.preemptMode: invalid value \"REQUEUE,NOPE\" (comma "
         "list of OFF, CANCEL, GANG, REQUEUE, SUSPEND, WITHIN, PRIORITY)"},
        {e_label, "labels.Env: invalid label key (want ^[a-z][a-z0-9_-]{0,62}$)"},
        {e_health_value, "healthPolicy.diskMinFreePercent: must be a number from 0 to 100"},
        {e_health_field, "healthPolicy.gpuMaxEcc: unknown field"},
        {e_health_nvml, "healthPolicy.nvmlLibrary: must be a library name or path of up to 255 "
                        "of [A-Za-z0-9/._+-] (or \"\")"},
        {e_health_klog, "healthPolicy.kernelLog: must be an absolute path of up to 255 of "
                        "[A-Za-z0-9/._+-] (or \"\")"},
        {e_health_type, "healthPolicy: must be an object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = edit_err(cases[i].fn);
        CHECK_STR(got, cases[i].want, "rule %zu rejected with a one-line message naming the field",
                  i);
        CHECK(!strchr(got, '\n'), "rule %zu message is one line", i);
    }
    CHECK_STR(norm_err("[1]"), "cluster spec must be a JSON object", "non-object rejected");
}

static void test_good_variants(void)
{
    /* good counterparts of the rules */
    CHECK_STR(
        norm_err(
            "{\"nodePools\":[{\"id\":\"c\",\"machineSpec\":{\"machineType\":\"n2-standard-8\"},"
            "\"scalingSpec\":{\"minNodeCount\":0,\"maxNodeCount\":0}}]}"),
        "", "min == max == 0 accepted");
    CHECK_STR(
        norm_err(
            "{\"nodePools\":[{\"id\":\"c\",\"machineSpec\":{\"machineType\":\"n2-standard-8\"},"
            "\"scalingSpec\":{\"minNodeCount\":\"2\",\"maxNodeCount\":\"3\"}}]}"),
        "", "quoted integers (proto3 int64 style) accepted");
    CHECK_STR(
        norm_err("{\"nodePools\":[{\"id\":\"g\",\"machineSpec\":{\"machineType\":\"a4-highgpu-8g\","
                 "\"acceleratorType\":\"NVIDIA_B200\",\"acceleratorCount\":8}}],"
                 "\"orchestratorSpec\":{\"slurmSpec\":{\"partitions\":[{\"id\":\"a4\","
                 "\"nodePoolIds\":[\"g\"],"
                 "\"config\":{\"maxtime\":\"1:00:00\",\"OverSubscribe\":\"EXCLUSIVE\","
                 "\"PriorityTier\":5}}],"
                 "\"nodeSets\":[{\"nodePoolId\":\"g\",\"config\":{\"Features\":\"b200\",\"Weight\":"
                 "\"10\"}}]}}}"),
        "", "matching accelerator, partition and node keys accepted");
    CHECK_STR(
        norm_err(
            "{\"nodePools\":[{\"id\":\"g\",\"machineSpec\":{\"machineType\":\"local-gpu\"}}],"
            "\"orchestratorSpec\":{\"slurmSpec\":{\"scheduling\":{\"preemptMode\":\"REQUEUE,GANG\","
            "\"preemptType\":\"preempt/"
            "partition_prio\"},\"accounting\":{\"accountingStorageEnforce\":\"limits,qos\"}}}}"),
        "", "scheduling and accounting values accepted");
    CHECK_STR(norm_err("{\"name\":\"projects/p/locations/l/modelDevelopmentClusters/"
                       "x\",\"createTime\":\"2026-01-01T00:00:00Z\","
                       "\"clusterStatus\":{\"state\":\"RUNNING\"},\"nodePools\":[{\"id\":\"c\","
                       "\"machineSpec\":{\"machineType\":\"local\"}}]}"),
              "", "output-only fields accepted and dropped");
}

static void test_canonical(void)
{
    mtc_error_t err = {{0}};
    json_t *in = parse("{\"display_name\":\"x\",\"node_pools\":[{\"id\":\"gpu\",\"machine_spec\":{"
                       "\"machine_type\":\"a3-ultragpu-8g\"},"
                       "\"scaling_spec\":{\"min_node_count\":2}},{\"id\":\"login\",\"machine_"
                       "spec\":{\"machine_type\":\"local\"}}],"
                       "\"orchestrator_spec\":{\"slurm_spec\":{\"login_node_pool_id\":\"login\"}},"
                       "\"clusterEvents\":[]}");
    json_t *out = cluster_spec_normalize(in, &err);
    CHECK(out != NULL, "snake_case spec accepted (%s)", err.text);
    char *s = json_dumps(out, JSON_COMPACT);
    CHECK_STR(s,
              "{\"displayName\":\"x\",\"nodePools\":[{\"id\":\"gpu\",\"machineSpec\":{"
              "\"machineType\":\"a3-ultragpu-8g\","
              "\"acceleratorType\":\"NVIDIA_H200_141GB\",\"acceleratorCount\":8},"
              "\"provisioningModel\":\"ON_DEMAND\","
              "\"scalingSpec\":{\"minNodeCount\":2,\"maxNodeCount\":2}},{\"id\":\"login\","
              "\"machineSpec\":{\"machineType\":\"local\"},"
              "\"provisioningModel\":\"ON_DEMAND\",\"scalingSpec\":{\"minNodeCount\":1,"
              "\"maxNodeCount\":1}}],"
              "\"orchestratorSpec\":{\"slurmSpec\":{\"loginNodePoolId\":\"login\",\"partitions\":[{"
              "\"id\":\"gpu\","
              "\"nodePoolIds\":[\"gpu\"]}],\"defaultPartitionId\":\"gpu\"}}}",
              "camelCase emitted, defaults filled, output-only dropped");
    /* idempotent: normalizing the canonical form changes nothing */
    json_t *again = cluster_spec_normalize(out, &err);
    CHECK(again && json_equal(again, out), "normalize is idempotent");
    CHECK(cluster_spec_node_count(out) == 2, "node count = minNodeCount of compute pools");
    char *parts = cluster_spec_partitions(out);
    CHECK_STR(parts, "gpu", "partition list");
    CHECK_STR(cluster_spec_login_pool(out), "login", "login pool");
    CHECK(cluster_spec_pool(out, "gpu") != NULL && cluster_spec_pool(out, "x") == NULL,
          "pool lookup");
    free(parts);
    free(s);
    json_decref(again);
    json_decref(out);
    json_decref(in);

    /* healthPolicy: snake_case accepted, defaults filled, kept canonical */
    in = parse("{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"local\"}}],"
               "\"health_policy\":{\"disk_min_free_percent\":2,\"nvml_library\":"
               "\"/opt/fake/libnvml.so\",\"kernelLog\":\"/var/log/kern.log\"}}");
    out = cluster_spec_normalize(in, &err);
    json_t *hp = json_object_get(out, "healthPolicy");
    CHECK(hp && json_number_value(json_object_get(hp, "diskMinFreePercent")) == 2 &&
              !strcmp(json_string_value(json_object_get(hp, "nvmlLibrary")) ?: "",
                      "/opt/fake/libnvml.so") &&
              !strcmp(json_string_value(json_object_get(hp, "kernelLog")) ?: "",
                      "/var/log/kern.log") &&
              json_integer_value(json_object_get(hp, "slurmIntervalSeconds")) == 60 &&
              json_object_size(hp) == 22,
          "healthPolicy normalized: camelCase, given values kept, every default filled (%s)",
          err.text);
    again = out ? cluster_spec_normalize(out, &err) : NULL;
    CHECK(again && json_equal(again, out), "healthPolicy: normalize is idempotent");
    json_decref(again);
    json_decref(out);
    json_decref(in);
    in = parse("{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"local\"}}]}");
    out = cluster_spec_normalize(in, &err);
    CHECK(out && !json_object_get(out, "healthPolicy"),
          "no healthPolicy given: none added (the defaults apply)");
    json_decref(out);
    json_decref(in);

    in = parse("{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"local\"}}],"
               "\"node_pools\":[]}");
    CHECK_STR(cluster_spec_normalize(in, &err) ? "" : err.text,
              "nodePools: field given twice (snake_case and camelCase)",
              "both spellings at once rejected");
    json_decref(in);
}

static void test_ids_and_catalog(void)
{
    CHECK(cluster_id_valid("a"), "id a");
    CHECK(cluster_id_valid("abc123def0"), "id of 10 chars");
    CHECK(!cluster_id_valid("abc123def01"), "id of 11 chars rejected");
    CHECK(!cluster_id_valid("1abc"), "id starting with a digit rejected");
    CHECK(!cluster_id_valid("a-b"), "id with '-' rejected");
    CHECK(!cluster_id_valid(""), "empty id rejected");
    CHECK(!cluster_id_valid(NULL), "NULL id rejected");

    struct cluster_machine_type mt;
    mtc_error_t err;
    CHECK(cluster_machine_type_lookup("a3-megagpu-8g", &mt, &err) == 0 &&
              strcmp(mt.accelerator_type, "NVIDIA_H100_MEGA_80GB") == 0 &&
              mt.accelerator_count == 8,
          "a3-megagpu-8g: 8x H100 Mega");
    CHECK(cluster_machine_type_lookup("a3-ultragpu-8g", &mt, &err) == 0 &&
              strcmp(mt.accelerator_type, "NVIDIA_H200_141GB") == 0 && mt.accelerator_count == 8,
          "a3-ultragpu-8g: 8x H200");
    CHECK(cluster_machine_type_lookup("a4-highgpu-8g", &mt, &err) == 0 &&
              strcmp(mt.accelerator_type, "NVIDIA_B200") == 0 && mt.accelerator_count == 8,
          "a4-highgpu-8g: 8x B200");
    CHECK(cluster_machine_type_lookup("n2-standard-32", &mt, &err) == 0 && mt.vcpus == 32 &&
              mt.accelerator_count == 0 && mt.memory_mb == 32 * 4096,
          "n2-standard-32: 32 vCPUs, no GPU");
    CHECK(cluster_machine_type_lookup("n2-standard-3", &mt, &err) < 0, "n2-standard-3 unknown");
    CHECK(cluster_machine_type_lookup("local", &mt, &err) == 0 && mt.host_sized,
          "local host-sized");
    CHECK(cluster_machine_type_lookup("local-gpu", &mt, &err) == 0 && mt.host_sized &&
              mt.accelerator_count == 8,
          "local-gpu: host-sized with 8 emulated GPUs");
    CHECK(cluster_machine_type_lookup("a3-highgpu-8g", &mt, &err) == 0 &&
              mt.min_allreduce_bus_gbps == 60 && mt.min_pair_bus_gbps == 60,
          "health-scan thresholds: a3-highgpu-8g 60 GB/s");
    CHECK(cluster_machine_type_lookup("a3-ultragpu-8g", &mt, &err) == 0 &&
              mt.min_allreduce_bus_gbps == 250 && mt.min_pair_bus_gbps == 250,
          "health-scan thresholds: a3-ultragpu-8g 250 GB/s");
    CHECK(cluster_machine_type_lookup("a4-highgpu-8g", &mt, &err) == 0 &&
              mt.min_allreduce_bus_gbps == 250,
          "health-scan thresholds: a4-highgpu-8g 250 GB/s");
    CHECK(cluster_machine_type_lookup("n2-standard-8", &mt, &err) == 0 &&
              mt.min_allreduce_bus_gbps == 0 && mt.min_pair_bus_gbps == 0,
          "CPU types: no absolute thresholds (measured-relative)");
    CHECK(cluster_machine_type_lookup("local", &mt, &err) == 0 && mt.min_pair_bus_gbps == 0,
          "local: no absolute thresholds");
    json_t *list = cluster_catalog_list(&err);
    CHECK(list && json_array_size(list) >= 15, "catalog lists every type");
    json_decref(list);
}

static void test_examples(void)
{
    const char *files[] = {"examples/local-2node.json", "examples/local-3node.json",
                           "examples/local-cpu.json", "examples/cloud-style.json",
                           "examples/hosts.json"};
    int counts[] = {2, 3, 2, 2};
    for (size_t i = 0; i < 4; i++) {
        /* tests run from the repo root (tests/run.sh cds there) */
        json_error_t je;
        mtc_error_t err = {{0}};
        json_t *in = json_load_file(files[i], 0, &je);
        json_t *out = in ? cluster_spec_normalize(in, &err) : NULL;
        CHECK(out != NULL, "%s accepted (%s)", files[i], in ? err.text : je.text);
        CHECK(out && cluster_spec_node_count(out) == counts[i], "%s has %d compute nodes", files[i],
              counts[i]);
        json_decref(in);
        json_decref(out);
    }
}

/* The cloud API's proto enum names are accepted; the short name comes out. */
static void test_prefixed_enums(void)
{
    mtc_error_t err = {{0}};
    json_t *in = parse(
        "{\"nodePools\":[{\"id\":\"g\",\"provisioningModel\":\"PROVISIONING_MODEL_SPOT\","
        "\"machineSpec\":{\"machineType\":\"local\",\"reservationAffinity\":{"
        "\"reservationAffinityType\":\"RESERVATION_AFFINITY_TYPE_SPECIFIC_RESERVATION\","
        "\"key\":\"compute.googleapis.com/reservation-name\",\"values\":[\"r1\"]}}},"
        "{\"id\":\"h\",\"provisioning_model\":\"FLEX_START\",\"machineSpec\":{\"machineType\":"
        "\"local\",\"reservationAffinity\":{\"reservationAffinityType\":\"ANY_RESERVATION\"}}}]}");
    json_t *out = cluster_spec_normalize(in, &err);
    json_t *p0 = out ? json_array_get(json_object_get(out, "nodePools"), 0) : NULL;
    json_t *p1 = out ? json_array_get(json_object_get(out, "nodePools"), 1) : NULL;
    const char *ra = json_string_value(
        json_object_get(json_object_get(json_object_get(p0, "machineSpec"), "reservationAffinity"),
                        "reservationAffinityType"));
    CHECK(out && !strcmp(json_string_value(json_object_get(p0, "provisioningModel")), "SPOT") &&
              ra && !strcmp(ra, "SPECIFIC_RESERVATION") &&
              !strcmp(json_string_value(json_object_get(p1, "provisioningModel")), "FLEX_START"),
          "prefixed and short enum names in, short names out (%s)", err.text);
    json_t *again = out ? cluster_spec_normalize(out, &err) : NULL;
    CHECK(again && json_equal(again, out), "enum names: normalize is idempotent");
    json_decref(again);
    json_decref(out);
    json_decref(in);
    CHECK_STR(
        norm_err("{\"nodePools\":[{\"id\":\"g\",\"provisioningModel\":"
                 "\"PROVISIONING_MODEL_CHEAP\",\"machineSpec\":{\"machineType\":\"local\"}}]}"),
        "nodePools[0].provisioningModel: invalid value \"PROVISIONING_MODEL_CHEAP\" (one of "
        "ON_DEMAND, RESERVATION, SPOT, FLEX_START)",
        "an unknown prefixed name is rejected, the short names listed");
    CHECK_STR(norm_err("{\"nodePools\":[{\"id\":\"g\",\"provisioningModel\":\"spot\","
                       "\"machineSpec\":{\"machineType\":\"local\"}}]}"),
              "nodePools[0].provisioningModel: invalid value \"spot\" (one of ON_DEMAND, "
              "RESERVATION, SPOT, FLEX_START)",
              "enum names are case-sensitive, as proto3 JSON's are");
}

/* Defect 8: slurm.conf values that would break their line are rejected,
 * naming the field; scheduling values are written bare, so they must be one
 * word (a blank would start another key: "1 SlurmUser=root"). */
static json_t *with_slurm(const char *slurm_spec)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"nodePools\":[{\"id\":\"g\",\"machineSpec\":{\"machineType\":\"local\"}}],"
             "\"orchestratorSpec\":{\"slurmSpec\":%s}}",
             slurm_spec);
    return parse(text);
}

static void test_conf_values(void)
{
    static const struct {
        const char *slurm, *want;
    } cases[] = {
        {"{\"scheduling\":{\"preemptExemptTime\":\"00:10:00\",\"priorityWeightTres\":"
         "\"CPU=1000,Mem=2000,GRES/gpu=3000\",\"preemptMode\":\"requeue,gang\"}}",
         ""},
        {"{\"nodeSets\":[{\"nodePoolId\":\"g\",\"config\":{\"Reason\":\"new disk\"}}]}", ""},
        {"{\"scheduling\":{\"preemptExemptTime\":\"1 day\"}}",
         "orchestratorSpec.slurmSpec.scheduling.preemptExemptTime: value must be one word: a "
         "blank would end it and start another key"},
        {"{\"scheduling\":{\"priorityWeightTres\":\"CPU=1\\tSlurmUser=root\"}}",
         "orchestratorSpec.slurmSpec.scheduling.priorityWeightTres: value must be non-empty, "
         "one line, without '#' or '\"'"},
        {"{\"scheduling\":{\"priorityWeightTres\":\"CPU=1 SlurmUser=root\"}}",
         "orchestratorSpec.slurmSpec.scheduling.priorityWeightTres: value must be one word: a "
         "blank would end it and start another key"},
        {"{\"scheduling\":{\"preemptExemptTime\":\"\"}}",
         "orchestratorSpec.slurmSpec.scheduling.preemptExemptTime: value must be non-empty, one "
         "line, without '#' or '\"'"},
        {"{\"scheduling\":{\"preemptExemptTime\":\"1\\\\\"}}",
         "orchestratorSpec.slurmSpec.scheduling.preemptExemptTime: value must not contain '\\' "
         "(slurm.conf would join the next line to it)"},
        {"{\"scheduling\":{\"preemptMode\":\"REQUEUE, GANG\"}}",
         "orchestratorSpec.slurmSpec.scheduling.preemptMode: invalid value \"REQUEUE, GANG\" "
         "(comma list of OFF, CANCEL, GANG, REQUEUE, SUSPEND, WITHIN, PRIORITY)"},
        {"{\"accounting\":{\"accountingStorageEnforce\":\"limits, qos\"}}",
         "orchestratorSpec.slurmSpec.accounting.accountingStorageEnforce: invalid value \"limits, "
         "qos\" (comma list of associations, limits, nojobs, nosteps, qos, safe, wckeys, all)"},
        {"{\"nodeSets\":[{\"nodePoolId\":\"g\",\"config\":{\"Reason\":\"disk\\\\\"}}]}",
         "orchestratorSpec.slurmSpec.nodeSets[0].config.Reason: value must not contain '\\' "
         "(slurm.conf would join the next line to it)"},
        {"{\"partitions\":[{\"id\":\"p\",\"nodePoolIds\":[\"g\"],\"config\":{\"MaxTime\":"
         "\"1\\r\"}}]}",
         "orchestratorSpec.slurmSpec.partitions[0].config.MaxTime: value must be non-empty, one "
         "line, without '#' or '\"'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mtc_error_t err = {{0}};
        json_t *in = with_slurm(cases[i].slurm);
        json_t *out = in ? cluster_spec_normalize(in, &err) : NULL;
        CHECK_STR(out ? "" : err.text, cases[i].want, "slurm.conf value %zu: %s", i,
                  cases[i].slurm);
        json_decref(out);
        json_decref(in);
    }
}

static void collect_path(const char *path, const struct schema_field *f, void *arg)
{
    (void)f;
    char *buf = arg;
    snprintf(buf + strlen(buf), 1024 - strlen(buf), "%s%s", *buf ? " " : "", path);
}

/* The fields that make mtc or Slurm act as root, from the table. */
static void test_root_exec(void)
{
    char paths[1024] = "";
    schema_walk(&cluster_spec_schema, SCHEMA_ROOT_EXEC, collect_path, paths);
    CHECK_STR(paths,
              "nodePools[].startupScript nodePools[].filestores nodePools[].lustres "
              "nodePools[].hosts nodePools[].spareHosts "
              "orchestratorSpec.slurmSpec.homeDirectoryStorage "
              "orchestratorSpec.slurmSpec.accounting.database "
              "orchestratorSpec.slurmSpec.prologBashScripts "
              "orchestratorSpec.slurmSpec.epilogBashScripts healthPolicy.nvmlLibrary "
              "healthPolicy.kernelLog ssh controller installPackages "
              "hostRemediation.rebootCommand hostRemediation.reimageCommand "
              "hostRemediation.powerOnCommand hostRemediation.powerOffCommand experimentRoot "
              "users",
              "root-only fields (run, connect, read a credential as root) listed from the "
              "spec's table");

    /* what an editor may not do: set or change one of them */
    mtc_error_t err;
    const char *base = "{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":"
                       "\"n2-standard-4\"}}]";
    char text[1024];
    snprintf(text, sizeof(text), "%s}", base);
    json_t *in = json_loads(text, 0, NULL), *plain = cluster_spec_normalize(in, &err);
    json_decref(in);
    snprintf(text, sizeof(text),
             "%s,\"orchestratorSpec\":{\"slurmSpec\":{\"prologBashScripts\":[\"id\"]}}}", base);
    in = json_loads(text, 0, NULL);
    json_t *prolog = cluster_spec_normalize(in, &err);
    json_decref(in);
    snprintf(text, sizeof(text),
             "{\"nodePools\":[{\"id\":\"a\",\"startupScript\":\"x\",\"machineSpec\":{"
             "\"machineType\":\"n2-standard-4\"}}],\"healthPolicy\":{\"kernelLog\":\"/etc/"
             "shadow\"}}");
    in = json_loads(text, 0, NULL);
    json_t *both = cluster_spec_normalize(in, &err);
    json_decref(in);
    char field[128] = "";
    CHECK(plain && prolog && both, "privileged test specs normalize");
    CHECK(!cluster_spec_privileged_change(NULL, plain, field, sizeof(field)),
          "a create without root-executing fields is no privileged change");
    CHECK(!cluster_spec_privileged_change(prolog, prolog, field, sizeof(field)),
          "resending the same prolog is no change");
    CHECK(cluster_spec_privileged_change(plain, prolog, field, sizeof(field)) &&
              !strcmp(field, "orchestratorSpec.slurmSpec.prologBashScripts"),
          "adding a prolog script is (%s)", field);
    CHECK(cluster_spec_privileged_change(prolog, plain, field, sizeof(field)),
          "removing one is too");
    CHECK(cluster_spec_privileged_change(plain, both, field, sizeof(field)) &&
              !strcmp(field, "nodePools[0].startupScript, healthPolicy.kernelLog"),
          "a node pool's startupScript is, and every such field is named (%s)", field);
    json_object_del(json_array_get(json_object_get(both, "nodePools"), 0), "startupScript");
    CHECK(cluster_spec_privileged_change(plain, both, field, sizeof(field)) &&
              !strcmp(field, "healthPolicy.kernelLog"),
          "healthPolicy.kernelLog is (%s)", field);
    json_decref(plain);
    json_decref(prolog);
    json_decref(both);

    /* a cluster on hosts: where root logs in, with what, and the database
     * whose credentials root reads */
    json_t *hosts = parse(
        "{\"ssh\":{\"keyFile\":\"/root/.ssh/id_ed25519\"},\"controller\":{\"address\":"
        "\"10.9.0.1\"},\"installPackages\":true,\"nodePools\":[{\"id\":\"g\",\"machineSpec\":{"
        "\"machineType\":\"host\"},\"scalingSpec\":{\"minNodeCount\":1},\"hosts\":[\"10.9.0.2\"],"
        "\"spareHosts\":[\"10.9.0.3\"]}],\"orchestratorSpec\":{\"slurmSpec\":{\"accounting\":{"
        "\"enabled\":true,\"database\":{\"host\":\"db1\",\"credentialsFile\":\"/etc/db.cred\"}}}}}");
    json_t *on_hosts = cluster_spec_normalize(hosts, &err);
    CHECK(on_hosts, "a spec on hosts normalizes (%s)", err.text);
    CHECK(on_hosts && cluster_spec_privileged_change(NULL, on_hosts, field, sizeof(field)) &&
              !strcmp(field, "nodePools[0].hosts, nodePools[0].spareHosts, "
                             "orchestratorSpec.slurmSpec.accounting.database, ssh, controller, "
                             "installPackages"),
          "hosts, spares, the database, ssh, controller, installPackages: each named (%s)", field);
    json_t *same = on_hosts ? json_deep_copy(on_hosts) : NULL;
    json_object_set_new(same, "description", json_string("an editor's change"));
    CHECK(same && !cluster_spec_privileged_change(on_hosts, same, field, sizeof(field)),
          "an update leaving them as they were is no privileged change (%s)", field);
    json_object_set_new(json_object_get(same, "ssh"), "port", json_integer(2222));
    json_object_set_new(json_object_get(json_object_get(json_object_get(json_object_get(
                                                            same, "orchestratorSpec"),
                                                        "slurmSpec"),
                                        "accounting"),
                        "database"),
                        "port", json_integer(3307));
    CHECK(same && cluster_spec_privileged_change(on_hosts, same, field, sizeof(field)) &&
              !strcmp(field, "orchestratorSpec.slurmSpec.accounting.database, ssh"),
          "changing ssh.port or the database's port is (%s)", field);
    json_object_set_new(on_hosts, "installPackages", json_false());
    json_object_del(same, "installPackages");
    json_object_set(same, "ssh", json_object_get(on_hosts, "ssh"));
    json_object_set(json_object_get(json_object_get(same, "orchestratorSpec"), "slurmSpec"),
                    "accounting",
                    json_object_get(json_object_get(json_object_get(on_hosts, "orchestratorSpec"),
                                                    "slurmSpec"),
                                    "accounting"));
    CHECK(same && !cluster_spec_privileged_change(on_hosts, same, field, sizeof(field)),
          "installPackages false and absent are the same: no change (%s)", field);
    json_decref(same);
    json_decref(on_hosts);
    json_decref(hosts);
}

/* users[]: checked names and ids, each once; the shell function mtc-host
 * and mtcd run, against fake getent/groupadd/useradd over a fake passwd. */
static void test_users(void)
{
    const char *base = "{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":"
                       "\"n2-standard-4\"}}],\"users\":%s}";
    char text[1024];
    snprintf(text, sizeof(text), base, "[{\"name\":\"alice\",\"uid\":2001,\"gid\":2001}]");
    json_t *in = parse(text), *ok = cluster_spec_normalize(in, &(mtc_error_t){""});
    json_decref(in);
    char args[256];
    CHECK(ok && cluster_users_args(ok, args, sizeof(args)) == 1 && !strcmp(args, "alice:2001:2001"),
          "users: accepted, as mtc-host's arguments");
    json_decref(ok);
    snprintf(text, sizeof(text), base, "[{\"name\":\"Alice\",\"uid\":2001,\"gid\":2001}]");
    CHECK_STR(norm_err(text), "users[0].name: invalid user \"Alice\" (want ^[a-z_][a-z0-9_-]{0,31}$)",
              "a bad name");
    snprintf(text, sizeof(text), base, "[{\"name\":\"al\",\"uid\":0,\"gid\":1}]");
    CHECK(strstr(norm_err(text), "users[0].uid") != NULL, "uid 0 refused: %s", norm_err(text));
    snprintf(text, sizeof(text), base,
             "[{\"name\":\"a\",\"uid\":5,\"gid\":5},{\"name\":\"b\",\"uid\":5,\"gid\":6}]");
    CHECK_STR(norm_err(text), "users[1]: uid 5 is users[0]'s too", "a uid twice");

    char dir[] = "/tmp/mtc-unit-users-XXXXXX";
    if (!mkdtemp(dir))
        return;
    char fakes[2048];
    snprintf(fakes, sizeof(fakes),
             "cd %s && printf 'root:x:0:0::/root:/bin/sh\\nbob:x:3000:3000::/:/bin/sh\\n' >passwd "
             "&& printf 'bob:x:3000:\\n' >group && cat >getent <<'EOF'\n#!/bin/sh\n"
             "f=$(dirname \"$0\")/$1; awk -F: -v k=\"$2\" '$1 == k || $3 == k { print; f = 1 } "
             "END { exit !f }' \"$f\"\nEOF\ncat >groupadd <<'EOF'\n#!/bin/sh\n"
             "echo \"$3:x:$2:\" >>$(dirname \"$0\")/group\nEOF\ncat >useradd <<'EOF'\n#!/bin/sh\n"
             "echo \"$*\" >>$(dirname \"$0\")/calls; eval n=\\${$#}; echo \"$n:x:$4:$6::/:/bin/bash\" "
             ">>$(dirname \"$0\")/passwd\nEOF\nchmod +x getent groupadd useradd",
             dir);
    char *sh[] = {"sh", "-c", fakes, NULL};
    CHECK(mtc_run(sh, NULL, NULL, 10000) == 0, "fake getent, groupadd, useradd");
    char path_env[600], script[4096];
    snprintf(path_env, sizeof(path_env), "PATH=%s:/usr/bin:/bin", dir);
    char *env[] = {path_env, NULL}, *out = NULL;
    char *run[] = {"sh", "-c", script, NULL};
    snprintf(script, sizeof(script), "%s\nusers bob:3001:3000 carol:4000:4000\n", CLUSTER_USERS_SH);
    int rc = mtc_run(run, env, &out, 10000);
    CHECK(rc == 3 && out && strstr(out, "mtc-host: user bob is uid:gid 3000:3000 here, the spec says "
                                         "3001:3000"),
          "a user with other ids: exit 3, named (%s)", out ? out : "");
    free(out), out = NULL;
    snprintf(script, sizeof(script), "%s\nusers carol:4000:4000 dave:3000:3000\n",
             CLUSTER_USERS_SH);
    rc = mtc_run(run, env, &out, 10000);
    CHECK(rc == 3 && out && strstr(out, "uid 3000 is bob's here, the spec gives it to dave"),
          "a held uid: exit 3, named (%s)", out ? out : "");
    free(out), out = NULL;
    char calls[600];
    snprintf(calls, sizeof(calls), "%s/calls", dir);
    CHECK(!mtc_path_exists(calls), "  and nothing was made (carol, first, neither)");
    snprintf(script, sizeof(script), "%s\nusers bob:3000:3000 carol:4000:4000\n", CLUSTER_USERS_SH);
    rc = mtc_run(run, env, &out, 10000);
    char *made = mtc_read_file(calls, NULL);
    CHECK(rc == 0 && made && !strcmp(made, "-M -N -u 4000 -g 4000 -s /bin/bash carol\n"),
          "bob as the spec says is left; carol made with her ids (%s)", made ? made : "");
    free(made);
    free(out);
    mtc_rm_rf(dir);
}

int main(void)
{
    test_users();
    test_rules();
    test_prefixed_enums();
    test_conf_values();
    test_root_exec();
    test_good_variants();
    test_canonical();
    test_ids_and_catalog();
    test_examples();
    return check_done();
}
