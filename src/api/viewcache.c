/* viewcache: the JSON text of recent GET replies for clusters (one cluster,
 * a page of the list), kept while the store has not changed since their
 * reads began (store_changes), so a repeated GET is one lookup and a copy.
 * A reply with a cluster on hosts (whose hosts view the provider reads from
 * its own files, not the store) is never kept. */
#include "api/internal.h"
#include "cluster/cluster.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define VIEWS 64

static struct view {
    const struct store *st;
    char key[400];
    int64_t gen;
    char *text;
    size_t len;
} views[VIEWS];
static int next_view;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int api_view_get(struct store *st, const char *key, int64_t gen, struct api_resp *out)
{
    int hit = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < VIEWS && !hit; i++) {
        struct view *v = &views[i];
        if (v->text && v->st == st && v->gen == gen && strcmp(v->key, key) == 0 &&
            (out->text = malloc(v->len + 1))) {
            memcpy(out->text, v->text, v->len + 1);
            out->text_len = v->len;
            out->text_type = "application/json";
            hit = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    return hit;
}

/* A cluster resource on hosts: its status lists them, or its node pools
 * name them (the provider's view of them may not be written yet). */
static int has_hosts(const json_t *cluster)
{
    return json_object_get(json_object_get(cluster, "clusterStatus"), "hosts") != NULL ||
           cluster_spec_on_hosts(cluster);
}

void api_view_put(struct store *st, const char *key, int64_t gen, const json_t *body)
{
    const json_t *items = json_object_get(body, "modelDevelopmentClusters");
    size_t i;
    const json_t *c;
    if (has_hosts(body) || strlen(key) >= sizeof(views[0].key))
        return;
    json_array_foreach(items, i, c) if (has_hosts(c)) return;
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text)
        return;
    pthread_mutex_lock(&lock);
    /* the key's own slot, else a stale one, else the next in turn */
    struct view *v = NULL;
    for (int k = 0; k < VIEWS && !v; k++)
        if (views[k].text && views[k].st == st && strcmp(views[k].key, key) == 0)
            v = &views[k];
    for (int k = 0; k < VIEWS && !v; k++)
        if (!views[k].text || views[k].st != st || views[k].gen != gen)
            v = &views[k];
    if (!v) {
        v = &views[next_view];
        next_view = (next_view + 1) % VIEWS;
    }
    free(v->text);
    v->st = st;
    strcpy(v->key, key);
    v->gen = gen;
    v->text = text;
    v->len = strlen(text);
    pthread_mutex_unlock(&lock);
}

void api_view_forget(const struct store *st)
{
    pthread_mutex_lock(&lock);
    for (int k = 0; k < VIEWS; k++) {
        if (views[k].st == st) {
            free(views[k].text);
            memset(&views[k], 0, sizeof(views[k]));
        }
    }
    pthread_mutex_unlock(&lock);
}
