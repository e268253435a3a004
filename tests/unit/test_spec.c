/* test_spec: cluster spec validation (each rule, good and bad, with the exact
 * one-line message naming the field), snake_case input, camelCase output,
 * defaults, the catalog and the example specs. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cluster/cluster.h"
#include "health/health.h"
#include "provider/provider.h"

/* A valid base spec; tests patch it with a JSON text where noted. */
static const char *BASE =
    "{\"nodePools\":[{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"a3-megagpu-8g\"},"
    "\"scalingSpec\":{\"minNodeCount\":2,\"maxNodeCount\":4}},"
    "{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"n2-standard-4\"}}],"
    "\"orchestratorSpec\":{\"slurmSpec\":{\"loginNodePoolId\":\"login\","
    "\"partitions\":[{\"id\":\"a3m\",\"nodePoolIds\":[\"gpu\"]}],\"defaultPartitionId\":\"a3m\"}}}";

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        printf("# bad test json: %s: %s\n", je.text, text);
    return j;
}

/* Normalize in (consumed); the error text, "" when accepted. */
static const char *normalize_err(json_t *in)
{
    static mtc_error_t err;
    memset(&err, 0, sizeof(err));
    json_t *out = cluster_spec_normalize(in, &err);
    json_decref(in);
    if (out) {
        json_decref(out);
        return "";
    }
    return err.text;
}

/* Normalize text; return the error text ("" when accepted). */
static const char *norm_err(const char *text)
{
    return normalize_err(parse(text));
}

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
static json_t *pool(json_t *s, size_t i)
{
    return json_array_get(json_object_get(s, "nodePools"), i);
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

/* A cluster on hosts: two pools, a spare, the hosts-only sections. HOSTS_SPEC
 * takes the text added at the top level and the node pools. */
#define HOSTS_SPEC(top, pools)                                                                     \
    "{" top "\"nodePools\":[" pools "],\"orchestratorSpec\":{\"slurmSpec\":{"                      \
    "\"loginNodePoolId\":\"login\",\"partitions\":[{\"id\":\"gpu\",\"nodePoolIds\":[\"gpu\"]}]}}}"
#define LOGIN_POOL                                                                                 \
    "{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"host\"},\"hosts\":[\"login.lab\"]}"
#define GPU_POOL(hosts, min, extra)                                                                \
    "{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"host\"},\"scalingSpec\":{"                 \
    "\"minNodeCount\":" min "},\"hosts\":[" hosts "]" extra "}"
/* The login pool and the gpu pool. */
#define LOGIN_GPU(top, hosts, min, extra)                                                          \
    HOSTS_SPEC(top, LOGIN_POOL "," GPU_POOL(hosts, min, extra))
/* The gpu pool's one node on a.lab, the top level patched with top. */
#define ON_A_LAB(top) LOGIN_GPU(top, "\"a.lab\"", "1", "")
#define WANT_HOST "(want an IPv4 or IPv6 address or a DNS name)"
/* A case: the gpu pool on h (a quoted JSON string), which is no host name. */
#define BAD_HOST(h)                                                                                \
    LOGIN_GPU("", h, "1", ""), "nodePools[1].hosts[0]: invalid host " h " " WANT_HOST

static void test_hosts(void)
{
    struct {
        const char *spec, *want;
    } cases[] = {
        {LOGIN_GPU("\"ssh\":{\"user\":\"root\",\"port\":2222},\"controller\":{\"address\":"
                   "\"10.20.0.1\"},\"installPackages\":true,\"hostRemediation\":{"
                   "\"rebootCommand\":\"systemctl reboot\",\"bootTimeoutSeconds\":60},",
                   "\"10.20.0.3\",\"fe80::1\"", "2", ",\"spareHosts\":[\"n5.lab\"]"),
         ""},
        {LOGIN_GPU("", "\"10.20.0.3\"", "2", ""),
         "nodePools[1].hosts: lists 1 host(s) and maxNodeCount is 2: a pool on hosts lists one "
         "host per node (the first minNodeCount static, the rest elastic)"},
        {LOGIN_GPU("", "", "0", ""), "nodePools[1].hosts: at least one host is required"},
        {HOSTS_SPEC("", LOGIN_POOL ",{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"local\"}}"),
         "nodePools[1]: node pool \"gpu\" lists no hosts; a cluster runs either on hosts (every "
         "node pool lists its hosts) or locally (none does)"},
        {BAD_HOST("\"10.20.0.3;reboot\"")},
        {BAD_HOST("\"-oProxyCommand=x\"")},
        {BAD_HOST("\"10.20.0.300\"")},
        {LOGIN_GPU("", "\"a.lab\",\"LOGIN.lab\"", "2", ""),
         "nodePools[1].hosts[1]: host \"LOGIN.lab\" is also nodePools[0].hosts[0] (one node "
         "per host)"},
        {LOGIN_GPU("", "\"a.lab\"", "1", ",\"spareHosts\":[\"a.lab\"]"),
         "nodePools[1].spareHosts[0]: host \"a.lab\" is also nodePools[1].hosts[0] (one node "
         "per host)"},
        {HOSTS_SPEC("", LOGIN_POOL ",{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"local\"},"
                                   "\"hosts\":[\"a.lab\"]}"),
         "nodePools[1].machineSpec.machineType: machine type \"local\" emulates nodes on the "
         "mtcd host; a pool on hosts uses \"host\" (whatever the host has) or a catalog type"},
        {ON_A_LAB("\"ssh\":{\"user\":\"root; id\"},"),
         "ssh.user: invalid user \"root; id\" (want ^[a-z_][a-z0-9_.-]{0,31}$)"},
        {ON_A_LAB("\"ssh\":{\"keyFile\":\"id_rsa\"},"),
         "ssh.keyFile: must be an absolute path of up to 255 of [A-Za-z0-9/._+-]"},
        {ON_A_LAB("\"ssh\":{\"port\":0},"), "ssh.port: must be an integer from 1 to 65535"},
        {ON_A_LAB("\"controller\":{\"address\":\"a b\"},"),
         "controller.address: invalid host \"a b\" " WANT_HOST},
        {ON_A_LAB("\"hostRemediation\":{\"rebootCommand\":\"\"},"),
         "hostRemediation.rebootCommand: must be a non-empty string"},
        {ON_A_LAB("\"hostRemediation\":{\"reimageCommand\":\"a\\nb\"},"),
         "hostRemediation.reimageCommand: must not contain a newline"},
        {ON_A_LAB("\"hostRemediation\":{\"powerOnCommand\":\"a\\nb\"},"),
         "hostRemediation.powerOnCommand: must not contain a newline"},
        {ON_A_LAB("\"hostRemediation\":{\"powerOffCommand\":\"\"},"),
         "hostRemediation.powerOffCommand: must be a non-empty string"},
        /* elastic: one host per node up to max; the login pool never */
        {HOSTS_SPEC("\"hostRemediation\":{\"powerOnCommand\":\"wake {host}\"},",
                    LOGIN_POOL ",{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"host\"},"
                               "\"scalingSpec\":{\"minNodeCount\":1,\"maxNodeCount\":2},"
                               "\"hosts\":[\"a.lab\",\"b.lab\"]}"),
         ""},
        {HOSTS_SPEC("", "{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"host\"},"
                        "\"scalingSpec\":{\"minNodeCount\":1,\"maxNodeCount\":2},"
                        "\"hosts\":[\"login.lab\",\"l2.lab\"]}," GPU_POOL("\"a.lab\"", "1", "")),
         "nodePools[0].scalingSpec.maxNodeCount: the login pool is not elastic: maxNodeCount "
         "must equal minNodeCount (1)"},
        /* a local cluster may not carry the hosts-only sections */
        {"{\"ssh\":{\"user\":\"root\"},\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{"
         "\"machineType\":\"local\"}}]}",
         "ssh: only a cluster on hosts (nodePools[].hosts) uses this field"},
        {"{\"installPackages\":false,\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{"
         "\"machineType\":\"local\"}}]}",
         "installPackages: only a cluster on hosts (nodePools[].hosts) uses this field"},
        {"{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"local\"},"
         "\"spareHosts\":[\"b.lab\"]}]}",
         "nodePools[0].spareHosts: only a node pool with hosts has spare hosts"},
        {"{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"host\"}}]}",
         "nodePools[0].machineSpec.machineType: machine type \"host\" describes the pool's "
         "hosts, and the pool lists none"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_STR(norm_err(cases[i].spec), cases[i].want, "hosts rule %zu", i);

    static const char *const good[] = {"10.0.0.1",       "::1", "fe80::1", "node-1",
                                       "n1.lab.example", "a"};
    static const char *const bad[] = {"",          "-a",        "a b", "a;b",   "a..b", "a-.b",
                                      "1.2.3.4.5", "999.1.1.1", "a_b", "$(id)", "a/b"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        CHECK(cluster_host_valid(good[i]), "host \"%s\" valid", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(!cluster_host_valid(bad[i]), "host \"%s\" rejected", bad[i]);

    mtc_error_t err;
    json_t *in = parse(LOGIN_GPU("\"ssh\":{\"key_file\":\"/root/k\"},", "\"a.lab\"", "1",
                                 ",\"spare_hosts\":[\"b\"]"));
    json_t *out = cluster_spec_normalize(in, &err);
    json_decref(in);
    CHECK(out && cluster_spec_on_hosts(out), "snake_case hosts spec accepted, on hosts");
    const json_t *gp = out ? cluster_spec_pool(out, "gpu") : NULL;
    CHECK(gp && json_array_size(json_object_get(gp, "spareHosts")) == 1 &&
              !strcmp(json_string_value(json_object_get(json_object_get(out, "ssh"), "keyFile")),
                      "/root/k"),
          "spare_hosts and key_file emitted camelCase");
    CHECK(out && !json_object_get(json_object_get(out, "ssh"), "user") &&
              !json_object_get(out, "hostRemediation"),
          "no defaults filled in for the hosts sections (the provider has them)");
    json_decref(out);
}

/* The sim section (a simulated cluster): validated by the table, defaults
 * filled, never with hosts; and a simulated node's results. */
#define SIM_SPEC(sim)                                                                              \
    "{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"local\"},"              \
    "\"scalingSpec\":{\"minNodeCount\":4}}],\"sim\":" sim "}"
static void test_sim(void)
{
    struct {
        const char *spec, *want;
    } cases[] = {
        {SIM_SPEC("{\"rebootSeconds\":-1}"), "sim.rebootSeconds: must be a number from 0 to 86400"},
        {SIM_SPEC("{\"actionFailurePercent\":101}"),
         "sim.actionFailurePercent: must be a number from 0 to 100"},
        {SIM_SPEC("{\"rebootMinutes\":1}"), "sim: unknown field \"rebootMinutes\""},
        {ON_A_LAB("\"sim\":{},"), "sim: a simulated cluster runs on no hosts (drop nodePools[].hosts)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_STR(norm_err(cases[i].spec), cases[i].want, "sim rule %zu", i);
    mtc_error_t err;
    json_t *in = parse(SIM_SPEC("{\"reboot_seconds\":2.5}"));
    json_t *out = cluster_spec_normalize(in, &err);
    json_decref(in);
    const json_t *sim = json_object_get(out, "sim");
    CHECK(out && cluster_spec_simulated(out) && !cluster_spec_simulated(json_object_get(out, "x")),
          "a spec with a sim section is simulated");
    CHECK(json_number_value(json_object_get(sim, "rebootSeconds")) == 2.5 &&
              json_number_value(json_object_get(sim, "replaceSeconds")) == 1800 &&
              json_number_value(json_object_get(sim, "actionFailurePercent")) == 0,
          "sim: snake_case accepted, defaults filled (replace 1800 s, no failures)");

    json_t *r = provider_sim_results(json_object_get(out, "healthPolicy"), NULL, NULL, &err);
    struct health_result res[HEALTH_MAX_CHECKS];
    int n = r ? health_results_parse(r, res, HEALTH_MAX_CHECKS, &err) : -1;
    CHECK(n > 3 && health_worst(res, n, NULL) == HEALTH_PASS,
          "a simulated node's results parse as mtcd parses a report, all PASS (%d)", n);
    json_decref(r);
    r = provider_sim_results(json_object_get(out, "healthPolicy"), "disk", "full", &err);
    int sev = 0;
    n = r ? health_results_parse(r, res, HEALTH_MAX_CHECKS, &err) : -1;
    CHECK(n > 3 && health_worst(res, n, &sev) == HEALTH_FAIL && sev == HEALTH_SEV_REIMAGE,
          "a failing disk check FAILs with its table severity (REIMAGE)");
    json_decref(r);
    CHECK(!provider_sim_results(NULL, "gpu.nope", NULL, &err) &&
              strstr(err.text, "unknown check \"gpu.nope\""),
          "an unknown failing check is refused: %s", err.text);
    json_decref(out);
}

static void collect_path(const char *path, const struct schema_field *f, void *arg)
{
    (void)f;
    char *buf = arg;
    snprintf(buf + strlen(buf), 512 - strlen(buf), "%s%s", *buf ? " " : "", path);
}

/* The fields that make mtc or Slurm run something as root, from the table. */
static void test_root_exec(void)
{
    char paths[512] = "";
    schema_walk(&cluster_spec_schema, SCHEMA_ROOT_EXEC, collect_path, paths);
    CHECK_STR(paths,
              "nodePools[].startupScript nodePools[].filestores nodePools[].lustres "
              "orchestratorSpec.slurmSpec.homeDirectoryStorage "
              "orchestratorSpec.slurmSpec.prologBashScripts "
              "orchestratorSpec.slurmSpec.epilogBashScripts healthPolicy.nvmlLibrary "
              "healthPolicy.kernelLog ssh.keyFile hostRemediation.rebootCommand "
              "hostRemediation.reimageCommand hostRemediation.powerOnCommand "
              "hostRemediation.powerOffCommand experimentRoot",
              "root-executing fields listed from the spec's table");

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
              !strcmp(field, "nodePools[0].startupScript"),
          "a node pool's startupScript is (%s)", field);
    json_object_del(json_array_get(json_object_get(both, "nodePools"), 0), "startupScript");
    CHECK(cluster_spec_privileged_change(plain, both, field, sizeof(field)) &&
              !strcmp(field, "healthPolicy.kernelLog"),
          "healthPolicy.kernelLog is (%s)", field);
    json_decref(plain);
    json_decref(prolog);
    json_decref(both);
}

/* Shared storage: NFS and Lustre sources, mount paths and options, the
 * experiment root, on hosts and locally; the mounts a node gets. */
#define FS(pool_extra) LOGIN_GPU("", "\"a.lab\"", "1", ",\"filestores\":[" pool_extra "]")
static void test_storage(void)
{
    struct {
        const char *spec, *want;
    } cases[] = {
        {FS("{\"filestore\":\"10.0.0.2:/vol1\",\"mountPath\":\"/shared\","
            "\"mountOptions\":\"vers=4.1,nconnect=8\"}"),
         ""},
        {FS("{\"filestore\":\"nfs.lab:/\",\"mount_path\":\"/data/x\"}"), ""},
        {FS("{\"filestore\":\"[fd00::2]:/v\",\"mountPath\":\"/d\"}"), ""},
        {FS("{\"filestore\":\"10.0.0.2:vol1\",\"mountPath\":\"/shared\"}"),
         "nodePools[1].filestores[0].filestore: must be an NFS export ADDRESS:/share (10.0.0.2:/home, "
         "nfs.example.com:/vol1) or a Filestore instance name (projects/P/locations/L/instances/I), "
         "got \"10.0.0.2:vol1\""},
        {FS("{\"filestore\":\"a;b:/x\",\"mountPath\":\"/shared\"}"),
         "nodePools[1].filestores[0].filestore: must be an NFS export ADDRESS:/share (10.0.0.2:/home, "
         "nfs.example.com:/vol1) or a Filestore instance name (projects/P/locations/L/instances/I), "
         "got \"a;b:/x\""},
        {FS("{\"filestore\":\"10.0.0.2:/v\"}"),
         "nodePools[1].filestores[0].mountPath: required field missing"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/etc/x\"}"),
         "nodePools[1].filestores[0].mountPath: \"/etc/x\" is a system directory (or mtc's own on "
         "a host)"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/a/../etc\"}"),
         "nodePools[1].filestores[0].mountPath: must be an absolute path of up to 255 of "
         "[A-Za-z0-9/._+-] (no \"..\", no trailing /)"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/d\",\"mountOptions\":"
            "\"helper=/tmp/x\"}"),
         "nodePools[1].filestores[0].mountOptions: option \"helper=/tmp/x\": only [A-Za-z0-9_.=-]"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/d\",\"mountOptions\":"
            "\"vers=3,suid\"}"),
         "nodePools[1].filestores[0].mountOptions: option \"suid\" is refused (mtc mounts "
         "nosuid,nodev and passes no helper, file or user option)"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/d\",\"mountOptions\":"
            "\"ro,,soft\"}"),
         "nodePools[1].filestores[0].mountOptions: empty option (a comma list: "
         "\"vers=4.1,nconnect=8\")"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/d\"},"
            "{\"filestore\":\"10.0.0.3:/w\",\"mountPath\":\"/d\"}"),
         "nodePools[1].filestores[1].mountPath: \"/d\" is mounted twice on the pool's nodes"},
        {FS("{\"filestore\":\"projects/p/locations/l/instances/i\",\"mountPath\":\"/d\"}"),
         "nodePools[1].filestores[0].filestore: a cluster on hosts mounts an NFS export "
         "ADDRESS:/share; \"projects/p/locations/l/instances/i\" names a cloud instance"},
        {LOGIN_GPU("", "\"a.lab\"", "1",
                   ",\"lustres\":[{\"lustre\":\"10.0.0.5@tcp:/lfs\",\"mountPath\":\"/lustre\"},"
                   "{\"lustre\":\"mgs1@o2ib1,mgs1b@tcp:mgs2@tcp:/scr_1\",\"mountPath\":"
                   "\"/scratch\",\"mountOptions\":\"flock\"}]"),
         ""},
        {LOGIN_GPU("", "\"a.lab\"", "1",
                   ",\"lustres\":[{\"lustre\":\"10.0.0.5:/lfs\",\"mountPath\":\"/l\"}]"),
         "nodePools[1].lustres[0].lustre: must be a Lustre target MGS@NET:/fsname (10.0.0.5@tcp:/lfs, "
         "fsname up to 8 of [A-Za-z0-9_-]) or a Managed Lustre instance name, got \"10.0.0.5:/lfs\""},
        {LOGIN_GPU("", "\"a.lab\"", "1",
                   ",\"lustres\":[{\"lustre\":\"m@tcp:/toolongname\",\"mountPath\":\"/l\"}]"),
         "nodePools[1].lustres[0].lustre: must be a Lustre target MGS@NET:/fsname (10.0.0.5@tcp:/lfs, "
         "fsname up to 8 of [A-Za-z0-9_-]) or a Managed Lustre instance name, got "
         "\"m@tcp:/toolongname\""},
        {ON_A_LAB("\"experimentRoot\":\"/shared/exp\","), ""},
        {ON_A_LAB("\"experiment_root\":\"shared\","),
         "experimentRoot: must be an absolute path of up to 255 of [A-Za-z0-9/._+-] (no \"..\", "
         "no trailing /)"},
        {ON_A_LAB("\"experimentRoot\":\"/var/lib/mtc/x\","),
         "experimentRoot: \"/var/lib/mtc/x\" is a system directory (or mtc's own on a host)"},
        /* the home storage: cloud names are kept locally, refused on hosts */
        {"{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"local\"},"
         "\"filestores\":[{\"filestore\":\"projects/p/locations/l/instances/i\",\"mountPath\":"
         "\"/d\"}]}],\"orchestratorSpec\":{\"slurmSpec\":{\"homeDirectoryStorage\":"
         "\"projects/p/locations/l/instances/h\"}}}",
         ""},
        {"{\"nodePools\":[" LOGIN_POOL "],\"orchestratorSpec\":{\"slurmSpec\":{"
         "\"homeDirectoryStorage\":\"projects/p/locations/l/instances/h\"}}}",
         "orchestratorSpec.slurmSpec.homeDirectoryStorage: a cluster on hosts mounts an NFS export "
         "ADDRESS:/share at /home; \"projects/p/locations/l/instances/h\" names a cloud instance"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_STR(norm_err(cases[i].spec), cases[i].want, "storage rule %zu", i);

    /* what each node mounts, in order, with nosuid,nodev first */
    mtc_error_t err;
    json_t *in = parse(
        "{\"nodePools\":[" LOGIN_POOL ",{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":"
        "\"host\"},\"hosts\":[\"a.lab\"],\"lustres\":[{\"lustre\":\"m@tcp:/l\","
        "\"mountPath\":\"/l\"}],\"filestores\":[{\"filestore\":\"n:/d\",\"mountPath\":"
        "\"/d\",\"mountOptions\":\"vers=4.1\"}]}],\"orchestratorSpec\":{\"slurmSpec\":{"
        "\"loginNodePoolId\":\"login\",\"homeDirectoryStorage\":\"n:/home\","
        "\"home_directory_mount_options\":\"nconnect=4\"}}}");
    json_t *out = cluster_spec_normalize(in, &err);
    json_decref(in);
    CHECK(out != NULL, "storage spec normalizes (%s)", out ? "" : err.text);
    json_t *m = out ? cluster_spec_mounts(out, "gpu") : NULL, *l = out ? cluster_spec_mounts(out, "login") : NULL;
    char *ms = m ? json_dumps(m, JSON_COMPACT) : NULL, *ls = l ? json_dumps(l, JSON_COMPACT) : NULL;
    CHECK_STR(ms ? ms : "",
              "[{\"type\":\"nfs\",\"source\":\"n:/home\",\"path\":\"/home\",\"options\":"
              "\"nosuid,nodev,nconnect=4\"},{\"type\":\"nfs\",\"source\":\"n:/d\",\"path\":"
              "\"/d\",\"options\":\"nosuid,nodev,vers=4.1\"},{\"type\":\"lustre\",\"source\":"
              "\"m@tcp:/l\",\"path\":\"/l\",\"options\":\"nosuid,nodev\"}]",
              "a compute node mounts home, then filestores, then lustres");
    CHECK_STR(ls ? ls : "",
              "[{\"type\":\"nfs\",\"source\":\"n:/home\",\"path\":\"/home\",\"options\":"
              "\"nosuid,nodev,nconnect=4\"}]",
              "the login node mounts home only");
    free(ms);
    free(ls);
    json_decref(m);
    json_decref(l);
    json_decref(out);
}

/* Elastic pools: power-saving defaults only when max > min, snake_case,
 * range checks with one-line errors naming the field. */
static void test_elastic(void)
{
    mtc_error_t err = {""};
    json_t *in = parse(BASE);
    json_t *out = cluster_spec_normalize(in, &err);
    const json_t *sc = json_object_get(pool(out, 0), "scalingSpec");
    CHECK(json_integer_value(json_object_get(sc, "suspendTimeSeconds")) ==
                  CLUSTER_SUSPEND_TIME_DEFAULT &&
              json_integer_value(json_object_get(sc, "resumeTimeoutSeconds")) ==
                  CLUSTER_RESUME_TIMEOUT_DEFAULT,
          "an elastic pool (min 2, max 4) gets the power-saving defaults");
    CHECK(!json_object_get(json_object_get(pool(out, 1), "scalingSpec"), "suspendTimeSeconds"),
          "a fixed pool gets none");
    json_decref(out);
    json_object_set_new(json_object_get(pool(in, 0), "scalingSpec"), "suspend_time_seconds",
                        json_integer(-1));
    out = cluster_spec_normalize(in, &err);
    CHECK(out && json_integer_value(json_object_get(json_object_get(pool(out, 0), "scalingSpec"),
                                                    "suspendTimeSeconds")) == -1,
          "suspend_time_seconds -1 (never) accepted (%s)", err.text);
    json_decref(out);
    json_decref(in);
    static const struct {
        const char *key;
        int v;
        const char *want;
    } bad[] = {
        {"suspendTimeSeconds", 0,
         "nodePools[0].scalingSpec: suspendTimeSeconds must be -1 (never) or 1..604800"},
        {"suspendTimeSeconds", -2, "nodePools[0].scalingSpec.suspendTimeSeconds: must be an integer from -1 to 604800"},
        {"resumeTimeoutSeconds", 1, "nodePools[0].scalingSpec.resumeTimeoutSeconds: must be an integer from 5 to 3600"},
        {"resumeTimeoutSeconds", 7200,
         "nodePools[0].scalingSpec.resumeTimeoutSeconds: must be an integer from 5 to 3600"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        in = parse(BASE);
        json_object_set_new(json_object_get(pool(in, 0), "scalingSpec"), bad[i].key,
                            json_integer(bad[i].v));
        CHECK_STR(normalize_err(in), bad[i].want, "%s %d refused", bad[i].key, bad[i].v);
    }
}

/* The by-name node index: every named node found (in any order of the
 * array), unnamed ones skipped, the first of two equal names, NULL for the
 * unknown and for an empty array; 1000 nodes, each found. */
static void test_node_index(void)
{
    json_t *nodes = json_loads("[{\"instanceName\":\"c-b-1\",\"n\":0},{\"nodePoolId\":\"x\"},"
                               "{\"instanceName\":\"c-a-0\",\"n\":2},"
                               "{\"instanceName\":\"c-b-1\",\"n\":3},"
                               "{\"instanceName\":\"c-b-10\",\"n\":4}]",
                               0, NULL);
    struct cluster_node_index *ix = cluster_node_index_create(nodes);
    CHECK(ix && cluster_node_index_get(ix, "c-a-0") == json_array_get(nodes, 2) &&
              cluster_node_index_get(ix, "c-b-10") == json_array_get(nodes, 4),
          "node index: each name finds its object");
    CHECK(cluster_node_index_get(ix, "c-b-1") == json_array_get(nodes, 0),
          "node index: the first of two equal names");
    CHECK(!cluster_node_index_get(ix, "c-b-2") && !cluster_node_index_get(ix, "") &&
              !cluster_node_index_get(ix, NULL),
          "node index: an unknown name finds nothing");
    cluster_node_index_destroy(ix);
    json_decref(nodes);
    json_t *none = json_array();
    ix = cluster_node_index_create(none);
    CHECK(ix && !cluster_node_index_get(ix, "c-a-0"), "node index: empty array");
    cluster_node_index_destroy(ix);
    json_decref(none);
    nodes = json_array();
    for (int i = 999; i >= 0; i--) { /* backwards: the index sorts */
        char name[16];
        snprintf(name, sizeof(name), "c-p-%d", i);
        json_array_append_new(nodes, json_pack("{s:s, s:i}", "instanceName", name, "i", i));
    }
    ix = cluster_node_index_create(nodes);
    int found = 0;
    for (int i = 0; i < 1000; i++) {
        char name[16];
        snprintf(name, sizeof(name), "c-p-%d", i);
        json_t *o = cluster_node_index_get(ix, name);
        found += o && json_integer_value(json_object_get(o, "i")) == i;
    }
    CHECK(found == 1000, "node index: 1000 nodes, each found (%d)", found);
    cluster_node_index_destroy(ix);
    json_decref(nodes);
}

int main(void)
{
    test_node_index();
    test_elastic();
    test_rules();
    test_prefixed_enums();
    test_conf_values();
    test_root_exec();
    test_hosts();
    test_sim();
    test_storage();
    test_good_variants();
    test_canonical();
    test_ids_and_catalog();
    test_examples();
    return check_done();
}
