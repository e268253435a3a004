/* catalog: the machine-type catalog. It is data (data/machine-types.json,
 * found through mtc_data_path) so new shapes need no rebuild. */
#include "cluster/cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *catalog_load(mtc_error_t *err)
{
    char *path = mtc_data_path("machine-types.json");
    if (!path) {
        errprintf(err, "machine-type catalog machine-types.json not found (set MTC_DATA_DIR)");
        errno = EIO;
        return NULL;
    }
    json_error_t jerr;
    json_t *cat = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!cat || !json_is_array(json_object_get(cat, "machineTypes"))) {
        errprintf(err, "%s: %s", path, cat ? "no machineTypes array" : jerr.text);
        json_decref(cat);
        free(path);
        errno = EIO;
        return NULL;
    }
    free(path);
    return cat;
}

static void fill(struct cluster_machine_type *mt, const char *name, const json_t *e, int vcpus,
                 long mem)
{
    memset(mt, 0, sizeof(*mt));
    snprintf(mt->name, sizeof(mt->name), "%s", name);
    mt->vcpus = vcpus;
    mt->memory_mb = mem;
    snprintf(mt->accelerator_type, sizeof(mt->accelerator_type), "%s",
             json_string_value(json_object_get(e, "acceleratorType")) ?: "");
    mt->accelerator_count = (int)json_integer_value(json_object_get(e, "acceleratorCount"));
    snprintf(mt->gres_type, sizeof(mt->gres_type), "%s",
             json_string_value(json_object_get(e, "gresType")) ?: "");
    mt->host_sized = json_is_true(json_object_get(e, "hostSized"));
    mt->min_allreduce_bus_gbps = json_number_value(json_object_get(e, "minAllReduceBusGBps"));
    mt->min_pair_bus_gbps = json_number_value(json_object_get(e, "minPairBusGBps"));
}

/* Calls fn for every catalog entry (families expanded) until fn returns non-zero. */
static int catalog_walk(const json_t *cat, int (*fn)(const struct cluster_machine_type *, void *),
                        void *arg)
{
    size_t i, j;
    json_t *e, *v;
    struct cluster_machine_type mt;
    json_array_foreach(json_object_get(cat, "machineTypes"), i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name)
            continue;
        fill(&mt, name, e, (int)json_integer_value(json_object_get(e, "vcpus")),
             (long)json_integer_value(json_object_get(e, "memoryMb")));
        if (fn(&mt, arg))
            return 1;
    }
    json_array_foreach(json_object_get(cat, "families"), i, e)
    {
        const char *prefix = json_string_value(json_object_get(e, "prefix"));
        long per = (long)json_integer_value(json_object_get(e, "memoryMbPerVcpu"));
        if (!prefix)
            continue;
        json_array_foreach(json_object_get(e, "vcpus"), j, v)
        {
            char name[64];
            int n = (int)json_integer_value(v);
            snprintf(name, sizeof(name), "%s%d", prefix, n);
            fill(&mt, name, e, n, per * n);
            if (fn(&mt, arg))
                return 1;
        }
    }
    return 0;
}

struct find {
    const char *name;
    struct cluster_machine_type *out;
};

static int find_cb(const struct cluster_machine_type *mt, void *arg)
{
    struct find *f = arg;
    if (strcmp(mt->name, f->name) != 0)
        return 0;
    *f->out = *mt;
    return 1;
}

int cluster_machine_type_lookup(const char *name, struct cluster_machine_type *out,
                                mtc_error_t *err)
{
    json_t *cat = catalog_load(err);
    if (!cat)
        return -1;
    struct find f = {.name = name, .out = out};
    int found = catalog_walk(cat, find_cb, &f);
    json_decref(cat);
    if (!found) {
        errno = ENOENT;
        return errprintf(err, "unknown machine type \"%s\"", name);
    }
    return 0;
}

static int list_cb(const struct cluster_machine_type *mt, void *arg)
{
    json_t *o =
        json_pack("{s:s, s:i, s:I, s:s, s:i, s:b}", "name", mt->name, "vcpus", mt->vcpus,
                  "memoryMb", (json_int_t)mt->memory_mb, "acceleratorType", mt->accelerator_type,
                  "acceleratorCount", mt->accelerator_count, "hostSized", mt->host_sized);
    json_array_append_new(arg, o);
    return 0;
}

json_t *cluster_catalog_list(mtc_error_t *err)
{
    json_t *cat = catalog_load(err);
    if (!cat)
        return NULL;
    json_t *list = json_array();
    catalog_walk(cat, list_cb, list);
    json_decref(cat);
    return list;
}
