/* view: a dataset as the API shows it — its stored row and versions
 * (store) read into the resource's JSON. */
#include "dataset/dataset.h"

#include "store/store.h"

json_t *dataset_json(struct store *st, const struct store_dataset *d, int with_versions)
{
    char ts[40];
    json_t *j = json_pack("{s:o}", "name",
                          json_sprintf("projects/%s/locations/%s/datasets/%s", d->project,
                                       d->location, d->name));
    json_object_update(j, d->spec);
    json_object_set_new(j, "state", json_string(d->state));
    json_object_set_new(j, "createTime", json_string(mtc_time_rfc3339(d->create_ms, ts, 40)));
    json_object_set_new(j, "updateTime", json_string(mtc_time_rfc3339(d->update_ms, ts, 40)));
    int n = 0;
    struct store_dataset_version *v =
        store_dataset_versions(st, d->project, d->location, d->name, &n);
    if (n > 0)
        json_object_set_new(
            j, "latestVersion",
            dataset_version_json(v[n - 1].version, v[n - 1].record, v[n - 1].create_ms));
    if (with_versions) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(arr,
                                  dataset_version_json(v[i].version, v[i].record, v[i].create_ms));
        json_object_set_new(j, "versions", arr);
    }
    store_dataset_versions_free(v, n);
    return j;
}
