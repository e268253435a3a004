/* Unit tests for mtcd's backups (src/backup/backup.c, store_copy_to): a home
 * with a store and a cluster's files backed up and restored whole (modes,
 * links, the store sound), what is left out (runtime files, logs, model
 * artifacts, the excluded directory), and a crafted backup — valid checksum,
 * hostile manifest — that tries to write outside the home through "..", an
 * absolute path or a link restored before it: refused, nothing written. */
#include "check.h"
#include "backup/backup.h"
#include "store/store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/mtc-test-backup.XXXXXX";

static void put(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static int has(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static void test_round_trip(void)
{
    char home[256], p[1024], out[512], back[256];
    snprintf(home, sizeof(home), "%s/home", dir);
    snprintf(p, sizeof(p), "%s/clusters/c1/munge", home);
    CHECK(mtc_mkdir_p(p, 0700) == 0, "home made");
    mtc_error_t err = {""};
    snprintf(p, sizeof(p), "%s/mtcd.db", home);
    struct store *st = store_open(p, &err);
    CHECK(st != NULL, "store: %s", err.text);
    store_event_add(st, "c1", "TEST", NULL, "before the backup");
    snprintf(p, sizeof(p), "%s/clusters/c1/munge/key", home);
    put(p, "secret-key", 0400);
    snprintf(p, sizeof(p), "%s/clusters/c1/slurm.conf", home);
    put(p, "ClusterName=c1\n", 0644);
    snprintf(p, sizeof(p), "%s/clusters/c1/slurmctld.log", home);
    put(p, "a log\n", 0644);
    snprintf(p, sizeof(p), "%s/clusters/c1/current", home);
    symlink("slurm.conf", p);
    /* the private accounting database: its dump goes, its datadir never */
    snprintf(p, sizeof(p), "%s/clusters/c1/db/data/slurm_acct_db", home);
    mtc_mkdir_p(p, 0700);
    snprintf(p, sizeof(p), "%s/clusters/c1/db/data/ibdata1", home);
    put(p, "pages in flight", 0600);
    snprintf(p, sizeof(p), "%s/clusters/c1/db/dump.sql", home);
    put(p, "CREATE DATABASE slurm_acct_db;", 0600);
    snprintf(p, sizeof(p), "%s/models/m1", home);
    mtc_mkdir_p(p, 0755);
    snprintf(p, sizeof(p), "%s/models/m1/weights.bin", home);
    put(p, "weights", 0644);
    snprintf(p, sizeof(p), "%s/log", home);
    mtc_mkdir_p(p, 0700);
    snprintf(p, sizeof(p), "%s/log/mtcd.log", home);
    put(p, "log", 0644);
    snprintf(p, sizeof(p), "%s/backups", home);
    mtc_mkdir_p(p, 0700);
    snprintf(p, sizeof(p), "%s/backups/old.mtcbak", home);
    put(p, "an older backup", 0600);

    snprintf(out, sizeof(out), "%s/b.mtcbak", dir);
    int fd = open(out, O_RDWR | O_CREAT | O_EXCL, 0600);
    struct backup_info info;
    snprintf(p, sizeof(p), "%s/backups", home);
    char tls[128];
    snprintf(tls, sizeof(tls), "%s/tls-key.pem", dir); /* a file mtcd is given, outside its home */
    put(tls, "a tls key", 0600);
    const char *extra[] = {tls, NULL};
    CHECK(backup_write(st, home, p, extra, fd, &info, &err) == 0, "backup written: %s", err.text);
    store_event_add(st, "c1", "TEST", NULL, "after the backup");
    CHECK(info.files == 5 && info.schema == store_schema_latest(),
          "5 files (the store, the key, slurm.conf, the accounting dump, the TLS key; no log, no "
          "database files): %d, schema %d",
          info.files, info.schema);
    struct backup_info again;
    CHECK(backup_check(fd, &again, &err) == 0 && again.bytes == info.bytes &&
              !strcmp(again.sha256, info.sha256),
          "checked: %s", err.text);
    close(fd);
    store_close(st);

    snprintf(back, sizeof(back), "%s/restored", dir);
    CHECK(backup_restore(out, back, &info, &err) == 0, "restored: %s", err.text);
    struct stat s;
    snprintf(p, sizeof(p), "%s/clusters/c1/munge/key", back);
    CHECK(stat(p, &s) == 0 && (s.st_mode & 07777) == 0400, "the munge key, mode 0400");
    char *k = mtc_read_file(p, NULL);
    CHECK(k && !strcmp(k, "secret-key"), "its bytes");
    free(k);
    char to[64] = "";
    snprintf(p, sizeof(p), "%s/clusters/c1/current", back);
    CHECK(readlink(p, to, sizeof(to) - 1) > 0 && !strcmp(to, "slurm.conf"), "a link as a link");
    snprintf(p, sizeof(p), "%s/clusters/c1/slurmctld.log", back);
    CHECK(!has(p), "logs left out");
    snprintf(p, sizeof(p), "%s/clusters/c1/db/dump.sql", back);
    CHECK(stat(p, &s) == 0 && (s.st_mode & 07777) == 0600, "the accounting dump, mode 0600");
    snprintf(p, sizeof(p), "%s/clusters/c1/db/data", back);
    CHECK(!has(p), "the accounting database's files left out (made again and loaded from the dump)");
    snprintf(p, sizeof(p), "%s/models", back);
    CHECK(!has(p), "model artifacts left out");
    snprintf(p, sizeof(p), "%s/backups", back);
    CHECK(!has(p), "the excluded directory left out");
    snprintf(p, sizeof(p), "%s/log", back);
    CHECK(!has(p), "mtcd's log left out");
    snprintf(p, sizeof(p), "%s/external%s", back, tls);
    k = mtc_read_file(p, NULL);
    CHECK(k && !strcmp(k, "a tls key"), "a file from outside the home under external/");
    free(k);
    snprintf(p, sizeof(p), "%s/restored.json", back);
    json_t *mark = json_load_file(p, 0, NULL);
    CHECK(mark && !strcmp(mtc_json_str_or(json_array_get(json_object_get(mark, "external"), 0),
                                          "origin", ""),
                          tls),
          "the record for mtcd's next start names where it came from");
    json_decref(mark);
    snprintf(p, sizeof(p), "%s/mtcd.db", back);
    int schema = 0;
    CHECK(store_check(p, &schema, &err) == 0 && schema == store_schema_latest(),
          "the store sound: %s", err.text);
    struct store *r = store_open(p, &err);
    int n = 0;
    struct store_event *ev = r ? store_events(r, "c1", 10, &n) : NULL;
    CHECK(n == 1 && !strcmp(ev[0].message, "before the backup"),
          "the store as it was at the backup: %d events", n);
    free(ev);
    store_close(r);
    /* a second restore into the same (now full) home */
    CHECK(backup_restore(out, back, NULL, &err) < 0 && strstr(err.text, "is not empty"),
          "a non-empty home refused: %s", err.text);
}

/* A backup file made by hand from a manifest and data, with a valid checksum. */
static void craft(const char *path, const char *manifest, const char *data)
{
    char rest[512];
    snprintf(rest, sizeof(rest), "%s/rest", dir);
    FILE *f = fopen(rest, "w");
    fprintf(f, "%s\n%s", manifest, data);
    fclose(f);
    int rfd = open(rest, O_RDONLY);
    char sum[72];
    mtc_sha256_fd(rfd, sum);
    struct stat st;
    fstat(rfd, &st);
    char head[512], *body = malloc((size_t)st.st_size);
    ssize_t got = pread(rfd, body, (size_t)st.st_size, 0);
    close(rfd);
    int n = snprintf(head, sizeof(head),
                     "{\"mtcVersion\":\"0\",\"schemaVersion\":1,\"created\":0,\"bytes\":%lld,"
                     "\"files\":1,\"sha256\":\"%s\"}",
                     (long long)(13 + 512 + st.st_size), sum);
    memset(head + n, ' ', sizeof(head) - (size_t)n);
    head[511] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(write(fd, "MTC-BACKUP 1\n", 13) == 13 && write(fd, head, 512) == 512 &&
              got == st.st_size && write(fd, body, (size_t)got) == got,
          "crafted %s", path);
    close(fd);
    free(body);
}

static void test_hostile(void)
{
    char f[512], home[512], outside[512];
    mtc_error_t err = {""};
    snprintf(outside, sizeof(outside), "%s/outside", dir);
    mkdir(outside, 0755);
    static const struct {
        const char *what, *manifest;
    } cases[] = {
        {"a path with ..", "{\"files\":[{\"path\":\"../outside/x\",\"type\":\"file\",\"mode\":420,"
                           "\"size\":1}]}"},
        {"an absolute path", "{\"files\":[{\"path\":\"/tmp/x\",\"type\":\"file\",\"mode\":420,"
                             "\"size\":1}]}"},
        {"a file through a link restored before it",
         "{\"files\":[{\"path\":\"a\",\"type\":\"link\",\"to\":\"%s\"},{\"path\":\"a/x\","
         "\"type\":\"file\",\"mode\":420,\"size\":1}]}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char m[1024];
        snprintf(m, sizeof(m), cases[i].manifest, outside);
        snprintf(f, sizeof(f), "%s/h%zu.mtcbak", dir, i);
        craft(f, m, "X");
        snprintf(home, sizeof(home), "%s/hostile%zu", dir, i);
        err.text[0] = '\0';
        CHECK(backup_restore(f, home, NULL, &err) < 0, "%s: refused (%s)", cases[i].what,
              err.text);
        CHECK(!has(home), "%s: no home left behind", cases[i].what);
    }
    snprintf(f, sizeof(f), "%s/outside/x", dir);
    CHECK(!has(f), "nothing written outside the home");
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    test_round_trip();
    test_hostile();
    if (!getenv("KEEP"))
        mtc_rm_rf(dir);
    return check_done();
}
