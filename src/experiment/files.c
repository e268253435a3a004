/* files: what a run wrote, read for whoever shows it — its training curve
 * (metrics.jsonl), its log's tail and last line, its checkpoints. Every
 * file is opened with the calling thread's ids (mtcd: the run's user, as
 * jobs_fs_enter sets them), as a regular file or a directory only, never
 * from a kernel filesystem (mtc_open_as_user). */
#include "experiment/experiment.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

json_t *exp_curve(const json_t *cfg, int64_t after, size_t max)
{
    json_t *points = json_array();
    char path[PATH_MAX + 32];
    int fd = exp_metrics_path(cfg, path, sizeof(path)) ? mtc_open_as_user(path, 0) : -1;
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (fd >= 0 && !f)
        close(fd);
    char line[4096];
    while (f && fgets(line, sizeof(line), f) && json_array_size(points) < max) {
        json_t *o = json_loads(line, 0, NULL);
        json_int_t step = json_integer_value(json_object_get(o, "step"));
        if (o && step > after)
            json_array_append(points, o);
        json_decref(o);
    }
    if (f)
        fclose(f);
    return points;
}

json_t *exp_log_tail(const json_t *cfg)
{
    char path[PATH_MAX + 32], buf[EXP_LOG_TAIL + 1];
    int fd = cfg && exp_log_path(cfg, path, sizeof(path)) ? mtc_open_as_user(path, 0) : -1;
    if (fd < 0)
        return json_string("");
    struct stat st;
    off_t from = fstat(fd, &st) == 0 && st.st_size > EXP_LOG_TAIL ? st.st_size - EXP_LOG_TAIL : 0;
    ssize_t n = pread(fd, buf, EXP_LOG_TAIL, from);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    char *p = buf;
    while (from > 0 && ((unsigned char)*p & 0xC0) == 0x80) /* inside a character */
        p++;
    json_t *t = json_string(p);
    for (char *c = p; !t && *c; c++)
        if ((unsigned char)*c >= 0x80)
            *c = '?';
    return t ? t : json_string(p);
}

const char *exp_last_line(const json_t *cfg, char *buf, size_t len)
{
    char path[PATH_MAX + 64];
    *buf = '\0';
    int fd = exp_log_path(cfg, path, sizeof(path)) ? mtc_open_as_user(path, 0) : -1;
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (!f) {
        if (fd >= 0)
            close(fd);
        return buf;
    }
    char line[512];
    /* the tail: a long log's last 16 KiB */
    off_t size = fseeko(f, 0, SEEK_END) == 0 ? ftello(f) : 0;
    fseeko(f, size > 16384 ? size - 16384 : 0, SEEK_SET);
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        /* slurmstepd names itself slurmstepd-NODE where a host runs several */
        if (*line && strncmp(line, "mtc: ", 5) != 0 && strncmp(line, "srun: ", 6) != 0 &&
            strncmp(line, "slurmstepd: ", 12) != 0 && strncmp(line, "slurmstepd-", 11) != 0)
            snprintf(buf, len, "%s", line);
    }
    fclose(f);
    return buf;
}

json_t *exp_checkpoints(const json_t *cfg, size_t max)
{
    json_t *ckpts = json_array();
    const char *ckdir = exp_checkpoint_dir(cfg);
    int fd = ckdir ? mtc_open_as_user(ckdir, 1) : -1;
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (fd >= 0 && !d)
        close(fd);
    struct dirent *e;
    while (d && (e = readdir(d)) && json_array_size(ckpts) < max)
        if (e->d_name[0] != '.')
            json_array_append_new(ckpts, json_string(e->d_name));
    if (d)
        closedir(d);
    return ckpts;
}
