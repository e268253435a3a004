/* metrics: one JSON object per step in <log-dir>/metrics.jsonl and the same
 * scalars in a TensorBoard event file, so runs can be compared by script or in
 * TensorBoard. A resumed run first drops lines past its checkpoint's step. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/train.h"

struct metrics {
    FILE *f;
    struct tb_writer *tb;
};

/* Keep only lines whose "step" <= keep_step (lines after the checkpoint were
 * written by the interrupted run and will be produced again). */
static int truncate_after(const char *path, int64_t keep_step)
{
    size_t len;
    char *buf = mtc_read_file(path, &len);
    if (!buf)
        return errno == ENOENT ? 0 : -1;
    size_t out = 0;
    char *line = buf;
    while (line < buf + len) {
        char *nl = memchr(line, '\n', (size_t)(buf + len - line));
        size_t ll = nl ? (size_t)(nl - line) + 1 : (size_t)(buf + len - line);
        json_t *o = json_loadb(line, ll, 0, NULL);
        int keep = o && json_integer_value(json_object_get(o, "step")) <= keep_step && nl;
        json_decref(o);
        if (keep) {
            memmove(buf + out, line, ll);
            out += ll;
        }
        line += ll;
    }
    int rc = mtc_write_file_atomic(path, buf, out, 0644);
    free(buf);
    return rc;
}

struct metrics *metrics_create(const char *log_dir, int64_t resume_step, mtc_error_t *err)
{
    char path[4200];
    if (mtc_mkdir_p(log_dir, 0755) < 0)
        return errprintf(err, "cannot create log dir %s: %s", log_dir, strerror(errno)), NULL;
    snprintf(path, sizeof path, "%s/metrics.jsonl", log_dir);
    if (resume_step >= 0 && truncate_after(path, resume_step) < 0)
        return errprintf(err, "cannot rewrite %s: %s", path, strerror(errno)), NULL;
    if (resume_step < 0)
        unlink(path);  // a fresh run starts a fresh file
    struct metrics *mt = calloc(1, sizeof *mt);
    if (!mt)
        return errprintf(err, "out of memory"), NULL;
    mt->f = fopen(path, "a");
    if (!mt->f) {
        errprintf(err, "cannot open %s: %s", path, strerror(errno));
        free(mt);
        return NULL;
    }
    mt->tb = tb_create(log_dir, err);
    if (!mt->tb) {
        fclose(mt->f);
        free(mt);
        return NULL;
    }
    return mt;
}

int metrics_log(struct metrics *mt, int64_t step, json_t *fields)
{
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer(step));
    json_object_update(o, fields);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s)
        return -1;
    int rc = fprintf(mt->f, "%s\n", s) < 0 || fflush(mt->f) != 0 ? -1 : 0;
    free(s);
    const char *key;
    json_t *v;
    json_object_foreach(fields, key, v)
    {
        if (!json_is_number(v) || strcmp(key, "time") == 0) /* the row's clock: not a scalar */
            continue;
        char tag[160];
        if (strncmp(key, "val_", 4) == 0)
            snprintf(tag, sizeof tag, "val/%s", key + 4);
        else
            snprintf(tag, sizeof tag, "train/%s", key);
        if (tb_scalar(mt->tb, tag, step, (float)json_number_value(v)) < 0)
            rc = -1;
    }
    return rc;
}

void metrics_destroy(struct metrics *mt)
{
    if (!mt)
        return;
    int e = errno;
    if (mt->f)
        fclose(mt->f);
    tb_destroy(mt->tb);
    free(mt);
    errno = e;
}
